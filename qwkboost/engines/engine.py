"""``train``: one training function for every engine, with the checks every engine gets before it starts.

The stages meet at named objects: an engine is an
:class:`~qwkboost.engines.base.Engine` (:mod:`qwkboost.engines.registry` names
them), it sees the objective through :class:`EngineObjective`, the validation
rows as an :class:`~qwkboost.engines.base.EvalSet`, its callbacks as
:mod:`qwkboost.callback`, and returns a :class:`~qwkboost.engines.base.FitResult`,
which :func:`train` turns into a :class:`~qwkboost.engines.model.Model`.
"""

from __future__ import annotations

import copy
import inspect
import numbers
from dataclasses import dataclass
from typing import Callable

import numpy as np

from qwkboost import defaults
from qwkboost.callback import EarlyStopping, RoundFunction, check_min_delta
from qwkboost.data.features import EncodedFeatures, FeatureSchema
from qwkboost.engines.base import Engine, EvalSet, FitResult
from qwkboost.engines.model import Model, load_model
from qwkboost.engines.registry import ENGINES, get_engine
from qwkboost.engines.threads import blas_single_thread, engine_threads
from qwkboost.objectives import Objective, resolve
from qwkboost.objectives.base import takes_weight
from qwkboost.objectives.rows import freeze
from qwkboost.validation import (
    check_1d,
    check_int,
    check_mapping,
    check_same_length,
    check_seed,
    check_weight,
)

__all__ = ["train", "load_model", "Model", "ENGINES", "get_engine", "check_engine_params", "check_early_stopping",
           "label_offset", "EngineObjective", "Trained", "train_scoring", "for_workers", "Engine", "EvalSet",
           "FitResult"]

#: Every engine's names for the learning rate; qwkboost refuses values <= 0 on all of them.
LEARNING_RATE_NAMES = ("learning_rate", "eta", "shrinkage_rate")


def learning_rate(engine: str, params: dict) -> float:
    """The learning rate ``params`` give ``engine`` (any of its names), else the engine's default
    (:attr:`~qwkboost.engines.base.Engine.default_learning_rate`)."""
    for k in LEARNING_RATE_NAMES:
        if params.get(k) is not None:
            return float(params[k])
    return get_engine(engine).default_learning_rate


def min_delta(objective: Objective, engine: str, params: dict, given: float | None) -> float:
    """``given`` (checked), else the objective's :meth:`~qwkboost.objectives.Objective.default_min_delta` at the
    engine's learning rate."""
    if given is not None:
        return check_min_delta(given)
    return check_min_delta(objective.default_min_delta(learning_rate(engine, params)),
                           f"{objective.name}.default_min_delta()")


def check_early_stopping(rounds, min_delta, has_eval_set: bool) -> tuple[int | None, float | None]:
    """``early_stopping_rounds`` and ``early_stopping_min_delta`` checked: a positive integer that needs an eval
    set, and a finite number >= 0 that needs ``early_stopping_rounds``; ``None`` stays ``None``.

    Raises
    ------
    ValueError
        Naming the argument and the problem.
    """
    if rounds is not None:
        rounds = check_int(rounds, "early_stopping_rounds", 1)
        if not has_eval_set:
            raise ValueError("early_stopping_rounds needs an eval_set to score")
    if min_delta is not None:
        min_delta = check_min_delta(min_delta)
        if rounds is None:
            raise ValueError("early_stopping_min_delta needs early_stopping_rounds (it says what counts as an "
                             "improvement for early stopping)")
    return rounds, min_delta


def check_engine_params(engine: str, params: dict | None, n_features: int | None) -> dict:
    """Check ``params`` for ``engine`` before any training; return them without ``base_score``.

    Unknown names (misspellings that XGBoost and LightGBM would silently
    ignore) and values the engine would reject are refused, naming the
    parameter. Learning rates must be > 0 on every engine. ``n_features=None``
    checks a config before its data is read: what needs no data (the names
    qwkboost sets itself, CatBoost's file settings, ...).

    Raises
    ------
    ValueError
    """
    params = dict(params or {})
    base_score = params.pop("base_score", None)
    if base_score is not None and (isinstance(base_score, bool) or not isinstance(base_score, numbers.Real)
                                   or not np.isfinite(float(base_score))):
        raise ValueError(f"params.base_score must be a finite number or None; got {base_score!r}")
    for k in LEARNING_RATE_NAMES:
        if k in params:
            v = params[k]
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not v > 0:
                raise ValueError(f"params.{k} (the learning rate) must be a number > 0; got {v!r}")
    get_engine(engine).check_params(params, n_features=n_features)
    return params


def label_offset(y: np.ndarray) -> float:
    r"""The integer subtracted from the labels before an engine sees them.

    XGBoost keeps scores and ``base_score`` in float32: labels near
    :math:`10^6` would leave it steps of 0.06. When the labels' mid-point is
    further from 0 than their range, they are centred on the rounded
    mid-point (labels 100,000..100,003 train as -2..1); otherwise nothing is
    shifted. Predictions are shifted back, so users never see it.
    """
    lo, hi = float(np.min(y)), float(np.max(y))
    mid = 0.5 * (lo + hi)
    return float(np.round(mid)) if abs(mid) > max(hi - lo, 1.0) else 0.0


class EngineObjective:
    """The objective as an engine sees it: labels centred by ``offset``, every output checked.

    Each call is made in label space (``offset`` added back to labels and
    scores), so objectives never see the centring. Gradients and hessians
    must have one value per row, and, where ``check_finite``, be finite (the
    native engine checks finiteness in its own passes): a custom objective's
    mistake is named instead of failing deep in an engine or training a
    constant model on NaN.

    An objective whose ``grad_hess`` takes ``out=`` writes every round into the
    same (gradient, hessian) pair, kept here: the engines copy or consume them
    before the next call, and a round then allocates no new pages for them
    (see :mod:`qwkboost.objectives.rows` on what fresh pages cost).
    """

    def __init__(self, objective: Objective, offset: float = 0.0, check_finite: bool = True,
                 sample_weight: np.ndarray | None = None):
        self.objective = objective
        self.offset = float(offset)
        self.check_finite = check_finite
        self.sample_weight = sample_weight
        self._weighted = {m: takes_weight(getattr(objective, m)) for m in ("grad_hess", "metric", "loss")}
        self._takes_out = _takes(objective.grad_hess, "out")
        self._out: tuple[np.ndarray, np.ndarray] | None = None
        self.name = objective.name
        self.hessian_kind = objective.hessian_kind
        self.metric_name = objective.metric_name
        self.higher_is_better = objective.higher_is_better
        self.n_outputs = int(getattr(objective, "n_outputs_", 1))
        self.init_score_ = np.asarray(objective.init_score_, dtype=np.float64) - self.offset if self.n_outputs > 1 \
            else objective.init_score_ - self.offset
        self._round = 0

    def _shift(self, y, score):
        return (y, score) if not self.offset else (y + self.offset, score + self.offset)

    def reweighted(self, sample_weight: np.ndarray | None) -> "EngineObjective":
        """The same objective (its state shared) with other row weights: for an engine that reorders the rows."""
        out = EngineObjective(self.objective, self.offset, self.check_finite, sample_weight)
        out.init_score_ = self.init_score_
        return out

    def grad_hess_rows(self, y, score):
        """Gradients and hessians of some of the training rows, unweighted (the caller scales them by its rows'
        weights): for an engine that asks for its rows in blocks, with an objective whose rows are independent
        (``gradient_needs = "rows"``)."""
        g, h = self.objective.grad_hess(*self._shift(y, score))
        g = np.asarray(g, dtype=np.float64)
        h = np.asarray(h, dtype=np.float64)
        if g.shape != y.shape or h.shape != y.shape:
            raise ValueError(f"objective {self.name!r}: grad_hess returned gradients of shape {g.shape} and "
                             f"hessians of shape {h.shape} for {y.size} rows; it must return shape {y.shape}")
        if self.check_finite and not (np.isfinite(g).all() and np.isfinite(h).all()):
            raise ValueError(f"objective {self.name!r} returned non-finite gradients or hessians")
        return g, h

    def round_state(self, y, score) -> dict | None:
        """The objective's :meth:`~qwkboost.objectives.Objective.round_state` at every training row (weighted by
        ``sample_weight``): in place of a round's :meth:`grad_hess` call, for an engine that computes each block of
        rows from it."""
        w = self.sample_weight
        kw = {"sample_weight": w} if w is not None and self._weighted["grad_hess"] else {}
        state = self.objective.round_state(*self._shift(y, score), **kw)
        self._round += 1
        return state

    def grad_hess(self, y, score):
        """Gradients and hessians of the training rows (weighted by ``sample_weight``)."""
        w = self.sample_weight
        kw = {"out": self._out_for(score)} if self._takes_out else {}
        if w is not None and self._weighted["grad_hess"]:
            kw["sample_weight"] = w
        g, h = self.objective.grad_hess(*self._shift(y, score), **kw)
        g = np.asarray(g, dtype=np.float64)
        h = np.asarray(h, dtype=np.float64)
        shape = y.shape if self.n_outputs == 1 else (y.size, self.n_outputs)
        if w is not None and not self._weighted["grad_hess"] and g.shape == shape and h.shape == shape:
            ww = w if self.n_outputs == 1 else w[:, None]
            g, h = g * ww, h * ww           # a loss summed over rows: each row's terms scale with its weight
        if g.shape != shape or h.shape != shape:
            raise ValueError(f"objective {self.name!r}: grad_hess returned gradients of shape {g.shape} and "
                             f"hessians of shape {h.shape} for {y.size} rows; it must return shape {shape}")
        if self.check_finite and not (np.isfinite(g).all() and np.isfinite(h).all()):
            raise ValueError(f"objective {self.name!r} returned non-finite gradients or hessians at round "
                             f"{self._round}")
        self._round += 1
        return g, h

    def _out_for(self, score) -> tuple[np.ndarray, np.ndarray]:
        """The kept (gradient, hessian) pair, made anew when ``score``'s shape or memory order changes."""
        pair = self._out
        if pair is None or pair[0].shape != np.shape(score) or \
                pair[0].flags.c_contiguous != np.asarray(score).flags.c_contiguous:
            pair = self._out = (np.empty_like(score, dtype=np.float64), np.empty_like(score, dtype=np.float64))
        return pair

    def metric(self, y, score, sample_weight=None):
        if sample_weight is not None and self._weighted["metric"]:
            return self.objective.metric(*self._shift(y, score), sample_weight=sample_weight)
        return self.objective.metric(*self._shift(y, score))

    def loss(self, y, score, sample_weight=None):
        if sample_weight is not None and self._weighted["loss"]:
            return self.objective.loss(*self._shift(y, score), sample_weight=sample_weight)
        return self.objective.loss(*self._shift(y, score))


def for_workers(objective: Objective, allreduce: Callable[[np.ndarray], np.ndarray] | None = None) -> Objective:
    r"""A copy of a fitted ``objective`` for the workers of a cluster whose engine all-reduces
    (:attr:`~qwkboost.engines.base.DaskSupport.allreduce`): it forms its gradient from sums over all workers.

    A distributed engine calls the custom objective on each worker's own rows. For an objective whose gradient
    needs sums over *every* row (``gradient_needs == "sums"``; extended QWK's :math:`f = \tfrac12\sum (\hat y -
    y)^2` and :math:`g = \tfrac12\sum((\hat y - a)^2 + b)`), each worker would otherwise optimise its own
    objective. Instead the worker's partial sums are all-reduced (``allreduce``: summed over the workers) before
    the gradient is formed, so every row's gradient equals the one-process gradient; the label statistics (``a``,
    ``b``, the label range, the initial score) are fitted once on the whole training set and shipped with the
    objective. ``allreduce=None`` only checks the objective.

    Raises
    ------
    ValueError
        For an objective whose gradient needs sums over every row but does not
        take them through :meth:`~qwkboost.objectives.Objective.global_sums`:
        trained on each worker's rows alone it would silently optimise something else.
    """
    if objective.gradient_needs == "sums" and not objective.allreduce_ready:
        raise ValueError(f"objective {objective.name!r} needs sums over every training row for its gradient, which "
                         "qwkboost does not all-reduce across workers for it; distributed training would optimise a "
                         "different objective on each worker. Train it on one machine")
    out = copy.copy(objective)
    if objective.gradient_needs == "sums":
        out.allreduce = allreduce
    return out


def _takes(method, name: str) -> bool:
    """Whether ``method`` has a parameter called ``name`` (not only ``**kwargs``)."""
    try:
        return name in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def _check_callbacks(callbacks) -> list:
    if callbacks is None:
        return []
    if callable(callbacks) or not isinstance(callbacks, (list, tuple)):
        raise ValueError(f"callbacks must be a list of functions fn(round, evals); got {callbacks!r}")
    for i, fn in enumerate(callbacks):
        if not callable(fn):
            raise ValueError(f"callbacks[{i}] is not callable; got {fn!r}")
        try:
            inspect.signature(fn).bind(0, {})
        except TypeError:
            raise ValueError(f"callbacks[{i}] must accept two arguments, fn(round, evals); "
                             f"its signature is {inspect.signature(fn)}") from None
        except ValueError:
            pass    # no signature to read (a builtin): let it run
    return list(callbacks)


@dataclass(frozen=True)
class Trained:
    """What :func:`train_scoring` returns.

    Attributes
    ----------
    model : Model
    valid : ndarray or None
        The eval set's raw scores at ``model.best_iteration``, as :meth:`Model.predict_raw` gives them, where the
        engine scored them while training; else ``None``.
    rows : tuple of (ndarray or None)
        The same for each of ``score_rows``.
    """

    model: Model
    valid: np.ndarray | None
    rows: tuple[np.ndarray | None, ...]


def train(X, y, engine: str | None = None, objective: str | Objective | None = None, params: dict | None = None,
          num_boost_round: int = 100, eval_set: tuple | None = None, early_stopping_rounds: int | None = None,
          objective_params: dict | None = None, callbacks: list[Callable[[int, dict], None]] | None = None,
          seed: int = 0, n_jobs: int | None = None, categorical=None, sample_weight=None,
          early_stopping_min_delta: float | None = None) -> Model:
    r"""Boost ``num_boost_round`` trees of ``engine`` on ``objective``.

    The objective is fitted on ``y`` first (its statistics and :math:`F_0`),
    then every engine runs the same gradient, hessian and metric. Every input
    is checked before training starts.

    Parameters
    ----------
    X : array-like, DataFrame or EncodedFeatures, of shape (n_samples, n_features)
        Features; NaN is missing. A DataFrame's column names are kept, and
        :meth:`Model.predict` matches columns by them. String and ``category``
        columns are categorical (:class:`qwkboost.data.features.FeatureSchema`): every
        engine splits them by category sets.
    y : array-like of shape (n_samples,)
        Labels on their own scale.
    engine : {"lightgbm", "xgboost", "native", "catboost"}, optional
        ``None``: the project's default engine (:func:`qwkboost.defaults.default_engine`, the one
        ``experiments/run.py`` uses).
    objective : str or Objective, optional
        A registered name (see :func:`qwkboost.objectives.available`) or an instance; ``None``: the project's
        default (:func:`qwkboost.defaults.default_objective`).
    params : dict, optional
        The engine's own parameters, e.g. ``{"max_depth": 5, "learning_rate": 0.1}``. ``None``: qwkboost's
        defaults for the engine and objective (:func:`qwkboost.defaults.engine_params`, from
        ``conf/engine/<engine>.yaml``, the same as ``experiments/run.py``'s); a dict is used as given, over the
        engine library's own defaults (merge with ``{**qwkboost.defaults.engine_params(engine), ...}`` to start
        from qwkboost's). Unknown names are refused. ``base_score`` (XGBoost's name), on any
        engine, replaces the objective's initial score :math:`F_0`; ``None`` keeps it.
    num_boost_round : int, default 100
    eval_set : tuple (X_val, y_val) or (X_val, y_val, weight_val), optional
        Scored every round with the objective's metric (weighted by ``weight_val``).
    early_stopping_rounds : int, optional
        Stop when the eval-set metric has not improved for this many rounds
        (:class:`qwkboost.callback.EarlyStopping`); needs ``eval_set``.
    early_stopping_min_delta : float, optional
        The smallest gain of the eval-set metric that counts as an improvement
        (XGBoost's and LightGBM's ``min_delta``); needs ``early_stopping_rounds``.
        ``None``: the objective's own at the learning rate :math:`\eta` of ``params``
        (:meth:`qwkboost.objectives.Objective.default_min_delta`): :math:`0.01\,\eta` for extended QWK's
        :math:`\tilde\kappa`, whose long tails of tiny gains otherwise keep training going, 0 for the other
        built-in objectives.
    objective_params : dict, optional
        Parameters for a named objective, e.g. ``{"hessian": "gauss_newton"}``; ``None``: its defaults for this
        engine (:func:`qwkboost.defaults.objective_params`, as ``experiments/run.py`` composes them); a dict is used
        as given.
    callbacks : list of callable, optional
        Each is called as ``fn(round, {"train": {...}, "valid": {...}})`` after every round,
        on every engine; raising :class:`qwkboost.callback.EarlyStopException` stops training.
    seed : int, default 0
    n_jobs : int, optional
        Engine threads; default the cores free when training starts
        (:func:`qwkboost.engines.threads.engine_threads`: the cores this process
        may use less those other processes' runnable tasks hold, at least one).
        A thread count in ``params`` (``nthread``, ``num_threads``, ...) wins.
    categorical : list of str or int, optional
        Further categorical columns (names, or positions for an array), e.g.
        integer-coded ones; strings and pandas categories are categorical anyway.
    sample_weight : array-like of shape (n_samples,), optional
        Weight of each row, in the objective's gradients and sums, its initial
        score and its metric (see :mod:`qwkboost.objectives.base`).

    Returns
    -------
    Model

    Raises
    ------
    ValueError
        For malformed data, an unknown engine, objective or parameter, or inconsistent arguments.
    """
    return train_scoring(X, y, engine, objective, params, num_boost_round, eval_set, early_stopping_rounds,
                         objective_params, callbacks, seed, n_jobs, categorical, sample_weight,
                         early_stopping_min_delta, score_rows=None).model


def train_scoring(X, y, engine: str | None = None, objective: str | Objective | None = None,
                  params: dict | None = None, num_boost_round: int = 100, eval_set: tuple | None = None,
                  early_stopping_rounds: int | None = None, objective_params: dict | None = None,
                  callbacks: list[Callable[[int, dict], None]] | None = None, seed: int = 0,
                  n_jobs: int | None = None, categorical=None, sample_weight=None,
                  early_stopping_min_delta: float | None = None, score_rows: tuple | None = ()) -> Trained:
    """:func:`train`, also returning the raw scores of the eval set and of ``score_rows`` at the model's best
    round where the engine scored them as it boosted (``scores_while_training``: LightGBM, on its binned rows,
    about a quarter of the cost of predicting them afterwards); cross-validation passes its test rows.

    ``score_rows`` is a tuple (maybe empty) of feature arrays laid out as ``X`` (or :class:`EncodedFeatures` of
    its schema); ``None`` keeps no scores (:func:`train`).
    """
    engine = defaults.default_engine() if engine is None else engine
    objective = defaults.default_objective() if objective is None else objective
    adapter = get_engine(engine)
    if objective_params is None and isinstance(objective, str):
        objective_params = defaults.objective_params(objective, engine)      # {} for a name conf/ does not know
    obj = resolve(objective, **check_mapping(objective_params, "objective_params"))
    params = defaults.engine_params(engine, objective) if params is None else check_mapping(params, "params")
    if isinstance(X, EncodedFeatures):
        if categorical is not None:
            raise ValueError("categorical: the columns of EncodedFeatures are set by its schema")
        schema, X = X.schema, X.X
    else:
        schema, X = FeatureSchema.fit_encode(X, categorical, "X")
    y = check_1d(y, "y")
    check_same_length(X, y, "X", "y")
    weight = check_weight(sample_weight, y.size, "sample_weight")
    if obj.ordinal:
        _check_whole(y, "y", obj)
    check_label_span(y, "y")
    if eval_set is not None:
        if not (isinstance(eval_set, (tuple, list)) and len(eval_set) in (2, 3)):
            raise ValueError("eval_set must be a pair (X_val, y_val) or a triple (X_val, y_val, weight_val)")
        Xv = eval_set[0].X if isinstance(eval_set[0], EncodedFeatures) else \
            schema.encode(eval_set[0], "eval_set X", reference="X has")
        yv = check_1d(eval_set[1], "eval_set y")
        check_same_length(Xv, yv, "eval_set X", "eval_set y")
        wv = check_weight(eval_set[2], yv.size, "eval_set weight") if len(eval_set) == 3 else None
        if obj.ordinal:
            _check_whole(yv, "eval_set y", obj)
        eval_set = (Xv, yv, wv)
    num_boost_round = check_int(num_boost_round, "num_boost_round", 0)
    early_stopping_rounds, early_stopping_min_delta = check_early_stopping(
        early_stopping_rounds, early_stopping_min_delta, eval_set is not None)
    seed = check_seed(seed)
    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral) or n_jobs == 0):
        raise ValueError(f"n_jobs must be a non-zero integer (or None for every core); got {n_jobs!r}")
    callbacks = _check_callbacks(callbacks)
    base_score = params.get("base_score")
    params = check_engine_params(engine, params, X.shape[1])
    if not _splittable(X).any():
        raise ValueError(f"X: every feature is constant (or missing) over the {X.shape[0]} training row(s); "
                         "there is nothing to split on")
    params = adapter.with_threads(params, engine_threads(n_jobs))
    if weight is not None and takes_weight(obj.fit):
        obj.fit(y, sample_weight=weight)
    else:
        obj.fit(y)
    if base_score is not None:
        if getattr(obj, "n_outputs_", 1) > 1:
            raise ValueError(f"params.base_score is one number; objective {obj.name!r} has "
                             f"{obj.n_outputs_} outputs and starts from its own initial scores")
        obj.init_score_ = float(base_score)
    adapter.check_objective(obj)           # an objective the engine cannot run, refused before training
    # class objectives index their labels themselves; centring would shift their class scores
    offset = label_offset(y) if getattr(obj, "centre_labels", True) else 0.0
    seen = EngineObjective(obj, offset, check_finite=not adapter.checks_gradients, sample_weight=weight)
    y_seen = freeze(y - offset)        # the engines' own label arrays, recognised by identity every round
    valid = None if eval_set is None else EvalSet(eval_set[0], freeze(eval_set[1] - offset), eval_set[2])
    stopper = None if early_stopping_rounds is None else \
        EarlyStopping(early_stopping_rounds, obj.metric_name, obj.higher_is_better,
                      min_delta=min_delta(obj, engine, params, early_stopping_min_delta))
    rounds = [RoundFunction(fn) for fn in callbacks] + ([stopper] if stopper else [])   # users see every round
    rows = None if score_rows is None else \
        tuple(_score_rows(r, schema, f"score_rows[{i}]") for i, r in enumerate(score_rows))
    scoring = {"score_rows": rows} if adapter.scores_while_training else {}
    with blas_single_thread():
        fit = adapter.fit(X, y_seen, objective=seen, params=params, num_boost_round=num_boost_round,
                          valid=valid, callbacks=rounds, seed=seed, categorical=schema.categorical,
                          sample_weight=weight, **scoring)
    best = stopper.best_iteration if stopper is not None and stopper.best_iteration is not None \
        else fit.stopped_at_best
    best_iteration = fit.num_rounds if best is None or not fit.num_rounds else best + 1
    obj.finish(best_iteration)
    model = Model(engine, obj, obj.init_score_, fit.booster, fit.num_rounds, best_iteration, fit.evals_result,
                  label_offset=offset, schema=schema)
    at = next((s for s in fit.scores if s.rounds == best_iteration), None)
    if at is None:
        return Trained(model, None, (None,) * len(rows or ()))
    return Trained(model, None if at.valid is None else at.valid + offset, tuple(r + offset for r in at.rows))


def _score_rows(rows, schema: FeatureSchema, name: str) -> np.ndarray:
    if not isinstance(rows, EncodedFeatures):
        return schema.encode(rows, name, reference="X has")
    if rows.schema.n_features != schema.n_features:
        raise ValueError(f"{name} has {rows.schema.n_features} features; X has {schema.n_features}")
    return rows.X


def _splittable(X: np.ndarray) -> np.ndarray:
    """Per column: two distinct values, or a value and a missing one."""
    nan = np.isnan(X)
    spread = np.fmax.reduce(X, axis=0) > np.fmin.reduce(X, axis=0)
    return spread | (nan.any(axis=0) & ~nan.all(axis=0))


#: Label spreads the engines' float32 scores can hold, with room for the boosting steps.
MAX_LABEL_SPAN = 1e30


def check_label_span(y: np.ndarray, name: str) -> None:
    span = float(np.max(y)) - float(np.min(y))
    if not span <= MAX_LABEL_SPAN:
        raise ValueError(f"{name} spans {span:.3g}; XGBoost and LightGBM keep labels and scores in float32, so "
                         f"labels must span at most {MAX_LABEL_SPAN:g}: rescale them")


def _check_whole(y: np.ndarray, name: str, obj: Objective) -> None:
    frac = y != np.round(y)
    if frac.any():
        i = int(np.flatnonzero(frac)[0])
        raise ValueError(f"objective {obj.name!r} needs whole-numbered ordinal labels; {name}[{i}] is "
                         f"{float(y[i])!r}. For a continuous target use objective='squared_error'")
