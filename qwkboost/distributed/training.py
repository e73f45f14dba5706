r"""Training on a Dask cluster through the engines' own Dask interfaces.

qwkboost does not distribute anything itself: :func:`train_dask` hands the
registry's objectives to :func:`xgboost.dask.train` or to
:class:`lightgbm.DaskLGBMRegressor`, which partition the rows over the Dask
workers and build each tree together. What qwkboost adds is that the
objective stays *one* objective:

* its label statistics (extended QWK's :math:`a`, :math:`b` and label range,
  the initial score :math:`F_0`) are fitted once, on every training label,
  from the labels' (weighted) counts computed on the cluster;
* an objective whose gradient needs sums over every row (``gradient_needs ==
  "sums"``: extended QWK's :math:`f` and :math:`g`, soft QWK's expected
  confusion matrix, the cumulative-link model's cut-point steps) gets them
  all-reduced over XGBoost's workers (:func:`qwkboost.engines.engine.for_workers`),
  so each row's gradient equals the one-process gradient; what it learns while
  boosting (the cut points) comes back with the booster
  (:meth:`~qwkboost.objectives.Objective.learned`);
* categorical columns of in-memory rows are encoded on the client, with one
  process's codes (:class:`~qwkboost.data.features.FeatureSchema`), and split
  on by XGBoost's workers;
* the metric is all-reduced the same way (:meth:`~qwkboost.objectives.Objective.metric_sums`),
  so early stopping sees the metric of all validation rows. XGBoost would
  otherwise average the workers' own metrics, which is not the QWK of their union.

LightGBM's Dask interface calls the objective on each worker's rows and
exposes no collective operation to it. Objectives that need sums are refused
there (they would silently optimise a different objective on each worker), as
are its per-worker eval sets and early stopping; squared error and other
per-row objectives train exactly.

What each engine's Dask interface can do is on the engine (:attr:`~qwkboost.engines.base.Engine.dask`, a
:class:`~qwkboost.engines.base.DaskSupport`: whether its workers all-reduce, how many scores per row, and its
training function in the engine's module); nothing here names an engine.

The trained :class:`~qwkboost.engines.model.Model` is an ordinary one: it
predicts, saves and loads on one machine like any other;
:func:`predict_dask` scores a Dask collection partition by partition.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import Any, Mapping

import numpy as np

from qwkboost import defaults
from qwkboost.data.features import EncodedFeatures, FeatureSchema
from qwkboost.engines.base import DaskSupport
from qwkboost.engines.engine import (
    check_early_stopping,
    check_engine_params,
    check_label_span,
    for_workers,
    label_offset,
    min_delta,
)
from qwkboost.engines.model import Model
from qwkboost.engines.registry import ENGINES, get_engine
from qwkboost.exceptions import ClusterLost, ConfigError, EngineUnavailable, RunStopped
from qwkboost.objectives import resolve
from qwkboost.objectives.base import takes_weight
from qwkboost.distributed.connection import ClusterSpec, connect
from qwkboost.validation import check_int, check_mapping, check_seed

__all__ = ["ClusterSpec", "connect", "DaskData", "read_parquet", "train_dask", "predict_dask", "dask_engines",
           "dask_support", "check_dask_objective", "check_dask_categorical", "DASK_ENGINES"]

log = logging.getLogger(__name__)


def dask_engines(allreduce: bool = False) -> tuple[str, ...]:
    """The engines with a Dask interface (:attr:`~qwkboost.engines.base.Engine.dask`); with ``allreduce``, those
    whose workers add up an objective's sums and the metric over all of them."""
    out = []
    for n in ENGINES:
        try:
            dask = get_engine(n).dask
        except EngineUnavailable:       # a library that cannot be imported: its engine is not offered
            continue
        if dask is not None and (dask.allreduce or not allreduce):
            out.append(n)
    return tuple(out)


def __getattr__(name: str):
    if name == "DASK_ENGINES":      # the engines with a Dask interface, read from them when asked
        return dask_engines()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _choices(engines) -> str:
    return " or ".join(f"engine={n}" for n in engines)


def dask_support(engine: str) -> DaskSupport:
    """``engine``'s Dask interface.

    Raises
    ------
    ValueError
        For an engine that trains on one machine only, naming those that do not.
    """
    support = get_engine(engine).dask
    if support is None:
        raise ValueError(f"engine {engine!r} has no Dask interface; on a cluster use {_choices(dask_engines())} "
                         f"(engine={engine} trains on one machine)")
    return support


def check_dask_objective(engine: str, objective, scores_valid: bool = False) -> None:
    """Refuse, before training, what ``engine``'s Dask interface would get wrong: an objective whose gradient
    needs sums over every row, and (with ``scores_valid``) an eval set or early stopping, on workers that cannot
    add them up; an objective that needs sums it does not all-reduce.

    Raises
    ------
    ValueError
        Naming the objective or the setting, and the engines to use instead.
    """
    support = dask_support(engine)
    if support.allreduce:
        for_workers(objective)       # refuses objectives that need sums they cannot all-reduce
        return
    if objective.gradient_needs == "sums":
        raise ValueError(f"objective {objective.name!r} needs sums over every training row for its gradient, and "
                         f"{engine}.dask calls the objective on each worker's rows with no all-reduce to combine "
                         f"them: each worker would optimise a different objective. Use {_choices(dask_engines(True))} "
                         "on a cluster (its workers all-reduce the sums), or a per-row objective such as squared_error")
    if scores_valid:
        raise ValueError(f"{engine}.dask scores eval sets and stops early on each worker's own rows; qwkboost "
                         "takes no eval_set or early_stopping_rounds for it (set engine.early_stopping_rounds=null, "
                         f"or use {_choices(dask_engines(True))}, whose metric covers every row)")


def check_dask_categorical(engine: str, columns) -> None:
    """Refuse categorical ``columns`` (names) before training on an engine whose Dask interface takes numbers only.

    Raises
    ------
    ValueError
        Naming the columns and the engines whose workers split on categories.
    """
    if columns and not dask_support(engine).categorical:
        takes = [n for n in dask_engines() if get_engine(n).dask.categorical]
        raise ValueError(f"categorical columns {list(columns)}: {engine}.dask takes numeric features only; use "
                         f"{_choices(takes)} on a cluster (its workers split on the same category codes as one "
                         "process), or encode them as numbers")


# -- data --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DaskData:
    """Training rows as Dask arrays whose row chunks line up.

    Attributes
    ----------
    X : dask.array.Array of shape (n, n_features)
    y : dask.array.Array of shape (n,) or None
    weight : dask.array.Array of shape (n,) or None
    feature_names : list of str or None
    categorical : tuple of int
        Positions of the columns that hold category codes (:class:`~qwkboost.data.features.FeatureSchema`), encoded
        on the client as on one machine.
    """

    X: Any
    y: Any = None
    weight: Any = None
    feature_names: list[str] | None = None
    categorical: tuple[int, ...] = ()

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])


def read_parquet(path, target: str | None = None, weight: str | None = None, columns: list[str] | None = None,
                 **kwargs) -> DaskData:
    """Parquet files read by :func:`dask.dataframe.read_parquet`, one partition per row group or file.

    Parameters
    ----------
    path : str or list of str
        A file, a directory or a glob (``data/train-*.parquet``), local or a URL Dask can read.
    target : str, optional
        The label column (absent for rows to predict).
    weight : str, optional
        A column of row weights.
    columns : list of str, optional
        The feature columns, in this order; default every other column.
    **kwargs
        Passed to :func:`dask.dataframe.read_parquet`.

    Raises
    ------
    ValueError
        If ``target``, ``weight`` or a feature column is missing, or a feature column is not numeric.
    """
    import dask.dataframe as dd  # optional: dask

    df = dd.read_parquet(path, **kwargs)
    for key, col in (("target", target), ("weight", weight)):
        if col is not None and col not in df.columns:
            raise ValueError(f"{key}={col!r} is not a column of {path}; its columns are {list(df.columns)}")
    features = list(columns) if columns is not None else [c for c in df.columns if c not in (target, weight)]
    missing = [c for c in features if c not in df.columns]
    if missing:
        raise ValueError(f"columns {missing} are not in {path}; its columns are {list(df.columns)}")
    bad = [c for c in features if not _numeric(df[c].dtype)]
    if bad:
        raise ValueError(f"columns {bad} of {path} are not numeric; on a Dask cluster qwkboost trains numeric "
                         "features only (encode categories as numbers, or train on one machine)")
    # one array for all columns, so that features, labels and weights share their row chunks
    extra = [c for c in (target, weight) if c is not None]
    arr = df[features + extra].astype(np.float64).to_dask_array(lengths=True)
    nf = len(features)
    col = {c: arr[:, nf + i] for i, c in enumerate(extra)}
    return DaskData(arr[:, :nf], col.get(target), col.get(weight), [str(c) for c in features])


def _numeric(dtype) -> bool:
    from pandas.api.types import is_bool_dtype, is_numeric_dtype  # slow to import: pandas

    return is_numeric_dtype(dtype) or is_bool_dtype(dtype)


def as_dask(X, y=None, weight=None, n_partitions: int = 2, client=None) -> DaskData:
    """``X``, ``y`` and ``weight`` as Dask arrays with the same row chunks.

    NumPy and pandas inputs are split into ``n_partitions`` row blocks; with a
    ``client``, block ``i`` is placed on worker ``i mod n_workers`` (by
    address), so the same call trains on the same split of rows every time.
    Dask collections keep their partitions (row counts are computed once),
    placed by Dask's scheduler.

    Raises
    ------
    ValueError
        For a non-numeric feature column (categorical columns train on one
        machine), mismatched lengths or shapes.
    """
    import dask.array as da  # optional: dask
    import dask.dataframe as dd  # optional: dask
    import pandas as pd  # slow to import: pandas

    names = None
    if isinstance(X, (dd.DataFrame, pd.DataFrame)):
        bad = [str(c) for c, t in X.dtypes.items() if not _numeric(t)]
        if bad:
            raise ValueError(f"X: columns {bad} are not numeric; on a Dask cluster qwkboost trains numeric "
                             "features only (encode categories as numbers, or train on one machine)")
        names = [str(c) for c in X.columns]
        X = X.to_numpy(dtype=np.float64) if isinstance(X, pd.DataFrame) else \
            X.astype(np.float64).to_dask_array(lengths=True)
    if not isinstance(X, da.Array):
        X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (rows, features); got shape {X.shape}")

    def column(v, name):
        if v is None:
            return None
        if isinstance(v, dd.Series):
            v = v.to_dask_array(lengths=True)
        if not isinstance(v, da.Array):
            v = np.asarray(v, dtype=np.float64)
        if v.ndim != 1:
            raise ValueError(f"{name} must be 1-D; got shape {v.shape}")
        if v.shape[0] != X.shape[0]:
            raise ValueError(f"{name} has {v.shape[0]} rows but X has {X.shape[0]}")
        return v

    y, weight = column(y, "y"), column(weight, "sample_weight")
    present = [v for v in (X, y, weight) if v is not None]
    step = max(1, math.ceil(X.shape[0] / max(1, n_partitions)))
    if client is not None and not any(isinstance(v, da.Array) for v in present):
        placed = iter(_place_rows(client, present, step))
        return DaskData(next(placed), next(placed) if y is not None else None,
                        next(placed) if weight is not None else None, names)
    if not isinstance(X, da.Array):
        X = da.from_array(X, chunks=(step, X.shape[1]))
    if any(math.isnan(c) for c in X.chunks[0]):
        X = X.compute_chunk_sizes()
    X = X.rechunk({1: -1})

    def aligned(v):
        if v is None:
            return None
        v = da.from_array(v, chunks=(X.chunks[0],)) if not isinstance(v, da.Array) else v.rechunk((X.chunks[0],))
        return v.astype(np.float64)

    return DaskData(X, aligned(y), aligned(weight), names)


def _place_rows(client, arrays: list[np.ndarray], step: int) -> list:
    """Row blocks of ``step`` rows of each array, block ``i`` of all of them on worker ``i mod n`` (sorted)."""
    import dask.array as da  # optional: dask

    workers = sorted(client.scheduler_info()["workers"])
    if not workers:
        raise ClusterLost(f"the Dask cluster at {client.scheduler.address} has no worker to place the rows on")
    blocks: list[list] = [[] for _ in arrays]
    for b, start in enumerate(range(0, arrays[0].shape[0], step)):
        where = [workers[b % len(workers)]]
        for k, a in enumerate(arrays):
            part = np.ascontiguousarray(a[start:start + step], dtype=np.float64)
            future = client.scatter(part, workers=where, hash=False)
            blocks[k].append(da.from_delayed(future, shape=part.shape, dtype=np.float64))
    return [da.concatenate(b) for b in blocks]


def _label_counts(y, weight, weighted: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The distinct labels and their counts (weighted by ``weight`` if ``weighted``), computed on the cluster;
    labels and weights checked."""
    import dask  # optional: dask
    import dask.array as da  # optional: dask
    import dask.dataframe as dd  # optional: dask

    if y.shape[0] == 0:
        raise ValueError("y has no rows")
    bad_y = (~da.isfinite(y)).any()
    if weight is None or not weighted:
        bad_w = False if weight is None else (~da.isfinite(weight) | (weight < 0)).any()
        (vals, counts), bad_y, bad_w = dask.compute(da.unique(y, return_counts=True), bad_y, bad_w)
    else:
        bad_y, bad_w = dask.compute(bad_y, (~da.isfinite(weight) | (weight < 0)).any())
        frame = dd.from_dask_array(da.stack([y, weight], axis=1), columns=["y", "w"])
        sums = frame.groupby("y")["w"].sum().compute().sort_index()
        vals, counts = sums.index.to_numpy(dtype=np.float64), sums.to_numpy(dtype=np.float64)
    if bad_y:
        raise ValueError("y has missing or infinite labels; drop those rows before training")
    vals = np.asarray(vals, dtype=np.float64)
    if bad_w:
        raise ValueError("sample_weight must be finite and >= 0")
    return vals, np.asarray(counts, dtype=np.float64)


# -- training ----------------------------------------------------------------------------------------------


def train_dask(client, X, y=None, *, engine: str | None = None, objective=None, params: dict | None = None,
               num_boost_round: int = 100, eval_set: tuple | None = None, early_stopping_rounds: int | None = None,
               objective_params: dict | None = None, seed: int = 0, sample_weight=None,
               early_stopping_min_delta: float | None = None, categorical=None, stop=None) -> Model:
    r"""Boost ``num_boost_round`` trees of ``engine`` on ``objective`` over the workers of ``client``.

    The same contract as :func:`qwkboost.train`, on rows that live on a
    cluster: the objective is fitted on every training label (from their
    weighted counts), its gradient takes sums over every worker's rows, and
    the returned :class:`~qwkboost.engines.model.Model` predicts in label
    space on one machine.

    Parameters
    ----------
    client : distributed.Client
        See :func:`connect`.
    X : DaskData, dask Array or DataFrame, NumPy array, pandas DataFrame or EncodedFeatures
        Features (NaN is missing). In-memory inputs are encoded on the client as :func:`qwkboost.train` encodes
        them (string and pandas category columns become category codes, on an engine whose workers split on
        categories: xgboost) and split over the workers. Dask collections hold numeric columns. A
        :class:`DaskData` (from :func:`read_parquet`) carries ``y`` and the weights itself.
    y : array-like, optional
        Labels, with ``X``'s rows (omit with a :class:`DaskData` that has them).
    engine : str, optional
        An engine with a Dask interface (:func:`dask_engines`: lightgbm, xgboost). ``None``: the default engine
        (:func:`qwkboost.defaults.default_engine`), as in :func:`qwkboost.train`.
    objective : str or Objective, optional
        As in :func:`qwkboost.train` (``None``: the default objective). On an engine whose workers do not all-reduce
        (lightgbm) an objective whose gradient needs sums over every row (``gradient_needs == "sums"``) is refused.
    params : dict, optional
        The engine's own parameters; unknown names are refused. ``None``: the defaults that
        :func:`qwkboost.train` uses (:func:`qwkboost.defaults.engine_params`); a dict is used as given.
    num_boost_round : int, default 100
    eval_set : tuple (X_val, y_val) or (X_val, y_val, weight_val), or DaskData, optional
        Scored every round with the objective's metric over all its rows (on an engine whose workers all-reduce:
        xgboost).
    early_stopping_rounds : int, optional
        Needs ``eval_set`` (on an engine whose workers all-reduce).
    early_stopping_min_delta : float, optional
        As in :func:`qwkboost.train` (XGBoost's own ``min_delta``); ``None``: the objective's own.
    objective_params : dict, optional
        ``None``: the objective's defaults for ``engine`` (:func:`qwkboost.defaults.objective_params`), as in
        :func:`qwkboost.train`; a dict is used as given.
    seed : int, default 0
    sample_weight : array-like, optional
    categorical : list of str or int, optional
        Further categorical columns of in-memory ``X``, as in :func:`qwkboost.train`.
    stop : RoundStop, optional
        Asked on every worker after each round (:class:`~qwkboost.distributed.tasks.RoundStop`: a client's stop,
        a deadline); all workers stop at the same round, and the training raises ``RunStopped``.

    Returns
    -------
    Model

    Raises
    ------
    ValueError
        Before any training: for an engine without a Dask interface, an objective that would
        be wrong on that engine's workers, an unknown parameter, malformed
        data or labels.
    RunStopped
        When ``stop`` ended the training.
    """
    engine = defaults.default_engine() if engine is None else engine
    objective = defaults.default_objective() if objective is None else objective
    support = dask_support(engine)
    schema, X = _encode(X, categorical)
    # before the rows are placed on the workers
    check_dask_categorical(engine, [schema.column_name(j) for j in schema.categorical] if schema else ())
    if objective_params is None and isinstance(objective, str):
        objective_params = defaults.objective_params(objective, engine)
    obj = resolve(objective, **check_mapping(objective_params, "objective_params"))
    params = defaults.engine_params(engine, objective) if params is None else check_mapping(params, "params")
    n_workers = max(1, len(client.scheduler_info().get("workers", {})))
    data = X if isinstance(X, DaskData) else as_dask(X, y, sample_weight, n_partitions=n_workers, client=client)
    if schema is not None:
        data = replace(data, feature_names=schema.names, categorical=tuple(schema.categorical))
    if isinstance(X, DaskData) and (y is not None or sample_weight is not None):
        raise ValueError("X is DaskData, which carries y and the weights itself; do not pass y or sample_weight")
    if data.y is None:
        raise ValueError("y is missing: pass the labels (or read_parquet(..., target=...))")
    valid = None
    if eval_set is not None:
        if isinstance(eval_set, DaskData):
            valid = eval_set
        elif isinstance(eval_set, (tuple, list)) and len(eval_set) in (2, 3):
            Xv = eval_set[0]
            if schema is not None:          # encoded as X was: the same columns, the same category codes
                Xv = Xv.X if isinstance(Xv, EncodedFeatures) else schema.encode(Xv, "eval_set X", reference="X has")
            valid = as_dask(Xv, eval_set[1], eval_set[2] if len(eval_set) == 3 else None,
                            n_partitions=n_workers, client=client)
            valid = replace(valid, categorical=data.categorical)
        else:
            raise ValueError("eval_set must be a pair (X_val, y_val), a triple (X_val, y_val, weight_val) or DaskData")
        if valid.y is None:
            raise ValueError("eval_set has no labels")
        if valid.n_features != data.n_features:
            raise ValueError(f"eval_set X has {valid.n_features} features but X has {data.n_features}")
    num_boost_round = check_int(num_boost_round, "num_boost_round", 0)
    seed = check_seed(seed)
    early_stopping_rounds, early_stopping_min_delta = check_early_stopping(
        early_stopping_rounds, early_stopping_min_delta, valid is not None)
    delta = min_delta(obj, engine, params, early_stopping_min_delta)
    check_dask_objective(engine, obj, valid is not None or early_stopping_rounds is not None)
    base_score = params.get("base_score")
    params = check_engine_params(engine, params, data.n_features)

    # an objective whose fit takes no weights fits on the labels alone, as on one machine
    vals, counts = _label_counts(data.y, data.weight, weighted=takes_weight(obj.fit))
    if obj.ordinal and (vals != np.round(vals)).any():
        raise ValueError(f"objective {obj.name!r} needs whole-numbered ordinal labels; y has the label "
                         f"{float(vals[vals != np.round(vals)][0])!r}. For a continuous target use "
                         "objective='squared_error'")
    check_label_span(vals, "y")
    # the objective's statistics from every label at once: each distinct label weighted by its count
    if takes_weight(obj.fit):
        obj.fit(vals, sample_weight=counts)
    else:
        obj.fit(np.repeat(vals, counts.astype(np.int64)))
    if base_score is not None:
        if getattr(obj, "n_outputs_", 1) > 1:
            raise ValueError(f"params.base_score is one number; objective {obj.name!r} has several outputs")
        obj.init_score_ = float(base_score)
    k = int(getattr(obj, "n_outputs_", 1))
    if support.max_outputs is not None and k > support.max_outputs:
        others = [n for n in dask_engines() if get_engine(n).dask.max_outputs is None]
        raise ValueError(f"objective {obj.name!r} has {k} outputs, which qwkboost trains on {engine}.dask with at "
                         f"most {support.max_outputs}; use {_choices(others)} on a cluster")
    offset = label_offset(vals) if getattr(obj, "centre_labels", True) else 0.0
    fit = support.train(client, data, valid, obj, offset=offset, params=params, num_boost_round=num_boost_round,
                        early_stopping_rounds=early_stopping_rounds, seed=seed, min_delta=delta,
                        **({} if stop is None else {"stop": stop}))
    why = None if stop is None else stop.why()
    if why is not None:
        raise RunStopped(why)
    best = fit.stopped_at_best
    best_iteration = fit.num_rounds if best is None or not fit.num_rounds else best + 1
    obj.finish(best_iteration)
    return Model(engine, obj, obj.init_score_, fit.booster, fit.num_rounds, best_iteration, fit.evals_result,
                 label_offset=offset,
                 schema=schema if schema is not None else FeatureSchema.numeric(data.n_features, data.feature_names))


def _encode(X, categorical) -> tuple[FeatureSchema | None, Any]:
    """In-memory rows encoded on the client as :func:`qwkboost.train` encodes them (strings and pandas categories,
    and the ``categorical`` columns, become codes: :class:`~qwkboost.data.features.FeatureSchema`), with their
    schema; a Dask collection as it is (numeric columns only), with ``None``."""
    if isinstance(X, EncodedFeatures):
        if categorical is not None:
            raise ValueError("categorical: the columns of EncodedFeatures are set by its schema")
        return X.schema, X.X
    if isinstance(X, DaskData) or type(X).__module__.split(".")[0] == "dask":
        if categorical:
            raise ValueError("categorical: the columns of a Dask collection are taken as numbers; encode its "
                             "categories as codes, or pass the rows in memory (encoded on the client)")
        return None, X
    return FeatureSchema.fit_encode(X, categorical, "X")


def predict_dask(model: Model, X, num_iteration: int | None = None):
    """``model.predict`` over a Dask collection, partition by partition on the workers.

    Returns
    -------
    dask.array.Array of shape (n,)
    """
    import dask.array as da  # optional: dask

    data = X if isinstance(X, DaskData) else as_dask(X)
    if model.n_features is not None and data.n_features != model.n_features:
        raise ValueError(f"X has {data.n_features} features but the model was trained on {model.n_features}")
    return da.map_blocks(lambda b: model.predict(b, num_iteration), data.X, drop_axis=1, dtype=np.float64)
