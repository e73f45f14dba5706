"""``experiment=auto`` and ``tune.py`` on a Dask cluster: candidates and trials side by side, one per worker, with
the same directory, leaderboard, study and MLflow runs as on one machine; the refusals in one line."""

import json
import logging
import os
import signal

import mlflow
import optuna
import pandas as pd
import pytest

from conftest import TINY, TINY_OVERRIDES, run_in_process
from qwkboost.exceptions import ConfigError

SMALL = ["data.n_train=1500", "data.n_test=800", "cv.n_splits=3"]


def _runs(uri, name):
    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name(name)
    return client.search_runs([exp.experiment_id])


def test_auto_on_a_local_cluster_runs_candidates_and_trials_side_by_side(mlflow_store, tmp_path, caplog):
    out = tmp_path / "out"
    with caplog.at_level(logging.INFO, logger="qwkboost.autoblend"):
        run_in_process(["experiment=auto", "cluster=local", "auto.time_limit=30",
                        "auto.engines=[lightgbm,xgboost]", "auto.objectives=[squared_error,extended_qwk]",
                        *SMALL, f"tracking.uri={mlflow_store}", "tracking.experiment_name=auto-cluster"], out)
    board = pd.read_csv(out / "leaderboard.csv")
    finished = board[board["status"] == "finished"]
    assert len(finished) >= 4 and finished["worker"].str.startswith("tcp://127.0.0.1:").all()
    assert finished["worker"].nunique() == 2                    # both workers ran candidates
    trials = finished[finished["candidate"].str.contains("-trial-")]
    assert len(trials) >= 2                                     # the tuning ran on the workers too
    # side by side: some candidate started before another one had ended
    spans = sorted((r.started_at, r.started_at + r.seconds) for r in finished.itertuples())
    assert any(b[0] < a[1] - 1.0 for a, b in zip(spans, spans[1:]))
    # tuning starts on the first free worker while the last default candidate still runs on the other (whether a
    # trial's first fold begins before that candidate's last one ends is a race of seconds, so the decision is
    # what is checked), and that candidate still ends finished, beside the trials
    beside = [r.getMessage() for r in caplog.records if "tuning starts on the free worker beside" in r.getMessage()]
    assert len(beside) == 1
    last = beside[0].rsplit("beside ", 1)[1].split(", ")
    defaults = finished[~finished["candidate"].str.contains("-trial-")]
    assert last and set(last) <= set(defaults["candidate"])
    # the candidates' files, in the same directory as on one machine
    for d in finished["candidate"]:
        assert (out / "candidates" / d / "oof.parquet").exists()
    assert (out / "submission.csv").exists()
    session = json.loads((out / "auto.json").read_text())["sessions"][-1]
    assert session["status"] == "finished" and session["seconds"] <= 30 * 1.1
    # the study's trials reported their folds from the workers (the pruner's intermediate values)
    db = f"sqlite:///{out}/tuning.db"           # a study per tuned pair; the first may hold only a stopped trial
    done = [t for name in optuna.get_all_study_names(db) for t in optuna.load_study(study_name=name, storage=db).trials
            if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == len(trials) and all(len(t.intermediate_values) == 3 for t in done)
    # MLflow: one parent, each candidate a child, none left RUNNING
    runs = _runs(mlflow_store, "auto-cluster")
    parent = [r for r in runs if r.data.tags.get("qwkboost.auto") == "parent"]
    assert len(parent) == 1 and all(r.info.status != "RUNNING" for r in runs)
    children = {r.info.run_name for r in runs if r.data.tags.get("mlflow.parentRunId") == parent[0].info.run_id}
    assert set(finished["candidate"]) <= children


def test_the_same_directory_again_reuses_what_the_cluster_finished(tmp_path):
    out = tmp_path / "out"
    args = ["experiment=auto", "cluster=local", "auto.time_limit=30", "auto.engines=[xgboost]",
            "auto.objectives=[squared_error,extended_qwk]", "auto.tune=false", *SMALL, "tracking.uri=null"]
    run_in_process(args, out)
    a = pd.read_csv(out / "leaderboard.csv").set_index("candidate")
    run_in_process(args, out)
    b = pd.read_csv(out / "leaderboard.csv").set_index("candidate")
    done = a.index[a["status"] == "finished"]
    assert len(done) == 2
    assert (b.loc[done, "status"] == "finished").all()
    assert (b.loc[done, "nested_oof_qwk"] == a.loc[done, "nested_oof_qwk"]).all()
    assert (b.loc[done, "worker"] == a.loc[done, "worker"]).all()       # reused where they ran, not run again
    sessions = json.loads((out / "auto.json").read_text())["sessions"]
    assert len(sessions) == 2 and sessions[-1]["seconds"] < 30


@pytest.mark.parametrize("overrides, words", [
    (["cluster=local", "cluster.parallel=runs", "engine=xgboost"], "a single run trains its folds' rows"),
    (["cluster=local", "cluster.parallel=sideways"], "cluster.parallel must be runs"),
])
def test_what_a_cluster_cannot_do_is_refused_in_one_line(tmp_path, overrides, words):
    with pytest.raises(ConfigError, match=words) as err:
        run_in_process([*overrides, *TINY_OVERRIDES, "tracking.uri=null"], tmp_path / "out")
    assert "\n" not in str(err.value)


def test_rows_on_request_train_each_candidate_s_folds_across_the_workers_where_its_engine_can(tmp_path):
    out = tmp_path / "out"
    run_in_process(["experiment=auto", "cluster=local", "cluster.parallel=rows", "auto.time_limit=40",
                    "auto.engines=[lightgbm,xgboost]", "auto.objectives=[squared_error]", "auto.tune=false", *SMALL,
                    "tracking.uri=null"], out)
    board = pd.read_csv(out / "leaderboard.csv").set_index("candidate")
    assert (board["status"] == "finished").all()
    assert board.loc["xgboost-squared_error", "worker"] == "rows across 2 workers"
    assert board.loc["lightgbm-squared_error", "worker"].startswith("tcp://127.0.0.1:")     # no Dask early stopping
    assert "whole on one worker: lightgbm.dask" in board.loc["lightgbm-squared_error", "why"]


def test_tune_on_a_local_cluster_runs_trials_on_both_workers(mlflow_store, tmp_path):
    storage = f"sqlite:///{tmp_path}/optuna.db"
    study = run_in_process(["engine=lightgbm", "cluster=local", "tune.n_trials=4", f"tune.storage={storage}",
                            "tune.rerun_repeats=0", *TINY_OVERRIDES, f"tracking.uri={mlflow_store}",
                            "tracking.experiment_name=tune-cluster"], tmp_path / "out", config_name="tune")
    finished = [t for t in study.trials if t.state in (optuna.trial.TrialState.COMPLETE,
                                                       optuna.trial.TrialState.PRUNED)]
    assert len(finished) >= 4
    processes = {t.user_attrs["qwkboost.process"].split(":")[1] for t in finished}
    assert len(processes) == 2                          # two worker processes, neither this one
    import os

    assert str(os.getpid()) not in processes
    assert len({tuple(sorted(t.params.items())) for t in finished}) == len(finished)     # no repeated trial
    runs = _runs(mlflow_store, "tune-cluster")
    assert all(r.info.status != "RUNNING" for r in runs)
    assert sum(r.info.run_name.startswith("trial ") for r in runs) >= 4


def test_a_worker_killed_mid_candidate_loses_only_that_candidate_which_runs_again(tmp_path, caplog):
    """From Python (``qb.auto(..., cluster=client)``): the worker running a candidate dies; the candidate comes back
    lost, runs again on a worker (the nanny restarts the dead one), and the budget ends with every candidate."""
    import threading
    import time

    import qwkboost as qb
    from conftest import quartile_frames
    from qwkboost.distributed.connection import ClusterSpec, connect

    X, y, X_test, _ = quartile_frames(0, n_train=30000)     # a candidate takes seconds
    with connect(ClusterSpec(n_workers=2, threads_per_worker=1)) as client:
        killed = []

        def executing(dask_worker):
            return [str(ts.key) for ts in dask_worker.state.executing]

        def kill_once():
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not killed:
                for w, keys in client.run(executing).items():
                    if any("xgboost-squared_error-" in k for k in keys):
                        time.sleep(0.5)         # mid-task
                        pid = client.run(os.getpid, workers=[w])[w]
                        os.kill(pid, signal.SIGKILL)
                        killed.append(w)
                        return
                time.sleep(0.1)
        watcher = threading.Thread(target=kill_once, daemon=True)
        watcher.start()
        with caplog.at_level(logging.WARNING, logger="qwkboost.autoblend"):
            result = qb.auto(X, y, X_test, time_limit=90, engines=["lightgbm", "xgboost"],
                             objectives=["squared_error", "extended_qwk"], tune=False, n_splits=3,
                             output_dir=tmp_path / "out", cluster=client, progress=False)
        watcher.join(timeout=5)
    assert killed
    board = result.leaderboard.set_index("candidate")
    assert board.loc["xgboost-squared_error", "status"] == "finished"
    assert (board["status"] == "finished").sum() == 4
    lines = [r.getMessage() for r in caplog.records]
    assert any("xgboost-squared_error lost its Dask worker" in m and "it runs again" in m for m in lines), lines


def _budget_on(client, ds, out, seconds, engines, objectives, tune, shape=None, parallel=None):
    """An auto budget on ``client``'s workers built as ``qb.auto`` builds it, with its executor handed back so a
    test can shape the cluster it sees (``shape(executor)``)."""
    from qwkboost.autoblend.api import candidate_config
    from qwkboost.autoblend.budget import Budget
    from qwkboost.autoblend.candidates import plan, runnable_configs
    from qwkboost.autoblend.cluster import DaskExecutor
    from qwkboost.autoblend.driver import AutoRun
    from qwkboost.autoblend.settings import AutoSettings

    settings = AutoSettings.from_config({"time_limit": seconds, "engines": engines, "objectives": objectives,
                                         "tune": tune})
    budget = Budget(seconds)
    configs = runnable_configs({c.pair: candidate_config(c.engine, c.objective, n_splits=3, data=TINY["data"])
                                for c in plan(engines, objectives)}, ds)
    executor = DaskExecutor(client, ds, budget, out, parallel=parallel)
    if shape is not None:
        shape(executor)
    return AutoRun(settings, configs, ds, out, None, "auto", budget=budget, progress=False, executor=executor).run()


def test_data_too_large_for_a_worker_trains_across_the_rows_where_it_can_and_is_left_out_saying_why(tmp_path,
                                                                                                    caplog):
    from qwkboost.autoblend.placement import data_bytes, need
    from qwkboost.distributed.connection import ClusterSpec, connect
    from qwkboost.runs.experiment import load_dataset

    ds = load_dataset(TINY["data"], 0)

    def small_workers(executor):    # as on workers that hold less than any engine's copies of this data
        executor.worker_memory = min(need(e, data_bytes(ds)) for e in ("lightgbm", "xgboost")) - 1

    with connect(ClusterSpec(n_workers=2, threads_per_worker=1)) as client, \
            caplog.at_level(logging.INFO, logger="qwkboost.autoblend"):
        result = _budget_on(client, ds, tmp_path / "out", 40, ["lightgbm", "xgboost"], ["squared_error"], False,
                            small_workers)
    board = result.leaderboard.set_index("candidate")
    assert board.loc["xgboost-squared_error", "status"] == "finished"
    assert board.loc["xgboost-squared_error", "worker"] == "rows across 2 workers"
    assert "does not fit one worker" in board.loc["xgboost-squared_error", "why"]
    assert board.loc["lightgbm-squared_error", "status"] == "left out"
    assert "cannot train across workers' rows" in board.loc["lightgbm-squared_error", "note"]
    lines = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("auto: lightgbm-squared_error left out: its data does not fit one worker") for m in lines)


def test_workers_that_see_no_file_prune_trials_on_the_study_kept_by_the_scheduler(client, tmp_path):
    """Workers on other machines do not see ``tuning.db``: the trials report their folds to a copy of the study in
    the scheduler's memory, where the pruner runs, and each trial ends up in ``tuning.db`` as on one machine."""
    from qwkboost.runs.experiment import load_dataset

    ds = load_dataset(TINY["data"], 0)

    def elsewhere(executor):
        executor.pool.shared = False

    out = tmp_path / "out"
    result = _budget_on(client, ds, out, 25, ["lightgbm"], ["squared_error"], True, elsewhere)
    board = result.leaderboard
    trials = board[board["candidate"].str.contains("-trial-") & board["status"].isin(["finished", "pruned"])]
    assert len(trials) >= 3 and trials["worker"].str.startswith("tcp://").all()
    study = optuna.load_study(study_name=optuna.get_all_study_names(f"sqlite:///{out}/tuning.db")[0],
                              storage=f"sqlite:///{out}/tuning.db")
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(study.trials) >= len(trials) and done
    assert all(len(t.intermediate_values) == 3 for t in done)     # reported from the workers, fold by fold
    assert {t.number for t in study.trials} == set(range(len(study.trials)))
