"""The cluster path as a user meets it: ``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1, the
commands as processes. Ctrl-C on ``experiment=auto`` stops the candidates running on the workers (every MLflow run
KILLED, the workers free again); ``tune.py`` shares a study in PostgreSQL across the workers and goes on to its
total when one worker is killed mid-trial; workers that do not see this machine's files (as on other machines)
tune with no database server and send auto's files back."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import optuna
import pytest

from dask_processes import can_hide, running_dask

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "CI": "true"}


def _default_sigint():
    # a suite started in the background hands its children SIGINT ignored; a terminal does not
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait(p, until, what, timeout=240):
    deadline = time.time() + timeout
    while not until():
        assert p.poll() is None, p.communicate(timeout=60)[1][-3000:]
        assert time.time() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.5)


@pytest.mark.slow
def test_ctrl_c_stops_the_candidates_running_on_the_workers(tmp_path):
    from qwkboost.tracking import prepare_store

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    prepare_store(uri)
    out = tmp_path / "out"
    with running_dask(tmp_path / "dask") as cluster:
        p = subprocess.Popen(
            [sys.executable, str(ROOT / "experiments" / "run.py"), "experiment=auto", "auto.time_limit=600",
             "auto.engines=[lightgbm,xgboost]", "auto.objectives=[squared_error]", "data=quartiles",
             "data.n_train=20000", "engine.num_boost_round=3000", "engine.early_stopping_rounds=3000",
             f"cluster.address={cluster.address}", f"tracking.uri={uri}", f"hydra.run.dir={out}"],
            cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=_default_sigint, start_new_session=True)
        client = mlflow.MlflowClient(uri)

        def both_running():
            exp = client.get_experiment_by_name("qwkboost")
            return exp is not None and len(client.search_runs([exp.experiment_id],
                                                              "attributes.status = 'RUNNING'")) >= 3
        _wait(p, both_running, "the parent run and two candidates RUNNING")
        os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=120)
        assert p.returncode == 130, err[-3000:]
        assert "Traceback" not in err
        assert err.strip().splitlines()[-1] == ("experiments/run.py: interrupted (Ctrl-C); its MLflow runs are "
                                                "marked KILLED")
        exp = client.get_experiment_by_name("qwkboost")
        runs = client.search_runs([exp.experiment_id])
        assert sorted(r.info.status for r in runs) == ["KILLED"] * 3
        session = json.loads((out / "auto.json").read_text())["sessions"][-1]
        assert session["status"] == "stopped"
        # the workers are alive and free: nothing of the stopped budget runs on
        from distributed import Client

        with Client(cluster.address, timeout="10s") as c:
            assert len(c.scheduler_info()["workers"]) == 2
            deadline = time.time() + 30
            while any(c.processing().values()):
                assert time.time() < deadline, c.processing()
                time.sleep(0.5)
        assert all(w.poll() is None for w in cluster.workers)


@pytest.mark.slow
def test_tuning_shares_a_postgresql_study_and_survives_a_killed_worker(postgres_url, mlflow_store, tmp_path):
    with running_dask(tmp_path / "dask") as cluster:
        p = subprocess.Popen(
            [sys.executable, str(ROOT / "experiments" / "tune.py"), "engine=lightgbm", "data.n_train=8000",
             "data.n_test=800", "cv.n_splits=3", "engine.num_boost_round=400", "engine.early_stopping_rounds=400",
             "tune.n_trials=6", "tune.pruner=none", "tune.study_name=killed-worker", f"tune.storage={postgres_url}",
             "tune.heartbeat_interval=1", "tune.grace_period=3", f"cluster.address={cluster.address}",
             f"tracking.uri={mlflow_store}", "tracking.experiment_name=killed-worker", "tracking.explain=false",
             f"hydra.run.dir={tmp_path / 'out'}"],
            cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=_default_sigint, start_new_session=True)

        def study():
            try:
                return optuna.load_study(study_name="killed-worker", storage=postgres_url)
            except KeyError:
                return None

        client = mlflow.MlflowClient(mlflow_store)

        def two_running():          # two trials whose MLflow runs have begun, one on each worker
            exp = client.get_experiment_by_name("killed-worker")
            return exp is not None and len(client.search_runs(
                [exp.experiment_id], "attributes.status = 'RUNNING' and tags.kind = 'trial'")) >= 2
        _wait(p, two_running, "two trials running")
        victim = cluster.workers[0]
        victim.send_signal(signal.SIGKILL)
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
    trials = study().trials
    finished = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    failed = [t for t in trials if t.state == optuna.trial.TrialState.FAIL]
    assert len(finished) >= 6
    assert len(failed) == 1 and str(victim.pid) in failed[0].user_attrs["qwkboost.process"]
    # the killed trial was retried with its parameters, on the worker that lived
    assert any(t.params == failed[0].params for t in finished)
    exp = client.get_experiment_by_name("killed-worker")
    runs = client.search_runs([exp.experiment_id])
    assert not [r for r in runs if r.info.status == "RUNNING"]
    killed = [r for r in runs if r.info.status == "KILLED"]
    assert len(killed) == 1 and killed[0].info.run_name.endswith(f" trial {failed[0].number}")


@pytest.mark.slow
@pytest.mark.skipif(not can_hide(), reason="needs unshare and mount (root) to hide a folder from the workers")
def test_workers_that_do_not_see_this_machine_s_files_tune_with_no_server_and_send_auto_s_files_back(
        mlflow_store, tmp_path):
    """Workers as on other machines (the client's folder hidden from them): ``tune.py`` with its default SQLite file
    runs the study on the scheduler, each trial copied back to the file; auto's candidates send their files back and
    its trials prune on the scheduler's copy of its study."""
    from distributed import Client

    import qwkboost as qb
    from conftest import quartile_frames

    here = tmp_path / "client"
    here.mkdir()
    storage = f"sqlite:///{here}/optuna.db"
    with running_dask(tmp_path / "dask", hide=here) as cluster:
        p = subprocess.run(
            [sys.executable, str(ROOT / "experiments" / "tune.py"), "engine=lightgbm", "data.n_train=3000",
             "data.n_test=800", "cv.n_splits=3", "tune.n_trials=5", "tune.study_name=elsewhere",
             f"tune.storage={storage}", f"cluster.address={cluster.address}", f"tracking.uri={mlflow_store}",
             "tracking.experiment_name=elsewhere", "tracking.explain=false", f"hydra.run.dir={here / 'tune'}"],
            cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        assert "trials run on a copy of the study on the scheduler" in p.stdout + p.stderr
        with Client(cluster.address, timeout="10s") as c:          # the file is here, and no worker sees it
            assert (here / "optuna.db").exists() and not any(c.run(os.path.exists, str(here / "optuna.db")).values())
        X, y, X_test, _ = quartile_frames(0, n_train=3000)
        result = qb.auto(X, y, X_test, time_limit=25, engines=["lightgbm"], objectives=["squared_error"],
                         n_splits=3, output_dir=here / "auto", cluster=cluster.address, progress=False)
    study = optuna.load_study(study_name="elsewhere", storage=storage)
    done = [t for t in study.trials if t.state.is_finished() and t.state != optuna.trial.TrialState.FAIL]
    assert len(done) >= 5
    workers = {str(w.pid) for w in cluster.workers}
    assert {t.user_attrs["qwkboost.process"].split(":")[1] for t in done} <= workers
    assert all(t.intermediate_values for t in done)              # each reported its folds to its pruner
    runs = mlflow.MlflowClient(mlflow_store).search_runs(
        [mlflow.MlflowClient(mlflow_store).get_experiment_by_name("elsewhere").experiment_id])
    assert not [r for r in runs if r.info.status == "RUNNING"]
    board = result.leaderboard
    finished = board[board["status"] == "finished"]
    assert len(finished) >= 2 and finished["worker"].str.startswith("tcp://127.0.0.1:").all()
    for name in finished["candidate"]:            # written on the workers, sent back here
        assert (here / "auto" / "candidates" / name / "oof.parquet").exists()
    auto_db = f"sqlite:///{here}/auto/tuning.db"
    trials = optuna.load_study(study_name=optuna.get_all_study_names(auto_db)[0], storage=auto_db).trials
    assert [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE and len(t.intermediate_values) == 3]


@pytest.mark.slow
def test_a_lost_scheduler_ends_the_budget_with_the_blend_of_what_finished(tmp_path):
    """The scheduler killed (``kill -9``) while candidates run on its workers: the budget ends at once with the
    blend of the candidates that had finished, the running ones recorded as lost, exit status 0, no traceback."""
    from qwkboost.tracking import prepare_store

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    prepare_store(uri)
    out = tmp_path / "out"
    with running_dask(tmp_path / "dask") as cluster:
        p = subprocess.Popen(
            [sys.executable, str(ROOT / "experiments" / "run.py"), "experiment=auto", "auto.time_limit=600",
             "auto.engines=[lightgbm,xgboost]", "auto.objectives=[squared_error,extended_qwk]", "auto.tune=false",
             "data=quartiles", "data.n_train=20000", f"cluster.address={cluster.address}", f"tracking.uri={uri}",
             f"hydra.run.dir={out}"],
            cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=_default_sigint, start_new_session=True)

        def finished_one():
            try:
                records = json.loads((out / "auto.json").read_text())["candidates"].values()
            except (OSError, ValueError, KeyError):
                return False
            return any(r.get("status") == "finished" for r in records)
        _wait(p, finished_one, "a candidate finished")
        os.killpg(cluster.scheduler.pid, signal.SIGKILL)
        outs, err = p.communicate(timeout=180)
    assert p.returncode == 0, err[-3000:]
    assert "Traceback" not in err + outs
    assert "was lost (the client's connection to it closed); the candidates running there are lost, and the " \
           "budget ends with the blend of the" in outs + err
    record = json.loads((out / "auto.json").read_text())
    statuses = {n: r["status"] for n, r in record["candidates"].items()}
    assert "finished" in statuses.values() and set(statuses.values()) <= {"finished", "lost"}
    assert "cluster_lost" in record["sessions"][-1] and record["sessions"][-1]["status"] == "finished"
    assert (out / "submission.csv").exists() and (out / "leaderboard.csv").exists()
    client = mlflow.MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("qwkboost").experiment_id])
    assert not [r for r in runs if r.info.status == "RUNNING"]


@pytest.mark.slow
def test_workers_too_small_for_any_candidate_are_refused_in_one_line(tmp_path):
    """Two ``dask worker --memory-limit 200MB``: refused once connected, before any candidate is sent (they were
    restarted by their nanny under the rows job, and the command ended in a traceback)."""
    from conftest import TINY_OVERRIDES, run_in_process
    from qwkboost.exceptions import ConfigError

    with running_dask(tmp_path / "dask", memory_limit="200MB") as cluster:
        with pytest.raises(ConfigError, match=r"the memory_limit of the Dask workers at tcp://127.0.0.1:\d+ leaves "
                                              r"each Dask worker 153 MiB before Dask pauses it .* start the workers "
                                              r"with more \(dask worker --memory-limit 1GiB\)") as err:
            run_in_process(["experiment=auto", f"cluster.address={cluster.address}", "auto.time_limit=30",
                            *TINY_OVERRIDES, "tracking.uri=null"], tmp_path / "out")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "out" / "candidates").exists()

