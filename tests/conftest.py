from pathlib import Path

import numpy as np
import pytest

from qwkboost.data.sources import quartiles


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
            "thresholds": {"method": "exact"}, "seed": 0}


CONF_DIR = str(Path(__file__).resolve().parents[1] / "conf")


def run_in_process(overrides, output_dir, config_name: str = "config"):
    """``experiments/run.py <overrides>`` (``tune.py`` with ``config_name="tune"``) in this process: the config composed as Hydra's command line would
    compose it, Hydra's state set as ``@hydra.main`` sets it, then :func:`qwkboost.runs.command.run_command`.

    For what the command computes and refuses; the real process (exit codes, signals, launchers, one-line
    errors on stderr) is tested through subprocesses in ``tests/runs/test_run_cli.py``.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from qwkboost.runs.command import run_command, tune_command

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
            return (tune_command if config_name == "tune" else run_command)(cfg)
        finally:
            HydraConfig.instance().cfg = None
