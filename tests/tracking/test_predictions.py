"""The practitioner's path: a competition's CSV pair -> one command -> submission.csv; the run's pipeline
from its directory or its MLflow run id; experiments/predict.py; the MLflow model served over HTTP."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import qwkboost as qb
from qwkboost.data.sources import from_file

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "CI": "true"}


def competition(tmp_path: Path, n_train: int = 1200, n_test: int = 400):
    """train.csv and test.csv shaped like a competition's: an Id, string categories with missing values,
    numeric columns with missing values, a label column only in train."""
    rs = np.random.RandomState(0)

    def make(n, start):
        city = rs.choice(["Paris", "Lyon", "Nice", "Lille", None], n, p=[.3, .3, .2, .15, .05])
        breed = rs.choice(list("abcdef"), n)
        x1 = rs.normal(size=n)
        x2 = rs.rand(n)
        x2[rs.rand(n) < 0.1] = np.nan
        eff = {"Paris": 1.0, "Lyon": 0.0, "Nice": -1.0, "Lille": 0.5, None: 0.0}
        lat = np.array([eff[c] for c in city]) + np.array(["abcdef".index(b) % 3 for b in breed]) * 0.7 + x1 \
            + rs.normal(scale=0.5, size=n)
        y = np.digitize(lat, [-0.5, 0.7, 1.8, 2.8]) + 1        # labels 1..5, on their own scale
        return pd.DataFrame({"Id": [f"id{start + i}" for i in range(n)], "city": city, "x1": x1, "breed": breed,
                             "x2": x2}), y

    tr, y = make(n_train, 0)
    te, yt = make(n_test, 100_000)
    tr.assign(AdoptionSpeed=y).to_csv(tmp_path / "train.csv", index=False)
    te.to_csv(tmp_path / "test.csv", index=False)
    return te, yt


def test_a_test_file_without_labels_ids_and_dropped_columns(tmp_path):
    te, _ = competition(tmp_path)
    ds = from_file(str(tmp_path / "train.csv"), "AdoptionSpeed", test_path=str(tmp_path / "test.csv"), id="Id",
                   drop=["x2"])
    assert ds.y_test is None and not ds.has_test_labels
    assert ds.feature_names == ["city", "x1", "breed"] and ds.schema.categorical == [0, 2]
    assert list(ds.ids_test) == list(te["Id"]) and ds.id_name == "Id" and ds.target == "AdoptionSpeed"
    assert list(ds.classes) == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match=r"data.id: \['ID'\] not a column of data.path"):
        from_file(str(tmp_path / "train.csv"), "AdoptionSpeed", id="ID")
    with pytest.raises(ValueError, match=r"data.drop: \['x9'\] not a column"):
        from_file(str(tmp_path / "train.csv"), "AdoptionSpeed", drop="x9")
    pd.read_csv(tmp_path / "test.csv").assign(Id="same").to_csv(tmp_path / "dup.csv", index=False)
    with pytest.raises(ValueError, match=r"data.id='Id' repeats the value 'same' in data.test_path"):
        from_file(str(tmp_path / "train.csv"), "AdoptionSpeed", test_path=str(tmp_path / "dup.csv"), id="Id")


def _cli(tmp_path, script, *args):
    proc = subprocess.run([sys.executable, str(ROOT / "experiments" / script), *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """One run of the command on the competition pair (native engine), logged to its own sqlite store: its
    config composed as the command line composes it, run in this process (:func:`conftest.run_in_process`)."""
    from conftest import run_in_process

    tmp = tmp_path_factory.mktemp("competition")
    te, yt = competition(tmp)
    uri = f"sqlite:///{tmp}/mlflow.db"
    run_in_process(["engine=native", "data=csv", f"data.path={tmp}/train.csv", f"data.test_path={tmp}/test.csv",
                    "data.target=AdoptionSpeed", "data.id=Id", "engine.num_boost_round=200",
                    "engine.early_stopping_rounds=20", "engine.params.learning_rate=0.2", "cv.n_splits=3",
                    f"tracking.uri={uri}"], tmp / "out")
    import mlflow

    client = mlflow.MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name("qwkboost").experiment_id])
    return tmp, tmp / "out", run.info.run_id, uri, te, yt


def test_one_command_writes_the_submission_and_the_predictions(finished_run):
    tmp, out, run_id, uri, te, yt = finished_run
    sub = pd.read_csv(out / "submission.csv")
    assert list(sub.columns) == ["Id", "AdoptionSpeed"]
    assert list(sub["Id"]) == list(te["Id"])                               # every test row, in file order
    assert set(sub["AdoptionSpeed"]) <= {1, 2, 3, 4, 5} and sub["AdoptionSpeed"].dtype.kind == "i"
    assert qb.qwk(yt - 1, sub["AdoptionSpeed"].to_numpy() - 1) > 0.7        # real predictions, not a constant
    pred = pd.read_parquet(out / "predictions.parquet")
    assert list(pred.columns) == ["Id", "score", "class"]
    np.testing.assert_array_equal(pred["class"], sub["AdoptionSpeed"])
    oof = pd.read_parquet(out / "oof.parquet")
    assert list(oof.columns) == ["Id", "AdoptionSpeed", "score", "class", "fold"] and len(oof) == 1200
    assert sorted(oof["fold"].unique()) == [0, 1, 2]                         # the validation fold of every row (3 folds)
    result = json.loads((out / "result.json").read_text())
    assert "qwk_thresholds" not in result and result["qwk_thresholds_oof"] > 0.7   # no labels: no test metrics


def test_the_pipeline_from_the_directory_and_from_mlflow_predicts_the_submission(finished_run):
    tmp, out, run_id, uri, te, _ = finished_run
    sub = pd.read_csv(out / "submission.csv")
    local = qb.load_run(out)
    remote = qb.load_run(run_id, tracking_uri=uri)
    assert len(local.models) == 3 and list(local.classes) == [1, 2, 3, 4, 5] and local.id_name == "Id"
    np.testing.assert_array_equal(local.predict(te), sub["AdoptionSpeed"])
    np.testing.assert_array_equal(remote.predict(te), sub["AdoptionSpeed"])
    shuffled = te[["x2", "breed", "Id", "city", "x1"]]                   # columns in another order
    np.testing.assert_array_equal(local.predict(shuffled), sub["AdoptionSpeed"])
    np.testing.assert_allclose(local.predict_score(te), pd.read_parquet(out / "predictions.parquet")["score"])
    with pytest.raises(ValueError, match="is neither a directory nor a run in the MLflow store"):
        qb.load_run("0123456789abcdef0123456789abcdef", tracking_uri=uri)


def test_predict_cli_writes_the_same_submission(finished_run):
    tmp, out, run_id, uri, te, _ = finished_run
    _cli(tmp, "predict.py", f"run={run_id}", f"data.path={tmp}/test.csv", f"tracking.uri={uri}", "out=again")
    np.testing.assert_array_equal(pd.read_csv(tmp / "again" / "submission.csv"), pd.read_csv(out / "submission.csv"))
    te.assign(city="Atlantis").to_csv(tmp / "odd.csv", index=False)       # a category nobody saw
    # run=<directory>, in this process: what experiments/predict.py does with its checked settings
    import importlib.util

    spec = importlib.util.spec_from_file_location("predict_cli", ROOT / "experiments" / "predict.py")
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    cli.predict_file(str(out), str(tmp / "odd.csv"), tmp / "odd")
    assert len(pd.read_csv(tmp / "odd" / "submission.csv")) == len(te)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_the_served_mlflow_model_answers_http_with_the_same_classes(finished_run):
    tmp, out, run_id, uri, te, _ = finished_run
    port = _free_port()
    env = {**ENV, "MLFLOW_TRACKING_URI": uri}
    import mlflow

    from model_files import model_uri

    # the address the run printed ("MLflow model: models:/<id>"), as the getting-started page serves it
    server = subprocess.Popen(["mlflow", "models", "serve", "-m", model_uri(mlflow.MlflowClient(uri), run_id),
                               "--env-manager", "local",
                               "--host", "127.0.0.1", "--port", str(port)],
                              cwd=tmp, env={**env, "PATH": f"{Path(sys.executable).parent}:{env['PATH']}"},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.time() > deadline:
                    raise AssertionError(server.stdout.read().decode()[-3000:])
                time.sleep(0.5)
        rows = te.head(50).assign(city=lambda d: d["city"].where(d.index != 0, "Atlantis")).drop(columns="Id")
        body = json.dumps({"dataframe_split": json.loads(rows.to_json(orient="split", index=False))}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", data=body,
                                     headers={"Content-Type": "application/json"})
        answer = json.loads(urllib.request.urlopen(req, timeout=30).read())["predictions"]
        served = np.array([r["class"] for r in answer])
        np.testing.assert_array_equal(served, qb.load_run(out).predict(rows))
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)


def test_the_readme_snippet_on_a_finished_run(finished_run, monkeypatch):
    """The getting-started page's ``load_run`` block (shown, not run by test_docs: it needs a finished run), run
    as written against this one."""
    import re

    tmp, out, *_ , te, _ = finished_run
    page = (ROOT / "docs" / "getting-started.md").read_text()
    (code,) = [b for b in re.findall(r"```py\n(.*?)```", page, flags=re.S) if "load_run" in b]
    monkeypatch.chdir(tmp)
    ns = {"qb": qb, "pd": pd}
    exec(compile(code.replace("outputs/2026-11-23/10-00-00", str(out)), "getting-started.md", "exec"), ns)
    np.testing.assert_array_equal(ns["pipe"].predict(ns["new"]), pd.read_csv(out / "submission.csv")["AdoptionSpeed"])


def test_the_model_registry_holds_the_pipeline(finished_run):
    import mlflow

    tmp, out, run_id, uri, te, _ = finished_run
    mlflow.set_tracking_uri(uri)
    try:
        from model_files import logged_model

        model = logged_model(mlflow.MlflowClient(uri), run_id)
        # by its run and name, as MLflow addresses a run's model, and by its id
        assert model.name == "native-squared_error" and model.tags["kind"] == "run"
        assert mlflow.pyfunc.load_model(f"runs:/{run_id}/{model.name}").predict(te.head(3)).shape[0] == 3
        version = mlflow.register_model(f"models:/{model.model_id}", "adoption-speed")
        served = mlflow.pyfunc.load_model(f"models:/adoption-speed/{version.version}").predict(te.head(30))
    finally:
        mlflow.set_tracking_uri(None)
    np.testing.assert_array_equal(served["class"], pd.read_csv(out / "submission.csv")["AdoptionSpeed"][:30])


@pytest.mark.parametrize("args, message", [
    (["data.path=x.csv"], "error: run is not set; give run=<a run's output directory or its MLflow run id>"),
    (["run=out"], "error: data.path is not set"),
    (["run=nowhere", "data.path=x.csv"], "run='nowhere' is neither a directory nor a run in the MLflow store"),
])
def test_predict_cli_says_what_is_missing(tmp_path, args, message):
    proc = subprocess.run([sys.executable, str(ROOT / "experiments" / "predict.py"), *args,
                           f"tracking.uri=sqlite:///{tmp_path}/mlflow.db"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env=ENV)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def test_logging_the_model_reads_its_pipeline_no_second_time(finished_run, monkeypatch, tmp_path):
    """The pyfunc model is logged from the pipeline already read (its answer on the input example is the check);
    MLflow's own check would read every fold model again. The logged model still loads and predicts."""
    import mlflow

    from qwkboost.tracking import loading
    from qwkboost.tracking.serving import example_frame, log_pyfunc

    _, out, _, _, te, _ = finished_run
    pipe = qb.load_run(out)
    reads = []
    real = loading.load_pipeline
    monkeypatch.setattr(loading, "load_pipeline", lambda *a, **k: reads.append(a) or real(*a, **k))
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    try:
        with mlflow.start_run() as run:
            model_id = log_pyfunc(out / "pipeline", example_frame([pipe.schema]), pipe=pipe)
        assert reads == []
        served = mlflow.pyfunc.load_model(f"models:/{model_id}").predict(te.head(30))
        assert len(reads) == 1
        np.testing.assert_array_equal(served["class"], pipe.predict(te.head(30)))
    finally:
        mlflow.set_tracking_uri(None)
