"""``qwkboost.auto``: a time budget from Python, the same as ``python experiments/run.py experiment=auto``."""

from __future__ import annotations

import contextlib
import copy
import tempfile
from pathlib import Path

from qwkboost import defaults
from qwkboost import tracking as trk
from qwkboost.autoblend.budget import Budget
from qwkboost.autoblend.candidates import runnable_configs
from qwkboost.autoblend.dask_executor import DaskExecutor, check_local_room
from qwkboost.autoblend.driver import AutoResult, AutoRun
from qwkboost.autoblend.ranking import plan
from qwkboost.autoblend.settings import AutoSettings
from qwkboost.cv.inner import default_early_stopping_on
from qwkboost.data.files import from_file
from qwkboost.distributed.connection import ClusterSpec, connect
from qwkboost.exceptions import ConfigError, config_errors
from qwkboost.validation import check_int

__all__ = ["auto", "candidate_config"]

#: The column names the frames get on their way through a file, when ``y`` is not a column of ``X``.
_LABEL = "label"


def candidate_config(engine: str, objective: str, *, n_splits: int = 5, seed: int = 0, group: str | None = None,
                     n_jobs: int | None = None, tracking: dict | None = None, data: dict | None = None) -> dict:
    """A run's resolved config for one candidate, from the project's defaults (``conf/``): the engine's and the
    objective's configs, the objective's adjustment of the engine's parameters, 5-fold stratified CV and exact
    cut points, as ``experiments/run.py engine=<engine> objective=<objective>`` composes them."""

    eng = copy.deepcopy(defaults.engine_config(engine))
    eng["params"] = {**(eng.get("params") or {}), **defaults.objective_engine_params(objective, engine)}
    obj = copy.deepcopy(defaults.objective_config(objective))
    return {"data": data or {"name": "frame"}, "engine": eng, "objective": obj,
            "cv": {"n_splits": int(n_splits), "stratified": True, "shuffle": True, "group": group, "repeats": 1,
                   "early_stopping_on": default_early_stopping_on()},
            "thresholds": {"method": "exact"},
            "tracking": {"log_models": True, "log_pyfunc": False, "explain": False, **(tracking or {})},
            "seed": int(seed), "n_jobs": n_jobs}


def _frames(X, y, X_test):
    import pandas as pd  # slow to import: pandas

    train = X.copy() if isinstance(X, pd.DataFrame) else pd.DataFrame(X).rename(columns=lambda c: f"x{c}")
    if isinstance(y, str):
        if y not in train.columns:
            raise ValueError(f"y={y!r} names no column of X; columns: {list(train.columns)}")
        return train, y, (X_test.copy() if isinstance(X_test, pd.DataFrame)
                          else pd.DataFrame(X_test).rename(columns=lambda c: f"x{c}"))
    target = getattr(y, "name", None) or _LABEL
    if target in train.columns:
        raise ValueError(f"y is named {target!r}, which is also a column of X; rename one of them")
    if len(y) != len(train):
        raise ValueError(f"X has {len(train)} rows and y {len(y)}; give one label per row")
    train[target] = y.to_numpy() if hasattr(y, "to_numpy") else y
    if hasattr(y, "dtype") and isinstance(y.dtype, pd.CategoricalDtype):
        train[target] = pd.Categorical(train[target], categories=y.dtype.categories, ordered=y.dtype.ordered)
    test = X_test.copy() if isinstance(X_test, pd.DataFrame) else pd.DataFrame(X_test).rename(columns=lambda c: f"x{c}")
    return train, target, test


def auto(X, y, X_test, *, time_limit: float = 600, engines=None, objectives=None, tune: bool = True,
         n_splits: int = 5, id: str | None = None, groups: str | None = None, classes=None, seed: int = 0,
         output_dir=None, tracking_uri: str | None = None, experiment_name: str = "qwkboost",
         n_jobs: int | None = None, max_members: int = 15, screen: str = "auto", keep: str = "all",
         progress: bool | None = None, cluster=None) -> AutoResult:
    """The best blend qwkboost finds within ``time_limit`` seconds (:mod:`qwkboost.autoblend`).

    Candidates (engine x objective) are cross-validated in the order of expected gain per second, the most
    promising one is tuned with the time left, and every candidate that finished is blended by ensemble selection
    with cut points fitted on the out-of-fold scores; ``metrics["nested_oof_qwk"]`` estimates the blend's QWK
    with weights and cut points fitted without each fold.

    Parameters
    ----------
    X : DataFrame or array of shape (n, p)
        Training rows; string and ``category`` columns are categorical.
    y : array-like, Series or str
        The labels (ordinal: whole numbers, or words with ``classes`` or an ordered ``Categorical``), or the name
        of their column in ``X``.
    X_test : DataFrame or array
        Rows to predict (a competition's test set): ``submission.csv`` and ``predictions.parquet`` hold them; with a
        label column (``y``'s name) they are scored too. Other rows later: ``result.predict(X_new)``.
    time_limit : float, default 600
        Seconds for everything: the candidates, the tuning, the blend and its files (at most 10 % more).
    engines, objectives : list of str, optional
        Narrow the candidates (default: every engine; squared error, extended QWK, ordinal logit and multiclass).
    tune : bool, default True
    n_splits : int, default 5
    id : str, optional
        A column of ``X`` (and ``X_test``) carried to the predictions and never a feature.
    groups : str, optional
        A column of ``X`` naming each row's entity: an entity's rows stay in one fold.
    classes : list, optional
        The classes in order, lowest first, for labels that are words.
    seed : int, default 0
    output_dir : path, optional
        Where candidates and outputs go; the same directory again resumes (default: a new temporary directory). A
        folder that holds other files (yours, another command's outputs) is refused before any training.
    tracking_uri : str, optional
        An MLflow store: one parent run, a child per candidate. Default: no tracking.
    experiment_name : str, default "qwkboost"
    n_jobs : int, optional
        Engine threads (default: the cores free when training starts).
    max_members : int, default 15
    screen : {"auto", "always", "never"}, default "auto"
        Screen the candidates on a sample of rows before their cross-validation, so that every engine gets a look
        and the promising ones run first: ``auto`` when they would not all fit in the time left.
    keep : {"all", "blend"}, default "all"
        Which finished candidates keep their fold models once the outputs are written: all, or only the blend's
        members (the others keep their predictions and leave the pool of a later call on the same directory).
    progress : bool, optional
        The progress line (default: on a terminal).
    cluster : str, ClusterSpec or distributed.Client, optional
        Run the candidates and tuning trials on a Dask cluster, one per worker at a time
        (:mod:`qwkboost.autoblend.dask_executor`): ``"local"`` (a ``LocalCluster`` of 2 workers on this machine), a
        scheduler's address (``"tcp://10.0.0.5:8786"``), a :class:`~qwkboost.distributed.connection.ClusterSpec`, or a
        connected client. Default: this process, one at a time. A candidate whose data does not fit one worker, or
        every one with ``ClusterSpec(parallel="rows")``, trains each fold's rows across the workers where its engine
        can (:mod:`qwkboost.autoblend.placement`). A lost worker loses only its candidate; a lost scheduler ends the
        budget with the blend of what finished.

    Returns
    -------
    AutoResult
        ``predict(X)``, ``leaderboard``, ``metrics``, ``blend`` and ``output_dir``.

    Raises
    ------
    ValueError
        For bad settings or data, before any training; if no candidate finished within the time limit.
    """

    with config_errors():
        settings = AutoSettings.from_config({"time_limit": time_limit, "engines": engines, "objectives": objectives,
                                             "tune": tune, "max_members": max_members, "screen": screen,
                                             "keep": keep})
        n_splits = check_int(n_splits, "n_splits", 2)
        spec = _cluster_spec(cluster)
    budget = Budget(settings.time_limit)
    if X_test is None:
        raise ConfigError("X_test: give the rows to predict (a test set): the budget writes their submission; "
                          "other rows later with result.predict(X_new)")
    train, target, test = _frames(X, y, X_test)
    # through Parquet files, so that frames get every check and rule of a CSV run (data=csv) word for word
    with tempfile.TemporaryDirectory(prefix="qwkboost-auto-data-") as work:
        paths = {"X": Path(work) / "X.parquet", "X_test": Path(work) / "X_test.parquet"}
        train.to_parquet(paths["X"])
        test.to_parquet(paths["X_test"])
        try:
            ds = from_file(str(paths["X"]), target, test_path=str(paths["X_test"]), seed=seed, id=id,
                           classes=classes, group=groups)
        except ValueError as exc:
            text = str(exc)
            for name, p in paths.items():
                text = text.replace(f"'{p}'", name).replace(str(p), name)
            raise ConfigError(text) from None
    data = {"name": "frame", "target": target, "id": id}
    with config_errors():
        configs = runnable_configs({c.pair: candidate_config(c.engine, c.objective, n_splits=n_splits, seed=seed,
                                                             group=groups, n_jobs=n_jobs, data=data)
                                    for c in plan(settings.engines, settings.objectives)}, ds)
    out = Path(output_dir) if output_dir is not None else Path(tempfile.mkdtemp(prefix="qwkboost-auto-"))
    experiment_id = None
    if tracking_uri is not None:
        experiment_id = trk.setup(tracking_uri, experiment_name)
    args = dict(budget=budget, progress=progress, data_names=("X", "X_test"), dir_key="output_dir")
    run = AutoRun(settings, configs, ds, out, experiment_id, "auto", **args)
    if spec is None:
        return run.run()
    run.check_directory()       # a directory of other data or settings is refused before a cluster starts
    check_local_room(spec, configs, ds)     # and workers too small for any candidate
    with _client(spec) as client:
        import mlflow  # slow to import: mlflow

        executor = DaskExecutor(client, ds, budget, out, mlflow.get_tracking_uri() if tracking_uri else None,
                                getattr(spec, "parallel", None))
        executor.check_room(configs)
        return run.run(executor)


def _cluster_spec(cluster):
    """``auto(cluster=...)`` checked: ``None``, a connected client, or a ``ClusterSpec``."""
    if isinstance(cluster, ClusterSpec):
        cluster.worker_memory()         # a memory_limit Dask cannot read, before anything starts
    if cluster is None or isinstance(cluster, ClusterSpec) or hasattr(cluster, "scheduler_info"):
        return cluster
    if cluster == "local":
        return ClusterSpec()
    if isinstance(cluster, str) and "://" in cluster:
        return ClusterSpec(address=cluster)
    raise ValueError(f"cluster must be 'local', a scheduler address such as 'tcp://10.0.0.5:8786', a ClusterSpec "
                     f"or a distributed.Client; got {cluster!r}")


@contextlib.contextmanager
def _client(spec):
    """A Dask client for ``auto(cluster=...)``: the given one, or one connected for the call."""
    if hasattr(spec, "scheduler_info"):          # a distributed.Client
        yield spec
        return
    with connect(spec) as client:
        yield client
