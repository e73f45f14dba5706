r"""What things cost on this data, in seconds: a candidate's cross-validation (priors, then what is measured), and
what the end of a budget needs (the blend, its files, its MLflow model), which is kept back from the candidates.

Costs are relative to LightGBM's squared error: a prior per engine (the study's median seconds per cell:
LightGBM 1.8, XGBoost 3.1, native 7.6, CatBoost 14.1) times a prior per objective, replaced by what is measured on
the data as candidates are screened and finish (:class:`CostModel`; FLAML orders its learners the same way, from a
cost prior that measured times replace).

Nothing here changes as a side effect of asking: :func:`reserve` is a function of the finished candidates and the
one coming, computed where it is needed (:mod:`qwkboost.autoblend.fit`). Only the driver's bookkeeping
(:mod:`qwkboost.autoblend.jobs`) records measured times in the :class:`CostModel`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from qwkboost.autoblend.candidates import Candidate
from qwkboost.blending.methods import GREEDY_STEPS, _binned_qwk
from qwkboost.data.dataset import class_range

if TYPE_CHECKING:
    from qwkboost.autoblend.ranking import DataShape
    from qwkboost.autoblend.state import CandidateRecord
    from qwkboost.data.dataset import Dataset

__all__ = ["ENGINE_COST", "OBJECTIVE_COST", "objective_cost", "prior_cost", "CostModel", "Reserve", "reserve",
           "time_one_blend_score", "WRITE_SECONDS", "PYFUNC_SECONDS", "MEMBER_SECONDS", "SECONDS_PER_MB",
           "SECONDS_PER_MB_TRACKED", "READ_SECONDS_PER_MB", "CANDIDATE_SECONDS_PER_MB", "BOUND_FACTOR"]

#: Seconds per cell of each engine relative to LightGBM (the large study's medians: 1.8, 3.1, 7.6, 14.1 s).
ENGINE_COST = {"lightgbm": 1.0, "xgboost": 1.7, "native": 4.2, "catboost": 7.8}
#: Cost of each objective relative to squared error on the same engine (one score and its cut points costs about
#: two; K class scores about K / 2 on LightGBM, more where each class is a tree per round).
OBJECTIVE_COST = {"squared_error": 1.0, "extended_qwk": 1.0, "ordinal_logit": 2.0, "multiclass": 3.0,
                  "soft_qwk": 8.0}

#: Seconds set aside for writing the outputs and, with tracking, the MLflow model after the blend is fitted,
#: besides what grows with the members (:data:`MEMBER_SECONDS`) and their pipelines. Measured on the six packaged
#: sets at 60 s, whole machine and one CPU (benchmarks/auto_budget.py, issue 57): the end took 1.5-5.9 s, fitted by
#: 0.9 s + 0.034 s/MB besides the greedy search; the reserve then kept 7.7-16 s, 2.5-5 times that, and 60 s runs
#: used 74-92 % of their limit. Each constant here is about 1.5-2 times its measured part.
WRITE_SECONDS = 1.0
PYFUNC_SECONDS = 1.0
#: Seconds per member of the blend besides its megabytes (reading its record and scores; 7 small members on
#: happiness took 1.2 s beyond the fit above).
MEMBER_SECONDS = 0.15
#: Seconds per megabyte of the blend's members' pipelines (their compact model files), linked into the output
#: directory and checked, and, with tracking, copied into MLflow; read back by engine (:data:`READ_SECONDS_PER_MB`).
SECONDS_PER_MB = 0.009
SECONDS_PER_MB_TRACKED = 0.014
#: Seconds per megabyte of compact model files (``fold_<k>.zip``) to read a member's pipeline back (checked, then
#: built), by engine; an engine not named takes the largest. The rates measured on the JSON files before (XGBoost
#: 0.029, native 0.039, LightGBM 0.012, CatBoost 0.009 s a megabyte of JSON) times the JSON's megabytes per compact
#: one (native 3.4, LightGBM 3.4, CatBoost 4.3), and 1.5 for a compact file being inflated twice (checked, then
#: built); XGBoost's stays as it was, its 16 times fewer megabytes read 40 times faster as UBJSON. On MovieLens at
#: 300 s (one CPU, CatBoost's 84 MB and LightGBM's 17 MB of members) the end took 10.1 s against a reserve of
#: 6.4 s with the JSON rates; these keep 11.5 s (benchmarks/storage.py, issue 58).
READ_SECONDS_PER_MB = {"xgboost": 0.029, "native": 0.2, "lightgbm": 0.06, "catboost": 0.06}
#: Seconds per megabyte of a candidate's own compact pipeline, written after its folds: 16 s after the last fold of
#: CatBoost's 627 MB of JSON on MovieLens, 146 MB compact (0.11 s a megabyte; 1.4x kept). Deflating costs 0.04 s
#: a compact megabyte of CatBoost's and 0.15-0.18 s of XGBoost's and LightGBM's, whose files are small.
CANDIDATE_SECONDS_PER_MB = 0.15
#: A lower bound's upper estimate: what stopped at its time cap before early stopping is taken to have been at least
#: half-way (the doubling of successive halving's budgets, Jamieson and Talwalkar 2016).
BOUND_FACTOR = 2.0


def objective_cost(objective: str, shape: DataShape | None, prior: float) -> float:
    """An objective's cost relative to squared error on the same engine: ``prior``, except for ``multiclass``,
    whose one tree per class and round costs :math:`\\max(1, K/2)` with :math:`K` classes when the shape is known."""
    if objective == "multiclass" and shape is not None:
        return max(1.0, shape.classes / 2)
    return prior


def prior_cost(pair: tuple[str, str], shape: DataShape | None = None) -> float:
    """The prior cost of ``pair`` relative to LightGBM's squared error (on data of ``shape`` when given)."""
    return ENGINE_COST.get(pair[0], 4.0) * objective_cost(pair[1], shape, OBJECTIVE_COST.get(pair[1], 4.0))


class CostModel:
    """Expected seconds of a candidate's cross-validation, from what was measured on this data and the priors.

    In order of preference:

    1. a pair that has run is expected to take what it took;
    2. a pair stopped because a fold reached its share of the time before early stopping
       (:func:`~qwkboost.autoblend.fit.converging`): that fold's upper estimate, plus the overhead below;
    3. a screened pair (:mod:`~qwkboost.autoblend.screening`), its screen's projection of the folds' training,
       :math:`\\hat T`, times the correction :math:`\\rho` of finished candidates (the geometric mean of their
       measured training seconds over their screens' projections, those of the same engine when there are any; 1
       before any), plus what a finished candidate spent besides training (scoring, cut points, files: the mean
       over finished candidates, 0 before any). A screen stopped at its time cap measured a lower bound: when a
       second screen at a raised learning rate reached early stopping, the projection is an upper estimate from
       it (``upper``); when it did not, the bound times :data:`BOUND_FACTOR` (``bound``);
    4. otherwise measured and projected times scaled by the priors' ratio, preferring what is known of the same
       engine (an objective's ratio), then of the same objective (an engine's ratio), then anything known; the
       geometric mean of the scaled times when several apply.

    Before anything is measured or screened it is ``None``: the first candidate runs whatever it costs. A
    candidate run with a raised learning rate is expected to take its pair's estimate divided by its
    ``speedup``.

    Parameters
    ----------
    shape : DataShape, optional
        The data's shape: the class objectives' priors grow with the classes
        (:func:`objective_cost`).
    """

    def __init__(self, shape=None):
        self.shape = shape
        self.measured: dict[tuple[str, str], float] = {}
        self.trained: dict[tuple[str, str], float] = {}       # the folds' training seconds of measured pairs
        self.projected: dict[tuple[str, str], float] = {}
        self.bounds: set[tuple[str, str]] = set()       # screened pairs whose screen stopped at its time cap
        self.uppers: set[tuple[str, str]] = set()       # ... and whose second screen at a raised rate converged
        self.cut: dict[tuple[str, str], float] = {}       # the folds' training seconds of a pair cut short (upper)
        self.screen_mb: dict[tuple[str, str], float] = {}       # a screened pair's model size

    def prior(self, pair: tuple[str, str]) -> float:
        """The prior cost of ``pair`` relative to LightGBM's squared error on data of this shape."""
        return prior_cost(pair, self.shape)

    def record(self, candidate: Candidate, seconds: float, fit_seconds: float | None = None) -> None:
        """A candidate's measured seconds (and its folds' training seconds): its pair's cost (for a raised learning
        rate, its folds' times its speed-up, what follows them as measured; without ``fit_seconds``, all of it
        times its speed-up). A tuning trial's never replaces its pair's default."""
        if candidate.trial is not None and candidate.pair in self.measured:
            return
        if candidate.speedup != 1.0 and candidate.pair in self.measured:
            return
        if fit_seconds is None:
            self.measured[candidate.pair] = float(seconds) * candidate.speedup
            return
        self.trained[candidate.pair] = float(fit_seconds) * candidate.speedup
        self.measured[candidate.pair] = self.trained[candidate.pair] + max(float(seconds) - float(fit_seconds), 0.0)

    def screened(self, pair: tuple[str, str], projected: float, mb: float | None = None,
                 capped: bool = False, upper: bool = False) -> None:
        """Record a screen's projection of ``pair``'s folds' training seconds (and its model's megabytes);
        ``capped``: the screen stopped at its time cap before early stopping, so the projection is a lower
        bound, unless ``upper``: it is an upper estimate from a second screen at a raised learning rate."""
        self.projected[pair] = float(projected)
        self.bounds.discard(pair)
        self.uppers.discard(pair)
        if capped:
            (self.uppers if upper else self.bounds).add(pair)
        if mb:
            self.screen_mb[pair] = float(mb)

    def cut_short(self, pair: tuple[str, str], seconds: float) -> None:
        """Record an upper estimate of ``pair``'s folds' training seconds at its configured learning rate, from a
        fold that reached its share of the time before early stopping (:func:`~qwkboost.autoblend.fit.converging`)."""
        self.cut[pair] = float(seconds)

    def pipeline_mb(self, pair: tuple[str, str], n_models: int) -> float | None:
        r"""Expected megabytes of ``pair``'s pipeline of ``n_models`` fold models from its screen, or ``None``:
        the screen's model times :math:`\max(1, \rho)` each, the correction of :meth:`correction` (the rounds
        that more rows keep grow the training time and the model alike)."""
        if pair not in self.screen_mb:
            return None
        return n_models * self.screen_mb[pair] * max(1.0, self.correction(pair[0]))

    def correction(self, engine: str | None = None) -> float:
        """:math:`\\rho`: training over projected seconds of the pairs that have both (of ``engine`` when any), their
        screens not capped."""
        both = [p for p in self.trained if p in self.projected and self.projected[p] > 0 and self.trained[p] > 0
                and p not in self.bounds and p not in self.uppers]     # a capped screen projected no estimate
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

    def kind(self, candidate: Candidate) -> str | None:
        """What :meth:`estimate` rests on for ``candidate``: ``measured`` (its pair ran), ``upper`` (a fold cut short,
        or a second screen at a raised learning rate, gave an upper estimate), ``projected`` (its pair's screen),
        ``bound`` (a screen stopped at its time cap: :data:`BOUND_FACTOR` times that lower bound), ``scaled`` (other
        pairs' times scaled by the priors), or ``None`` (nothing yet)."""
        pair = candidate.pair
        if pair in self.measured:
            return "measured"
        if pair in self.cut or pair in self.uppers:
            return "upper"
        if pair in self.projected:
            return "bound" if pair in self.bounds else "projected"
        return "scaled" if self.measured or self.projected else None

    def estimate(self, candidate: Candidate) -> float | None:
        r"""Expected seconds of ``candidate``, or ``None``: its pair's, :math:`\hat T`, whose folds take ``speedup``
        times less, :math:`(\hat T - o) / s + o`; what follows its folds, :math:`o` (:meth:`overhead`), does not
        shrink with a raised learning rate."""
        pair_estimate = self._pair(candidate)
        if pair_estimate is None or candidate.speedup == 1.0:
            return pair_estimate
        after = min(self.overhead(candidate.pair), pair_estimate)
        return (pair_estimate - after) / candidate.speedup + after

    def _screened(self, pair: tuple[str, str]) -> float:
        bound = BOUND_FACTOR if pair in self.bounds else 1.0
        return bound * self.projected[pair] * self.correction(pair[0]) + self.overhead(pair)

    def _pair(self, candidate: Candidate) -> float | None:
        pair = candidate.pair
        if pair in self.measured:
            return self.measured[pair]
        if pair in self.cut:
            return self.cut[pair] + self.overhead(pair)
        if pair in self.projected:
            return self._screened(pair)
        known = {**{p: self._screened(p) for p in self.projected}, **self.measured}
        if not known:
            return None
        same_engine = [(p, t) for p, t in known.items() if p[0] == candidate.engine]
        same_objective = [(p, t) for p, t in known.items() if p[1] == candidate.objective]
        basis = same_engine or same_objective or list(known.items())
        logs = [math.log(t * self.prior(pair) / self.prior(p)) for p, t in basis]
        return math.exp(sum(logs) / len(logs))


def time_one_blend_score(ds: Dataset) -> float:
    """Seconds to score one blend on ``ds``'s training rows (what the greedy search repeats), measured once."""
    y = ds.y_train
    classes = class_range(ds.classes)
    y_idx = (y - classes[0]).astype(np.int64)
    s = y_idx + np.random.default_rng(0).normal(size=y.size)
    t = time.perf_counter()
    _binned_qwk(s, y_idx, classes.size, None, "exact", 1024)
    return time.perf_counter() - t


@dataclass(frozen=True)
class Reserve:
    """Seconds kept back from the candidates for the end, and the pipeline expected of the one coming.

    Attributes
    ----------
    seconds : float
    coming_mb : float
        The megabytes of pipeline expected of each coming candidate (what it writes after its folds).
    """

    seconds: float
    coming_mb: float = 0.0


def reserve(done: Sequence[CandidateRecord], pool: Sequence[CandidateRecord], cost: CostModel, *, n_folds: int,
            eval_seconds: float, max_members: int, tracked: bool, coming: int = 1,
            coming_seconds: float | None = None, coming_pair: tuple[str, str] | None = None) -> Reserve:
    r"""Seconds to keep for the end: the greedy blend of the ``done`` (finished) candidates and ``coming`` more (its
    in-sample fit and one per fold for the nested estimate,
    :math:`1.3\,t_{\text{score}}\,m\,S\,(n_{\text{folds}} + 1)` with :math:`m` members and :math:`S` greedy
    steps), :data:`MEMBER_SECONDS` a member, its files and its MLflow model, which grow with the members' pipelines
    (seconds per megabyte by engine,
    :data:`SECONDS_PER_MB` and :data:`READ_SECONDS_PER_MB`): the blend's ``pool`` as it stands (all of which the
    blend may weigh), and each coming candidate's, expected from its seconds (``coming_seconds``) times the
    megabytes per second of cross-validation that its engine's finished candidates wrote (pipelines grow with the
    rounds), or, for an engine not yet measured, the largest of those rates and at least the largest pipeline so
    far, and at least what its screen's model says (``coming_pair``, :meth:`CostModel.pipeline_mb`): on MovieLens,
    CatBoost's pipeline of 627 MB was 4.6 times what LightGBM's rate said.

    A pure function: the same records and the same question give the same answer, whoever asks.
    """
    coming_engine = coming_pair[0] if coming_pair else None
    m = min(len(done) + coming, max_members)
    blend_s = 0.0 if m < 2 else 1.3 * eval_seconds * m * GREEDY_STEPS * (n_folds + 1)
    per_mb = SECONDS_PER_MB_TRACKED if tracked else SECONDS_PER_MB

    def seconds_per_mb(engine) -> float:
        return per_mb + READ_SECONDS_PER_MB.get(engine, max(READ_SECONDS_PER_MB.values()))

    pooled = sum((r.pipeline_mb or 0.0) * seconds_per_mb(r.engine) for r in pool)
    rates: dict = {}
    for r in done:
        if r.seconds:
            rates[r.engine] = max(rates.get(r.engine, 0.0), (r.pipeline_mb or 0.0) / r.seconds)
    if coming_seconds is not None and coming_engine in rates:
        coming_mb = rates[coming_engine] * coming_seconds
    else:
        coming_mb = max(max((r.pipeline_mb or 0.0 for r in done), default=0.0),
                        max(rates.values(), default=0.0) * (coming_seconds or 0.0),
                        (cost.pipeline_mb(coming_pair, n_folds) or 0.0) if coming_pair else 0.0)
    seconds = blend_s + WRITE_SECONDS + MEMBER_SECONDS * m + pooled + \
        coming * coming_mb * seconds_per_mb(coming_engine) + (PYFUNC_SECONDS if tracked else 0.0)
    return Reserve(seconds, coming_mb)
