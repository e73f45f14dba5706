import mlflow
import pytest

from qwkboost import tracking


def test_default_store_is_absolute_sqlite_in_the_project(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = tracking.resolve_tracking_uri(None)
    assert uri.startswith(f"sqlite:///{tracking.PROJECT_ROOT}/mlflow.db")
    assert "timeout=" in uri


def test_environment_and_config_override(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5999")
    assert tracking.resolve_tracking_uri(None) == "http://127.0.0.1:5999"
    assert tracking.resolve_tracking_uri("sqlite:////tmp/x.db").startswith("sqlite:////tmp/x.db?timeout=")


@pytest.mark.parametrize("uri", ["./mlruns", "file:///tmp/mlruns", "mlruns"])
def test_file_store_is_rejected(uri):
    with pytest.raises(ValueError, match="file store, which current MLflow rejects"):
        tracking.resolve_tracking_uri(uri)


def test_flatten():
    assert tracking.flatten({"a": {"b": 1, "c": [1, 2]}, "d": None}) == {"a.b": 1, "a.c": "[1, 2]", "d": None}


def test_run_statuses(mlflow_store):
    exp = tracking.setup(mlflow_store, "statuses")
    with tracking.run(exp, "ok") as ok:
        tracking.log_metrics({"x": 1.0})
    with pytest.raises(RuntimeError):
        with tracking.run(exp, "boom") as boom:
            raise RuntimeError("crash")
    with pytest.raises(KeyboardInterrupt):
        with tracking.run(exp, "ctrl-c") as killed:
            raise KeyboardInterrupt
    client = mlflow.MlflowClient(mlflow_store)
    assert client.get_run(ok.info.run_id).info.status == "FINISHED"
    assert client.get_run(boom.info.run_id).info.status == "FAILED"
    assert client.get_run(killed.info.run_id).info.status == "KILLED"
    assert mlflow.active_run() is None


def test_artifacts_sit_beside_the_database(mlflow_store):
    exp = tracking.setup(mlflow_store, "where_artifacts_go")
    loc = mlflow.MlflowClient(mlflow_store).get_experiment(exp).artifact_location
    assert loc.endswith("/mlartifacts") and loc.startswith("file://")


def test_versions_recorded():
    v = tracking.library_versions()
    assert {"python", "numpy", "xgboost", "lightgbm", "mlflow", "optuna", "hydra-core"} <= set(v)
