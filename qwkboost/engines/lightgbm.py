"""LightGBM as an :class:`~qwkboost.engines.base.Engine`: our objective as a callable ``objective``, its metric as ``feval``.

LightGBM starts custom objectives at 0 and never adds ``init_score`` back at
prediction; we pass :math:`F_0` as ``init_score`` and add it in
:func:`predict_raw`.
"""

from __future__ import annotations

import difflib
import functools
import re
import warnings

import lightgbm as lgb
import numpy as np
from lightgbm.basic import _ConfigAliases

from qwkboost.callback import EarlyStopException, EarlyStopping
from qwkboost.engines.base import DaskSupport, EvalSet, FitResult, RowScores, run_callbacks
from qwkboost.engines.engine import EngineObjective
from qwkboost.engines.threads import set_threads

__all__ = ["LightGBMEngine", "check_params", "check_data", "aliases"]

DEFAULTS = {"verbose": -1}
#: Set by qwkboost itself (checked with every alias LightGBM knows).
RESERVED = {"objective": "the objective is qwkboost's (objective=...)",
            "seed": "use the seed argument (or seed=... in a config)",
            "metric": "qwkboost scores with the objective's own metric",
            "num_iterations": "use num_boost_round (engine.num_boost_round in a config)",
            "early_stopping_round": "use early_stopping_rounds (engine.early_stopping_rounds in a config)"}


@functools.lru_cache(maxsize=1)
def aliases() -> dict[str, str]:
    """Every name LightGBM accepts, mapped to its canonical parameter."""

    return {alias: canon for canon, names in _ConfigAliases._get_all_param_aliases().items()
            for alias in (canon, *names)}


def _scores_are_predictions(params: dict) -> bool:
    """Whether the scores LightGBM keeps of its validation rows as it boosts are what the model predicts at that
    round: not under DART, which scales earlier trees down after they scored, nor with linear trees, whose binned
    rows are scored in single precision (1e-7 apart); checked with every other boosting setting
    (``tests/engines/test_scoring_while_training.py``)."""
    boosting, linear = _param(params, "boosting", "gbdt"), _param(params, "linear_tree", False)
    return str(boosting).lower() in ("gbdt", "gbrt", "goss") and linear in (False, "false", 0)


def _thread_names() -> tuple[str, ...]:
    return tuple(a for a, c in aliases().items() if c == "num_threads")


def check_params(params: dict, n_features: int | None) -> None:
    """Refuse names LightGBM does not know (it would only warn) and values it rejects; ``n_features=None``
    (before the data is read): the names only.

    Raises
    ------
    ValueError
        Naming the parameter (with close matches and the valid names) or LightGBM's reason.
    """
    known = aliases()
    unknown = [k for k in params if k not in known]
    if unknown:
        canon = sorted(set(known.values()))
        hints = {u: difflib.get_close_matches(u, list(known), n=2) for u in unknown}
        hint = "; ".join(f"{u!r}: did you mean {' or '.join(map(repr, h))}?" for u, h in hints.items() if h)
        raise ValueError(f"unknown lightgbm parameter(s) {unknown}" + (f" ({hint})" if hint else "")
                         + f"; valid parameters (aliases also accepted): {', '.join(canon)}")
    seen: dict[str, str] = {}
    for k in params:
        c = known[k]
        if c in RESERVED:
            raise ValueError(f"engine parameter {k!r} cannot be set for lightgbm: {RESERVED[c]}")
        if c in seen:
            raise ValueError(f"lightgbm parameters {seen[c]!r} and {k!r} are the same parameter ({c!r}); give one")
        seen[c] = k
    boosting = _param(params, "boosting", "gbdt")
    if str(boosting).lower() in ("rf", "random_forest"):
        raise ValueError(f"lightgbm parameter boosting={boosting!r} cannot be used: LightGBM's random forest takes no "
                         "initial score, and qwkboost's objectives start every row from theirs; use gbdt, goss or "
                         "dart")
    if n_features is None:
        return
    mono = _param(params, "monotone_constraints", None)
    if isinstance(mono, (list, tuple)) and len(mono) != n_features:
        raise ValueError(f"monotone_constraints must have one entry per feature ({n_features}); got {len(mono)}")
    cat = _param(params, "categorical_feature", None)
    if cat is not None:
        idx = cat if isinstance(cat, (list, tuple)) else str(cat).split(",")
        bad = [c for c in idx if not str(c).strip().lstrip("-").isdigit() or not 0 <= int(c) < n_features]
        if bad:
            raise ValueError(f"categorical_feature must list feature indices in [0, {n_features}); got {cat!r} "
                             "(LightGBM would ignore the others)")
    X = np.arange(3 * n_features, dtype=np.float64).reshape(3, n_features)
    try:
        lgb.Booster({**DEFAULTS, **params}, lgb.Dataset(X, np.arange(3.0), params={"verbose": -1}))
    except lgb.basic.LightGBMError as exc:
        raise ValueError(f"lightgbm rejected the parameters: {_reason(exc)}") from None


def _reason(exc: Exception) -> str:
    return re.sub(r" at [^ ]+, line \d+ \.?$", "", str(exc).strip())


def _param(params: dict, canonical: str, default):
    known = aliases()
    return next((v for k, v in params.items() if known.get(k) == canonical), default)


#: Below this many rows, a training set may leave LightGBM no feature to split on (checked first).
PROBE_ROWS = 10_000


def _no_feature_message(n: int, params: dict) -> str:
    known = aliases()
    # advise the name the parameters already use (min_child_samples in conf/engine/lightgbm.yaml): a second
    # alias beside it would be refused
    key = next((k for k in params if known.get(k) == "min_data_in_leaf"), None)
    lower = (f"engine.params.{key}=3" if key else "+engine.params.min_data_in_leaf=5")
    return (f"lightgbm can split no feature of these {n} training rows with {key or 'min_data_in_leaf'}="
            f"{_param(params, 'min_data_in_leaf', 20)} and min_data_in_bin={_param(params, 'min_data_in_bin', 3)} "
            f"(every split needs that many rows on each side); lower them (e.g. {lower}; in Python "
            f"params={{'{key or 'min_data_in_leaf'}': ...}}) or give more rows")


def check_data(X, params: dict, categorical="auto") -> None:
    """Refuse training rows on which LightGBM would find no usable feature (its fatal
    ``num_features() > 0`` check): bins them as LightGBM would, without training.

    Raises
    ------
    ValueError
        Naming ``min_data_in_leaf`` and ``min_data_in_bin`` and what to do.
    """
    probe = {k: v for k, v in params.items() if not callable(v)}
    ds = lgb.Dataset(X, params={**probe, "verbose": -1}, categorical_feature=categorical).construct()
    if all(ds.feature_num_bin(j) == 0 for j in range(X.shape[1])):
        raise ValueError(_no_feature_message(X.shape[0], params))


def _callbacks(callbacks, on_best=None):
    """qwkboost's callbacks as one LightGBM callback; an :class:`EarlyStopException` stops training.

    ``on_best(iteration)`` is called in each round an :class:`~qwkboost.callback.EarlyStopping` among
    ``callbacks`` takes as its best, before any stop."""
    stopper = next((c for c in callbacks if isinstance(c, EarlyStopping)), None)

    def cb(env):
        evals: dict = {}
        for ds, metric, value, _ in env.evaluation_result_list:
            evals.setdefault(ds, {})[metric] = value
        try:
            run_callbacks(callbacks, env.iteration, evals)
        except EarlyStopException as stop:
            cb.stopped_at_best = stop.best_iteration
            raise lgb.callback.EarlyStopException(stop.best_iteration, env.evaluation_result_list) from None
        finally:
            if on_best is not None and stopper is not None and stopper.best_iteration == env.iteration:
                on_best(env.iteration)
    cb.order = 30
    cb.stopped_at_best = None
    return cb


class _Scored:
    """The scores LightGBM hands the metric each round, for the eval set and the ``score_rows``
    (:class:`~qwkboost.engines.base.RowScores`): the latest round's, and a copy at each new best round."""

    def __init__(self, n_rows: int):
        self.latest: dict[str, np.ndarray] = {}
        self.names = ["valid"] + [f"score_rows_{i}" for i in range(n_rows)]
        self.best: RowScores | None = None

    def keep(self, name: str, pred: np.ndarray) -> None:
        self.latest[name] = pred            # LightGBM's own buffer, overwritten next round: copied when kept

    def scores(self, rounds: int) -> RowScores | None:
        if not all(n in self.latest for n in self.names[1:]):
            return None
        valid = self.latest.get("valid")
        return RowScores(rounds, None if valid is None else valid.copy(),
                         tuple(self.latest[n].copy() for n in self.names[1:]))

    def on_best(self, iteration: int) -> None:
        self.best = self.scores(iteration + 1)


def _load(text: str):
    """A booster from ``model_to_string`` text, checked first: LightGBM aborts on some truncated files."""
    if not text.startswith("tree\n") or "\nend of trees\n" not in text:
        raise ValueError("the lightgbm booster in the model file is malformed or truncated "
                         "(no 'tree' header or 'end of trees' marker)")
    sizes = re.search(r"^tree_sizes=([\d ]*)$", text, flags=re.M)
    n_trees = len(re.findall(r"^Tree=\d+$", text, flags=re.M))
    if sizes is None or len(sizes.group(1).split()) != n_trees:
        raise ValueError("the lightgbm booster in the model file is malformed or truncated "
                         "(its tree count does not match tree_sizes)")
    try:
        return lgb.Booster(model_str=text)
    except lgb.basic.LightGBMError as exc:
        raise ValueError(f"the lightgbm booster in the model file is malformed: {_reason(exc)}") from None


class _WorkerObjective:
    """LightGBM's ``objective(y_true, y_pred, weight)`` on a worker (per-row objectives only)."""

    def __init__(self, objective, offset: float):
        self.objective = objective
        self.offset = offset

    def __call__(self, y_true, y_pred, weight):
        w = None if weight is None else np.asarray(weight, dtype=np.float64)
        seen = EngineObjective(self.objective, self.offset, sample_weight=w)
        return seen.grad_hess(np.asarray(y_true, dtype=np.float64), np.asarray(y_pred, dtype=np.float64))


def train_dask(client, data, valid, objective, *, offset, params, num_boost_round, early_stopping_rounds, seed,
               min_delta=0.0, stop=None) -> FitResult:
    """:class:`lightgbm.DaskLGBMRegressor` on the objective, called on each worker's rows
    (:attr:`LightGBMEngine.dask`: no eval set, no early stopping, one score per row, no ``stop``: its workers
    cannot agree on a round to stop at)."""
    if stop is not None:
        raise ValueError("lightgbm.dask cannot stop its workers together between rounds; train with "
                         "engine=xgboost on a cluster to be stopped mid-fold")
    import dask.array as da  # optional: the cluster extra

    if num_boost_round == 0:        # as on one machine: no booster, predictions are F0
        return FitResult(None, 0)
    init = da.full(data.y.shape[0], objective.init_score_ - offset, chunks=data.X.chunks[0])
    reg = lgb.DaskLGBMRegressor(client=client, objective=_WorkerObjective(objective, offset),
                                n_estimators=num_boost_round, random_state=seed,
                                **{"verbosity": -1, **params})
    with warnings.catch_warnings():      # lightgbm.dask sets its own threads per worker and says so
        warnings.filterwarnings("ignore", message="Parameter n_jobs will be ignored")
        reg.fit(data.X, data.y - offset, sample_weight=data.weight, init_score=init)
    booster = reg.to_local().booster_
    return FitResult(booster, booster.current_iteration())


class LightGBMEngine:
    """LightGBM under qwkboost's objective (see :class:`~qwkboost.engines.base.Engine`).

    LightGBM starts custom objectives at 0 and never adds ``init_score`` back
    at prediction: :math:`F_0` goes in as ``init_score`` and :meth:`predict`
    adds it. Every trained round is kept (``keep_training_booster``), as on
    the other engines.
    """

    name = "lightgbm"
    default_learning_rate = 0.1
    booster_suffix = "txt"
    checks_gradients = False
    scores_while_training = True
    #: ``lightgbm.dask`` calls the objective and the metric on each worker's rows, with nothing to add them up
    dask = DaskSupport(train_dask, allreduce=False, max_outputs=1)

    def check_data(self, X, params: dict) -> None:
        """Refuse rows on which LightGBM would find no usable feature (:func:`check_data`)."""
        check_data(X, params)

    @property
    def thread_params(self) -> tuple[str, ...]:
        return _thread_names()

    def check_objective(self, objective) -> None:
        """Every objective runs here (one score per row or several)."""

    def check_params(self, params: dict, *, n_features: int | None) -> None:
        check_params(params, n_features)

    def with_threads(self, params: dict, n_threads: int) -> dict:
        """``params`` with ``num_threads`` set (:func:`~qwkboost.engines.threads.set_threads`), unless the user gave
        a thread count (any alias)."""
        return set_threads(params, _thread_names(), "num_threads", n_threads)

    def fit(self, X, y, *, objective, params: dict, num_boost_round: int, valid: EvalSet | None, callbacks,
            seed: int, categorical=(), sample_weight=None, score_rows=None) -> FitResult:
        """Boost on ``X``. Given ``score_rows`` (a tuple, maybe empty), the eval set's scores are kept as it boosts,
        and the rows of each array too, added as validation sets without a metric
        (:class:`~qwkboost.engines.base.RowScores`)."""
        if num_boost_round == 0:
            return FitResult(None, 0)
        categorical = sorted(int(j) for j in categorical) or "auto"
        if len(y) < PROBE_ROWS:
            check_data(X, params, categorical)
        k = getattr(objective, "n_outputs", 1)
        f0 = objective.init_score_
        init = (lambda n: np.tile(np.asarray(f0, dtype=np.float64), (n, 1))) if k > 1 else \
            (lambda n: np.full(n, f0))
        params = {**DEFAULTS, **params, "seed": seed, "metric": "None",
                  "objective": lambda pred, d: objective.grad_hess(y, pred)}
        if k > 1:
            params["num_class"] = k
        dtrain = lgb.Dataset(X, label=y, init_score=init(len(y)), free_raw_data=False,
                             categorical_feature=categorical)
        valid_sets, names, labels = [dtrain], ["train"], {"train": (y, sample_weight)}
        if valid is not None:
            valid_sets.append(lgb.Dataset(valid.X, label=valid.y, init_score=init(len(valid.y)), reference=dtrain))
            names.append("valid")
            labels["valid"] = (valid.y, valid.weight)
        keeping = score_rows is not None and _scores_are_predictions(params)     # else predicted afterwards
        score_rows = tuple(score_rows or ()) if keeping else ()
        scored = _Scored(len(score_rows))
        for i, rows in enumerate(score_rows):
            valid_sets.append(lgb.Dataset(rows, init_score=init(len(rows)), reference=dtrain))
            names.append(f"score_rows_{i}")
        order = {id(ds): n for ds, n in zip(valid_sets, names)}

        def feval(pred, d):
            name = order.get(id(d), "train")
            if name != "train" and keeping:
                scored.keep(name, pred)
            if name not in labels:
                return []
            yl, wl = labels[name]
            return objective.metric_name, objective.metric(yl, pred, wl), objective.higher_is_better

        evals_result: dict = {}
        rounds = _callbacks(callbacks, scored.on_best if keeping else None)
        try:
            booster = lgb.train(params, dtrain, num_boost_round=num_boost_round, valid_sets=valid_sets,
                                valid_names=names, feval=feval, keep_training_booster=True,
                                callbacks=[lgb.record_evaluation(evals_result), rounds])
        except lgb.basic.LightGBMError as exc:
            if "num_features()) > (0)" in str(exc):
                raise ValueError(_no_feature_message(len(y), params)) from None
            raise
        n = booster.current_iteration()
        scores = () if not keeping else tuple(s for s in (scored.best, scored.scores(n)) if s is not None)
        booster.free_dataset()
        return FitResult(booster, n, rounds.stopped_at_best, evals_result, scores)

    def predict(self, booster, X, *, n_iter: int, init_score) -> np.ndarray:
        """LightGBM's raw score plus :math:`F_0` (a vector with several outputs)."""
        return booster.predict(X, num_iteration=n_iter, raw_score=True) + np.asarray(init_score)

    def predict_span(self, booster, X, *, start: int, stop: int) -> np.ndarray:
        """The raw scores of rounds ``start`` to ``stop - 1`` alone, without :math:`F_0`
        (LightGBM's ``start_iteration``)."""
        return booster.predict(X, start_iteration=start, num_iteration=stop - start, raw_score=True)

    def contributions(self, booster, X, *, n_iter: int, init_score):
        """LightGBM's ``pred_contrib`` (its TreeSHAP), which knows nothing of ``init_score``: :math:`F_0` is added
        to the bias, as :meth:`predict` adds it."""
        c = np.asarray(booster.predict(X, num_iteration=n_iter, pred_contrib=True), dtype=np.float64)
        k = booster.num_model_per_iteration()
        if k > 1:
            c = c.reshape(c.shape[0], k, -1)                # (n, K, F + 1)
            return np.moveaxis(c[:, :, :-1], 1, 2), c[:, :, -1] + np.asarray(init_score)
        return c[:, :-1], c[:, -1] + float(init_score)

    def gains(self, booster, *, n_iter: int, n_outputs: int) -> np.ndarray:
        """Each split's ``split_gain`` from the model's dump, summed per feature (tree ``t`` is output ``t % K``)."""
        out = np.zeros((booster.num_feature(), n_outputs))
        for info in booster.dump_model(num_iteration=n_iter)["tree_info"]:
            stack = [info["tree_structure"]]
            while stack:
                node = stack.pop()
                if "split_feature" in node:
                    out[node["split_feature"], info["tree_index"] % n_outputs] += float(node["split_gain"])
                    stack += [node["left_child"], node["right_child"]]
        return out[:, 0] if n_outputs == 1 else out

    def dump(self, booster) -> str:
        return booster.model_to_string(num_iteration=-1)

    def load(self, text: str):
        return _load(text)

    def to_bytes(self, booster) -> bytes:
        return self.dump(booster).encode()

    def from_bytes(self, data: bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("the lightgbm model in the model file is malformed (not UTF-8 text)") from None
        return _load(text)

    def shape(self, booster) -> tuple[int, int]:
        return booster.current_iteration(), booster.num_feature()
