"""Tuning that prunes, on a real Optuna storage: a clearly worse trial stops after an early fold and is PRUNED in
Optuna and MLflow; a resumed study goes on with its pruner (another one is refused); the parent run holds the
study's plots, its table of trials and the winner's honest figures."""

import mlflow
import numpy as np
import optuna
import pandas as pd
import pytest

from conftest import TINY_OVERRIDES, run_in_process
from qwkboost.exceptions import ConfigError
from qwkboost.runs.tuning.pruners import fold_score, make_pruner

#: Two learning rates: 0.3 learns in 60 rounds, 0.001 barely moves from the initial score: clearly worse.
SPACE = ["~engine.search_space", "+engine.search_space={learning_rate:{type:categorical,choices:[0.3,0.001]},"
         "max_depth:{type:int,low:2,high:4}}"]


def tune(tmp_path, store, n_trials, *extra, name="pruning"):
    return run_in_process([*TINY_OVERRIDES, "engine=xgboost", "protocol=article", "engine.early_stopping_rounds=60", *SPACE,
                           f"tracking.uri={store}", f"tracking.experiment_name={name}", "tracking.log_models=false",
                           f"tune.storage=sqlite:///{tmp_path}/optuna.db", f"tune.n_trials={n_trials}",
                           "tune.study_name=s", "tune.sampler=random", *extra], tmp_path / "out", config_name="tune")


def test_a_clearly_worse_trial_is_pruned_after_an_early_fold(tmp_path, mlflow_store):
    tune(tmp_path, mlflow_store, 8, "tune.pruner=median", "tune.rerun_repeats=2")
    st = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path}/optuna.db")
    pruned = [t for t in st.trials if t.state == optuna.trial.TrialState.PRUNED]
    done = [t for t in st.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) + len(pruned) == 8, [(t.number, t.state, t.params) for t in st.trials]   # n_trials: finished
    slow = [t.value for t in done if t.params["learning_rate"] == 0.001]
    fast = [t.value for t in done if t.params["learning_rate"] == 0.3]
    assert fast and max(slow, default=0) < min(fast) - 0.2          # the slow rate is clearly worse
    # once the median has 5 trials to stand on, every clearly worse trial is stopped (seeded draws: trial 7 is one)
    late_slow = [t for t in st.trials if t.number >= 5 and t.params["learning_rate"] == 0.001]
    assert late_slow and all(t.state == optuna.trial.TrialState.PRUNED for t in late_slow)
    client = mlflow.MlflowClient(mlflow_store)
    for t in pruned:
        scores = t.user_attrs["fold_scores"]
        assert 2 <= len(scores) < 3                                 # after fold 2 of 3 (median: from fold 2 on)
        assert t.intermediate_values == {i: pytest.approx(np.mean(scores[:i + 1])) for i in range(len(scores))}
        run = client.get_run(t.user_attrs["mlflow_run_id"])
        # it did what it was asked: FINISHED, tagged pruned, its fold scores by step and no score posing as the objective
        assert run.info.status == "FINISHED" and run.data.tags["pruned"] == "true"
        assert run.data.tags["qwkboost.trial_state"] == "PRUNED" and "oof_qwk" not in run.data.metrics
        folds = client.get_metric_history(run.info.run_id, "fold_oof_qwk")
        assert [f.step for f in folds] == list(range(1, len(scores) + 1))       # fold k at step k
        assert [f.value for f in folds] == pytest.approx(scores)
        assert not client.list_artifacts(run.info.run_id, "predictions")
    for t in done:
        assert len(t.user_attrs["fold_scores"]) == 3
    exp = client.get_experiment_by_name("pruning")
    parent = next(r for r in client.search_runs([exp.experiment_id]) if (r.data.tags.get("kind"), r.data.tags.get("optuna.study")) == ("tune", "s"))
    arts = {a.path for a in client.list_artifacts(parent.info.run_id, "study")}
    assert {f"study/{p}.png" for p in ("optimization_history", "param_importances", "parallel_coordinate",
                                       "intermediate_values")} | {"study/trials.csv"} == arts
    table = pd.read_csv(client.download_artifacts(parent.info.run_id, "study/trials.csv", str(tmp_path)))
    assert len(table) == len(st.trials) and set(table["state"]) == {"COMPLETE", "PRUNED"}
    m = parent.data.metrics
    assert m["n_pruned"] == len(pruned) and m["n_complete"] == len(done)
    # the best trial's figures under the names every run uses, so one sorted column ranks the parent beside them
    assert m["oof_qwk"] == pytest.approx(st.best_value) and "test_qwk" in m
    assert m["cut_optimism"] == pytest.approx(m["oof_qwk"] - m["nested_oof_qwk"])
    assert m["selection_optimism"] == pytest.approx(m["oof_qwk"] - m["rerun_oof_qwk"])
    rerun = next(r for r in client.search_runs([exp.experiment_id]) if r.info.run_name.startswith("best (trial"))
    assert rerun.data.params["cv.repeats"] == "2" and rerun.data.params["seed"] == "1000"


def test_a_resumed_study_keeps_its_pruner_and_refuses_another(tmp_path, mlflow_store):
    tune(tmp_path, mlflow_store, 3, "tune.pruner=wilcoxon", name="resume_pruner")
    with pytest.raises(ConfigError, match=r"tune.pruner: 'wilcoxon' -> 'median'"):
        tune(tmp_path, mlflow_store, 4, "tune.pruner=median", name="resume_pruner")
    tune(tmp_path, mlflow_store, 5, "tune.pruner=wilcoxon", name="resume_pruner")
    st = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path}/optuna.db")
    done = [t for t in st.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(st.trials) == 5
    # wilcoxon is given each fold's own score (not a running mean)
    for t in done:
        assert [t.intermediate_values[i] for i in range(3)] == pytest.approx(t.user_attrs["fold_scores"])


def test_fold_scores_are_the_studys_metric_on_the_folds_rows():
    rs = np.random.RandomState(0)
    y = rs.randint(1, 5, 400).astype(float)
    s = y + rs.normal(scale=0.6, size=400)
    classes = np.arange(1.0, 5.0)
    from qwkboost.evaluation.metrics import qwk, rmse

    exact = fold_score("qwk_thresholds_oof", y, s, classes, "exact")
    rounded = fold_score("qwk_round_oof", y, s, classes, "exact")
    assert exact >= rounded and rounded == pytest.approx(qwk((y - 1).astype(int), np.clip(np.rint(s), 1, 4).astype(int) - 1))
    assert fold_score("rmse_oof", y, s, classes, "exact") == pytest.approx(rmse(y, s))
    with pytest.raises(ValueError, match=r"tune.pruner='hyperband' is unknown; choose one of: none, median"):
        make_pruner("hyperband")
