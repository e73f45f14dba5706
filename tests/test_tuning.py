"""Optuna tuning: trials as nested MLflow runs, an RDB study that resumes, also after a kill."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import optuna
import pytest

from conftest import TINY_OVERRIDES
from qwkboost.tuning import suggest

ROOT = Path(__file__).resolve().parents[1]


def tune_cmd(store, study_db, name, n_trials, extra=()):
    return [sys.executable, str(ROOT / "experiments" / "tune.py"), *TINY_OVERRIDES, f"tracking.uri={store}",
            f"tracking.experiment_name={name}", f"tune.storage=sqlite:///{study_db}", f"tune.n_trials={n_trials}",
            "tune.study_name=s", "tune.heartbeat_interval=1", "tune.grace_period=2", *extra]


def complete(study_db):
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{study_db}")
    return [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]


def test_study_runs_resumes_and_nests_runs(tmp_path, mlflow_store):
    env = {**os.environ, "CI": "true"}
    db = tmp_path / "optuna.db"
    subprocess.run(tune_cmd(mlflow_store, db, "tune_basic", 2), cwd=tmp_path, check=True, env=env,
                   capture_output=True, timeout=600)
    assert len(complete(db)) == 2
    subprocess.run(tune_cmd(mlflow_store, db, "tune_basic", 3), cwd=tmp_path, check=True, env=env,
                   capture_output=True, timeout=600)
    trials = complete(db)
    assert len(trials) == 3    # resumed: one more trial, not three
    client = mlflow.MlflowClient(mlflow_store)
    exp = client.get_experiment_by_name("tune_basic")
    all_runs = client.search_runs([exp.experiment_id])
    parents = [r for r in all_runs if r.info.run_name == "tune s"]
    assert len(parents) == 2 and all(p.info.status == "FINISHED" for p in parents)
    children = [r for r in all_runs if r.info.run_name.startswith("trial")]
    assert len(children) == 3
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {p.info.run_id for p in parents}
    assert {t.user_attrs["mlflow_run_id"] for t in trials} == {r.info.run_id for r in children}
    for t in trials:
        run = client.get_run(t.user_attrs["mlflow_run_id"])
        assert run.data.metrics["qwk_thresholds_oof"] == pytest.approx(t.value)
        assert float(run.data.params["engine.params.max_depth"]) == t.params["max_depth"]


def test_killed_study_resumes(tmp_path, mlflow_store):
    env = {**os.environ, "CI": "true"}
    db = tmp_path / "optuna.db"
    # slow trials so the kill lands inside one
    slow = ["engine.num_boost_round=3000", "engine.early_stopping_rounds=3000", "data.n_train=4000"]
    proc = subprocess.Popen(tune_cmd(mlflow_store, db, "tune_kill", 2, slow), cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline:
        time.sleep(1)
        if db.exists():
            try:
                s = optuna.load_study(study_name="s", storage=f"sqlite:///{db}")
                if any(t.state == optuna.trial.TrialState.RUNNING for t in s.trials):
                    break
            except Exception:
                pass
    time.sleep(3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    s = optuna.load_study(study_name="s", storage=f"sqlite:///{db}")
    assert [t.state for t in s.trials] == [optuna.trial.TrialState.RUNNING]
    time.sleep(3)   # past the grace period
    subprocess.run(tune_cmd(mlflow_store, db, "tune_kill", 1), cwd=tmp_path, check=True, env=env,
                   capture_output=True, timeout=600)
    s = optuna.load_study(study_name="s", storage=f"sqlite:///{db}")
    states = [t.state for t in s.trials]
    assert states[0] == optuna.trial.TrialState.FAIL
    assert optuna.trial.TrialState.COMPLETE in states
    client = mlflow.MlflowClient(mlflow_store)
    orphan = client.get_run(s.trials[0].user_attrs["mlflow_run_id"])
    assert orphan.info.status == "KILLED"


def test_suggest_rejects_bad_space():
    study = optuna.create_study()
    trial = study.ask()
    with pytest.raises(ValueError, match=r"engine.search_space.depth.type='integer'"):
        suggest(trial, {"depth": {"type": "integer", "low": 1, "high": 3}})
    with pytest.raises(ValueError, match="engine.search_space.lr needs low and high"):
        suggest(trial, {"lr": {"type": "float"}})
    assert set(suggest(trial, {"d": {"type": "int", "low": 1, "high": 3},
                               "c": {"type": "categorical", "choices": ["a", "b"]}})) == {"d", "c"}
