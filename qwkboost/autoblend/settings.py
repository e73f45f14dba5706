"""The settings of a time budget (``auto.*`` in ``conf/experiment/auto.yaml``, the arguments of
:func:`qwkboost.autoblend`), checked before any data is read."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping

import qwkboost.runs.tuning as tuning_face
from qwkboost.blending.methods import BLEND_METHODS
from qwkboost.engines.registry import ENGINES
from qwkboost.validation import check_bool, check_int

__all__ = ["AutoSettings", "AUTO_KEYS", "AUTO_OBJECTIVES", "SCREEN_MODES", "KEEP_MODES"]

AUTO_KEYS = ("time_limit", "engines", "objectives", "tune", "max_members", "blend_method", "pruner", "screen", "keep")
#: Which candidates keep their fold models once the outputs are written: every finished one, or the blend's members.
KEEP_MODES = ("all", "blend")
#: When the default candidates are screened before their cross-validation (:mod:`qwkboost.autoblend.schedule`).
SCREEN_MODES = ("auto", "always", "never")
#: The objectives a budget can run: qwkboost's own, each with a config in ``conf/objective/``.
AUTO_OBJECTIVES = ("squared_error", "extended_qwk", "ordinal_logit", "multiclass", "soft_qwk")


def _names(value: Any, key: str, known) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"{key} must be a non-empty list (e.g. {key}=[{known[0]},{known[1]}]) or null for all; "
                         f"got {value!r}")
    unknown = [v for v in value if v not in known]
    if unknown:
        raise ValueError(f"{key} has unknown name(s) {unknown}; choose from: {', '.join(known)}")
    if len(set(value)) < len(value):
        raise ValueError(f"{key} names {[v for v in value if list(value).count(v) > 1][0]!r} twice")
    return tuple(value)


@dataclass(frozen=True)
class AutoSettings:
    """A time budget's settings.

    Attributes
    ----------
    time_limit : float
        Seconds for the whole command: the candidates, the tuning, the blend and its files.
    engines, objectives : tuple of str or None
        The candidates' engines and objectives (``None``: all, in the default order).
    tune : bool
        Tune the most promising candidate with the time left after the default ones.
    max_members : int
        The blend considers at most this many finished candidates (the best by nested out-of-fold QWK).
    blend_method : str
        A method of :data:`qwkboost.blending.BLEND_METHODS` (``greedy``: ensemble selection).
    pruner : str
        The tuning's pruner (:data:`qwkboost.runs.tuning.pruners.tuning_face.PRUNERS`).
    screen : {"auto", "always", "never"}
        Screen the candidates on a sample before their cross-validation (:mod:`qwkboost.autoblend.schedule`):
        ``auto`` when they would not all fit in the time left after the first one.
    keep : {"all", "blend"}
        Which finished candidates keep their fold models (``candidates/<name>/pipeline/``) once the outputs are
        written: ``all``, or only the blend's members (the others keep their predictions and leave the pool of a
        later invocation on the same directory, having nothing to serve).
    """

    time_limit: float
    engines: tuple[str, ...] | None = None
    objectives: tuple[str, ...] | None = None
    tune: bool = True
    max_members: int = 15
    blend_method: str = "greedy"
    pruner: str = "successive_halving"
    screen: str = "auto"
    keep: str = "all"

    @classmethod
    def from_config(cls, auto: Mapping[str, Any]) -> "AutoSettings":
        """Settings from an ``auto`` config group, every value checked.

        Raises
        ------
        ValueError
            Naming the setting (``auto.time_limit``, ...) and the problem.
        """

        if not isinstance(auto, Mapping):
            raise ValueError(f"auto must be a group of settings; got {auto!r}")
        unknown = sorted(set(auto) - set(AUTO_KEYS))
        if unknown:
            raise ValueError(f"auto has no setting(s) {unknown}; its settings are: {', '.join(AUTO_KEYS)}")
        limit = auto.get("time_limit")
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not math.isfinite(limit) or limit <= 0:
            raise ValueError(f"auto.time_limit must be a number of seconds > 0; got {limit!r}")
        method = auto.get("blend_method", "greedy")
        if method not in BLEND_METHODS:
            raise ValueError(f"auto.blend_method={method!r} is unknown; choose one of: {', '.join(BLEND_METHODS)}")
        pruner = auto.get("pruner", "successive_halving")
        if pruner not in tuning_face.PRUNERS:
            raise ValueError(f"auto.pruner={pruner!r} is unknown; choose one of: {', '.join(tuning_face.PRUNERS)}")
        screen = auto.get("screen", "auto")
        if screen not in SCREEN_MODES:
            raise ValueError(f"auto.screen={screen!r} is unknown; choose one of: {', '.join(SCREEN_MODES)}")
        keep = auto.get("keep", "all")
        if keep not in KEEP_MODES:
            raise ValueError(f"auto.keep={keep!r} is unknown; choose one of: {', '.join(KEEP_MODES)}")
        return cls(float(limit), _names(auto.get("engines"), "auto.engines", list(ENGINES)),
                   _names(auto.get("objectives"), "auto.objectives", list(AUTO_OBJECTIVES)),
                   check_bool(auto.get("tune", True), "auto.tune"),
                   check_int(auto.get("max_members", 15), "auto.max_members", 1), method, pruner, screen, keep)

    def as_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}
