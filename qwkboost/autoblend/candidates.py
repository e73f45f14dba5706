r"""The candidates of a time budget: which (engine, objective) pairs, in which order, at what expected cost.

The order is the expected gain per second, from the study at competition size (``docs/study.md``): squared error
with exact cut points is the strongest single objective and LightGBM the fastest engine, so LightGBM's squared
error runs first; then the other engines on squared error (their blends with it gain the most), then extended QWK
and the ordinal logit (other errors, so they blend well), the class objectives, and the slowest pairs last.

Costs are relative to LightGBM's squared error: a prior per engine (the study's median seconds per cell:
LightGBM 1.8, XGBoost 3.1, native 7.6, CatBoost 14.1) times a prior per objective, replaced by what is measured on
the data as candidates are screened and finish (:class:`CostModel`; FLAML orders its learners the same way, from a
cost prior that measured times replace). The order is then adapted to the data: its shape moves pairs
(:mod:`~qwkboost.autoblend.ranking`) and screening settles the rest (:mod:`~qwkboost.autoblend.screening`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from qwkboost.autoblend.ranking import objective_cost
from qwkboost.exceptions import EngineUnavailable

if TYPE_CHECKING:
    from qwkboost.data.dataset import Dataset

__all__ = ["Candidate", "ORDER", "ENGINE_COST", "OBJECTIVE_COST", "plan", "available_engines", "CostModel",
           "runnable_configs"]

log = logging.getLogger("qwkboost.autoblend")

#: Seconds per cell of each engine relative to LightGBM (the large study's medians: 1.8, 3.1, 7.6, 14.1 s).
ENGINE_COST = {"lightgbm": 1.0, "xgboost": 1.7, "native": 4.2, "catboost": 7.8}
#: Cost of each objective relative to squared error on the same engine (one score and its cut points costs about
#: two; K class scores about K / 2 on LightGBM, more where each class is a tree per round).
OBJECTIVE_COST = {"squared_error": 1.0, "extended_qwk": 1.0, "ordinal_logit": 2.0, "multiclass": 3.0,
                  "soft_qwk": 8.0}
#: The default order of the candidates (expected gain per second, highest first).
ORDER = (
    ("lightgbm", "squared_error"),
    ("xgboost", "squared_error"),
    ("catboost", "squared_error"),
    ("lightgbm", "extended_qwk"),
    ("lightgbm", "ordinal_logit"),
    ("xgboost", "extended_qwk"),
    ("xgboost", "ordinal_logit"),
    ("lightgbm", "multiclass"),
    ("native", "squared_error"),
    ("catboost", "extended_qwk"),
    ("xgboost", "multiclass"),
    ("catboost", "ordinal_logit"),
    ("native", "extended_qwk"),
)


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
        (:func:`~qwkboost.autoblend.schedule.fitted`): the factor, by which its rounds and time are expected to
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

    @property
    def prior_cost(self) -> float:
        return ENGINE_COST.get(self.engine, 4.0) * OBJECTIVE_COST.get(self.objective, 4.0)


def available_engines(engines) -> list[str]:
    """Those of ``engines`` whose library can be imported; each other one is left out with a log line saying why
    (:class:`~qwkboost.exceptions.EngineUnavailable`).

    Raises
    ------
    EngineUnavailable
        When none is left (the first one's).
    """
    from qwkboost.engines.registry import get_engine  # slow to import: scipy

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


def plan(engines=None, objectives=None) -> list[Candidate]:
    """The candidates: :data:`ORDER` when neither list is given; else every pair of ``engines`` (default: all)
    and ``objectives`` (default: the objectives of :data:`ORDER`), those of :data:`ORDER` first in its order, the
    others after them, cheapest first.

    Without ``engines``, an engine whose library cannot be imported is left out with a log line
    (:func:`available_engines`); one named in ``engines`` is kept, and refused when it is checked.

    Raises
    ------
    ValueError
        For an empty list; names are checked by :class:`~qwkboost.autoblend.settings.AutoSettings`.
    EngineUnavailable
        Without ``engines``, when no engine's library can be imported.
    """
    if engines is None and objectives is None:
        usable = set(available_engines(dict.fromkeys(e for e, _ in ORDER)))
        return [Candidate(e, o) for e, o in ORDER if e in usable]
    engines = available_engines(ENGINE_COST) if engines is None else list(engines)
    objectives = list(dict.fromkeys(o for _, o in ORDER)) if objectives is None else list(objectives)
    if not engines or not objectives:
        raise ValueError("auto.engines and auto.objectives must each name at least one")
    ordered = [Candidate(e, o) for e, o in ORDER if e in engines and o in objectives]
    rest = [Candidate(e, o) for e in engines for o in objectives if (e, o) not in ORDER]
    return ordered + sorted(rest, key=lambda c: c.prior_cost)


class CostModel:
    """Expected seconds of a candidate's cross-validation, from what was measured on this data and the priors.

    In order of preference:

    1. a pair that has run is expected to take what it took;
    2. a screened pair (:mod:`~qwkboost.autoblend.screening`), its screen's projection of the folds' training,
       :math:`\\hat T`, times the correction :math:`\\rho` of finished candidates (the geometric mean of their
       measured training seconds over their screens' projections, those of the same engine when there are any; 1
       before any), plus what a finished candidate spent besides training (scoring, cut points, files: the mean
       over finished candidates, 0 before any);
    3. otherwise measured and projected times scaled by the priors' ratio, preferring what is known of the same
       engine (an objective's ratio), then of the same objective (an engine's ratio), then anything known; the
       geometric mean of the scaled times when several apply.

    Before anything is measured or screened it is ``None``: the first candidate runs whatever it costs. A
    candidate run with a raised learning rate is expected to take its pair's estimate divided by its
    ``speedup``.

    Parameters
    ----------
    shape : DataShape, optional
        The data's shape: the class objectives' priors grow with the classes
        (:func:`~qwkboost.autoblend.ranking.objective_cost`).
    """

    def __init__(self, shape=None):
        self.shape = shape
        self.measured: dict[tuple[str, str], float] = {}
        self.trained: dict[tuple[str, str], float] = {}       # the folds' training seconds of measured pairs
        self.projected: dict[tuple[str, str], float] = {}
        self.screen_mb: dict[tuple[str, str], float] = {}       # a screened pair's model size

    def prior(self, pair: tuple[str, str]) -> float:
        """The prior cost of ``pair`` relative to LightGBM's squared error on data of this shape."""
        return ENGINE_COST.get(pair[0], 4.0) * objective_cost(pair[1], self.shape, OBJECTIVE_COST.get(pair[1], 4.0))

    def record(self, candidate: Candidate, seconds: float, fit_seconds: float | None = None) -> None:
        """A candidate's measured seconds (and its folds' training seconds): its pair's cost (for a raised learning
        rate, times its speed-up). A tuning trial's never replaces its pair's default."""
        if candidate.trial is not None and candidate.pair in self.measured:
            return
        if candidate.speedup != 1.0 and candidate.pair in self.measured:
            return
        self.measured[candidate.pair] = float(seconds) * candidate.speedup
        if fit_seconds is not None:
            self.trained[candidate.pair] = float(fit_seconds) * candidate.speedup

    def screened(self, pair: tuple[str, str], projected: float, mb: float | None = None) -> None:
        """Record a screen's projection of ``pair``'s folds' training seconds (and its model's megabytes)."""
        self.projected[pair] = float(projected)
        if mb:
            self.screen_mb[pair] = float(mb)

    def pipeline_mb(self, pair: tuple[str, str], n_models: int) -> float | None:
        r"""Expected megabytes of ``pair``'s pipeline of ``n_models`` fold models from its screen, or ``None``:
        the screen's model times :math:`\max(1, \rho)` each, the correction of :meth:`correction` (the rounds
        that more rows keep grow the training time and the model alike)."""
        if pair not in self.screen_mb:
            return None
        return n_models * self.screen_mb[pair] * max(1.0, self.correction(pair[0]))

    def correction(self, engine: str | None = None) -> float:
        """:math:`\\rho`: training over projected seconds of the pairs that have both (of ``engine`` when any)."""
        both = [p for p in self.trained if p in self.projected and self.projected[p] > 0 and self.trained[p] > 0]
        same = [p for p in both if p[0] == engine]
        ratios = [self.trained[p] / self.projected[p] for p in (same or both)]
        return math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else 1.0

    def overhead(self, pair: tuple[str, str] | None = None) -> float:
        """Mean seconds a finished candidate spent besides its folds' training (scoring, cut points, files): of
        ``pair`` when it has finished, else of its objective's finished candidates, else of all. The objective
        decides most of it: on Diamonds, LightGBM's multiclass spent 42 s so, its squared error 1 s."""
        extra = {p: max(self.measured[p] - t, 0.0) for p, t in self.trained.items() if p in self.measured}
        if pair is not None and pair in extra:
            return extra[pair]
        same = [v for p, v in extra.items() if pair is not None and p[1] == pair[1]]
        pool = same or list(extra.values())
        return sum(pool) / len(pool) if pool else 0.0

    def estimate(self, candidate: Candidate) -> float | None:
        """Expected seconds of ``candidate`` (its pair's, divided by its ``speedup``), or ``None``."""
        pair_estimate = self._pair(candidate)
        return None if pair_estimate is None else pair_estimate / candidate.speedup

    def _pair(self, candidate: Candidate) -> float | None:
        pair = candidate.pair
        if pair in self.measured:
            return self.measured[pair]
        if pair in self.projected:
            return self.projected[pair] * self.correction(pair[0]) + self.overhead(pair)
        known = {**{p: t * self.correction(p[0]) + self.overhead(p) for p, t in self.projected.items()},
                 **self.measured}
        if not known:
            return None
        same_engine = [(p, t) for p, t in known.items() if p[0] == candidate.engine]
        same_objective = [(p, t) for p, t in known.items() if p[1] == candidate.objective]
        basis = same_engine or same_objective or list(known.items())
        logs = [math.log(t * self.prior(pair) / self.prior(p)) for p, t in basis]
        return math.exp(sum(logs) / len(logs))


def runnable_configs(configs: Mapping[tuple[str, str], dict], ds: Dataset) -> dict[tuple[str, str], dict]:
    """The candidates' configs checked against the data before any training
    (:func:`~qwkboost.runs.experiment.check_against_data`); a pair whose engine cannot run the objective (several
    scores per row on CatBoost) is left out with a log line.

    Raises
    ------
    ValueError
        For a setting the data refuses, naming it; if no pair can run.
    """
    from qwkboost.config import objective_ref  # slow to import: scipy, scipy.optimize
    from qwkboost.engines.registry import get_engine  # slow to import: scipy
    from qwkboost.objectives import get as get_objective  # slow to import: scipy
    from qwkboost.runs.experiment import check_against_data  # slow to import: scipy, sklearn, matplotlib

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
