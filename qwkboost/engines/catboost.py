r"""CatBoost as an :class:`~qwkboost.engines.base.Engine`: qwkboost's objective as a Python loss, its metric as a
Python ``eval_metric``, the callbacks after every iteration.

**One gradient a round, at the round's scores.** CatBoost asks a Python loss for derivatives in blocks of rows
(``calc_ders_range``, at most 1,000 rows a call, several passes a round: the split search in row order, then the
leaf values leaf by leaf), while qwkboost's objectives compute every row's gradient at once, some of them from
sums over all rows (extended QWK's numerator and denominator, ordinal logit's cut points, updated once a
round). So each round's gradients and hessians come from one call of the objective on the whole training set,
at the round's scores, and every block looks its rows up by (score, label): the scores CatBoost's Python metric
is given after each iteration are those the next iteration's blocks are given (checked on every block; a
block whose pair is not found stops training with an error, never a wrong gradient). Objectives whose rows are
independent (``gradient_needs = "rows"``) are called on each block directly. The derivatives CatBoost wants
are those of the function it maximises: :math:`(-g, -h)`.

**Initial score.** CatBoost refuses ``boost_from_average`` for Python losses, and a Pool's ``baseline`` is held
in float32; so the trees start from 0 and every score handed to the objective is :math:`F_0 + a` in float64.
After training, :math:`F_0` is written into the model as its bias (``set_scale_and_bias``), so the ``.cbm``
file alone predicts the full score; :meth:`CatBoostEngine.predict` puts qwkboost's :math:`F_0` in its place.

**Fixed settings.** ``boosting_type=Plain`` (Ordered boosting keeps one score per permutation, not one per row),
``leaf_estimation_iterations=1`` and ``leaf_estimation_backtracking=No`` (further Newton steps within a round
would need gradients at scores no objective has seen). Row weights go into the Pool, as CatBoost's own losses
take them, and the objective's per-row terms are scaled by the weights CatBoost hands each block. With
categorical columns and an objective whose gradients are looked up, CatBoost's learning fold would compute its
target statistics in a permutation of its own and score the rows differently from its metric; the rows are
then shuffled by ``seed`` here and trained with ``has_time=True`` (one permutation, ours), unless the user set
``has_time`` (rows in time order).
"""

from __future__ import annotations

import base64
import os
import tempfile
import threading
import warnings

import numpy as np

from qwkboost.engines.base import EvalSet, FitResult, run_callbacks
from qwkboost.engines.callback import EarlyStopException

__all__ = ["CatBoostEngine", "check_params", "DEFAULTS", "RESERVED", "FIXED", "FILE_PARAMS"]

DEFAULTS = {"logging_level": "Silent", "allow_writing_files": False, "boost_from_average": False,
            "metric_period": 1, "use_best_model": False}
#: Set by qwkboost to these values; a user's other value is refused (why: the module's docstring).
FIXED = {"boosting_type": "Plain", "leaf_estimation_iterations": 1, "leaf_estimation_backtracking": "No"}
#: Set by qwkboost itself (checked after CatBoost's own synonyms are resolved).
RESERVED = {
    "loss_function": "the objective is qwkboost's (objective=...)",
    "objective": "the objective is qwkboost's (objective=...)",
    "eval_metric": "qwkboost scores with the objective's own metric",
    "custom_metric": "qwkboost scores with the objective's own metric",
    "custom_loss": "qwkboost scores with the objective's own metric",
    "iterations": "use num_boost_round (engine.num_boost_round in a config)",
    "random_seed": "use the seed argument (or seed=... in a config)",
    "early_stopping_rounds": "use early_stopping_rounds (engine.early_stopping_rounds in a config)",
    "od_type": "qwkboost stops early on the objective's metric (engine.early_stopping_rounds)",
    "od_wait": "qwkboost stops early on the objective's metric (engine.early_stopping_rounds)",
    "od_pval": "qwkboost stops early on the objective's metric (engine.early_stopping_rounds)",
    "use_best_model": "qwkboost keeps every round and predicts with the best one",
    "cat_features": "categorical columns are the feature schema's (string columns, data.categorical)",
    "boost_from_average": "the initial score is the objective's own (params.base_score replaces it)",
    "task_type": "CatBoost trains Python losses on the CPU only",
    "devices": "CatBoost trains Python losses on the CPU only",
    "metric_period": "qwkboost scores every round (its early stopping and learning curves need them)",
    "class_weights": "weights are rows' (data.weight, sample_weight)",
    "auto_class_weights": "weights are rows' (data.weight, sample_weight)",
}
#: CatBoost's settings that write files (its training logs in ``catboost_info/`` of the working directory, snapshots
#: to resume training): refused, whatever their value but ``allow_writing_files=false``. qwkboost keeps the learning
#: curves itself (``Model.evals_result``, MLflow) and saves models as JSON (``Model.save``).
FILE_PARAMS = ("allow_writing_files", "train_dir", "save_snapshot", "snapshot_file", "snapshot_interval",
               "json_log", "profile_log", "learn_error_log", "test_error_log", "time_left_log", "roc_file",
               "training_options_file", "output_borders")
THREAD_PARAMS = ("thread_count", "n_jobs")
_DUMP_PREFIX = "catboost-cbm-base64:"


def _synonyms(params: dict) -> dict:
    """``params`` under CatBoost's own names (``max_depth`` -> ``depth``, ``eta`` -> ``learning_rate``, ...)."""
    from catboost import core

    out = dict(params)
    if "n_jobs" in out and "thread_count" not in out:
        out["thread_count"] = out.pop("n_jobs")
    process = getattr(core, "_process_synonyms", None)
    if process is not None:
        process(out)
    return out


def check_params(params: dict, n_features: int | None) -> None:
    """Refuse names CatBoost does not know, values it rejects, settings qwkboost makes itself, and settings that
    write files (:data:`FILE_PARAMS`). ``n_features=None``: before the data is read (the checks that need no data).

    Raises
    ------
    ValueError
        Naming the parameter and why.
    """
    from catboost import CatBoostError
    from catboost._catboost import _check_train_params

    given = dict(params)
    for name in given:
        canon = next(iter(_synonyms({name: given[name]})), name)
        if canon in RESERVED:
            raise ValueError(f"engine parameter {name!r} cannot be set for catboost: {RESERVED[canon]}")
        if canon in FILE_PARAMS and not (canon == "allow_writing_files" and given[name] is False):
            raise ValueError(f"engine parameter {name}={given[name]!r} cannot be set for catboost: it makes CatBoost "
                             "write training files (into catboost_info/ of the working directory), and qwkboost writes "
                             "none; the learning curves are in the model's evals_result (and a run's MLflow run), and "
                             "models are saved with Model.save")
    canon = _synonyms(given)
    if len(canon) < len(given):
        raise ValueError(f"catboost parameters {sorted(given)} name one parameter twice (CatBoost's synonyms); "
                         "give one")
    for key, value in FIXED.items():
        if key in canon and canon[key] != value:
            raise ValueError(f"engine parameter {key}={canon[key]!r} cannot be used with qwkboost's objectives on "
                             f"catboost (they compute one gradient a round, for one score per row); qwkboost sets "
                             f"{key}={value!r}")
    if canon.get("leaf_estimation_method") == "Exact":
        raise ValueError("engine parameter leaf_estimation_method='Exact' needs one of CatBoost's own losses; use "
                         "'Newton' (the default) or 'Gradient'")
    mono = canon.get("monotone_constraints")
    if n_features is not None and isinstance(mono, (list, tuple)) and len(mono) != n_features:
        raise ValueError(f"monotone_constraints must have one entry per feature ({n_features}); got {len(mono)}")
    # checked as fit() gets them: with qwkboost's own settings (allow_writing_files=False among them)
    probe = {**DEFAULTS, **{k: v for k, v in canon.items() if k != "thread_count"}, "loss_function": "RMSE"}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _check_train_params(probe)
    except CatBoostError as exc:
        reason = str(exc).split(": ", 1)[-1]
        raise ValueError(f"catboost rejected the parameters: {reason}") from None


def _frame(X: np.ndarray, categorical) -> "object":
    """``X`` as CatBoost takes it: a DataFrame whose category columns hold integer codes (missing: -1)."""
    import pandas as pd

    cols = {}
    cat = set(int(j) for j in categorical)
    for j in range(X.shape[1]):
        col = X[:, j]
        cols[j] = np.where(np.isnan(col), -1, col).astype(np.int64) if j in cat else col
    return pd.DataFrame(cols, copy=False)


def _pool(X, categorical, label=None, weight=None):
    from catboost import Pool

    cat = sorted(int(j) for j in categorical)
    return Pool(_frame(X, cat), label=label, weight=weight, cat_features=cat or None)


class _ScoreIndex:
    """Where each of a round's distinct scores is (a hash table: pandas' own, through its public ``Index`` when
    that is not importable)."""

    def __init__(self, scores: np.ndarray):
        try:
            from pandas._libs.hashtable import Float64HashTable

            self._table = Float64HashTable(scores.size)
            self._table.map_locations(scores)
            self.positions = self._table.lookup
        except (ImportError, AttributeError):
            import pandas as pd

            self.positions = pd.Index(scores).get_indexer


def _declares_rows(objective) -> bool:
    """Whether the objective's own class says each row's gradient needs only that row (``gradient_needs =
    "rows"``, not the base class's default): its blocks are then computed directly, not looked up."""
    from qwkboost.objectives import Objective

    for cls in type(objective).__mro__:
        if cls is Objective:
            return False
        if "gradient_needs" in cls.__dict__:
            return cls.__dict__["gradient_needs"] == "rows"
    return False


class _Rounds:
    """The state shared by the loss, the metric and the callback: the scores a round starts from, the round's
    gradients (one objective call), and the metric values CatBoost has just asked for."""

    def __init__(self, objective, y: np.ndarray, weight: np.ndarray | None, valid: EvalSet | None):
        self.objective = objective
        self.f0 = float(objective.init_score_)
        self.y = np.asarray(y, dtype=np.float64)
        self.weight = weight
        self.valid = valid
        self.approx = np.zeros(self.y.size)       # CatBoost's trees start at 0: the score is f0 + approx
        self.table = None
        self.evals: dict = {}
        self.rows = _declares_rows(objective.objective)
        # labels as CatBoost hands them to the loss (float32), ranked: half of the table's key
        self.labels = np.unique(self.y.astype(np.float32))
        self.label_rank = np.searchsorted(self.labels, self.y.astype(np.float32))
        # CatBoost asks for blocks from several threads at once: one at a time reaches the objective (whose
        # scratch buffers are shared), and the round's gradients are computed once
        self.lock = threading.Lock()

    def new_round(self, approx: np.ndarray) -> None:
        self.approx = approx
        self.table = None

    def _build(self) -> None:
        """This round's gradients and hessians at every training row, in a table indexed by (score, label): the
        score's place among the round's distinct scores (a hash index) and the label's rank."""
        g, h = self.objective.grad_hess(self.y, self.f0 + self.approx)
        a, lab = self.approx, self.label_rank
        if self.weight is not None:                 # per-row terms; the block's weights scale them back
            keep = self.weight > 0
            g = np.divide(g, self.weight, out=np.zeros_like(g), where=keep)[keep]
            h = np.divide(h, self.weight, out=np.zeros_like(h), where=keep)[keep]
            a, lab = a[keep], lab[keep]
        scores, rank = np.unique(a, return_inverse=True)
        L = self.labels.size
        G = np.full(scores.size * L, np.nan)        # NaN: no training row has this (score, label)
        H = np.empty(scores.size * L)
        cell = rank * L + lab
        G[cell], H[cell] = g, h
        self.table = (_ScoreIndex(scores), G, H)

    def _lookup(self, table, a: np.ndarray, t: np.ndarray):
        """``(g, h)`` of rows with scores ``a`` and labels ``t`` (float32, as CatBoost holds them) from a round's
        table."""
        index, G, H = table
        rank = index.positions(a)
        lab = np.searchsorted(self.labels, np.asarray(t, dtype=np.float32))
        cell = rank * self.labels.size + np.minimum(lab, self.labels.size - 1)
        g = G[cell]
        if (rank < 0).any() or np.isnan(g).any():
            raise RuntimeError("catboost asked for derivatives at scores that are not the round's (its metric "
                               "and its loss saw different scores); qwkboost cannot give its objective's "
                               "gradient there. Report the catboost version and parameters")
        return g, H[cell]

    def ders(self, approxes, targets, weights) -> np.ndarray:
        """CatBoost's derivatives for one block: :math:`(-g, -h)` of its rows, as an ``(n, 2)`` array.

        The objective is reached by one thread at a time; a round's table, once built, is only read."""
        a = np.asarray(approxes, dtype=np.float64)
        out = np.empty((a.size, 2))
        if self.rows:
            with self.lock:
                g, h = self.objective.grad_hess_rows(np.asarray(targets, dtype=np.float64), self.f0 + a)
        else:
            table = self.table
            if table is None:
                with self.lock:
                    if self.table is None:
                        self._build()
                    table = self.table
            if weights is None:
                g, h = self._lookup(table, a, targets)
            else:
                g = np.zeros(a.size)
                h = np.zeros(a.size)
                live = np.asarray(weights) > 0
                g[live], h[live] = self._lookup(table, a[live], np.asarray(targets)[live])
        if weights is not None:
            w = np.asarray(weights, dtype=np.float64)
            g, h = g * w, h * w
        np.negative(g, out=out[:, 0])
        np.negative(h, out=out[:, 1])
        return out


class _Shared:
    """CatBoost deep-copies its parameters before training; the loss and the metric must stay the objects
    that share the round's state with the callback, so a copy is the object itself."""

    def __deepcopy__(self, memo):
        return self


class _Loss(_Shared):
    """CatBoost's Python loss: each block's derivatives from :class:`_Rounds`."""

    def __init__(self, rounds: _Rounds):
        self.rounds = rounds

    def calc_ders_range(self, approxes, targets, weights):
        return self.rounds.ders(approxes, targets, weights)


class _Metric(_Shared):
    """CatBoost's Python ``eval_metric``: the objective's metric on the training rows, then on the eval rows,
    after every iteration; the training rows' scores become the next round's."""

    def __init__(self, rounds: _Rounds):
        self.rounds = rounds
        self.calls = 0

    def is_max_optimal(self):
        return bool(self.rounds.objective.higher_is_better)

    def evaluate(self, approxes, target, weight):
        r = self.rounds
        a = np.array(approxes[0], dtype=np.float64)
        which = "train" if self.calls == 0 else "valid"
        self.calls += 1
        if which == "train":
            if a.size != r.y.size:
                raise RuntimeError(f"catboost scored {a.size} rows where the training set has {r.y.size}")
            r.new_round(a)
            value = r.objective.metric(r.y, r.f0 + a, r.weight)
        else:
            v = r.valid
            value = r.objective.metric(v.y, r.f0 + a, v.weight)
        r.evals[which] = {r.objective.metric_name: float(value)}
        return float(value), 1.0

    def get_final_error(self, error, weight):
        return error


class _AfterIteration:
    """qwkboost's callbacks after every CatBoost iteration; an early stop ends training (``False``).

    Any other exception a callback raises (a deadline, a pruned trial) also ends training and is kept in
    ``raised``, to be raised again as itself once CatBoost returns (CatBoost would wrap it in its own error).
    """

    def __init__(self, rounds: _Rounds, metric: _Metric, callbacks):
        self.rounds, self.metric, self.callbacks = rounds, metric, callbacks
        self.history: dict = {}
        self.stopped_at_best = None
        self.raised: BaseException | None = None

    def after_iteration(self, info) -> bool:
        i = int(info.iteration) - 1
        evals = self.rounds.evals
        self.rounds.evals, self.metric.calls = {}, 0
        for name, values in evals.items():
            for metric, value in values.items():
                self.history.setdefault(name, {}).setdefault(metric, []).append(value)
        try:
            run_callbacks(self.callbacks, i, evals)
        except EarlyStopException as stop:
            self.stopped_at_best = stop.best_iteration
            return False
        except Exception as exc:      # noqa: BLE001 - raised again after fit, unwrapped
            self.raised = exc
            return False
        return True


class CatBoostEngine:
    """CatBoost under qwkboost's objective (see :class:`~qwkboost.engines.base.Engine` and the module's notes)."""

    name = "catboost"
    thread_params = THREAD_PARAMS

    def check_params(self, params: dict, *, n_features: int | None) -> None:
        check_params(params, n_features)

    def check_objective(self, objective) -> None:
        """Refuse objectives with several scores per row: CatBoost calls such a Python loss once per row."""
        k = int(getattr(objective, "n_outputs_", 1))
        if k > 1:
            raise ValueError(f"objective={objective.name} has {k} scores per row, which CatBoost computes one row "
                             "per Python call (seconds a round at competition size); run it on engine=xgboost, "
                             "engine=lightgbm or engine=native")

    def with_threads(self, params: dict, n_threads: int) -> dict:
        if any(k in params for k in THREAD_PARAMS):
            return params
        return {**params, "thread_count": int(n_threads)}

    def fit(self, X, y, *, objective, params: dict, num_boost_round: int, valid: EvalSet | None, callbacks,
            seed: int, categorical=(), sample_weight=None) -> FitResult:
        from catboost import CatBoost

        self.check_objective(objective)
        if num_boost_round == 0:
            return FitResult(None, 0)
        params = {**DEFAULTS, **_synonyms(params), **FIXED}
        if len(categorical) and not _declares_rows(objective.objective) and not params.get("has_time"):
            # CatBoost's learning fold computes its categorical statistics in a permutation of its own, so its
            # scores differ from the metric's; in one order (ours, seeded) they are the same
            perm = np.random.RandomState(seed).permutation(y.size)
            X, y = X[perm], y[perm]
            if sample_weight is not None:
                sample_weight = sample_weight[perm]
                objective = objective.reweighted(sample_weight)
            params["has_time"] = True
        rounds = _Rounds(objective, y, sample_weight, valid)
        metric = _Metric(rounds)
        after = _AfterIteration(rounds, metric, callbacks)
        params.update({"loss_function": _Loss(rounds), "eval_metric": metric, "iterations": int(num_boost_round),
                       "random_seed": int(seed)})
        train = _pool(X, categorical, label=y, weight=sample_weight)
        evals = None if valid is None else _pool(valid.X, categorical, label=valid.y)
        model = CatBoost(params)
        with warnings.catch_warnings():
            # CatBoost's note that numba is not installed to compile Python losses: they are NumPy here
            warnings.filterwarnings("ignore", message=".*numba.*")
            model.fit(train, eval_set=evals, callbacks=[after])
        if after.raised is not None:
            raise after.raised
        model.set_scale_and_bias(1.0, rounds.f0)        # the .cbm file alone predicts F0 + the trees
        return FitResult(model, int(model.tree_count_), after.stopped_at_best, after.history)

    def predict(self, booster, X, *, n_iter: int, init_score) -> np.ndarray:
        """The trees' raw score from the first ``n_iter`` rounds, plus :math:`F_0`."""
        _, bias = booster.get_scale_and_bias()
        raw = booster.predict(_pool(X, booster.get_cat_feature_indices()), prediction_type="RawFormulaVal",
                              ntree_end=int(n_iter))
        return np.asarray(raw, dtype=np.float64) - float(bias) + float(init_score)

    def _upto(self, booster, n_iter: int):
        if n_iter >= booster.tree_count_:
            return booster
        part = booster.copy()
        part.shrink(ntree_end=int(n_iter))
        return part

    def contributions(self, booster, X, *, n_iter: int, init_score):
        """CatBoost's ``ShapValues`` (its TreeSHAP) of the first ``n_iter`` trees; its expected value holds the
        model's bias (:math:`F_0` at training), replaced by ``init_score`` as :meth:`predict` replaces it."""
        model = self._upto(booster, n_iter)
        _, bias = model.get_scale_and_bias()
        sv = np.asarray(model.get_feature_importance(data=_pool(X, model.get_cat_feature_indices()),
                                                     type="ShapValues"), dtype=np.float64)
        return sv[:, :-1], sv[:, -1] - float(bias) + float(init_score)

    def gains(self, booster, *, n_iter: int, n_outputs: int) -> np.ndarray:
        """CatBoost keeps no split gains: its ``PredictionValuesChange`` importance (how much a feature's splits
        move the predictions) stands in for them."""
        model = self._upto(booster, n_iter)
        return np.asarray(model.get_feature_importance(type="PredictionValuesChange"), dtype=np.float64)

    def dump(self, booster) -> str:
        fd, path = tempfile.mkstemp(suffix=".cbm")
        os.close(fd)
        try:
            booster.save_model(path, format="cbm")
            with open(path, "rb") as f:
                return _DUMP_PREFIX + base64.b64encode(f.read()).decode("ascii")
        finally:
            os.unlink(path)

    def load(self, text: str):
        from catboost import CatBoost, CatBoostError

        if not text.startswith(_DUMP_PREFIX):
            raise ValueError("the catboost model in the model file is malformed (no catboost model header)")
        try:
            raw = base64.b64decode(text[len(_DUMP_PREFIX):], validate=True)
        except ValueError:
            raise ValueError("the catboost model in the model file is malformed (not base64)") from None
        fd, path = tempfile.mkstemp(suffix=".cbm")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(raw)
            model = CatBoost()
            model.load_model(path, format="cbm")
        except CatBoostError as exc:
            raise ValueError(f"the catboost model in the model file is malformed: {exc}") from None
        finally:
            os.unlink(path)
        return model

    def shape(self, booster) -> tuple[int, int]:
        return int(booster.tree_count_), len(booster.feature_names_)
