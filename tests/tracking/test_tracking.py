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


def test_ui_links_open_on_runs_in_the_installed_mlflow_ui():
    """MLflow 3's UI opens experiments on GenAI pages unless the link carries workflowType=machine_learning
    (checked in a browser: the experiment tag alone did not switch it). The installed UI must still read it."""
    import glob
    import os

    link = tracking.ui_link("http://127.0.0.1:5000", "7", "abc")
    assert link == "http://127.0.0.1:5000/#/experiments/7/runs/abc?workflowType=machine_learning"
    # an experiment's link opens the starting view the experiment holds
    assert tracking.ui_link("http://127.0.0.1:5000", "7") == (
        "http://127.0.0.1:5000/#/experiments/7/runs?viewStateShareKey=qwkboost&workflowType=machine_learning")
    js_dir = os.path.join(os.path.dirname(mlflow.__file__), "server", "js", "build", "static", "js")
    bundle = "".join(open(f, encoding="utf-8", errors="ignore").read() for f in glob.glob(f"{js_dir}/main.*.js"))
    assert 'MACHINE_LEARNING="machine_learning"' in bundle and '.get("workflowType")' in bundle


def test_experiment_is_tagged_for_model_training(mlflow_store):
    exp = tracking.setup(mlflow_store, "tagged")
    assert mlflow.MlflowClient(mlflow_store).get_experiment(exp).tags["mlflow.experimentKind"] == \
        "custom_model_development"


def test_every_experiment_holds_the_starting_view(mlflow_store):
    """The runs table's starting view, as MLflow's UI stores a shared view: new experiments get it, older ones
    (made by another tool, or holding another view) get it on the next command. The browser test opens it."""
    import json

    client = mlflow.MlflowClient(mlflow_store)
    exp = tracking.setup(mlflow_store, "viewed")
    view = json.loads(client.get_experiment(exp).tags["mlflow.sharedViewState.qwkboost"])
    assert view["orderByKey"] == "metrics.`oof_qwk`" and view["orderByAsc"] is False
    assert view["selectedColumns"][:4] == ["metrics.`oof_qwk`", "metrics.`nested_oof_qwk`", "metrics.`test_qwk`",
                                           "metrics.`seconds`"]
    other = client.create_experiment("made_elsewhere")
    client.set_experiment_tag(exp, "mlflow.sharedViewState.qwkboost", "{}")
    for name, exp_id in (("made_elsewhere", other), ("viewed", exp)):
        assert tracking.setup(mlflow_store, name) == exp_id
        assert json.loads(client.get_experiment(exp_id).tags["mlflow.sharedViewState.qwkboost"]) == view


def test_safe_names_stay_in_their_directory():
    assert tracking.safe_name("../../x") == "x"
    assert tracking.safe_name("a/b\\c") == "a_b_c"
    assert tracking.safe_name("..") == "run"
    assert tracking.safe_name("xgboost__extended_qwk") == "xgboost__extended_qwk"


def test_run_names_carry_what_distinguishes_them():
    over = ["engine=lightgbm", "data.n_train=1500", "tracking.uri=sqlite:///x.db", "engine.params.max_depth=3"]
    assert tracking.run_name("lightgbm", "extended_qwk", over) == \
        "lightgbm/extended_qwk data.n_train=1500 engine.params.max_depth=3"
    assert tracking.run_name("lightgbm", "extended_qwk", over, varying=["engine.params.max_depth"]) == \
        "lightgbm/extended_qwk engine.params.max_depth=3"


def test_dead_process_runs_are_reaped(mlflow_store):
    import subprocess
    import sys

    exp = tracking.setup(mlflow_store, "reap")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    client = mlflow.MlflowClient(mlflow_store)
    orphan = client.create_run(exp, run_name="orphan", tags={tracking.PROCESS_TAG: tracking.process_tag(dead.pid)})
    alive = client.create_run(exp, run_name="alive", tags={tracking.PROCESS_TAG: tracking.process_tag()})
    foreign = client.create_run(exp, run_name="other host", tags={tracking.PROCESS_TAG: "elsewhere:1:1"})
    assert tracking.reap_dead_runs(exp, client) == [orphan.info.run_id]
    assert client.get_run(orphan.info.run_id).info.status == "KILLED"
    assert client.get_run(alive.info.run_id).info.status == "RUNNING"
    assert client.get_run(foreign.info.run_id).info.status == "RUNNING"


def test_a_store_left_half_migrated_is_repaired(tmp_path):
    """A migration killed half-way leaves _alembic_tmp_* tables that block every later one; they are dropped."""
    import sqlite3

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    tracking.prepare_store(uri)
    con = sqlite3.connect(tmp_path / "mlflow.db")
    con.execute("CREATE TABLE _alembic_tmp_latest_metrics (x int)")
    con.commit()
    con.close()
    tracking.prepare_store(uri)
    con = sqlite3.connect(tmp_path / "mlflow.db")
    assert con.execute("SELECT name FROM sqlite_master WHERE name GLOB '_alembic_tmp_*'").fetchall() == []
    con.close()
    assert tracking.setup(uri, "after_repair")


def test_a_migration_that_collides_with_another_client_is_retried(tmp_path, monkeypatch):
    """Another MLflow client (an `mlflow ui`, a script) migrating the new store at the same moment makes
    alembic fail once ("expected to match one row"); prepare_store waits and opens the store again. The
    collision itself is timing-dependent, so it is simulated here by failing the first open."""
    import mlflow

    real = mlflow.MlflowClient.search_experiments
    calls = []

    def flaky(self, *a, **k):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("Online migration expected to match one row when updating 'a' to 'b'; 0 found")
        return real(self, *a, **k)

    monkeypatch.setattr(mlflow.MlflowClient, "search_experiments", flaky)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    tracking.prepare_store(uri)
    assert len(calls) == 2
    monkeypatch.setattr(mlflow.MlflowClient, "search_experiments",
                        lambda self, *a, **k: (_ for _ in ()).throw(RuntimeError("disk I/O error")))
    with pytest.raises(RuntimeError, match="disk I/O error"):        # anything else is not retried
        tracking.prepare_store(uri)


def test_member_keys_name_each_member_once_in_what_mlflow_accepts():
    from qwkboost.tracking.vocabulary import member_keys, run_metrics

    assert member_keys(["lightgbm/squared_error", "xgboost/extended_qwk engine.params.max_depth=3",
                        "lightgbm/squared_error", "a:b"]) == [
        "lightgbm-squared_error", "xgboost-extended_qwk engine.params.max_depth_3", "lightgbm-squared_error_2", "a_b"]
    assert run_metrics({"qwk_thresholds_oof": 0.5, "qwk_thresholds_oof_nested": 0.4, "qwk_thresholds": 0.3,
                        "cut_optimism": 0.1}) == {"oof_qwk": 0.5, "nested_oof_qwk": 0.4, "test_qwk": 0.3,
                                                  "cut_optimism": 0.1}


def test_runs_that_log_the_same_rows_at_once_all_get_their_datasets(mlflow_store):
    """A study's trials, auto's candidates and its parent log the same dataset at once: SQLite refuses all but the
    first insert of its record (UNIQUE constraint failed: datasets...), which failed a trial before. Each run must
    end with its training and test datasets. (Without the fix, 8 threads failed in two of three tries here.)"""
    import threading

    from qwkboost.data.fingerprint import fingerprint
    from qwkboost.runs.experiment import load_dataset

    data = {"name": "quartiles", "n_train": 300, "n_test": 100, "seed": 0, "test_seed": 1, "n_features": 5,
            "n_visible": 3, "n_classes": 4}
    fp = fingerprint(load_dataset(data, seed=0))
    client = mlflow.MlflowClient(mlflow_store)
    for attempt in range(3):
        exp = tracking.setup(mlflow_store, f"same_rows_at_once_{attempt}")
        barrier, errors, ids = threading.Barrier(8), [], []

        def work():
            try:
                with mlflow.start_run(experiment_id=exp) as run:
                    ids.append(run.info.run_id)
                    barrier.wait()
                    tracking.log_datasets(fp, data)
            except Exception as exc:  # noqa: BLE001 - collected: the assertion names it
                errors.append(repr(exc)[:300])

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        for run_id in ids:
            inputs = client.get_run(run_id).inputs.dataset_inputs
            assert sorted(d.dataset.name for d in inputs) == ["quartiles test", "quartiles train"]
