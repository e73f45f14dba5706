r"""CatBoost as an :class:`~qwkboost.engines.base.Engine`: qwkboost's objective as CatBoost's own loss where it
has it built in, else as a Python loss, its metric as CatBoost's or as a Python ``eval_metric``, the callbacks
after every iteration.

**Paths** (:mod:`qwkboost.engines.catboost_losses`). ``squared_error`` and ``multiclass`` train with CatBoost's
``RMSE`` and ``MultiClass`` (the same model as their Python loss). CatBoost asks a Python loss for derivatives in
blocks of rows (``calc_ders_range``, at most 1,000 rows a call, two passes a round: the split search in row order,
then the leaf values leaf by leaf), while some objectives need sums over all rows (extended QWK's numerator and
denominator, ordinal logit's cut points, updated once a round). Those with a compiled row kernel
(:mod:`qwkboost.engines.catboost_kernels`) compute those quantities once a round
(:meth:`~qwkboost.objectives.Objective.round_state`) and every block alone; any other objective is called once a
round on every row and each block looks its rows up by (score, label). Both take the round's scores from what
CatBoost's Python metric is given after each iteration, which are those the next iteration's blocks are given
(checked: a round at other scores stops training with an error, never a wrong gradient). Objectives whose rows
are independent (``gradient_needs = "rows"``) are called on each block directly. The derivatives CatBoost wants
are those of the function it maximises: :math:`(-g, -h)`.

**Initial score.** CatBoost refuses ``boost_from_average`` for Python losses, and a Pool's ``baseline`` is held
in float32; so the trees start from 0 and every score handed to the objective is :math:`F_0 + a` in float64
(``RMSE`` trains on the labels minus :math:`F_0`, ``MultiClass`` from the class priors as its baseline).
After training, :math:`F_0` is written into the model as its bias (``set_scale_and_bias``), so the ``.cbm``
file alone predicts the full score; :meth:`CatBoostEngine.predict` puts qwkboost's :math:`F_0` in its place.

**Fixed settings.** ``boosting_type=Plain`` (Ordered boosting keeps one score per permutation, not one per row),
``leaf_estimation_iterations=1`` and ``leaf_estimation_backtracking=No`` (further Newton steps within a round
would need gradients at scores no objective has seen). Row weights go into the Pool, as CatBoost's own losses
take them, and the objective's per-row terms are scaled by the weights CatBoost hands each block. With
categorical columns and an objective whose gradients come from the metric's scores (kernels, lookup),
CatBoost's learning fold would compute its target statistics in a permutation of its own and score the rows
differently from its metric; the rows are then shuffled by ``seed`` here and trained with ``has_time=True``
(one permutation, ours), unless the user set ``has_time`` (rows in time order).
"""

from __future__ import annotations

import base64
import functools
import os
import tempfile
import warnings

import numpy as np

from qwkboost.engines.base import EvalSet, FitResult
from qwkboost.engines.catboost_losses import (
    BUILTIN,
    MISMATCH,
    AfterIteration,
    KernelLoss,
    Loss,
    Metric,
    Rounds,
    needs_the_metrics_scores,
)
from qwkboost.engines.catboost_losses import path as objective_path
from qwkboost.engines.threads import set_threads

__all__ = ["CatBoostEngine", "check_params", "catboost_private", "DEFAULTS", "RESERVED", "FIXED", "FILE_PARAMS",
           "CATBOOST_RANGE"]

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


#: The CatBoost releases qwkboost is tested on (pyproject.toml pins them): it reads CatBoost's synonyms and checks
#: parameters with two private functions of theirs (:func:`catboost_private`).
CATBOOST_RANGE = ">=1.2.5,<1.3"


@functools.lru_cache(maxsize=1)
def catboost_private():
    """CatBoost's ``core._process_synonyms`` and ``_catboost._check_train_params``, once they are found to do what
    qwkboost relies on (``max_depth``, ``eta``, ``n_estimators`` read as ``depth``, ``learning_rate``,
    ``iterations``; an unknown name refused).

    Raises
    ------
    RuntimeError
        Naming the installed release and the tested range, when either is missing or behaves otherwise: a
        parameter is never passed on unchecked or under a name qwkboost did not see.
    """
    import catboost  # slow to import: catboost
    from catboost import CatBoostError, _catboost, core  # slow to import: catboost

    process = getattr(core, "_process_synonyms", None)
    check = getattr(_catboost, "_check_train_params", None)
    probe = {"max_depth": 3, "eta": 0.1, "n_estimators": 5}
    try:
        process(probe)
        works = probe == {"depth": 3, "learning_rate": 0.1, "iterations": 5}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check({"loss_function": "RMSE", "depth": 3})
        try:
            check({"loss_function": "RMSE", "no_such_parameter": 1})
            works = False
        except CatBoostError:
            pass
    except Exception:               # missing (None is not callable) or changed
        works = False
    if not works:
        raise RuntimeError(f"catboost {catboost.__version__} does not resolve and check parameters as the releases "
                           f"qwkboost is tested on do (catboost{CATBOOST_RANGE}: its core._process_synonyms and "
                           f"_catboost._check_train_params); install catboost{CATBOOST_RANGE}")
    return process, check


def _synonyms(params: dict) -> dict:
    """``params`` under CatBoost's own names (``max_depth`` -> ``depth``, ``eta`` -> ``learning_rate``, ...)."""
    out = dict(params)
    if "n_jobs" in out and "thread_count" not in out:
        out["thread_count"] = out.pop("n_jobs")
    catboost_private()[0](out)
    return out


def check_params(params: dict, n_features: int | None) -> None:
    """Refuse names CatBoost does not know, values it rejects, settings qwkboost makes itself, and settings that
    write files (:data:`FILE_PARAMS`). ``n_features=None``: before the data is read (the checks that need no data).

    Raises
    ------
    ValueError
        Naming the parameter and why.
    """
    from catboost import CatBoostError  # slow to import: catboost

    _check_train_params = catboost_private()[1]

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


#: CatBoost's settings that move its training scores after its metric has seen them (its model shrinkage, its
#: Langevin noise): the blocks of the next round would not be at the metric's scores.
MOVE_SCORES = {"model_shrink_rate": 0.0, "langevin": False, "posterior_sampling": False}


def _check_same_scores(params: dict, objective: str) -> None:
    """Refuse, for an objective whose blocks are computed from the round's scores as CatBoost's metric saw them,
    the settings that change the scores in between (:data:`MOVE_SCORES`)."""
    for key, off in MOVE_SCORES.items():
        if params.get(key) not in (None, off):
            raise ValueError(f"engine parameter {key}={params[key]!r} cannot be used with objective={objective} on "
                             "catboost: it moves the training scores after CatBoost's metric has seen them, and this "
                             "objective's gradients come from the round's scores as the metric saw them (sums over "
                             "every row)")


def _frame(X: np.ndarray, categorical) -> "object":
    """``X`` as CatBoost takes it: a DataFrame whose category columns hold integer codes (missing: -1)."""
    import pandas as pd  # slow to import: pandas

    cols = {}
    cat = set(int(j) for j in categorical)
    for j in range(X.shape[1]):
        col = X[:, j]
        cols[j] = np.where(np.isnan(col), -1, col).astype(np.int64) if j in cat else col
    return pd.DataFrame(cols, copy=False)


def _pool(X, categorical, label=None, weight=None, baseline=None):
    from catboost import Pool  # slow to import: catboost

    cat = sorted(int(j) for j in categorical)
    return Pool(_frame(X, cat), label=label, weight=weight, cat_features=cat or None, baseline=baseline)


class CatBoostEngine:
    """CatBoost under qwkboost's objective (see :class:`~qwkboost.engines.base.Engine` and the module's notes)."""

    name = "catboost"
    thread_params = THREAD_PARAMS
    default_learning_rate = 0.03
    booster_suffix = "cbm"
    checks_gradients = False
    scores_while_training = False
    dask = None

    def check_data(self, X, params: dict) -> None:
        """CatBoost trains on any rows :func:`qwkboost.train` takes."""

    def check_params(self, params: dict, *, n_features: int | None) -> None:
        check_params(params, n_features)

    def check_objective(self, objective) -> None:
        """Refuse objectives with several scores per row that CatBoost has not built in: it calls such a Python loss
        once per row."""
        k = int(getattr(objective, "n_outputs_", 1))
        if k > 1 and objective_path(objective) != "builtin":
            raise ValueError(f"objective={objective.name} has {k} scores per row, which CatBoost computes one row "
                             "per Python call (seconds a round at competition size); run it on engine=xgboost, "
                             "engine=lightgbm or engine=native (objective=multiclass runs on CatBoost's own "
                             "MultiClass)")

    def with_threads(self, params: dict, n_threads: int) -> dict:
        """``params`` with ``thread_count`` set (:func:`~qwkboost.engines.threads.set_threads`), unless the user gave
        a thread count. CatBoost's own thread pool (not OpenMP) takes the same default as the OpenMP engines: its
        threads also wait for each other every round."""
        return set_threads(params, THREAD_PARAMS, "thread_count", n_threads)

    def fit(self, X, y, *, objective, params: dict, num_boost_round: int, valid: EvalSet | None, callbacks,
            seed: int, categorical=(), sample_weight=None) -> FitResult:
        from catboost import CatBoost, CatBoostError  # slow to import: catboost

        self.check_objective(objective)
        if num_boost_round == 0:
            return FitResult(None, 0)
        params = {**DEFAULTS, **_synonyms(params), **FIXED}
        how = objective_path(objective.objective)
        if needs_the_metrics_scores(objective.objective):
            _check_same_scores(params, objective.name)
        if len(categorical) and needs_the_metrics_scores(objective.objective) and not params.get("has_time"):
            # CatBoost's learning fold computes its categorical statistics in a permutation of its own, so its
            # scores differ from the metric's; in one order (ours, seeded) they are the same
            perm = np.random.RandomState(seed).permutation(y.size)
            X, y = X[perm], y[perm]
            if sample_weight is not None:
                sample_weight = sample_weight[perm]
                objective = objective.reweighted(sample_weight)
            params["has_time"] = True
        label, baseline, valid_label = y, None, None if valid is None else valid.y
        if how == "builtin":
            label, baseline, valid_label = self._builtin(objective, y, valid, params)
        valid_baseline = None if baseline is None or valid is None else np.tile(baseline[0], (valid.y.size, 1))
        rounds = Rounds(objective, y, sample_weight, valid)
        if how == "builtin":            # CatBoost's own loss, and its own metric of the same formula
            name = BUILTIN[type(objective.objective)]
            after = AfterIteration(rounds, None, callbacks, builtin=name)
            params.update({"loss_function": name, "eval_metric": name})
        else:
            loss = KernelLoss(rounds) if how == "kernel" else Loss(rounds)
            metric = Metric(rounds, loss if how == "kernel" else None)
            after = AfterIteration(rounds, metric, callbacks)
            params.update({"loss_function": loss, "eval_metric": metric})
        params.update({"iterations": int(num_boost_round), "random_seed": int(seed)})
        train = _pool(X, categorical, label=label, weight=sample_weight, baseline=baseline)
        evals = None if valid is None else _pool(valid.X, categorical, label=valid_label, baseline=valid_baseline,
                                                 weight=valid.weight)
        model = CatBoost(params)
        try:
            model.fit(train, eval_set=evals, callbacks=[after])
        except CatBoostError as exc:
            if MISMATCH in str(exc):            # raised in a block (it reaches here inside CatBoost's error)
                raise RuntimeError(MISMATCH) from None
            if str(exc).rstrip().endswith("KeyboardInterrupt"):
                # Ctrl-C or SIGTERM landed in one of our callbacks, which CatBoost wraps in its error: a stop
                raise KeyboardInterrupt from None
            raise
        if after.raised is not None:
            raise after.raised
        # the .cbm file alone predicts F0 + the trees
        model.set_scale_and_bias(1.0, rounds.f0.tolist() if objective.n_outputs > 1 else rounds.f0)
        return FitResult(model, int(model.tree_count_), after.stopped_at_best, after.history)

    @staticmethod
    def _builtin(objective, y, valid, params):
        """What CatBoost's own loss trains on for the same model as the objective's Python loss: labels minus
        :math:`F_0` for ``RMSE``; for ``MultiClass`` the class indices, :math:`F_{0,k}` as the Pools' baseline
        (float32; the model's bias holds them in float64 after training) and the Python loss's bootstrap
        (``MVS``; CatBoost's ``MultiClass`` would otherwise take ``Bayesian``)."""
        f0 = objective.init_score_
        if objective.n_outputs == 1:
            return y - f0, None, None if valid is None else valid.y - f0
        lo = objective.objective.lo_ - objective.offset
        params["classes_count"] = objective.n_outputs
        params.setdefault("bootstrap_type", "MVS")
        base = np.tile(np.asarray(f0, dtype=np.float32), (y.size, 1))
        return y - lo, base, None if valid is None else valid.y - lo

    def predict(self, booster, X, *, n_iter: int, init_score) -> np.ndarray:
        """The trees' raw score from the first ``n_iter`` rounds, plus :math:`F_0` (``(n, K)`` for ``MultiClass``)."""
        _, bias = booster.get_scale_and_bias()
        raw = booster.predict(_pool(X, booster.get_cat_feature_indices()), prediction_type="RawFormulaVal",
                              ntree_end=int(n_iter))
        return np.asarray(raw, dtype=np.float64) - np.asarray(bias, dtype=np.float64) + init_score

    def _upto(self, booster, n_iter: int):
        if n_iter >= booster.tree_count_:
            return booster
        part = booster.copy()
        part.shrink(ntree_end=int(n_iter))
        return part

    def contributions(self, booster, X, *, n_iter: int, init_score):
        """CatBoost's ``ShapValues`` (its TreeSHAP) of the first ``n_iter`` trees; its expected value holds the
        model's bias (:math:`F_0` at training), replaced by ``init_score`` as :meth:`predict` replaces it.
        ``MultiClass``: CatBoost's ``(n, K, F + 1)`` as ``(n, F, K)`` values and an ``(n, K)`` bias."""
        model = self._upto(booster, n_iter)
        _, bias = model.get_scale_and_bias()
        sv = np.asarray(model.get_feature_importance(data=_pool(X, model.get_cat_feature_indices()),
                                                     type="ShapValues"), dtype=np.float64)
        if sv.ndim == 3:
            return np.transpose(sv[:, :, :-1], (0, 2, 1)), sv[:, :, -1] - np.asarray(bias) + init_score
        return sv[:, :-1], sv[:, -1] - float(bias) + float(init_score)

    def gains(self, booster, *, n_iter: int, n_outputs: int) -> np.ndarray:
        """CatBoost keeps no split gains: its ``PredictionValuesChange`` importance (how much a feature's splits
        move the predictions) stands in for them. CatBoost gives one per feature for ``MultiClass`` too (its trees
        split for every class at once), not one per class: each class column holds an equal share of it, so that
        the columns add up to CatBoost's figure."""
        model = self._upto(booster, n_iter)
        g = np.asarray(model.get_feature_importance(type="PredictionValuesChange"), dtype=np.float64)
        return g if n_outputs == 1 else np.repeat(g[:, None] / n_outputs, n_outputs, axis=1)

    def dump(self, booster) -> str:
        return _DUMP_PREFIX + base64.b64encode(self.to_bytes(booster)).decode("ascii")

    def load(self, text: str):
        if not text.startswith(_DUMP_PREFIX):
            raise ValueError("the catboost model in the model file is malformed (no catboost model header)")
        try:
            raw = base64.b64decode(text[len(_DUMP_PREFIX):], validate=True)
        except ValueError:
            raise ValueError("the catboost model in the model file is malformed (not base64)") from None
        return self.from_bytes(raw)

    def to_bytes(self, booster) -> bytes:
        fd, path = tempfile.mkstemp(suffix=".cbm")
        os.close(fd)
        try:
            booster.save_model(path, format="cbm")
            with open(path, "rb") as f:
                return f.read()
        finally:
            os.unlink(path)

    def from_bytes(self, data: bytes):
        from catboost import CatBoost, CatBoostError  # slow to import: catboost

        fd, path = tempfile.mkstemp(suffix=".cbm")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            model = CatBoost()
            model.load_model(path, format="cbm")
        except CatBoostError as exc:
            raise ValueError(f"the catboost model in the model file is malformed: {exc}") from None
        finally:
            os.unlink(path)
        return model

    def shape(self, booster) -> tuple[int, int]:
        return int(booster.tree_count_), len(booster.feature_names_)
