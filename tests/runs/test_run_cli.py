"""experiments/run.py as users type it: a single run, 2-job multiruns (sequential and joblib), the table,
and everything that can happen to them: commands started together on a new store, Ctrl-C, SIGTERM,
kill -9, a crafted run name, an unreachable tracking server, bad input."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pandas as pd
import pytest

from conftest import TINY_OVERRIDES, run_in_process

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "CI": "true"}
SLOW = ["data.n_train=3000", "engine.num_boost_round=3000", "engine.early_stopping_rounds=3000"]


def cmd(*args, script="run.py"):
    return [sys.executable, str(ROOT / "experiments" / script), *args]


def run_cli(tmp_path, *args, script="run.py", ok=True):
    proc = subprocess.run(cmd(*args, script=script), cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env=ENV)
    if ok:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def runs(uri, name):
    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name(name)
    return {r.info.run_name: r for r in client.search_runs([exp.experiment_id])}


def test_single_run(tmp_path, mlflow_store):
    run_cli(tmp_path, *TINY_OVERRIDES, "engine=lightgbm", "objective=squared_error",
            f"tracking.uri={mlflow_store}", "tracking.experiment_name=cli_single")
    got = runs(mlflow_store, "cli_single")
    # the run name carries the overrides that tell it from other runs (not where it is stored, nor what it logs)
    assert list(got) == ["lightgbm/squared_error " + " ".join(o for o in TINY_OVERRIDES if not o.startswith("tracking."))]
    r = next(iter(got.values()))
    assert r.info.status == "FINISHED" and "mlflow.parentRunId" not in r.data.tags
    assert list(tmp_path.glob("outputs/*/*/result.json"))
    exp = mlflow.MlflowClient(mlflow_store).get_experiment_by_name("cli_single")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"   # the UI opens on runs, not traces


@pytest.mark.parametrize("launcher", ["basic", "joblib"])
def test_two_job_multirun_gives_parent_and_children(tmp_path, mlflow_store, launcher):
    name = f"cli_multirun_{launcher}"
    args = ["-m", *TINY_OVERRIDES, "engine=xgboost", "objective=squared_error,extended_qwk",
            f"tracking.uri={mlflow_store}", f"tracking.experiment_name={name}"]
    if launcher == "joblib":
        args += ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    proc = run_cli(tmp_path, *args)
    got = runs(mlflow_store, name)
    parents = [r for n, r in got.items() if n.startswith("sweep")]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    children = [r for n, r in got.items() if not n.startswith("sweep")]
    # only what varies in the sweep goes into the names
    assert sorted(r.info.run_name for r in children) == ["xgboost/extended_qwk", "xgboost/squared_error"]
    for r in children:
        assert r.info.status == "FINISHED"
        assert r.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
    from qwkboost.engines.threads import threads_per_job
    expected_threads = str(threads_per_job(2)) if launcher == "joblib" else "None"
    assert {r.data.params["n_jobs"] for r in children} == {expected_threads}   # parallel jobs share the cores
    # the parent holds the sweep's summary table
    client = mlflow.MlflowClient(mlflow_store)
    arts = {a.path for a in client.list_artifacts(parents[0].info.run_id)}
    assert {"sweep_summary.csv", "sweep_summary.md"} <= arts
    summary = pd.read_csv(client.download_artifacts(parents[0].info.run_id, "sweep_summary.csv"))
    assert sorted(summary["run"]) == ["xgboost/extended_qwk", "xgboost/squared_error"]
    assert (summary["status"] == "FINISHED").all() and summary["oof_qwk"].between(0.3, 1).all()
    assert "qwk_thresholds_oof" in proc.stdout + proc.stderr
    assert parents[0].data.metrics["oof_qwk"] == pytest.approx(summary["oof_qwk"].max())      # the best job's, by name
    assert parents[0].data.tags["kind"] == "sweep" and parents[0].info.run_name.startswith("sweep ")


BROKEN = '''
from qwkboost.objectives import SquaredError


class Broken(SquaredError):
    """Fails while training on an odd number of rows (data.n_train=1501): no check before training can see it."""

    def grad_hess(self, y, score, sample_weight=None):
        if len(y) % 2 == 1 and score.std() > 0:
            raise RuntimeError("the objective broke while training")
        return super().grad_hess(y, score, sample_weight)
'''


def test_failed_job_marks_the_sweep_failed(tmp_path, mlflow_store):
    """A job that fails while training (not bad input) fails its run and the sweep's parent; the other job runs."""
    (tmp_path / "brokenobj.py").write_text(BROKEN)
    env = {**ENV, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run(cmd("-m", *TINY_OVERRIDES, "data.n_train=1501,1500", "objective=custom",
                              "objective._target_=brokenobj.Broken", f"tracking.uri={mlflow_store}",
                              "tracking.experiment_name=cli_fail"), cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, env=env)
    assert "the objective broke while training" in proc.stderr, proc.stderr[-3000:]
    got = runs(mlflow_store, "cli_fail")
    parent = next(r for n, r in got.items() if n.startswith("sweep"))
    assert parent.info.status == "FAILED"
    assert sorted(r.info.status for n, r in got.items() if r is not parent) == ["FAILED", "FINISHED"]


def test_commands_started_together_on_a_new_store(tmp_path):
    """Three commands at once on a store nobody created yet: each would run MLflow's migrations."""
    uri = f"sqlite:///{tmp_path}/fresh/mlflow.db"
    procs = [subprocess.Popen(cmd(*TINY_OVERRIDES, f"seed={i}", f"tracking.uri={uri}"), cwd=tmp_path, env=ENV,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for i in range(3)]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
    got = runs(uri, "qwkboost")
    assert len(got) == 3 and all(r.info.status == "FINISHED" for r in got.values())
    run_in_process([*TINY_OVERRIDES, f"tracking.uri={uri}"], tmp_path / "after")     # the store is still usable
    assert len(runs(uri, "qwkboost")) == 4


def _default_sigint():
    # a command typed at a terminal gets Ctrl-C; a test suite started as a background job (`cmd &` in a
    # non-interactive shell) hands its children SIGINT ignored, and Python keeps it ignored
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_and_wait_running(tmp_path, uri, args, n_running=1, **popen):
    from qwkboost.tracking import prepare_store

    prepare_store(uri)        # created first: this test's polling client must not migrate it alongside the command
    p = subprocess.Popen(cmd(*args, f"tracking.uri={uri}"), cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint, **popen)
    client = mlflow.MlflowClient(uri)
    deadline = time.time() + 300
    while True:
        time.sleep(0.5)
        if p.poll() is not None or time.time() > deadline:
            out, err = p.communicate(timeout=60) if p.poll() is not None else ("", "(still running)")
            raise AssertionError(f"the command never had {n_running} RUNNING run(s) to stop "
                                 f"(exit status {p.returncode}): {err[-2000:]}")
        try:
            exp = client.get_experiment_by_name("qwkboost")
            if exp and len(client.search_runs([exp.experiment_id], "attributes.status = 'RUNNING'")) >= n_running:
                break
        except Exception:       # the store is still being created by the command
            pass
    time.sleep(1.5)
    assert p.poll() is None, "the command ended before it could be stopped"
    return p


@pytest.mark.slow
@pytest.mark.parametrize("how", ["sigterm", "ctrl-c"])
def test_stopped_single_run_is_killed_with_one_line(tmp_path, how):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    p = _start_and_wait_running(tmp_path, uri, SLOW, start_new_session=True)
    if how == "sigterm":
        p.send_signal(signal.SIGTERM)
    else:
        os.killpg(p.pid, signal.SIGINT)         # Ctrl-C reaches the terminal's whole process group
    _, err = p.communicate(timeout=120)
    assert p.returncode == (143 if how == "sigterm" else 130), err[-3000:]
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == ("experiments/run.py: " + ("terminated (SIGTERM)" if how == "sigterm"
                                            else "interrupted (Ctrl-C)") + "; its MLflow runs are marked KILLED")
    (r,) = runs(uri, "qwkboost").values()
    assert r.info.status == "KILLED" and r.info.end_time is not None


@pytest.mark.slow
@pytest.mark.parametrize("how", ["sigterm", "ctrl-c"])
def test_stopped_joblib_multirun_ends_every_run(tmp_path, how):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    args = ["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "objective=squared_error,extended_qwk", *SLOW]
    p = _start_and_wait_running(tmp_path, uri, args, n_running=3, start_new_session=True)
    if how == "sigterm":
        p.send_signal(signal.SIGTERM)
    else:
        os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode in (130, 143), err[-3000:]
    assert "Traceback" not in err and "leaked semaphore" not in err
    got = runs(uri, "qwkboost")
    assert len(got) == 3
    assert {n: r.info.status for n, r in got.items()} == {n: "KILLED" for n in got}


@pytest.mark.slow
def test_run_of_a_killed_process_is_ended_by_the_next_command(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    p = _start_and_wait_running(tmp_path, uri, SLOW)
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=60)
    (r,) = runs(uri, "qwkboost").values()
    assert r.info.status == "RUNNING"          # nothing can end a run from inside kill -9
    run_in_process([*TINY_OVERRIDES, f"tracking.uri={uri}"], tmp_path / "next")     # the next command
    got = runs(uri, "qwkboost")
    assert got[r.info.run_name].info.status == "KILLED" and len(got) == 2


def test_unreachable_tracking_server_fails_fast(tmp_path):
    import socket

    with socket.socket() as s:       # a free port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t = time.time()
    proc = run_cli(tmp_path, *TINY_OVERRIDES, f"tracking.uri=http://127.0.0.1:{port}", ok=False)
    assert time.time() - t < 60
    assert proc.returncode != 0
    assert f"the MLflow tracking server at tracking.uri=http://127.0.0.1:{port} cannot be reached" in proc.stderr
    assert not list(tmp_path.glob("outputs/*/*/result.json"))     # nothing trained


@pytest.mark.parametrize("args, message", [
    (["engine=xgboost", "+engine.params.max_dept=3"],
     "unknown xgboost parameter(s) ['max_dept'] ('max_dept': did you mean 'max_depth'"),
])
def test_bad_input_is_one_clear_line_before_training(tmp_path, mlflow_store, args, message):
    """The process: a ConfigError is exit code 2, the message alone on stderr, nothing trained. (Every refusal's
    message, and that it is a ConfigError, is checked in-process in test_run_command.py.)"""
    proc = run_cli(tmp_path, *TINY_OVERRIDES, *args, f"tracking.uri={mlflow_store}",
                   "tracking.experiment_name=cli_bad", ok=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert message in proc.stderr
    assert not list(tmp_path.glob("outputs/*/*/result.json"))


@pytest.mark.parametrize("args, message", [
    (["tune.max_retry=-1"], "tune.max_retry must be an integer >= 0; got -1"),
])
def test_bad_tuning_input_is_one_line_before_any_trial(tmp_path, mlflow_store, args, message):
    """The process: exit code 2 and one line. (Every refusal's message, and that it is a ConfigError, is checked
    in-process in test_run_command.py.)"""
    proc = run_cli(tmp_path, *TINY_OVERRIDES, *args, f"tracking.uri={mlflow_store}", "tune.n_trials=1",
                   f"tune.storage=sqlite:///{tmp_path}/optuna.db", script="tune.py", ok=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and message in proc.stderr


@pytest.mark.parametrize("launcher", ["basic", "joblib"])
def test_bad_input_in_a_multirun_is_the_single_runs_one_line_once(tmp_path, mlflow_store, launcher):
    """A sweep checks every job before the first starts: bad input is the single run's line, once, exit code 2,
    no traceback, no job run and no MLflow run left behind."""
    bad = ["data=csv", f"data.path={tmp_path}/missing.csv", "data.target=score"]
    single = run_cli(tmp_path, *bad, f"tracking.uri={mlflow_store}", ok=False)
    line = [x for x in single.stderr.splitlines() if x.startswith("error:")]
    assert line == [f"error: data.path='{tmp_path}/missing.csv' does not exist"]
    extra = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"] if launcher == "joblib" else []
    proc = run_cli(tmp_path, "-m", "engine=lightgbm,xgboost", "objective=squared_error,extended_qwk", *bad, *extra,
                   f"tracking.uri={mlflow_store}", "tracking.experiment_name=cli_bad_sweep", ok=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert [x for x in proc.stderr.splitlines() if x.startswith("error:")] == line
    assert "Traceback" not in proc.stderr and "Error executing job" not in proc.stderr
    assert not list(tmp_path.glob("multirun/*/*/*/result.json"))
    exp = mlflow.MlflowClient(mlflow_store).get_experiment_by_name("cli_bad_sweep")
    assert exp is None or not mlflow.MlflowClient(mlflow_store).search_runs([exp.experiment_id])


def test_a_sweep_names_the_job_whose_setting_is_bad(tmp_path, mlflow_store):
    """A problem of one job only (too many folds for the rarest class) names that job; nothing runs."""
    proc = run_cli(tmp_path, "-m", *TINY_OVERRIDES, "data.n_train=200", "cv.n_splits=3,80",
                   f"tracking.uri={mlflow_store}", "tracking.experiment_name=cli_bad_job", ok=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: cv.n_splits=80 exceeds the smallest class count")
    assert errors[0].endswith("(job 1: cv.n_splits=80)") and "Traceback" not in proc.stderr
    assert not list(tmp_path.glob("multirun/*/*/*/result.json"))
