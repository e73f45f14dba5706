r"""Screening: a cheap look at a candidate on this data before its full cross-validation.

A screen trains the candidate once on its first fold (the same folds, groups and configuration), on at most
:data:`SCREEN_ROWS` of that fold's training rows, early-stopped and scored on at most :data:`SCREEN_VALID` of its
validation rows (whatever ``cv.early_stopping_on`` says: a screen only ranks). Both samples are stratified by the
label and keep every class the fold has, so an objective fitted on the sample sees the same classes. It returns
two things the budget cannot know otherwise:

- how good the candidate looks here: the QWK of its validation scores after exact cut points fitted on them
  (optimistic by the same small amount for every candidate, and never blended: only full out-of-fold scores are);
- what its full cross-validation will cost, projected from the screen's time :math:`t_s` on :math:`n_s` rows to
  the :math:`K` folds of :math:`n_f` training rows each, :math:`\hat T = K\,t_s\,n_f / n_s` (histogram boosting
  costs about linearly in the rows; the budget corrects the projection by what finished candidates measured,
  :class:`~qwkboost.autoblend.costs.CostModel`).

A screen stopped at its time cap measured lower bounds only: how many rounds the data needs at its learning rate is
not known. It is screened again at :data:`RESCREEN_SPEEDUP` times its learning rate, within the same cap
(:func:`upper_estimate`): at :math:`f\eta` boosting needs about :math:`1/f` of the rounds (Friedman, *Annals of
Statistics* 2001, sec. 5), so a second screen that reaches early stopping after :math:`r_2` rounds gives
:math:`f\,r_2` as the rounds at :math:`\eta` and an upper estimate of the cost from them.

This is the lowest rung of successive halving (Jamieson and Talwalkar, AISTATS 2016; FLAML's cost-frugal search
starts its learners on a sample the same way, Wang et al., MLSys 2021): every engine gets a look for a fraction of
a full run, and only the promising ones get the full cross-validation.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Mapping

import numpy as np

from qwkboost.callback import EarlyStopException
from qwkboost.config import objective_ref
from qwkboost.cv.folds import make_repeated_folds
from qwkboost.data.dataset import Dataset, class_range
from qwkboost.data.features import EncodedFeatures
from qwkboost.engines import train
from qwkboost.engines.registry import get_engine
from qwkboost.evaluation.metrics import qwk
from qwkboost.evaluation.thresholds import apply_thresholds, fit_thresholds

__all__ = ["Screen", "screen", "raised", "upper_estimate", "stratified_sample", "SCREEN_ROWS", "SCREEN_VALID",
           "RESCREEN_SPEEDUP"]

#: Training rows of a screen (of the first fold's), and validation rows it is stopped and scored on.
SCREEN_ROWS = 20_000
SCREEN_VALID = 10_000
#: A screen stopped at its time cap is run again with its learning rate raised by this factor.
RESCREEN_SPEEDUP = 4.0


@dataclass(frozen=True)
class Screen:
    """What a screen measured.

    Attributes
    ----------
    qwk : float
        QWK of the screen's validation scores after exact cut points fitted on them.
    seconds : float
        Its training and scoring time.
    rows : int
        Its training rows (:math:`n_s`).
    rounds : int
        Boosting rounds kept.
    capped : bool
        Whether it reached its time cap before early stopping (then ``qwk`` understates the candidate and
        ``projected`` its cost).
    projected : float
        Expected seconds of the full cross-validation, :math:`K\\,t_s\\,n_f / n_s`.
    mb : float
        Megabytes of the screen's model as a pipeline holds it (the engine's model text): what one fold model
        weighs at least, before its rounds grow with the rows.
    trained : int
        Rounds trained (``rounds`` and early stopping's patience, or up to the cap).
    """

    qwk: float
    seconds: float
    rows: int
    rounds: int
    capped: bool
    projected: float
    mb: float = 0.0
    trained: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def stratified_sample(rows: np.ndarray, y: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` of ``rows`` (sorted), each label's share kept and every label present at least once."""
    if rows.size <= size:
        return rows
    labels, counts = np.unique(y[rows], return_counts=True)
    take = np.maximum(1, np.floor(counts * size / rows.size).astype(int))
    out = [rng.choice(rows[y[rows] == v], k, replace=False) for v, k in zip(labels, np.minimum(take, counts))]
    return np.sort(np.concatenate(out))


def screen(ds: Dataset, cfg: Mapping[str, Any], cap_seconds: float = float("inf"), rows: int = SCREEN_ROWS,
           valid_rows: int = SCREEN_VALID) -> Screen:
    """Screen one candidate (``cfg``: its resolved run config) on ``ds``: see the module docstring.

    Parameters
    ----------
    ds : Dataset
    cfg : mapping
        ``engine``, ``objective``, ``cv``, ``thresholds``, ``seed`` (and ``n_jobs``) as a run takes them.
    cap_seconds : float
        Boosting stops at the first round after this many seconds (``capped``).
    rows, valid_rows : int
        At most this many training and validation rows (drawn with the run's seed).
    """
    seed = int(cfg.get("seed", 0))
    cv, engine, objective = cfg["cv"], cfg["engine"], cfg["objective"]
    n_splits, repeats = int(cv["n_splits"]), int(cv.get("repeats", 1))
    tr, va = make_repeated_folds(ds.y_train, n_splits, bool(cv.get("stratified", True)) and ds.is_ordinal,
                                 bool(cv.get("shuffle", True)), seed, 1, ds.groups_train)[0][0]
    n_fold = tr.size
    rng = np.random.default_rng(seed)
    tr = stratified_sample(tr, ds.y_train, rows, rng)
    va = stratified_sample(va, ds.y_train, valid_rows, rng)
    w = ds.w_train
    started = time.perf_counter()

    def cap(rnd: int, evals: dict) -> None:
        if rnd > 0 and time.perf_counter() - started > cap_seconds:
            capped.append(rnd)
            raise EarlyStopException(rnd)

    capped: list[int] = []
    model = train(EncodedFeatures(ds.X_train[tr], ds.schema), ds.y_train[tr], engine=engine["name"],
                  objective=objective_ref(objective), params=dict(engine.get("params") or {}),
                  objective_params=dict(objective.get("params") or {}),
                  num_boost_round=int(engine["num_boost_round"]),
                  eval_set=(EncodedFeatures(ds.X_train[va], ds.schema), ds.y_train[va], None if w is None else w[va]),
                  early_stopping_rounds=engine.get("early_stopping_rounds"), callbacks=[cap], seed=seed,
                  n_jobs=cfg.get("n_jobs"), sample_weight=None if w is None else w[tr],
                  early_stopping_min_delta=engine.get("early_stopping_min_delta"))
    scores = model.objective.decode(model.predict_raw(EncodedFeatures(ds.X_train[va], ds.schema)))
    seconds = time.perf_counter() - started
    classes = class_range(ds.classes)
    y_idx = (ds.y_train[va] - classes[0]).astype(np.int64)
    s = scores - classes[0]
    wv = None if w is None else w[va]
    cuts = fit_thresholds(cfg["thresholds"]["method"] if cfg["thresholds"]["method"] != "round" else "exact", s,
                          y_idx, n_classes=classes.size, sample_weight=wv)
    score = qwk(y_idx, apply_thresholds(s, cuts), n_classes=classes.size, sample_weight=wv)
    text = get_engine(engine["name"]).dump(model.booster) if model.booster is not None else ""
    return Screen(float(score), seconds, int(tr.size), int(model.best_iteration or model.num_rounds), bool(capped),
                  seconds * n_fold / tr.size * n_splits * repeats, len(text.encode()) / 1e6, int(model.num_rounds))


def raised(cfg: Mapping[str, Any], factor: float = RESCREEN_SPEEDUP) -> dict | None:
    """``cfg`` with its engine's ``learning_rate`` times ``factor`` (three significant digits), or ``None`` when it
    sets none."""
    params = dict(cfg["engine"].get("params") or {})
    rate = params.get("learning_rate")
    if not rate:
        return None
    return {**cfg, "engine": {**cfg["engine"], "params": {**params, "learning_rate": float(f"{rate * factor:.3g}")}}}


def upper_estimate(first: Screen, second: Screen, factor: float, patience: int) -> tuple[float, int, float] | None:
    r"""From a ``first`` screen stopped at its cap and a ``second`` at ``factor`` times its learning rate: the
    projected seconds of the full cross-validation at the first one's rate, the rounds it needs there,
    :math:`\hat R = f\,r_2`, and the megabytes of one model; ``None`` when the second one was capped too.
    The first screen's time per round, :math:`t_1 / n_1` over the :math:`n_1` rounds it trained, times the
    :math:`\hat R + P` rounds a fold would train (:math:`P`, early stopping's patience), scales its projection;
    its model's size grows in the same proportion."""
    if second.capped:
        return None
    rounds = int(round(factor * second.rounds))
    grow = (rounds + patience) / max(first.trained or first.rounds, 1)
    return first.projected * grow, rounds, first.mb * grow
