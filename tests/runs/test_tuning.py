"""Optuna tuning: trials as nested MLflow runs, an RDB study that resumes (also after kill -9) without
repeating itself, parallel workers that draw different parameters, and clear errors before any trial."""

import logging
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import optuna
import pytest

from conftest import TINY_OVERRIDES, run_in_process
from qwkboost.exceptions import ConfigError
from qwkboost.runs.tuning import (TrialSeededSampler, best_overrides, check_space, config_fingerprint, study_name,
                             suggest)

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "CI": "true"}


def tune_args(store, study_db, name, n_trials, extra=(), study="s"):
    named = [f"tune.study_name={study}"] if study else []
    return [*TINY_OVERRIDES, f"tracking.uri={store}", f"tracking.experiment_name={name}",
            f"tune.storage=sqlite:///{study_db}", f"tune.n_trials={n_trials}", *named, "tune.heartbeat_interval=1",
            "tune.grace_period=2", *extra]


def tune_cmd(*args, **kwargs):
    """``experiments/tune.py`` as a process: for what needs one (a kill, parallel workers)."""
    return [sys.executable, str(ROOT / "experiments" / "tune.py"), *tune_args(*args, **kwargs)]


def tune_in(tmp_path, *args, **kwargs):
    """``experiments/tune.py`` in this process (:func:`conftest.run_in_process`)."""
    return run_in_process(tune_args(*args, **kwargs), tmp_path / "out", config_name="tune")


#: Trials that count toward tune.n_trials: completed or pruned (the default pruner stops some after a fold)
FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)


def trials(study_db, study="s", state=FINISHED):
    s = optuna.load_study(study_name=study, storage=f"sqlite:///{study_db}")
    states = (state,) if isinstance(state, optuna.trial.TrialState) else state
    return [t for t in s.trials if state is None or t.state in states]


def test_study_runs_resumes_without_repeating_and_nests_runs(tmp_path, mlflow_store):
    db = tmp_path / "optuna.db"
    tune_in(tmp_path, mlflow_store, db, "tune_basic", 2, ["engine=xgboost"])
    assert len(trials(db)) == 2
    tune_in(tmp_path, mlflow_store, db, "tune_basic", 3, ["engine=xgboost"])
    done = trials(db)
    assert len(done) == 3    # resumed: one more trial, not three
    # the resumed invocation drew new parameters; it did not replay trial 0
    assert done[2].params != done[0].params
    client = mlflow.MlflowClient(mlflow_store)
    exp = client.get_experiment_by_name("tune_basic")
    all_runs = client.search_runs([exp.experiment_id])
    parents = [r for r in all_runs if (r.data.tags.get("kind"), r.data.tags.get("optuna.study")) == ("tune", "s")]
    assert len(parents) == 2 and all(p.info.status == "FINISHED" for p in parents)
    children = [r for r in all_runs if r.data.tags.get("kind") == "trial"]
    assert len(children) == 3
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {p.info.run_id for p in parents}
    assert {t.user_attrs["mlflow_run_id"] for t in done} == {r.info.run_id for r in children}
    for t in done:
        run = client.get_run(t.user_attrs["mlflow_run_id"])
        if t.state == optuna.trial.TrialState.PRUNED:       # stopped after a fold: no score poses as the objective
            assert run.info.status == "FINISHED" and run.data.tags["pruned"] == "true"
            assert "oof_qwk" not in run.data.metrics
        else:
            assert run.data.metrics["oof_qwk"] == pytest.approx(t.value)
        assert float(run.data.params["engine.params.max_depth"]) == t.params["max_depth"]
        # the search space is logged with tuning (the parent), not as 30 columns of every trial
        assert not any(k.startswith("engine.search_space") for k in run.data.params)
    assert any(k.startswith("engine.search_space") for k in parents[0].data.params)


def test_best_parameters_print_as_a_command_that_works(tmp_path, mlflow_store, caplog):
    db = tmp_path / "optuna.db"
    with caplog.at_level(logging.INFO, logger="qwkboost"):
        tune_in(tmp_path, mlflow_store, db, "tune_best", 2)
    out = caplog.text
    caplog.clear()
    assert re.search(r"MLflow run: http://127\.0\.0\.1:5000/#/experiments/\d+/runs/\w+\?workflowType", out)
    line = re.search(r"run the best trial with:\n\s+python experiments/run.py (.*)", out).group(1)
    best = optuna.load_study(study_name="s", storage=f"sqlite:///{db}").best_trial
    assert best_overrides(best.params) in line
    # the rerun of a finished study reports its best trial too
    with caplog.at_level(logging.INFO, logger="qwkboost"):
        tune_in(tmp_path, mlflow_store, db, "tune_best", 2)
    assert f"best qwk_thresholds_oof={best.value:.4f} (trial {best.number})" in caplog.text
    run_in_process([*shlex.split(line), "tracking.experiment_name=tune_best_rerun"], tmp_path / "rerun")
    client = mlflow.MlflowClient(mlflow_store)
    exp = client.get_experiment_by_name("tune_best_rerun")
    (r,) = client.search_runs([exp.experiment_id])
    trial_run = client.get_run(best.user_attrs["mlflow_run_id"])
    for k, v in best.params.items():
        assert float(r.data.params[f"engine.params.{k}"]) == pytest.approx(v)
    # same configuration and parameters: the same out-of-fold result as the trial
    assert r.data.metrics["oof_qwk"] == pytest.approx(trial_run.data.metrics["oof_qwk"])


def test_killed_study_resumes_at_once(tmp_path, mlflow_store):
    db = tmp_path / "optuna.db"
    # slow trials so the kill lands inside one
    slow = ["engine.num_boost_round=600", "engine.early_stopping_rounds=600", "data.n_train=3000"]
    cmd = tune_cmd(mlflow_store, db, "tune_kill", 1, slow)
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline:
        time.sleep(0.5)
        try:
            if trials(db, state=optuna.trial.TrialState.RUNNING):
                break
        except Exception:
            pass
    time.sleep(1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert [t.state for t in trials(db, state=None)] == [optuna.trial.TrialState.RUNNING]
    # resume at once, well inside the heartbeat's grace period: the dead process is recognised anyway (the
    # same command, in this process)
    tune_in(tmp_path, mlflow_store, db, "tune_kill", 1, slow)
    s = optuna.load_study(study_name="s", storage=f"sqlite:///{db}")
    states = [t.state for t in s.trials]
    assert states == [optuna.trial.TrialState.FAIL, optuna.trial.TrialState.COMPLETE]
    assert s.trials[1].params == s.trials[0].params          # the killed trial was retried
    client = mlflow.MlflowClient(mlflow_store)
    orphan = client.get_run(s.trials[0].user_attrs["mlflow_run_id"])
    assert orphan.info.status == "KILLED"
    exp = client.get_experiment_by_name("tune_kill")
    parents = client.search_runs([exp.experiment_id], "tags.kind = 'tune' and tags.`optuna.study` = 's'")
    assert sorted(p.info.status for p in parents) == ["FINISHED", "KILLED"]
    assert all(r.info.status != "RUNNING" for r in client.search_runs([exp.experiment_id]))


def test_parallel_workers_draw_different_parameters(tmp_path, mlflow_store):
    db = tmp_path / "optuna.db"     # a new study store, created by two workers at once
    cmds = [tune_cmd(mlflow_store, db, "tune_parallel", 4) for _ in range(2)]
    procs = [subprocess.Popen(c, cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True) for c in cmds]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
    done = trials(db)
    assert len(done) >= 4
    keys = {tuple(sorted(t.params.items())) for t in done}
    assert len(keys) == len(done)      # no two trials share their parameters


def test_sampler_is_reproducible_per_trial_number():
    space = {"x": {"type": "float", "low": 0.0, "high": 1.0}, "d": {"type": "int", "low": 1, "high": 9}}

    def draws(seed):
        study = optuna.create_study(sampler=TrialSeededSampler(seed))
        out = []
        for _ in range(4):
            t = study.ask()
            out.append(suggest(t, space))
            study.tell(t, out[-1]["x"])
        return out

    a, b = draws(0), draws(0)
    assert a == b and len({tuple(d.items()) for d in a}) == 4
    assert draws(1) != a


def test_study_belongs_to_its_configuration(tmp_path, mlflow_store):
    from conftest import TINY
    base = {**TINY, "tune": {"study_name": None, "n_trials": 2, "metric": "qwk_thresholds_oof"}}
    other = {**base, "data": {**TINY["data"], "n_train": 3000}}
    assert study_name(base) != study_name(other)
    assert study_name(base).startswith("xgboost-extended_qwk-quartiles-")
    # what does not change a result does not change the study
    assert study_name({**base, "tune": {**base["tune"], "n_trials": 50}, "n_jobs": 1}) == study_name(base)
    # a named study refuses another configuration, naming what differs
    db = tmp_path / "optuna.db"
    tune_in(tmp_path, mlflow_store, db, "tune_cfg", 1)
    with pytest.raises(ConfigError) as err:
        tune_in(tmp_path, mlflow_store, db, "tune_cfg", 2, ["data.n_train=3000"])
    assert "study 's'" in str(err.value) and \
        "was created with another configuration (data.n_train: 1500 -> 3000)" in str(err.value)
    assert len(trials(db)) == 1


def test_fingerprint_ignores_bookkeeping():
    from conftest import TINY
    fp, h = config_fingerprint({**TINY, "tracking": {"uri": "x"}, "tune": {"storage": "a", "metric": "m"}})
    fp2, h2 = config_fingerprint({**TINY, "tracking": {"uri": "y"}, "tune": {"storage": "b", "metric": "m"}})
    assert h == h2 and "tracking" not in fp


def test_where_trials_run_is_not_part_of_the_study():
    """A study begun on one machine goes on on a cluster and back: ``cluster`` is neither in its name nor in the
    configuration it checks (tests/distributed runs the move itself)."""
    from conftest import TINY
    base = {**TINY, "tune": {"storage": "a", "metric": "m", "study_name": None}}
    none = {**base, "cluster": {"name": "none", "address": None, "n_workers": 2, "parallel": None}}
    local = {**base, "cluster": {"name": "local", "address": None, "n_workers": 2, "parallel": "runs"}}
    assert study_name(none) == study_name(local) == study_name(base)
    assert config_fingerprint(none) == config_fingerprint(local)


def test_without_tune_storage_the_study_goes_in_the_working_directory(tmp_path, mlflow_store, monkeypatch):
    """``optuna-dashboard sqlite:///optuna.db`` (the README's) finds it there, wherever qwkboost is installed."""
    monkeypatch.chdir(tmp_path)
    run_in_process([*TINY_OVERRIDES, f"tracking.uri={mlflow_store}", "tracking.experiment_name=tune_cwd",
                    "tune.n_trials=1", "tune.rerun_repeats=0"], tmp_path / "out", config_name="tune")
    assert optuna.get_all_study_names(f"sqlite:///{tmp_path / 'optuna.db'}")


@pytest.mark.parametrize("space, match", [
    ({"depth": {"type": "integer", "low": 1, "high": 3}}, r"engine.search_space.depth.type='integer'"),
    ({"lr": {"type": "float"}}, "engine.search_space.lr needs low and high"),
    ({"lr": {"type": "float", "low": 0.3, "high": 0.01}}, r"engine.search_space.lr has low=0.3 > high=0.01; swap"),
    ({"lr": {"type": "float", "low": 0.0, "high": 0.3, "log": True}}, "log: true, so low must be > 0"),
    ({"d": {"type": "int", "low": 1.5, "high": 3}}, "must be a whole number"),
    ({"c": {"type": "categorical", "choices": []}}, "non-empty list of choices"),
])
def test_bad_space_is_refused(space, match):
    with pytest.raises(ValueError, match=match):
        check_space(space)


def test_suggest_draws_from_a_good_space():
    trial = optuna.create_study().ask()
    assert set(suggest(trial, {"d": {"type": "int", "low": 1, "high": 3},
                               "c": {"type": "categorical", "choices": ["a", "b"]}})) == {"d", "c"}


@pytest.mark.parametrize("storage, match", [
    ("nosuchdb://x/y", "is not a database URL qwkboost can use"),
    ("not a url", "is not a database URL qwkboost can use"),
])
def test_bad_storage_is_refused_before_any_trial(tmp_path, mlflow_store, storage, match):
    args = tune_args(mlflow_store, tmp_path / "unused.db", "tune_storage", 1)
    args = [a if not a.startswith("tune.storage=") else f"tune.storage={storage}" for a in args]
    with pytest.raises(ConfigError, match=match):
        run_in_process(args, tmp_path / "out", config_name="tune")


@pytest.mark.parametrize("engine,objective", [("native", "multiclass"), ("lightgbm", "ordinal_logit")])
def test_objectives_with_several_outputs_tune(tmp_path, mlflow_store, engine, objective):
    """Tuning drives the class objectives like the scalar ones: trials complete, score the decoded
    out-of-fold QWK, and log the objective's learned state."""
    db = tmp_path / "optuna.db"
    tune_in(tmp_path, mlflow_store, db, f"tune_{objective}", 2, [f"engine={engine}", f"objective={objective}",
                                                                "tune.pruner=none"])
    done = trials(db)
    assert len(done) == 2 and done[0].params != done[1].params
    client = mlflow.MlflowClient(mlflow_store)
    for t in done:
        run = client.get_run(t.user_attrs["mlflow_run_id"])
        assert run.data.params["objective.name"] == objective
        assert run.data.metrics["oof_qwk"] == pytest.approx(t.value)
        assert 0.5 < t.value <= 1.0    # the quartile data is easy; a broken decode would land near 0
        assert "objective_state.json" in {f.path for f in client.list_artifacts(run.info.run_id)}


@pytest.mark.parametrize("extra, match", [
    (["engine=catboost", "objective=soft_qwk"],
     r"^objective=soft_qwk has 4 scores per row, which CatBoost computes one row per Python call"),
    (["engine=catboost", "+engine.params.save_snapshot=true"],
     r"^engine.params \(catboost\): engine parameter save_snapshot=True cannot be set for catboost: it makes CatBoost "
     r"write training files"),
    # a GPU setting of the fixed parameters is theirs, not the first search-space entry's (it blamed
    # engine.search_space.learning_rate)
    (["engine=lightgbm", "+engine.params.device_type=gpu"], r"^engine.params \(lightgbm\): lightgbm rejected"),
    (["engine=catboost", "+engine.params.task_type=GPU"],
     r"^engine.params \(catboost\): engine parameter 'task_type' cannot be set for catboost: CatBoost trains Python "
     r"losses on the CPU only$"),
])
def test_refusals_come_before_the_study_as_in_run(tmp_path, mlflow_store, extra, match):
    """What run.py refuses at once, tune.py refuses with the same line before the study exists: no trial (no
    FAILED one), no traceback."""
    db = tmp_path / "optuna.db"
    with pytest.raises(ConfigError, match=match) as err:
        tune_in(tmp_path, mlflow_store, db, "tune_refused", 2, extra)
    assert "\n" not in str(err.value) and "search_space" not in str(err.value)
    assert not db.exists() or optuna.get_all_study_names(f"sqlite:///{db}") == []
    with pytest.raises(ConfigError) as ran:
        run_in_process([*TINY_OVERRIDES, f"tracking.uri={mlflow_store}", *extra], tmp_path / "run")
    assert str(ran.value) == str(err.value)
