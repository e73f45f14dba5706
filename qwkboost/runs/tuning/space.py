"""The search space of a study: ``engine.search_space`` checked, drawn from, and the best draw as overrides."""

from __future__ import annotations

import copy
import json
import numbers
import shlex
from typing import Any, Mapping

import numpy as np

__all__ = ["SPACE_TYPES", "check_space", "suggest", "draw", "best_overrides", "check_space_against_engine"]

SPACE_TYPES = ("float", "int", "categorical")


def check_space(space: Mapping[str, Mapping[str, Any]]) -> None:
    """Check ``engine.search_space`` before a study starts.

    Raises
    ------
    ValueError
        For an unknown type, missing or reversed bounds, a log range that
        reaches 0, or empty choices, naming the parameter.
    """
    for name, spec in space.items():
        key = f"engine.search_space.{name}"
        if not isinstance(spec, Mapping):
            raise ValueError(f"{key} must be a mapping like {{type: float, low: 0.01, high: 0.3}}; got {spec!r}")
        kind = spec.get("type")
        if kind not in SPACE_TYPES:
            raise ValueError(f"{key}.type={kind!r}; choose one of {SPACE_TYPES}")
        if kind == "categorical":
            choices = spec.get("choices")
            if not isinstance(choices, (list, tuple)) or not choices:
                raise ValueError(f"{key} needs a non-empty list of choices")
            odd = [c for c in choices if c is not None and not isinstance(c, (str, int, float, bool))]
            if odd:
                raise ValueError(f"{key}.choices must be numbers, strings, booleans or null; got {odd}")
            continue
        if "log" in spec and not isinstance(spec["log"], bool):
            raise ValueError(f"{key}.log must be true or false; got {spec['log']!r}")
        if "low" not in spec or "high" not in spec:
            raise ValueError(f"{key} needs low and high")
        low, high = spec["low"], spec["high"]
        for b, v in (("low", low), ("high", high)):
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not np.isfinite(v):
                raise ValueError(f"{key}.{b} must be a finite number; got {v!r}")
            if kind == "int" and int(v) != v:
                raise ValueError(f"{key}.{b} must be a whole number for type int; got {v!r}")
        if low > high:
            raise ValueError(f"{key} has low={low!r} > high={high!r}; swap them")
        if spec.get("log") and low <= 0:
            raise ValueError(f"{key} has log: true, so low must be > 0; got {low!r}")


def suggest(trial, space: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Draw one value per entry of ``engine.search_space``.

    Entries look like ``{type: float, low: 0.01, high: 0.3, log: true}``,
    ``{type: int, low: 3, high: 8}`` or ``{type: categorical, choices: [...]}``.

    Raises
    ------
    ValueError
        For a malformed entry (see :func:`check_space`), naming the parameter.
    """
    check_space(space)
    out = {}
    for name, spec in space.items():
        kind = spec["type"]
        if kind == "categorical":
            out[name] = trial.suggest_categorical(name, list(spec["choices"]))
        elif kind == "int":
            out[name] = trial.suggest_int(name, int(spec["low"]), int(spec["high"]), log=bool(spec.get("log", False)))
        else:
            out[name] = trial.suggest_float(name, float(spec["low"]), float(spec["high"]),
                                            log=bool(spec.get("log", False)))
    return out


def draw(trial, cfg: Mapping[str, Any]) -> tuple[dict[str, Any], dict]:
    """A trial's engine parameters drawn from ``cfg["engine"]["search_space"]`` (:func:`suggest`), and its config:
    a deep copy of ``cfg`` with them over ``engine.params``.

    Examples
    --------
    >>> import optuna
    >>> cfg = {"engine": {"params": {"max_depth": 3}, "search_space": {"eta": {"type": "float", "low": 0.1,
    ...                                                                       "high": 0.3}}}}
    >>> drawn, trial_cfg = draw(optuna.create_study().ask(), cfg)
    >>> sorted(trial_cfg["engine"]["params"]) == ["eta", "max_depth"] and "eta" not in cfg["engine"]["params"]
    True
    """
    drawn = suggest(trial, cfg["engine"]["search_space"])
    trial_cfg = copy.deepcopy(dict(cfg))
    trial_cfg["engine"] = {**trial_cfg["engine"], "params": {**trial_cfg["engine"].get("params", {}), **drawn}}
    return drawn, trial_cfg


def best_overrides(params: Mapping[str, Any]) -> str:
    """Best parameters as command-line overrides that ``experiments/run.py`` takes as is.

    ``++`` sets a parameter whether or not the engine's config lists it;
    values are written as Hydra reads them back (``null``, ``true``, quoted
    strings where needed).
    """

    def fmt(k, v):
        if v is None:
            text = "null"
        elif isinstance(v, bool):
            text = str(v).lower()
        elif isinstance(v, float):
            text = repr(v)
        elif isinstance(v, str) and not v.replace("_", "").replace(".", "").replace("-", "").isalnum():
            text = json.dumps(v)          # Hydra reads a double-quoted string as is
        else:
            text = str(v)
        return shlex.quote(f"++engine.params.{k}={text}")
    return " ".join(fmt(k, v) for k, v in params.items())


def check_space_against_engine(cfg: Mapping[str, Any], n_features: int) -> None:
    """Every search-space parameter, at its bounds and each choice, is one the engine accepts.

    Raises
    ------
    ValueError
        Naming ``engine.search_space.<name>`` and the engine's reason, before trial 0.
    """
    from qwkboost.engines import check_engine_params  # slow to import: scipy

    base = dict(cfg["engine"].get("params") or {})
    engine = cfg["engine"]["name"]
    try:        # the fixed parameters first: a refusal of theirs (a GPU setting, ...) is not a search-space entry's
        check_engine_params(engine, base, n_features)
    except ValueError as exc:
        raise ValueError(f"engine.params ({engine}): {exc}") from None
    for name, spec in (cfg["engine"].get("search_space") or {}).items():
        values = spec["choices"] if spec["type"] == "categorical" else [spec["low"], spec["high"]]
        for v in values:
            try:
                check_engine_params(engine, {**base, name: v}, n_features)
            except ValueError as exc:
                raise ValueError(f"engine.search_space.{name}={v!r}: {exc}") from None
