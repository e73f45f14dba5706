"""XGBoost as an :class:`~qwkboost.engines.base.Engine`: our objective as ``fobj``, its metric scored on each
eval set's predictions every round (:func:`boost`, ``xgb.train``'s loop without its second evaluation).

XGBoost keeps ``base_score=0.5`` under a custom objective; we set it to the
objective's :math:`F_0`, so the booster itself predicts in label space.
"""

from __future__ import annotations

import difflib
import functools
import json
import logging
import re
import warnings

import numpy as np
import xgboost as xgb
from xgboost import collective

from qwkboost.callback import EarlyStopException
from qwkboost.engines.base import DaskSupport, EvalSet, FitResult, run_callbacks
from qwkboost.engines.engine import EngineObjective, for_workers
from qwkboost.engines.threads import set_threads

__all__ = ["XGBoostEngine", "boost", "check_params", "valid_params", "xgboost_allreduce"]

log = logging.getLogger(__name__)

DEFAULTS = {"tree_method": "hist", "verbosity": 0}
#: XGBoost's names for its thread count; qwkboost sets ``nthread`` when none is given.
THREAD_PARAMS = ("nthread", "n_jobs")
#: Set by qwkboost itself: a user's value would be overwritten or conflict.
RESERVED = {"objective": "the objective is qwkboost's (objective=...)",
            "seed": "use the seed argument (or seed=... in a config)",
            "random_state": "use the seed argument (or seed=... in a config)",
            "disable_default_eval_metric": "qwkboost scores with the objective's own metric",
            "eval_metric": "qwkboost scores with the objective's own metric"}
# keys in XGBoost's saved configuration that are bookkeeping, not parameters
_INTERNAL = {"name", "num_trees", "num_feature", "num_target", "updater_seq", "specified_updater",
             "process_type", "refresh_leaf"}


def boost(params: dict, dtrain, num_boost_round: int, evals, obj, feval, callbacks, history: dict):
    """``xgb.train``'s loop (XGBoost 3.2, ``training.train``) with the evaluation done here: ``(booster,
    stopped_at_best)``.

    ``xgb.train`` scores each eval set through ``Booster.eval_set``, which first runs XGBoost's own
    evaluation (``XGBoosterEvalOneIter``: predictions copied and transformed for metrics that qwkboost turns
    off) and then predicts again for the custom metric; measured, that first pass took 4 ms a round for
    80,000 + 20,000 rows and 4 classes. Here each eval set is predicted once, from XGBoost's prediction
    cache, and the training set's predictions are also the next round's scores for the gradients (a gbtree
    booster's; ``feval`` must not change the array it is given). The trees are the same: the same
    ``Booster`` (same data caches), gradients and boosting calls. Metric values are rounded to 6 decimals,
    as ``xgb.train`` passes them through its ``"%f"`` eval strings, so that early stopping and the learning
    curves are those of ``xgb.train``. ``history`` receives
    ``{set: {metric: [...]}}``; a callback raising :class:`~qwkboost.callback.EarlyStopException`
    stops training after that round.
    """
    bst = xgb.Booster(params, [dtrain] + [d for d, _ in evals])
    stopped_at_best = None
    # gbtree: the training rows' scores the metric was given after round i are those round i + 1 starts from
    # (``training=True`` only changes a dart booster's), so they are not predicted and copied a second time
    reuse = params.get("booster", "gbtree") != "dart"
    scores = None
    for i in range(num_boost_round):
        if reuse:
            if scores is None:
                scores = bst.predict(dtrain, output_margin=True, training=True)
            grad, hess = obj(scores, dtrain)
            bst.boost(dtrain, iteration=i, grad=grad, hess=hess)
            scores = None
        else:
            bst.update(dtrain, iteration=i, fobj=obj)
        now = {}
        for d, name in evals:
            pred = bst.predict(d, training=False, output_margin=True)
            if d is dtrain:
                scores = pred
            metric, value = feval(pred, d)
            value = float(f"{value:f}")
            history.setdefault(name, {}).setdefault(metric, []).append(value)
            now[name] = {metric: value}
        try:
            run_callbacks(callbacks, i, now)
        except EarlyStopException as stop:
            stopped_at_best = stop.best_iteration
            break
    return bst.reset(), stopped_at_best


def _dry_run(params: dict, n_features: int):
    """One round on three rows with a zero gradient; returns the booster and XGBoost's warnings."""
    X = np.arange(3 * n_features, dtype=np.float64).reshape(3, n_features)
    d = xgb.DMatrix(X, label=np.arange(3.0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        booster = xgb.train({**params, "verbosity": 1, "disable_default_eval_metric": 1}, d, 1,
                            obj=lambda p, _: (np.zeros(p.size), np.ones(p.size)))
    return booster, [str(w.message) for w in caught]


@functools.lru_cache(maxsize=1)
def valid_params() -> tuple[str, ...]:
    """Parameter names XGBoost reports in a booster's configuration (aliases included)."""
    booster, _ = _dry_run({"tree_method": "hist"}, 1)
    out: set[str] = {"verbosity", "max_cat_to_onehot", "nthread", "n_jobs"}

    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if isinstance(v, (dict, list)):
                    walk(v)
                elif k not in _INTERNAL:
                    out.add(k)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(json.loads(booster.save_config()))
    return tuple(sorted(out - set(RESERVED)))


def check_params(params: dict, n_features: int | None) -> None:
    """Refuse names XGBoost would ignore and values it would reject, before any training.

    XGBoost itself is asked: one round on three rows, whose "Parameters: { ... }
    are not used" warning names every unknown parameter. ``n_features=None`` (before the data is read): only
    the names qwkboost sets itself.

    Raises
    ------
    ValueError
        Naming the parameter (with close matches and the valid names) or XGBoost's reason.
    """
    for k in params:
        if k in RESERVED:
            raise ValueError(f"engine parameter {k!r} cannot be set for xgboost: {RESERVED[k]}")
    if n_features is None:
        return
    mono = params.get("monotone_constraints")
    if mono is not None:     # XGBoost takes a shorter list silently, leaving the other features free
        n_mono = len(mono) if isinstance(mono, (list, tuple, dict)) else \
            len([v for v in str(mono).strip("()[] ").split(",") if v.strip()])
        if not isinstance(mono, dict) and n_mono != n_features:
            raise ValueError(f"monotone_constraints has {n_mono} entries but X has {n_features} features; give "
                             "one constraint (-1, 0 or +1) per feature")
    try:
        _, messages = _dry_run({**DEFAULTS, **params}, n_features)
    except xgb.core.XGBoostError as exc:
        raise ValueError(f"xgboost rejected the parameters: {_first_line(exc)}") from None
    unused = [u for m in messages for u in re.findall(r'"([^"]+)"', m.split("are not used")[0])
              if "are not used" in m]
    if unused:
        valid = valid_params()
        hints = {u: difflib.get_close_matches(u, valid, n=2) for u in unused}
        hint = "; ".join(f"{u!r}: did you mean {' or '.join(map(repr, h))}?" for u, h in hints.items() if h)
        raise ValueError(f"unknown xgboost parameter(s) {unused}" + (f" ({hint})" if hint else "")
                         + f"; valid parameters: {', '.join(valid)}")


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    # drop XGBoost's "[time] file:line: " prefix and the stack trace
    first = next((line for line in text.splitlines() if line.strip() and not line.startswith(("Stack", "  ["))), text)
    return re.sub(r"^\[[\d:]+\] [^ ]+:\d+: ", "", first).strip()


def _types(n: int, categorical) -> list[str] | None:
    """XGBoost's feature types: ``"c"`` for the category-code columns; ``None`` if all are numeric."""
    cat = set(categorical)
    return ["c" if j in cat else "q" for j in range(n)] if cat else None


def _dmatrix(X, types, **kw) -> "xgb.DMatrix":
    """A DMatrix; with category columns, typed so that XGBoost makes categorical splits on them."""
    if types is not None and "c" in types:
        return xgb.DMatrix(X, feature_types=types, enable_categorical=True, **kw)
    return xgb.DMatrix(X, **kw)


def xgboost_allreduce(values: np.ndarray) -> np.ndarray:
    """Sum ``values`` over XGBoost's workers (inside a ``CommunicatorContext``, e.g. an ``xgboost.dask`` task)."""

    return collective.allreduce(np.ascontiguousarray(values, dtype=np.float64), collective.Op.SUM)


class _WorkerObjective:
    """XGBoost's ``obj(predt, dmatrix)`` on a worker: the labels and weights come from its local DMatrix."""

    def __init__(self, objective, offset: float):
        self.objective = objective
        self.offset = offset

    def __call__(self, predt, dmat):
        y = dmat.get_label().astype(np.float64)
        w = dmat.get_weight()
        seen = EngineObjective(self.objective, self.offset, sample_weight=w.astype(np.float64) if w.size else None)
        return seen.grad_hess(y, np.asarray(predt, dtype=np.float64))


class _WorkerMetric:
    """XGBoost's ``custom_metric(predt, dmatrix)`` on a worker: the metric of every worker's rows."""

    def __init__(self, objective, offset: float):
        self.objective = objective
        self.offset = offset

    def __call__(self, predt, dmat):
        y = dmat.get_label().astype(np.float64) + self.offset
        p = np.asarray(predt, dtype=np.float64) + self.offset
        w = dmat.get_weight()
        w = w.astype(np.float64) if w.size else None
        if not self.objective.metric_adds_up():     # XGBoost averages the workers' own values
            return self.objective.metric_name, EngineObjective(self.objective).metric(y, p, w)
        sums = self.objective.metric_sums(y, p, w)
        return self.objective.metric_name, self.objective.metric_from_sums(xgboost_allreduce(sums))


#: The booster attribute a worker writes the objective's :meth:`~qwkboost.objectives.Objective.learned` into.
LEARNED_ATTR = "qwkboost_learned"


class _ShipLearned(xgb.callback.TrainingCallback):
    """On a worker, after its last round: the objective's :meth:`~qwkboost.objectives.Objective.learned` (cut points
    learned while boosting) written into the booster, which is what comes back to the client. The objective is
    the one :class:`_WorkerObjective` boosts: both travel in one task, so one copy of it lives on the worker."""

    def __init__(self, objective):
        self.objective = objective

    def after_training(self, model):
        learned = self.objective.learned()
        if learned is not None:
            model.set_attr(**{LEARNED_ATTR: json.dumps(learned)})
        return model


def _take_learned(objective, booster) -> None:
    """The client's ``objective`` takes what a worker's copy learned (:class:`_ShipLearned`); the attribute is
    then removed, so the saved model is as one machine's."""
    raw = booster.attr(LEARNED_ATTR)
    if raw is not None:
        objective.take_learned(json.loads(raw))
        booster.set_attr(**{LEARNED_ATTR: None})


def _margin(X, f0: np.ndarray):
    """Initial scores as XGBoost's per-row ``base_margin``, chunked as ``X``'s rows."""
    import dask.array as da  # optional: the cluster extra

    return da.ones((X.shape[0], f0.size), chunks=(X.chunks[0], f0.size)) * f0


class _StopWhen(xgb.callback.TrainingCallback):
    """On a worker, after each round: ``stop()`` on this worker, added up over all of them, so every worker stops
    at the same round (one that stopped alone would leave the others waiting in the next all-reduce)."""

    def __init__(self, stop):
        self.stop = stop

    def after_iteration(self, model, epoch, evals_log) -> bool:
        return bool(xgboost_allreduce(np.array([float(self.stop())]))[0] > 0)


def train_dask(client, data, valid, objective, *, offset, params, num_boost_round, early_stopping_rounds, seed,
               min_delta=0.0, stop=None) -> FitResult:
    """:func:`xgboost.dask.train` on the objective, its sums and its metric all-reduced over the workers
    (:attr:`XGBoostEngine.dask`); ``stop()``, if given, is asked on every worker after each round
    (:class:`_StopWhen`)."""
    from xgboost import dask as dxgb  # optional: dask, the cluster extra

    obj = objective
    k = int(getattr(obj, "n_outputs_", 1))
    if k > 1:     # one base_margin per output, as on one machine
        f0 = np.asarray(obj.init_score_, dtype=np.float64)
        params = {**DEFAULTS, **params, "num_class": k, "base_score": 0.0}
        margin = lambda d: _margin(d.X, f0)
    else:
        params = {**DEFAULTS, **params, "base_score": obj.init_score_ - offset}
        margin = lambda d: None
    params = {**params, "seed": seed, "disable_default_eval_metric": 1}
    worker = for_workers(obj, xgboost_allreduce)

    types = _types(data.n_features, data.categorical)

    def dmatrix(d):
        # no feature names: the Model matches a DataFrame's columns itself, as on one machine
        return dxgb.DaskDMatrix(client, d.X, d.y - offset, weight=d.weight, base_margin=margin(d),
                                feature_types=types, enable_categorical=types is not None)

    client.run(xgb.set_config, verbosity=0)    # quiet the workers' "got rank" lines
    evals = [(dmatrix(data), "train")]
    if valid is not None:
        evals.append((dmatrix(valid), "valid"))
    callbacks = [_ShipLearned(worker)] + ([] if stop is None else [_StopWhen(stop)])
    if early_stopping_rounds is not None:
        callbacks.append(xgb.callback.EarlyStopping(
            rounds=early_stopping_rounds, metric_name=obj.metric_name, data_name="valid",
            maximize=obj.higher_is_better, save_best=False, min_delta=min_delta))
    if not obj.metric_adds_up():
        log.warning("objective %r has no metric_sums: XGBoost reports the mean of each worker's own %s, not the "
                    "%s of all rows", obj.name, obj.metric_name, obj.metric_name)
    out = dxgb.train(client, params, evals[0][0], num_boost_round=num_boost_round, evals=evals,
                     obj=_WorkerObjective(worker, offset), custom_metric=_WorkerMetric(worker, offset),
                     callbacks=callbacks, verbose_eval=False)
    booster = out["booster"]
    _take_learned(obj, booster)
    best = None
    if early_stopping_rounds is not None:
        # XGBoost's callback decides when to stop; the round kept is the best of all trained, as on one
        # machine (EarlyStopping keeps gains under min_delta, XGBoost's attribute would not)
        scores = np.asarray(out["history"]["valid"][obj.metric_name], dtype=np.float64)
        best = int(np.argmax(scores if obj.higher_is_better else -scores))
    return FitResult(booster, booster.num_boosted_rounds(), best, out["history"])


class XGBoostEngine:
    """XGBoost's ``hist`` trees under qwkboost's objective (see :class:`~qwkboost.engines.base.Engine`)."""

    name = "xgboost"
    thread_params = THREAD_PARAMS
    default_learning_rate = 0.3
    booster_suffix = "ubj"
    checks_gradients = False
    scores_while_training = False
    #: ``xgboost.dask``: its workers all-reduce an objective's sums and the metric (:func:`xgboost_allreduce`)
    #: and split on category codes (its ``enable_categorical``)
    dask = DaskSupport(train_dask, allreduce=True, categorical=True)

    def check_data(self, X, params: dict) -> None:
        """XGBoost trains on any rows :func:`qwkboost.train` takes."""

    def check_objective(self, objective) -> None:
        """Every objective runs here (one score per row or several)."""

    def check_params(self, params: dict, *, n_features: int | None) -> None:
        check_params(params, n_features)

    def with_threads(self, params: dict, n_threads: int) -> dict:
        """``params`` with ``nthread`` set (:func:`~qwkboost.engines.threads.set_threads`), unless the user gave a
        thread count."""
        return set_threads(params, THREAD_PARAMS, "nthread", n_threads)

    def fit(self, X, y, *, objective, params: dict, num_boost_round: int, valid: EvalSet | None, callbacks,
            seed: int, categorical=(), sample_weight=None) -> FitResult:
        k = getattr(objective, "n_outputs", 1)
        if k > 1:
            # several outputs: XGBoost keeps one base_score, so every output starts from its own base_margin
            params = {**DEFAULTS, **params, "num_class": k, "base_score": 0.0, "seed": seed,
                      "disable_default_eval_metric": 1}
            f0 = np.asarray(objective.init_score_, dtype=np.float64)
            margin = lambda n: np.tile(f0, (n, 1))
        else:
            params = {**DEFAULTS, **params, "base_score": objective.init_score_, "seed": seed,
                      "disable_default_eval_metric": 1}
            margin = lambda n: None
        types = _types(X.shape[1], categorical)
        dtrain = _dmatrix(X, types, label=y, base_margin=margin(len(y)))
        evals = [(dtrain, "train")]
        labels = {id(dtrain): (y, sample_weight)}
        if valid is not None:
            dvalid = _dmatrix(valid.X, types, label=valid.y, base_margin=margin(len(valid.y)))
            evals.append((dvalid, "valid"))
            labels[id(dvalid)] = (valid.y, valid.weight)

        kept: dict = {}

        def as_float64(pred, key):
            # XGBoost's float32 scores, widened into an array kept per data set (no new pages a round); the
            # training set's metric and the next round's gradients get the same array from boost()
            buf, last = kept.get(key, (None, None))
            if last is pred:
                return buf
            if buf is None or buf.shape != pred.shape:
                buf = np.empty(pred.shape)
            np.copyto(buf, pred)
            kept[key] = buf, pred
            return buf

        def obj(pred, d):
            return objective.grad_hess(y, as_float64(pred, id(dtrain)))

        def feval(pred, d):
            yl, wl = labels[id(d)]
            return objective.metric_name, objective.metric(yl, as_float64(pred, id(d)), wl)

        evals_result: dict = {}
        booster, stopped_at_best = boost(params, dtrain, num_boost_round, evals, obj, feval, callbacks,
                                         evals_result)
        return FitResult(booster, booster.num_boosted_rounds(), stopped_at_best, evals_result)

    def predict(self, booster, X, *, n_iter: int, init_score) -> np.ndarray:
        """Scores from the first ``n_iter`` rounds (the booster's ``base_score`` is :math:`F_0`; with several
        outputs the initial scores are added here, as ``base_margin`` is not kept with the model)."""
        out = booster.predict(_dmatrix(X, booster.feature_types), iteration_range=(0, n_iter), output_margin=True)
        out = out.astype(np.float64)
        return out + np.asarray(init_score) if out.ndim == 2 else out

    def contributions(self, booster, X, *, n_iter: int, init_score):
        """XGBoost's ``pred_contribs`` (its TreeSHAP); the bias column holds ``base_score`` (:math:`F_0`), and
        with several outputs the initial scores are added to it, as :meth:`predict` adds them."""
        c = booster.predict(_dmatrix(X, booster.feature_types), pred_contribs=True,
                            iteration_range=(0, n_iter)).astype(np.float64)
        if c.ndim == 3:                                     # (n, K, F + 1)
            return np.moveaxis(c[:, :, :-1], 1, 2), c[:, :, -1] + np.asarray(init_score)
        return c[:, :-1], c[:, -1]

    def gains(self, booster, *, n_iter: int, n_outputs: int) -> np.ndarray:
        """Each split's ``gain`` from the trees' JSON dump, summed per feature (and per output: tree ``t`` is
        output ``t % K``)."""
        out = np.zeros((booster.num_features(), n_outputs))
        names = booster.feature_names
        index = {n: j for j, n in enumerate(names)} if names else None
        for t, text in enumerate(booster.get_dump(dump_format="json", with_stats=True)[:n_iter * n_outputs]):
            stack = [json.loads(text)]
            while stack:
                node = stack.pop()
                if "split" in node:
                    f = index[node["split"]] if index else int(str(node["split"]).lstrip("f"))
                    out[f, t % n_outputs] += float(node.get("gain", 0.0))
                    stack.extend(node.get("children", []))
        return out[:, 0] if n_outputs == 1 else out

    def dump(self, booster) -> str:
        return bytes(booster.save_raw("json")).decode()

    def load(self, text: str):
        return self.from_bytes(text.encode())

    def to_bytes(self, booster) -> bytes:
        return bytes(booster.save_raw("ubj"))

    def from_bytes(self, data: bytes):
        """A booster from its JSON or UBJSON (XGBoost tells them apart by the first byte)."""
        b = xgb.Booster()
        try:
            b.load_model(bytearray(data))
        except xgb.core.XGBoostError as exc:
            raise ValueError(f"the xgboost booster in the model file is malformed: {_first_line(exc)}") from None
        return b

    def shape(self, booster) -> tuple[int, int]:
        return booster.num_boosted_rounds(), booster.num_features()
