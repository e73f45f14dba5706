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
    # what the budget decided, not how much its 30 s held (a machine twice as busy finishes fewer)
    board = pd.read_csv(out / "leaderboard.csv")
    finished = board[board["status"] == "finished"]
    assert finished["worker"].str.startswith("tcp://127.0.0.1:").all()
    trials = finished[finished["candidate"].str.contains("-trial-")]
    # side by side: the first two candidates were sent at once, one to each worker
    started = board.dropna(subset=["started_at"]).sort_values("started_at")
    first, second = started.iloc[0], started.iloc[1]
    assert first["worker"] != second["worker"] and second["started_at"] < first["started_at"] + first["seconds"]
    assert {first["status"], second["status"]} == {"finished"}
    # tuning starts on the first free worker while the last default candidate still runs on the other (whether a
    # trial's first fold begins before that candidate's last one ends is a race of seconds, so the decision is
    # what is checked), and that candidate still ends finished, beside the trials
    beside = [r.getMessage() for r in caplog.records if "tuning starts on the free worker beside" in r.getMessage()]
    assert len(beside) == 1
    last = beside[0].rsplit("beside ", 1)[1].split(", ")
    defaults = board[~board["candidate"].str.contains("-trial-")].set_index("candidate")
    assert last and (defaults.loc[last, "status"] == "finished").all()
    tried = board.loc[board["candidate"].str.contains("-trial-"), "worker"].dropna()
    assert tried.str.startswith("tcp://127.0.0.1:").all()       # the trials that ran, ran on the workers too
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
    children = {r.data.tags.get("candidate") for r in runs if r.data.tags.get("mlflow.parentRunId") == parent[0].info.run_id}
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
    assert sum(" trial " in r.info.run_name for r in runs) >= 4


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
    from qwkboost.autoblend.candidates import runnable_configs
    from qwkboost.autoblend.ranking import plan
    from qwkboost.autoblend.dask_executor import DaskExecutor
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
    return AutoRun(settings, configs, ds, out, None, "auto", budget=budget, progress=False).run(executor)


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


def _tuning_line(messages, pair="lightgbm-squared_error"):
    """How many trials the pair's study held when tuning began (auto's log line), or None if it did not tune."""
    lines = [m for m in messages if m.startswith(f"auto: tuning {pair} (")]
    return int(lines[-1].split("(")[1].split()[0]) if lines else None


def test_a_directory_moves_between_one_machine_and_a_cluster_keeping_its_candidates_and_study(tmp_path, caplog):
    """Where a candidate runs is not what it is: a directory made on one machine resumes on a LocalCluster (and back)
    with its default candidate reused and its study continued, not run or begun again."""
    import optuna

    out = tmp_path / "out"
    args = ["experiment=auto", "auto.engines=[lightgbm]", "auto.objectives=[squared_error]", *SMALL,
            "tracking.uri=null"]
    db = f"sqlite:///{out}/tuning.db"

    def trials():
        return sum(s.n_trials for s in optuna.get_all_study_summaries(db))

    run_in_process([*args, "auto.time_limit=30", "auto.tune=false"], out)
    first = json.loads((out / "auto.json").read_text())["candidates"]["lightgbm-squared_error"]
    for where, limit in ((["cluster=local"], 20), ([], 10)):        # to a cluster (it tunes), then back
        held = trials()
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="qwkboost.autoblend"):
            run_in_process([*args, f"auto.time_limit={limit}", *where], out)
        assert "auto: lightgbm-squared_error reused" in " ".join(caplog.messages), where
        assert _tuning_line(caplog.messages) in (held, None), where         # its study, as it was left
        assert len(optuna.get_all_study_names(db)) <= 1                     # never a second one beside it
        now = json.loads((out / "auto.json").read_text())["candidates"]["lightgbm-squared_error"]
        assert now == first, where                  # its record as the first run left it: not run again
    assert [s["status"] for s in json.loads((out / "auto.json").read_text())["sessions"]] == ["finished"] * 3


def test_tune_py_goes_on_with_a_study_begun_on_one_machine_on_a_cluster(mlflow_store, tmp_path, caplog):
    """The scale-out guide's promise: ``tune.py`` with ``cluster=local`` continues the study one process began (not a
    new one beside it), and the best trial's command it prints runs on this machine as it is printed."""
    import re
    import shlex

    storage = f"sqlite:///{tmp_path}/optuna.db"
    args = ["engine=lightgbm", f"tune.storage={storage}", "tune.rerun_repeats=0", *TINY_OVERRIDES,
            f"tracking.uri={mlflow_store}", "tracking.experiment_name=tune-switch"]
    run_in_process([*args, "tune.n_trials=2"], tmp_path / "one", config_name="tune")
    with caplog.at_level(logging.INFO, logger="qwkboost"):
        study = run_in_process([*args, "tune.n_trials=4", "cluster=local"], tmp_path / "two", config_name="tune")
    assert optuna.get_all_study_names(storage) == [study.study_name]
    assert len([t for t in study.trials if t.state.is_finished()]) >= 4
    line = re.search(r"run the best trial with:\n\s+python experiments/run.py (.*)", caplog.text).group(1)
    assert "cluster" not in line
    run_in_process([*shlex.split(line), "tracking.uri=null"], tmp_path / "best")
    assert (tmp_path / "best" / "submission.csv").exists()


def test_a_worker_lost_under_a_rows_job_loses_only_that_candidate(tmp_path, caplog):
    """``cluster.parallel=rows``: a worker killed while XGBoost's folds train across the workers. That candidate comes
    back lost (and runs again once if it still fits, on the worker the nanny starts in its place); the other
    candidate finishes and the blend of what finished is written."""
    import threading
    import time

    from qwkboost.distributed.connection import ClusterSpec, connect
    from qwkboost.runs.experiment import load_dataset

    ds = load_dataset({**TINY["data"], "n_train": 30000}, 0)        # a fold takes seconds
    killed, done = [], threading.Event()
    with connect(ClusterSpec(n_workers=2, threads_per_worker=1)) as client:
        def executing(dask_worker):
            return [str(ts.key) for ts in dask_worker.state.executing]

        def kill_once():
            while not done.is_set() and not killed:
                for w, keys in client.run(executing).items():
                    if any(k.startswith("fn-") for k in keys):      # xgboost.dask's training task on each worker
                        time.sleep(0.3)
                        os.kill(client.run(os.getpid, workers=[w])[w], signal.SIGKILL)
                        killed.append(w)
                        return
                time.sleep(0.05)
        watcher = threading.Thread(target=kill_once, daemon=True)
        watcher.start()
        try:
            with caplog.at_level(logging.INFO, logger="qwkboost.autoblend"):
                result = _budget_on(client, ds, tmp_path / "out", 90, ["lightgbm", "xgboost"], ["squared_error"],
                                    False, parallel="rows")
        finally:
            done.set()
            watcher.join(timeout=10)
    assert killed
    board = result.leaderboard.set_index("candidate")
    assert board.loc["lightgbm-squared_error", "status"] == "finished"
    # run again on the workers left (or, on a slow machine, out of time for it)
    assert board.loc["xgboost-squared_error", "status"] in ("finished", "lost", "stopped", "left out")
    assert any(m.startswith("auto: xgboost-squared_error lost its Dask worker") for m in caplog.messages)
    assert (tmp_path / "out" / "submission.csv").exists() and (tmp_path / "out" / "leaderboard.csv").exists()


@pytest.mark.parametrize("limit, words", [
    ("200MB", r"cluster.memory_limit=200MB leaves each Dask worker 153 MiB before Dask pauses it \(at 80%\), and no "
              r"candidate fits: the least, .*, needs about .* MiB .*; give cluster.memory_limit=1GiB or more"),
    ("lots", r"cluster.memory_limit='lots' is not a size Dask can read"),
])
def test_a_memory_limit_no_candidate_fits_in_is_refused_before_the_cluster_starts(tmp_path, limit, words):
    with pytest.raises(ConfigError, match=words) as err:
        run_in_process(["experiment=auto", "cluster=local", f"cluster.memory_limit={limit}", "auto.time_limit=30",
                        *TINY_OVERRIDES, "tracking.uri=null"], tmp_path / "out")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "out" / "candidates").exists()


def test_a_script_that_starts_a_local_cluster_outside_its_main_guard_works(tmp_path):
    """Dask starts a LocalCluster's workers with multiprocessing's spawn, which imports the main script again in each:
    a top-level ``qb.auto(..., cluster="local")`` without ``if __name__ == "__main__":`` started a cluster in every
    worker and ended in some 500 lines and "Nanny failed to start". Its workers now start without importing the
    script, as from a notebook, and the budget runs."""
    import subprocess
    import sys

    script = tmp_path / "mine.py"
    script.write_text("import numpy as np\nimport pandas as pd\nimport qwkboost as qb\n"
                      "X = pd.DataFrame(np.random.default_rng(0).normal(size=(400, 3)), columns=list('abc'))\n"
                      "y = pd.Series(np.digitize(X['a'] + X['b'], [-1, 0, 1]))\n"
                      "r = qb.auto(X, y, X, time_limit=60, engines=['lightgbm'], objectives=['squared_error'], "
                      "tune=False, n_splits=3, cluster='local', output_dir='out', progress=False)\n"
                      "print(r.leaderboard['worker'].iloc[0])\n")
    p = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip().startswith("tcp://127.0.0.1:")          # it ran on a worker
    assert "Traceback" not in p.stderr and "Nanny" not in p.stderr
    assert (tmp_path / "out" / "submission.csv").exists()


def test_tune_on_a_cluster_goes_on_when_a_worker_dies_as_the_trials_are_sent(mlflow_store, tmp_path, caplog):
    """A worker that dies while the study's objective is sent to it (it ends its process as it receives it: the
    ``CommClosedError`` a user met when a worker was killed as the trials started) is left out, the objective is
    sent again to the workers left, and the study reaches its total."""
    from dask_processes import DiesOnArrival
    from qwkboost.distributed.connection import ClusterSpec
    from qwkboost.runs.tuning.on_dask import optimize_on_cluster

    mlflow.set_tracking_uri(mlflow_store)
    marker = tmp_path / "the first to take this dies"
    marker.touch()
    url = f"sqlite:///{tmp_path}/optuna.db"
    optuna.create_study(study_name="s", storage=url, direction="maximize")
    finished = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    with caplog.at_level(logging.INFO, logger="qwkboost"):
        optimize_on_cluster(ClusterSpec(n_workers=2), DiesOnArrival(str(marker)), url, "s", {"sampler": "random"},
                            4, 0, finished)
    assert not marker.exists()                  # a worker took it, and died
    assert any(m.startswith("a Dask worker was lost as the trials were sent (CommClosedError)")
               for m in caplog.messages), caplog.messages
    study = optuna.load_study(study_name="s", storage=url)
    assert len([t for t in study.trials if t.state in finished]) >= 4
