import os
from pathlib import Path

import numpy as np
import pytest

from qwkboost.data.sources import quartiles


def _own_tracking_store() -> None:
    """Runs that name no store (``tracking.uri=null``, ``qb.auto()`` without ``tracking_uri``, the commands a test
    starts) go to a store of the test session's, never to the project's ``mlflow.db`` (a user's runs: ``make test``
    after ``make run`` left the tests' runs among them) nor to a server the user's ``MLFLOW_TRACKING_URI`` names.
    Set before the test modules are imported, so that the environments they copy for their commands carry it."""
    import atexit
    import shutil
    import tempfile

    d = tempfile.mkdtemp(prefix="qwkboost-tests-mlflow-")
    atexit.register(shutil.rmtree, d, True)
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{d}/mlflow.db"


def pytest_configure(config):
    """Every test process logs to a store of its own (:func:`_own_tracking_store`).

    Under pytest-xdist, each worker's engines get its share of the cores, as Hydra's joblib jobs do
    (:func:`qwkboost.engines.threads.threads_per_job`): two workers whose engines each spin an OpenMP thread
    per core fight for the cores and train many times slower. The share reaches
    :func:`~qwkboost.engines.threads.available_cores` (and the commands the tests start) through joblib's
    ``LOKY_MAX_CPU_COUNT``; a value set by the user is kept. The OpenMP and BLAS pools that a test starts
    without qwkboost (a raw engine beside ours, NumPy's OpenBLAS) get the same share through ``OMP_NUM_THREADS``,
    read as those libraries load, after this: the engine, estimator, objective and native tests took 87 s
    with two threads per worker and 67 s with one (``-n 2``, this 2-core machine)."""
    _own_tracking_store()
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:
        from qwkboost.engines.threads import available_cores

        share = str(max(1, available_cores() // int(workers)))
        os.environ.setdefault("LOKY_MAX_CPU_COUNT", share)
        os.environ.setdefault("OMP_NUM_THREADS", share)


#: Under pytest-xdist, the work is handed out in this order: the files and tests that take longest first, so that
#: the suite does not end with one worker running a long test while the others have finished. A file named here
#: keeps its collection order inside; tests not named follow in collection order. Scheduling only: a test
#: missing here still runs.
SLOW_FIRST = (
    "tests/distributed/test_auto_on_cluster.py",
    "tests/distributed/test_cluster_processes.py",
    "tests/distributed/test_executor.py",
    "tests/tracking/test_mlflow_server.py",
    "tests/distributed/test_cluster.py",
    "tests/runs/test_run_cli.py",
    "tests/runs/test_tuning_postgres.py",
    "tests/runs/test_tuning.py",
    "tests/objectives/test_outputs_and_hessians.py::test_every_objective_in_the_table_on_the_command_line",
    "tests/tracking/test_predictions.py",
    "tests/tracking/test_mlflow_ui.py",
    "tests/blending/test_blend_runs.py",
    "tests/tracking/test_loading_safety.py",
    "tests/tracking/test_column_rule.py",
    "tests/test_docs.py",
    "tests/study/test_study.py",
    "tests/test_estimator.py::test_scikit_learn_estimator_checks",
    "tests/test_custom_objective.py",
    "tests/runs/test_run_command.py",
    "tests/test_readme.py",
)
#: Files whose tests share a costly module fixture (a server, a Dask cluster, finished runs): under pytest-xdist
#: each is one unit of work, run by one worker, so the fixture is set up once. (``--dist loadgroup`` would do
#: this with ``xdist_group`` marks, but pytest-xdist 3.8 on pytest 9.2 no longer groups: pytest-xdist#1386.)
ONE_WORKER_FILES = (
    "tests/tracking/test_mlflow_server.py",         # one mlflow server, killed and restarted by a test
    "tests/distributed/test_cluster.py",            # one LocalCluster with two worker processes
    "tests/distributed/test_executor.py",           # one LocalCluster with two worker processes
    "tests/distributed/test_auto_on_cluster.py",    # LocalClusters one after the other, not two at once
    "tests/distributed/test_cluster_processes.py",  # scheduler and worker processes one after the other
    "tests/distributed/test_objectives_on_cluster.py",  # one LocalCluster with two worker processes
    "tests/runs/test_tuning_postgres.py",           # one PostgreSQL server
    "tests/tracking/test_predictions.py",           # one finished run
    "tests/tracking/test_mlflow_ui.py",             # one store of runs, one mlflow ui serving it
    "tests/blending/test_blend_runs.py",            # three finished runs to blend
    "tests/tracking/test_loading_safety.py",        # two finished runs, one logged to MLflow with its model
)


def _slow_rank(nodeid: str) -> int:
    name = nodeid.split("[", 1)[0]
    for i, prefix in enumerate(SLOW_FIRST):
        if name == prefix or name.startswith(prefix + "::"):
            return i
    return len(SLOW_FIRST)


def pytest_collection_modifyitems(config, items):
    """On a pytest-xdist worker (all workers sort alike), the slow files and tests first (:data:`SLOW_FIRST`)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items[:] = [item for _, _, item in sorted((_slow_rank(item.nodeid), i, item) for i, item in enumerate(items))]


@pytest.hookimpl(tryfirst=True, optionalhook=True)     # optional: a run without pytest-xdist has no such hook
def pytest_xdist_make_scheduler(config, log):
    """``-n``'s default ``--dist load``, with each file of :data:`ONE_WORKER_FILES` handed out whole: any test
    is its own unit of work, and units go out in collection order (slow first), to whichever worker is nearly
    done with its own, as with ``load``."""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path in ONE_WORKER_FILES else nodeid

    config.option.loadscopereorder = False       # units in collection order, not by their number of tests
    return Scheduling(config, log)


@pytest.fixture(scope="session")
def small_quartiles():
    """The DSB2019 article's quartile data at 4,000 training rows (test 2,000)."""
    return quartiles(n_train=4000, n_test=2000)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(scope="session")
def mlflow_store(tmp_path_factory):
    """A real sqlite tracking store shared by the session (schema creation takes seconds)."""
    import mlflow

    d = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{d}/mlflow.db"
    mlflow.MlflowClient(uri).search_experiments()  # create the schema once
    return uri


TINY = {
    "data": {"name": "quartiles", "n_train": 1500, "n_test": 800, "seed": 0, "test_seed": 1,
             "n_features": 10, "n_visible": 5, "n_classes": 4},
    "engine": {"name": "xgboost", "num_boost_round": 60, "early_stopping_rounds": 10,
               "params": {"learning_rate": 0.3, "max_depth": 3, "nthread": 1}},
    "objective": {"name": "extended_qwk", "params": {"hessian": "constant", "clip": "range"}},
    "cv": {"n_splits": 3, "stratified": True, "shuffle": True},
    "thresholds": {"method": "exact"},
    "seed": 0,
}


@pytest.fixture
def tiny_cfg(mlflow_store, request):
    import copy

    cfg = copy.deepcopy(TINY)
    cfg["tracking"] = {"uri": mlflow_store, "experiment_name": request.node.name, "log_models": True, "explain": False}
    return cfg


#: A small run for tests of what a command does; explanations (seconds per run) are tested in tests/explanations.
TINY_OVERRIDES = [
    "data.n_train=1500", "data.n_test=800", "engine.num_boost_round=60", "engine.early_stopping_rounds=10",
    "engine.params.learning_rate=0.3", "cv.n_splits=3", "tracking.explain=false",
]


@pytest.fixture(scope="session")
def postgres_url():
    """A real PostgreSQL server for the session, on a free loopback port (see ``tests/postgres_server.py``).

    Yields ``postgresql+psycopg2://postgres@127.0.0.1:PORT/qwkboost_test``; the
    server is stopped and its data removed afterwards. Skips, saying why, when
    the driver or Debian's server binaries are missing.
    """
    from postgres_server import missing_reason, running_postgres

    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    with running_postgres() as url:
        yield url


@pytest.fixture(scope="session")
def entity_csv(tmp_path_factory):
    """A competition-shaped pair of files: every training entity has 3 identical rows (its label too), the test
    file holds 4,000 other entities. Returns ``(train_path, test_path)``."""
    from qwkboost.data.synthetic import entity_frames

    d = tmp_path_factory.mktemp("entity_csv")
    train, test = entity_frames(n_entities=1500, rows_per_entity=3, n_test_entities=4000, row_noise=0.0, seed=0)
    train.to_csv(d / "train.csv", index=False)
    test.to_csv(d / "test.csv", index=False)
    return str(d / "train.csv"), str(d / "test.csv")


def csv_cfg(train: str, test: str | None, engine: str = "lightgbm", objective: str = "squared_error", **cv) -> dict:
    """A resolved run config on a CSV file (in-process, as Hydra would compose it), small and fast."""
    params = {"lightgbm": {"learning_rate": 0.1, "num_leaves": 15, "verbose": -1, "num_threads": 1},
              "xgboost": {"learning_rate": 0.1, "max_depth": 4, "nthread": 1},
              "native": {"learning_rate": 0.1, "max_depth": 4}}[engine]
    objective_params = {"extended_qwk": {"hessian": "constant", "clip": "range"}}.get(objective, {})
    return {"data": {"name": "csv", "path": train, "test_path": test, "target": "label", "id": "id",
                     "test_size": 0.2, "drop": [], "categorical": [], "ordinal": True, "seed": 0},
            "engine": {"name": engine, "num_boost_round": 400, "early_stopping_rounds": 30, "params": params},
            "objective": {"name": objective, "params": objective_params},
            "cv": {"n_splits": 4, "stratified": True, "shuffle": True, "group": None, "repeats": 1, **cv},
            "thresholds": {"method": "exact"}, "tracking": {"explain": False}, "seed": 0}


CONF_DIR = str(Path(__file__).resolve().parents[1] / "conf")


def run_in_process(overrides, output_dir, config_name: str = "config"):
    """``experiments/run.py <overrides>`` (``tune.py`` with ``config_name="tune"``) in this process: the config composed as Hydra's command line would
    compose it, Hydra's state set as ``@hydra.main`` sets it, then :func:`qwkboost.commands.run_command` (or
    :func:`qwkboost.runs.command.tune_command`), as the scripts do.

    For what the command computes and refuses; the real process (exit codes, signals, launchers, one-line
    errors on stderr) is tested through subprocesses in ``tests/runs/test_run_cli.py``.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from qwkboost.commands import run_command, tune_command

    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name=config_name, overrides=list(overrides), return_hydra_config=True)
        with open_dict(cfg):
            cfg.hydra.runtime.output_dir = str(output_dir)
            cfg.hydra.job.config_name = config_name
        HydraConfig.instance().set_config(cfg)
        with open_dict(cfg):
            del cfg["hydra"]
        try:
            if config_name == "tune":
                return tune_command(cfg)
            return run_command(cfg)     # as experiments/run.py does
        finally:
            HydraConfig.instance().cfg = None


def command_in_process(script: str, overrides, output_dir):
    """``experiments/<script> <overrides>`` (``predict.py``, ``explain.py``, ``blend.py``) in this process: its
    config composed as Hydra composes it, Hydra's state set, and the script's ``main`` called with it (Hydra's
    decorated ``main`` runs the task on a config passed to it). A refusal ends it as in the command:
    ``SystemExit(2)``, the line on stderr."""
    import importlib.util

    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location(f"cmd_{Path(script).stem}", root / "experiments" / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name=Path(script).stem, overrides=list(overrides), return_hydra_config=True)
        with open_dict(cfg):
            cfg.hydra.runtime.output_dir = str(output_dir)
            cfg.hydra.job.config_name = Path(script).stem
        HydraConfig.instance().set_config(cfg)
        with open_dict(cfg):
            del cfg["hydra"]
        try:
            return module.main(cfg)
        finally:
            HydraConfig.instance().cfg = None


def quartile_frames(seed: int, n_train: int = 1200, n_test: int = 600):
    """The article's data as the frames a user hands ``qb.auto``: ``(X, y, X_test, y_test)``, features ``f0..``,
    labels 1..4 named ``grade``."""
    import pandas as pd

    from qwkboost.data import quartiles

    ds = quartiles(n_train=n_train, n_test=n_test, seed=seed)
    cols = [f"f{j}" for j in range(ds.X_train.shape[1])]
    X = pd.DataFrame(ds.X_train, columns=cols)
    X_test = pd.DataFrame(ds.X_test, columns=cols)
    return X, pd.Series(ds.y_train.astype(int) + 1, name="grade"), X_test, ds.y_test.astype(int) + 1


@pytest.fixture(scope="module")
def client():
    """A real Dask LocalCluster of 2 worker processes of one thread each, for a test module (tests/distributed)."""
    from qwkboost.distributed.training import ClusterSpec, connect

    with connect(ClusterSpec(n_workers=2, threads_per_worker=1)) as c:
        yield c
