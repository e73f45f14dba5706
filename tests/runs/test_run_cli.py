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

from conftest import TINY_OVERRIDES

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
    # the run name carries the overrides that tell it from other runs (not where it is stored)
    assert list(got) == ["lightgbm/squared_error " + " ".join(TINY_OVERRIDES)]
    r = next(iter(got.values()))
    assert r.info.status == "FINISHED" and "mlflow.parentRunId" not in r.data.tags
    assert list(tmp_path.glob("outputs/*/*/result.json"))
    exp = mlflow.MlflowClient(mlflow_store).get_experiment_by_name("cli_single")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"   # the UI opens on runs, not traces


@pytest.mark.parametrize("launcher", ["basic", "joblib"])
def test_two_job_multirun_gives_parent_and_children(tmp_path, mlflow_store, launcher):
    name = f"cli_multirun_{launcher}"
    args = ["-m", *TINY_OVERRIDES, "objective=squared_error,extended_qwk", f"tracking.uri={mlflow_store}",
            f"tracking.experiment_name={name}"]
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
    from qwkboost.distributed.parallel import threads_per_job
    expected_threads = str(threads_per_job(2)) if launcher == "joblib" else "None"
    assert {r.data.params["n_jobs"] for r in children} == {expected_threads}   # parallel jobs share the cores
    # the parent holds the sweep's summary table
    client = mlflow.MlflowClient(mlflow_store)
    arts = {a.path for a in client.list_artifacts(parents[0].info.run_id)}
    assert {"sweep_summary.csv", "sweep_summary.md"} <= arts
    summary = pd.read_csv(client.download_artifacts(parents[0].info.run_id, "sweep_summary.csv"))
    assert sorted(summary["run"]) == ["xgboost/extended_qwk", "xgboost/squared_error"]
    assert (summary["status"] == "FINISHED").all() and summary["qwk_thresholds_oof"].between(0.3, 1).all()
    assert "qwk_thresholds_oof" in proc.stdout + proc.stderr
    assert "best_qwk_thresholds_oof" in parents[0].data.metrics


def test_failed_job_marks_the_sweep_failed(tmp_path, mlflow_store):
    proc = run_cli(tmp_path, "-m", *TINY_OVERRIDES, "engine.params.learning_rate=-1,0.3",
                   f"tracking.uri={mlflow_store}", "tracking.experiment_name=cli_fail", ok=False)
    assert "engine.params.learning_rate must be a number > 0; got -1" in proc.stderr
    got = runs(mlflow_store, "cli_fail")
    parent = next(r for n, r in got.items() if n.startswith("sweep"))
    assert parent.info.status == "FAILED"
    assert all(r.info.status != "RUNNING" for r in got.values())


def test_table_one_command(tmp_path, mlflow_store):
    proc = run_cli(tmp_path, "experiment=qwk_table", "table.engines=[xgboost,lightgbm]", *TINY_OVERRIDES,
                   "objective.params.clip=hold", f"tracking.uri={mlflow_store}", "tracking.experiment_name=cli_table")
    assert "objective.params.clip=hold does not apply" in proc.stdout   # squared error rows have no clip
    csv = next(tmp_path.glob("outputs/*/*/qwk_table.csv"))
    table = pd.read_csv(csv)
    # other data and sizes than the article's: its figures are not shown beside ours
    assert list(table.columns) == ["engine", "objective", "qwk_round", "qwk_thresholds", "thresholds", "fit_seconds"]
    assert "article" not in proc.stdout
    assert list(zip(table.engine, table.objective)) == [
        ("xgboost", "squared_error"), ("xgboost", "extended_qwk"),
        ("lightgbm", "squared_error"), ("lightgbm", "extended_qwk")]
    assert table.qwk_thresholds.between(0.3, 1).all()
    md = csv.with_suffix(".md").read_text()
    assert "| engine | objective | qwk_round |" in md and "Bayes ceiling" in md
    got = runs(mlflow_store, "cli_table")
    parent = got.pop("qwk_table")
    assert parent.info.status == "FINISHED" and "bayes_ceiling" in parent.data.metrics
    assert len(got) == 4
    assert all(r.data.tags["mlflow.parentRunId"] == parent.info.run_id and r.info.status == "FINISHED"
               for r in got.values())
    assert got["xgboost/extended_qwk"].data.params["objective.params.clip"] == "hold"
    assert "objective.params.clip" not in got["xgboost/squared_error"].data.params


def test_run_name_cannot_escape_the_output_directory(tmp_path, mlflow_store):
    work = tmp_path / "work"
    work.mkdir()
    run_cli(work, "experiment=qwk_table",
            "table.engines=[xgboost]", "table.objectives=[squared_error]", *TINY_OVERRIDES, "run_name=../../x",
            f"tracking.uri={mlflow_store}", "tracking.experiment_name=cli_escape")
    written = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.csv")}
    assert written and all(p.startswith("work/outputs/") for p in written), written
    assert any(p.endswith("/x.csv") for p in written)


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
    run_cli(tmp_path, *TINY_OVERRIDES, f"tracking.uri={uri}")      # the store is still usable
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
    run_cli(tmp_path, *TINY_OVERRIDES, f"tracking.uri={uri}")
    got = runs(uri, "qwkboost")
    assert got[r.info.run_name].info.status == "KILLED" and len(got) == 2


def test_duplicate_target_column_does_not_leak(tmp_path, mlflow_store):
    """A repeated target column became a feature (pandas renamed it y.1): test QWK 1.0 on random labels."""
    import numpy as np

    rs = np.random.RandomState(0)
    y = rs.randint(0, 4, 300)
    pd.DataFrame({"f1": rs.rand(300), "f2": rs.rand(300), "y": y, "y2": y}).rename(columns={"y2": "y"}) \
        .to_csv(tmp_path / "d.csv", index=False)
    proc = run_cli(tmp_path, "data=csv", f"data.path={tmp_path / 'd.csv'}", "data.target=y", "cv.n_splits=3",
                   f"tracking.uri={mlflow_store}", ok=False)
    assert proc.returncode == 2 and "duplicate column names ['y']" in proc.stderr


@pytest.mark.parametrize("args, message", [
    (["tune.max_retry=-1"], "tune.max_retry must be an integer >= 0; got -1"),
    (["tune.heartbeat_interval=abc"], "tune.heartbeat_interval must be an integer >= 1; got 'abc'"),
    (["+engine.search_space.foo={type:int,low:1,high:3}"], "engine.search_space.foo=1: unknown xgboost parameter"),
    (["engine.search_space.max_depth.low=-5", "engine.search_space.max_depth.high=-4"],
     "engine.search_space.max_depth=-5: xgboost rejected the parameters"),
    (["engine.search_space.learning_rate.log=maybe"], "engine.search_space.learning_rate.log must be true or false"),
])
def test_bad_tuning_input_is_one_line_before_any_trial(tmp_path, mlflow_store, args, message):
    proc = run_cli(tmp_path, *TINY_OVERRIDES, *args, f"tracking.uri={mlflow_store}", "tune.n_trials=1",
                   f"tune.storage=sqlite:///{tmp_path}/optuna.db", script="tune.py", ok=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and message in proc.stderr


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
    (["+engine.params.max_dept=3"], "unknown xgboost parameter(s) ['max_dept'] ('max_dept': did you mean 'max_depth'"),
    (["engine=lightgbm", "+engine.params.num_leavs=8"], "unknown lightgbm parameter(s) ['num_leavs']"),
    (["engine=native", "+engine.params.max_dept=3"], "unknown native-engine parameter 'max_dept'"),
    (["seed=abc"], "seed must be an integer in [0, 2147483644]; got 'abc'"),
    (["engine.params.base_score=high"], "engine.params.base_score must be a number or null; got 'high'"),
    (["data.n_train=0"], "data.n_train must be an integer >= 2; got 0"),
    (["data=chisq"], "objective=extended_qwk needs ordinal labels, but data=chisq is a regression target"),
    (["engine=lightgbm", "data.n_train=50"], "lightgbm can split no feature of these 33 training rows"),
    (["cv.shuffle=no"], "cv.shuffle must be true or false; got 'no'"),
    (["data.n_test=1"], "the 1 test row(s) hold a single class"),
    (["+cv.foo=1"], "cv has no setting(s) ['foo']; its settings are: n_splits, stratified, shuffle"),
    (["+data.n_trian=10"], "data=quartiles has no setting(s) ['n_trian']"),
    (["data.n_classes=2.5"], "data.n_classes must be an integer in [2, 1000]; got 2.5"),
    (["data.seed=-1"], "data.seed must be an integer in [0, 2147483647]; got -1"),
    (["data.n_visible=0"], "data.n_visible must be an integer >= 1; got 0"),
    (["cv.n_splits=1000"], "cv.n_splits=1000 exceeds the rows of the rarest class"),
    (["objective.params.a=1e308"], "a (the target label mean) must lie within the labels' range [0, 3]"),
    (["tracking.experiment_name=''"], "tracking.experiment_name must be a non-empty name"),
    (["tracking.uri=sqlite:///relative/mlflow.db"], "is a path relative to the working directory"),
    (["tracking.uri=mysql://u@127.0.0.1:1/db"], "needs a database driver that is not installed"),
    (["experiment=qwk_table", "table.engines=[]"], "table.engines must be a non-empty list"),
])
def test_bad_input_is_one_clear_line_before_training(tmp_path, mlflow_store, args, message):
    base = [] if "data=chisq" in args else TINY_OVERRIDES
    tracking = [a for a in (f"tracking.uri={mlflow_store}", "tracking.experiment_name=cli_bad")
                if a.split("=")[0] not in {x.split("=")[0] for x in args}]
    proc = run_cli(tmp_path, *base, *args, *tracking, ok=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert message in proc.stderr
    assert not list(tmp_path.glob("outputs/*/*/result.json"))
