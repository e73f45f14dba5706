import numpy as np
import pytest

from qwkboost.data import quartiles


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
    cfg["tracking"] = {"uri": mlflow_store, "experiment_name": request.node.name, "log_models": True}
    return cfg


TINY_OVERRIDES = [
    "data.n_train=1500", "data.n_test=800", "engine.num_boost_round=60", "engine.early_stopping_rounds=10",
    "engine.params.learning_rate=0.3", "cv.n_splits=3",
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
