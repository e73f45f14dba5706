"""A real ``mlflow server`` (SQLite backend, artifacts through its HTTP proxy) on 127.0.0.1.

experiments/run.py logs a run to it over HTTP and a client reads everything back over HTTP; a server that
does not answer stops a multirun and experiments/tune.py before anything trains; a server killed in the
middle of a sweep fails the sweep within seconds, naming the server, and keeps what was logged."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pytest
import requests

from conftest import TINY_OVERRIDES, run_in_process
from qwkboost.tracking.interrupt import is_alive
from qwkboost.tracking import HTTP_DEFAULTS, PROCESS_TAG, bound_http_retries

ROOT = Path(__file__).resolve().parents[2]
MLFLOW = Path(sys.executable).with_name("mlflow")
#: the commands run with qwkboost's own HTTP retry defaults, whatever the environment of the test run says
ENV = {k: v for k, v in os.environ.items() if k not in HTTP_DEFAULTS and k != "MLFLOW_TRACKING_URI"}
ENV["CI"] = "true"
#: generous bounds: a command that takes longer hangs (MLflow's own retries take minutes)
START_S, FAIL_S = 120, 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``mlflow server`` on 127.0.0.1:``port`` with its SQLite store and proxied artifacts under ``root``."""

    def __init__(self, root: Path, port: int) -> None:
        self.root, self.port = root, port
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None
        root.mkdir(parents=True, exist_ok=True)

    def start(self) -> "Server":
        # its own process group (uvicorn runs in a child), so that all of it can be stopped or killed at once
        env = {**ENV, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}    # no background job runners
        with open(self.root / "server.log", "a") as log:
            self.proc = subprocess.Popen(
                [str(MLFLOW), "server", "--backend-store-uri", f"sqlite:///{self.root / 'mlflow.db'}",
                 "--artifacts-destination", str(self.root / "artifacts"), "--host", "127.0.0.1",
                 "--port", str(self.port), "--workers", "1"],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.time() + START_S
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"mlflow server exited ({self.proc.returncode}):\n{self.log()[-3000:]}")
            try:
                if requests.get(self.url + "/health", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            if time.time() > deadline:
                raise AssertionError(f"mlflow server did not answer /health in {START_S} s:\n{self.log()[-3000:]}")
            time.sleep(0.2)

    def log(self) -> str:
        return (self.root / "server.log").read_text()

    def kill(self) -> None:
        """SIGKILL the whole server, as a crash or an OOM kill would."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=15)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """One server for the module (each test logs to its own experiment); a test that kills it starts it again
    with ``server.start()``, on the same store and port. Stopped when the module's tests are done."""
    server = Server(tmp_path_factory.mktemp("server"), free_port()).start()
    yield server
    server.stop()


def cmd(*args, script="run.py"):
    return [sys.executable, str(ROOT / "experiments" / script), *args]


def run_cli(cwd, *args, script="run.py", ok=True, timeout=600):
    proc = subprocess.run(cmd(*args, script=script), cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=ENV)
    if ok:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def runs_of(client, name: str) -> list:
    exp = client.get_experiment_by_name(name)
    return client.search_runs([exp.experiment_id]) if exp else []


def test_run_logged_over_http_is_read_back_over_http(tmp_path, mlflow_server):
    server = mlflow_server
    work = tmp_path / "work"
    work.mkdir()
    run_cli(work, *TINY_OVERRIDES, "engine=lightgbm", "objective=extended_qwk", f"tracking.uri={server.url}",
            "tracking.experiment_name=over_http")
    client = mlflow.MlflowClient(server.url)
    exp = client.get_experiment_by_name("over_http")
    assert exp.artifact_location.startswith("mlflow-artifacts:")     # the server's proxy, not a local path
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    (r,) = runs_of(client, "over_http")
    assert r.info.status == "FINISHED" and r.info.end_time is not None
    # params: the flattened config
    p = r.data.params
    assert (p["engine.name"], p["objective.name"], p["cv.n_splits"], p["data.n_train"]) == \
        ("lightgbm", "extended_qwk", "3", "1500")
    # metrics: the headline ones, and the per-round curves as step-indexed history
    m = r.data.metrics
    assert 0.3 < m["oof_qwk"] <= 1 and 0.3 < m["test_qwk"] <= 1 and m["oof_rmse"] > 0 and m["seconds"] > 0
    assert len(client.get_metric_history(r.info.run_id, "valid_kappa")) > 1
    # tags: what ran, with which versions, in which process
    t = r.data.tags
    assert (t["kind"], t["engine"], t["objective"], t["data"]) == ("run", "lightgbm", "extended_qwk", "quartiles")
    assert f"mlflow={mlflow.__version__}" in t["versions"].split() and PROCESS_TAG in t
    # artifacts: listed and downloaded over HTTP; they sit in the server's artifact destination
    arts = {a.path for a in client.list_artifacts(r.info.run_id)}
    assert {"thresholds.json", "config.yaml", "predictions", "plots"} <= arts
    # the fold models once, in the logged model, and read back from it over HTTP
    assert "pipeline" not in arts
    import qwkboost as qb
    assert len(qb.load_run(r.info.run_id, server.url).models) == 3
    got = Path(client.download_artifacts(r.info.run_id, "thresholds.json", str(tmp_path / "dl")))
    cuts = json.loads(got.read_text())["cuts"]
    assert len(cuts) == 3 and cuts == sorted(cuts)         # 4 classes: 3 increasing cut points
    stored = server.root / "artifacts" / exp.experiment_id / r.info.run_id / "artifacts" / "thresholds.json"
    assert json.loads(stored.read_text()) == json.loads(got.read_text())
    assert not (work / "mlartifacts").exists() and not (work / "mlruns").exists()   # nothing beside the command


TUNE = ["tune.n_trials=2", "tune.storage=sqlite:///{tmp_path}/optuna.db"]


def unreachable_message(url: str) -> str:
    return (f"the MLflow tracking server at tracking.uri={url} cannot be reached (ConnectionError: connection "
            "refused); start it (e.g. mlflow server --host 127.0.0.1 --port 5000), or leave tracking.uri and "
            "MLFLOW_TRACKING_URI unset to log to the local sqlite store")


def test_unreachable_server_stops_tuning_before_any_trial(tmp_path, monkeypatch):
    """experiments/tune.py's config in this process: a ConfigError (the command's exit status 2 with the message
    alone on stderr, tests/runs/test_run_cli.py) before the study is opened."""
    from qwkboost.exceptions import ConfigError

    for k in HTTP_DEFAULTS:              # restored afterwards: the command sets them for an http:// store
        monkeypatch.setenv(k, "")
        monkeypatch.delenv(k)
    url = f"http://127.0.0.1:{free_port()}"         # nothing listens there
    with pytest.raises(ConfigError) as exc:
        run_in_process([a.format(tmp_path=tmp_path) for a in TUNE] + [*TINY_OVERRIDES, f"tracking.uri={url}"],
                       tmp_path / "out", config_name="tune")
    assert str(exc.value) == unreachable_message(url)
    assert not list(tmp_path.rglob("result.json")) and not list(tmp_path.rglob("*.csv"))
    assert not (tmp_path / "optuna.db").exists()


@pytest.mark.parametrize("args, script", [
    (["-m", "engine=xgboost,lightgbm"], "run.py"),
    (["-m", "engine=xgboost,lightgbm", *TUNE], "tune.py"),
], ids=["run-multirun", "tune-multirun"])
def test_unreachable_server_stops_multirun_and_tuning_before_training(tmp_path, args, script):
    url = f"http://127.0.0.1:{free_port()}"         # nothing listens there
    t = time.time()
    proc = run_cli(tmp_path, *[a.format(tmp_path=tmp_path) for a in args], *TINY_OVERRIDES, f"tracking.uri={url}",
                   script=script, ok=False, timeout=FAIL_S)
    assert time.time() - t < FAIL_S
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "Launching" not in proc.stdout + proc.stderr   # no job started
    assert proc.stderr.strip().splitlines()[-1] == f"error: {unreachable_message(url)}"
    # nothing trained, nothing written: no results, no Optuna study
    assert not list(tmp_path.rglob("result.json")) and not list(tmp_path.rglob("*.csv"))
    assert not (tmp_path / "optuna.db").exists()


def test_http_retry_defaults_leave_the_users_settings(monkeypatch):
    for k in HTTP_DEFAULTS:        # set, then unset: monkeypatch restores each as it was, also the ones set below
        monkeypatch.setenv(k, "")
        monkeypatch.delenv(k)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "300")
    bound_http_retries("sqlite:////tmp/mlflow.db")          # a local store: MLflow's HTTP client is not used
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ
    bound_http_retries("http://127.0.0.1:5000")
    assert {k: os.environ[k] for k in HTTP_DEFAULTS} == {**HTTP_DEFAULTS, "MLFLOW_HTTP_REQUEST_TIMEOUT": "300"}
    # and MLflow reads them: its default would retry 7 times, with a backoff factor of 2
    from mlflow.environment_variables import MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR, MLFLOW_HTTP_REQUEST_MAX_RETRIES
    assert (MLFLOW_HTTP_REQUEST_MAX_RETRIES.get(), MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR.get()) == (4, 1)


@pytest.mark.slow
def test_server_killed_mid_sweep_fails_the_sweep_and_keeps_what_was_logged(tmp_path, mlflow_server, monkeypatch):
    server = mlflow_server
    name = "server_dies"
    work = tmp_path / "work"
    work.mkdir()
    with open(tmp_path / "sweep.out", "w") as out, open(tmp_path / "sweep.err", "w") as err:
        sweep = subprocess.Popen(cmd("-m", "seed=0,1,2,3", *TINY_OVERRIDES, f"tracking.uri={server.url}",
                                     f"tracking.experiment_name={name}"), cwd=work, env=ENV, stdout=out, stderr=err)
    try:
        # killed once a job has finished and the next one is logging (the sweep's parent is RUNNING as well)
        client = mlflow.MlflowClient(server.url)
        deadline = time.time() + 300
        while True:
            status = [r.info.status for r in runs_of(client, name)]
            if "FINISHED" in status and status.count("RUNNING") >= 2:
                break
            assert sweep.poll() is None, f"the sweep ended ({sweep.returncode}) before a second job started"
            assert time.time() < deadline, "no second job of the sweep started"
            time.sleep(0.1)
        server.kill()
        killed = time.time()
        sweep.wait(timeout=FAIL_S)          # MLflow's default retries would take minutes
        took = time.time() - killed
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    stderr = (tmp_path / "sweep.err").read_text()
    assert sweep.returncode != 0, stderr[-3000:]
    assert took < FAIL_S
    gone = f"the MLflow tracking server at tracking.uri={server.url} went away"
    # the job that was logging stops the sweep with one line naming the server, and the last line says what stays
    assert f"error: {gone} (ConnectionError" in stderr and "Traceback" not in stderr, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {gone}") and f"experiment {name!r}" in last, last

    server.start()                                          # back, on the same store and port
    client = mlflow.MlflowClient(server.url)
    before = {r.info.run_id: r for r in runs_of(client, name)}
    parent = next(r for r in before.values() if r.info.run_name.startswith("sweep"))
    children = [r for r in before.values() if r is not parent]
    finished = [r for r in children if r.info.status == "FINISHED"]
    assert finished and all(r.data.tags["mlflow.parentRunId"] == parent.info.run_id for r in children)
    for r in finished:       # intact: metrics, params, artifacts
        assert 0.3 < r.data.metrics["oof_qwk"] <= 1 and r.data.params["seed"] in {"0", "1", "2", "3"}
        assert "thresholds.json" in {a.path for a in client.list_artifacts(r.info.run_id)}
        assert client.search_logged_models([r.info.experiment_id], filter_string=(   # the fold models, once
            f"source_run_id = '{r.info.run_id}'"))
    # the runs the server's death left unended (the parent, and the job that was logging unless it had just
    # finished) are RUNNING, and belong to the sweep's process, which is gone: no live process could end them
    assert parent.info.status == "RUNNING"
    assert {r.info.status for r in before.values()} <= {"FINISHED", "RUNNING"}
    for r in before.values():
        if r.info.status == "RUNNING":
            assert r.data.tags[PROCESS_TAG].split(":")[1] == str(sweep.pid) and is_alive(r.data.tags[PROCESS_TAG]) \
                is False
    # the next command logging to the experiment (in this process, with qwkboost's HTTP defaults, restored
    # afterwards) ends them KILLED; the finished runs are untouched
    for k in (*HTTP_DEFAULTS, "MLFLOW_TRACKING_URI"):
        monkeypatch.setenv(k, "")
        monkeypatch.delenv(k)
    run_in_process([*TINY_OVERRIDES, f"tracking.uri={server.url}", f"tracking.experiment_name={name}"],
                   work / "next")
    after = {r.info.run_id: r for r in runs_of(client, name)}
    assert len(after) == len(before) + 1
    for run_id, r in before.items():
        a = after[run_id]
        assert a.info.status == ("KILLED" if r.info.status == "RUNNING" else "FINISHED")
        assert (a.data.metrics, a.data.params) == (r.data.metrics, r.data.params)
    assert not [r for r in after.values() if r.info.status == "RUNNING"]
