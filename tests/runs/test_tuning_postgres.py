"""Distributed tuning on a real PostgreSQL server: worker processes share one study, open an empty
database together, resume a finished study without new trials, and a wrong URL is refused before any trial."""

import os
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import optuna
import pytest

from conftest import TINY_OVERRIDES, run_in_process
from postgres_server import free_port
from qwkboost.exceptions import ConfigError

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "CI": "true"}
COMPLETE, PRUNED = optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED


def tune_args(store, storage, name, n_trials, study="s"):
    return [*TINY_OVERRIDES, f"tracking.uri={store}", f"tracking.experiment_name={name}", f"tune.storage={storage}",
            f"tune.n_trials={n_trials}", f"tune.study_name={study}", "tune.heartbeat_interval=1", "tune.grace_period=2"]


def tune_cmd(*args, **kwargs):
    """``experiments/tune.py`` as a process: for what needs one (workers side by side)."""
    return [sys.executable, str(ROOT / "experiments" / "tune.py"), *tune_args(*args, **kwargs)]


def new_database(server_url: str, name: str) -> str:
    """Create an empty database ``name`` on the server of ``server_url``; return its URL."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    finally:
        engine.dispose()
    return f"{server_url.rsplit('/', 1)[0]}/{name}"


def worker_pid(trial) -> int:
    """The pid of the process that ran ``trial``, from its ``host:pid:start`` tag."""
    return int(trial.user_attrs["qwkboost.process"].rsplit(":", 2)[1])


@pytest.mark.slow
def test_workers_share_one_study(postgres_url, mlflow_store, tmp_path, caplog):
    n = 4
    url = new_database(postgres_url, "shared")    # empty: the two workers create Optuna's tables together
    # one worker names the driver, the other writes postgresql:// as the README does
    urls = [url, url.replace("postgresql+psycopg2://", "postgresql://")]
    t0 = time.time()
    procs = [subprocess.Popen(tune_cmd(mlflow_store, u, "tune_pg_shared", n), cwd=tmp_path, env=ENV,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for u in urls]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
    elapsed = time.time() - t0

    study = optuna.load_study(study_name="s", storage=url)
    done = [t for t in study.trials if t.state in (COMPLETE, PRUNED)]      # finished: they count toward n_trials
    # tune.n_trials is the study's total: each worker stops once it is reached, finishing only a running trial
    assert n <= len(done) <= n + 1, [t.state for t in study.trials]
    by_worker = {p.pid: sum(worker_pid(t) == p.pid for t in done) for p in procs}
    assert all(c >= 1 for c in by_worker.values()), by_worker      # both workers contributed
    assert sum(by_worker.values()) == len(done)
    assert len({tuple(sorted(t.params.items())) for t in done}) == len(done)   # no parameters drawn twice
    print(f"\n{len(done)} trials in {elapsed:.1f} s; by worker: {by_worker}")

    client = mlflow.MlflowClient(mlflow_store)
    exp = client.get_experiment_by_name("tune_pg_shared")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if (r.data.tags.get("kind"), r.data.tags.get("optuna.study")) == ("tune", "s")]
    assert len(parents) == 2 and all(r.info.status == "FINISHED" for r in parents)
    assert {t.user_attrs["mlflow_run_id"] for t in done} <= {r.info.run_id for r in runs}

    # the same command again (in this process): the study is finished, so it runs no trial
    with caplog.at_level("INFO", logger="qwkboost"):
        run_in_process(tune_args(mlflow_store, url, "tune_pg_shared", n), tmp_path / "again", config_name="tune")
    assert f"already has {len(done)} finished trials" in caplog.text
    assert len(optuna.load_study(study_name="s", storage=url).trials) == len(study.trials)


def test_workers_opening_an_empty_database_together_both_succeed(postgres_url):
    """Without a lock, the second of two workers creating Optuna's tables at once fails in ``pg_type``."""
    code = ("import sys\n"
            "from qwkboost.runs.tuning import open_storage\n"
            "print('ready', flush=True)\n"
            "sys.stdin.readline()\n"          # both go at once, imports done
            "open_storage(sys.argv[1], {})\n")
    for i in range(2):
        url = new_database(postgres_url, f"empty{i}")
        procs = [subprocess.Popen([sys.executable, "-c", code, url], env=ENV, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        assert [p.stdout.readline() for p in procs] == ["ready\n"] * 2
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err[-3000:]
        optuna.create_study(study_name="ok", storage=url)     # the tables are complete


def test_unreachable_server_is_refused_before_any_trial(mlflow_store, tmp_path):
    pytest.importorskip("psycopg2", reason="psycopg2 (the PostgreSQL driver) is not installed; install the extra: "
                        "pip install -e '.[cluster]'")
    port = free_port()                  # nothing listens there
    url = f"postgresql://postgres:s3cret@127.0.0.1:{port}/qwkboost_test"
    # in this process: a ConfigError is experiments/tune.py's exit status 2 with its message alone on stderr
    # (test_run_cli.py::test_bad_tuning_input_is_one_line_before_any_trial)
    with pytest.raises(ConfigError) as exc:
        run_in_process(tune_args(mlflow_store, url, "tune_pg_refused", 2), tmp_path / "out", config_name="tune")
    err = str(exc.value)
    assert f"tune.storage='postgresql://postgres:***@127.0.0.1:{port}/qwkboost_test' cannot be opened" in err
    assert "Connection refused" in err and "check that the server runs" in err
    assert "s3cret" not in err
    # refused before tracking starts: no experiment, so no trial
    assert mlflow.MlflowClient(mlflow_store).get_experiment_by_name("tune_pg_refused") is None
