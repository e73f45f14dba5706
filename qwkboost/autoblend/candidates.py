r"""The candidates of a time budget: what one is (:class:`Candidate`), which engines can run here
(:func:`available_engines`) and which configs the data accepts (:func:`runnable_configs`).

Their order is decided in :mod:`~qwkboost.autoblend.ranking`, their cost in :mod:`~qwkboost.autoblend.costs`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from qwkboost.config import objective_ref
from qwkboost.engines.registry import get_engine
from qwkboost.exceptions import EngineUnavailable
from qwkboost.objectives import get as get_objective
from qwkboost.runs.experiment import check_against_data

if TYPE_CHECKING:
    from qwkboost.data.dataset import Dataset

__all__ = ["Candidate", "available_engines", "runnable_configs"]

log = logging.getLogger("qwkboost.autoblend")

@dataclass(frozen=True)
class Candidate:
    """One cross-validated run of a budget: an engine, an objective and, for a tuning trial, its parameters.

    Attributes
    ----------
    engine, objective : str
    params : tuple of (str, value)
        Engine parameters drawn by a tuning trial (on top of the defaults); empty for a default candidate.
    trial : int or None
        The tuning trial's number.
    speedup : float
        For a default candidate run with its learning rate raised to fit the time left
        (:func:`~qwkboost.autoblend.fit.fitted`): the factor, by which its rounds and time are expected to
        fall; 1 otherwise.
    """

    engine: str
    objective: str
    params: tuple = field(default_factory=tuple)
    trial: int | None = None
    speedup: float = 1.0

    @property
    def name(self) -> str:
        """``<engine>-<objective>``, ``-trial-<n>`` for a tuning trial, ``-lr<rate>`` for a default candidate whose
        learning rate was raised to fit: the candidate's directory and run."""
        base = f"{self.engine}-{self.objective}"
        if self.trial is not None:
            return f"{base}-trial-{self.trial}"
        if self.speedup != 1.0:
            return f"{base}-lr{dict(self.params)['learning_rate']:g}"
        return base

    @property
    def pair(self) -> tuple[str, str]:
        return self.engine, self.objective


def available_engines(engines) -> list[str]:
    """Those of ``engines`` whose library can be imported; each other one is left out with a log line saying why
    (:class:`~qwkboost.exceptions.EngineUnavailable`).

    Raises
    ------
    EngineUnavailable
        When none is left (the first one's).
    """
    out, missing = [], []
    for engine in engines:
        try:
            get_engine(engine)
        except EngineUnavailable as exc:
            missing.append(exc)
            log.info("auto: left out engine %s (auto.engines not given): %s", engine, exc)
        else:
            out.append(engine)
    if not out and missing:
        raise missing[0]
    return out


def runnable_configs(configs: Mapping[tuple[str, str], dict], ds: Dataset) -> dict[tuple[str, str], dict]:
    """The candidates' configs checked against the data before any training
    (:func:`~qwkboost.runs.experiment.check_against_data`); a pair whose engine cannot run the objective (several
    scores per row on CatBoost) is left out with a log line.

    Raises
    ------
    ValueError
        For a setting the data refuses, naming it; if no pair can run.
    """
    out, left = {}, []
    for (engine, objective), cfg in configs.items():
        obj = get_objective(objective_ref(cfg["objective"]), **(cfg["objective"].get("params") or {}))
        obj.fit(ds.y_train)
        try:
            get_engine(engine).check_objective(obj)
        except EngineUnavailable:        # an engine named in auto.engines that cannot be imported is refused
            raise
        except ValueError as exc:
            left.append(f"{engine}-{objective} ({exc})")
            continue
        check_against_data(cfg, ds)
        out[(engine, objective)] = cfg
    for why in left:
        log.info("auto: left out %s", why)
    if not out:
        raise ValueError(f"no candidate of auto.engines and auto.objectives can run: {'; '.join(left)}")
    return out
