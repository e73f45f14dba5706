"""A budget's candidate as a Dask task on a real LocalCluster: the same out-of-fold scores as in this process,
files sent back from a worker that does not see the output directory, two at once, a stop from the client, a lost
worker."""

import copy
from dataclasses import replace
import os
import signal
import time

import numpy as np
import pandas as pd
import pytest

from conftest import TINY
from qwkboost.autoblend.budget import Budget
from qwkboost.autoblend.executor import GuardSpec, Job, LocalExecutor
from qwkboost.distributed.connection import ClusterSpec, connect
from qwkboost.autoblend.dask_executor import LOST_WORKER, STOPPED, DaskExecutor
from qwkboost.runs.experiment import load_dataset


@pytest.fixture(scope="module")
def ds():
    return load_dataset(TINY["data"], 0)


def _job(directory, name, rounds=60, n_splits=3, long=False):
    cfg = copy.deepcopy(TINY)
    cfg["cv"]["n_splits"] = n_splits
    cfg["engine"]["num_boost_round"] = 200_000 if long else rounds
    if long:        # trains until stopped
        cfg["engine"]["early_stopping_rounds"] = None
        cfg["engine"]["params"]["learning_rate"] = 0.001
    cfg["tracking"] = {"log_models": False, "log_pyfunc": False, "explain": False}
    return Job(name, cfg, directory / "candidates" / name, GuardSpec(n_splits))


def _executing(dask_worker):
    return [str(ts.key) for ts in dask_worker.state.executing]


def _processing(client, name):
    """The worker executing the task of job ``name``, once it has begun (not only been assigned)."""
    for w, keys in client.run(_executing).items():
        if any(f"qwkboost-{name}-" in k for k in keys):
            return w
    return None


def _wait_running(client, names, timeout=60):
    deadline = time.monotonic() + timeout
    where = {}
    while len(where) < len(names):
        assert time.monotonic() < deadline, f"not all of {names} started: {client.processing()}"
        where = {n: w for n in names if (w := _processing(client, n)) is not None}
        time.sleep(0.2)
    return where


def test_a_candidate_on_a_worker_scores_what_this_process_scores(client, ds, tmp_path):
    here = LocalExecutor(ds, Budget(600)).run(_job(tmp_path, "here"))
    executor = DaskExecutor(client, ds, Budget(600), tmp_path)
    assert executor.slots == 2 and executor.shared
    there = executor.run(_job(tmp_path, "there"))
    assert there.row is not None and there.where in client.scheduler_info()["workers"]
    assert here.where == "this process"
    a, b = (pd.read_parquet(tmp_path / "candidates" / n / "oof.parquet") for n in ("here", "there"))
    pd.testing.assert_frame_equal(a, b)                 # XGBoost on one thread: bit-identical
    assert here.row["qwk_thresholds_oof_nested"] == there.row["qwk_thresholds_oof_nested"]


def test_a_worker_that_does_not_see_the_directory_sends_the_files_back(client, ds, tmp_path):
    executor = DaskExecutor(client, ds, Budget(600), tmp_path)
    executor.pool.shared = False    # as on another machine: the worker writes to its own temporary directory
    outcome = executor.run(_job(tmp_path, "sent"))
    assert outcome.row is not None
    LocalExecutor(ds, Budget(600)).run(_job(tmp_path, "here"))
    sent, here = tmp_path / "candidates" / "sent", tmp_path / "candidates" / "here"
    names = sorted(str(f.relative_to(sent)) for f in sent.rglob("*") if f.is_file())
    assert names == sorted(str(f.relative_to(here)) for f in here.rglob("*") if f.is_file())
    assert "oof.parquet" in names and any(n.startswith("pipeline/") for n in names)
    pd.testing.assert_frame_equal(pd.read_parquet(sent / "oof.parquet"), pd.read_parquet(here / "oof.parquet"))


def test_two_candidates_run_at_once_and_a_stop_reaches_them(client, ds, tmp_path):
    executor = DaskExecutor(client, ds, Budget(600), tmp_path)
    for name in ("a", "b"):
        executor.submit(_job(tmp_path, name, n_splits=2, long=True))
    where = _wait_running(client, ["a", "b"])
    assert len(set(where.values())) == 2            # one per worker, side by side
    time.sleep(2)
    t0 = time.monotonic()
    outcomes = executor.stop()
    assert time.monotonic() - t0 < 25               # read between rounds, not at the end of a 200,000-round fold
    assert sorted(o.name for o in outcomes) == ["a", "b"]
    for o in outcomes:
        assert o.row is None and o.tags == STOPPED and "the budget was stopped" in o.stopped
        assert o.where == where[o.name]
    assert executor.running == 0


def test_a_lost_worker_loses_only_its_task(ds, tmp_path):
    with connect(ClusterSpec(n_workers=2, threads_per_worker=1)) as c:
        executor = DaskExecutor(c, ds, Budget(600), tmp_path)
        executor.submit(_job(tmp_path, "long", n_splits=2, long=True))
        executor.submit(_job(tmp_path, "short"))
        where = _wait_running(c, ["long"])["long"]
        pid = c.run(os.getpid, workers=[where])[where]
        os.kill(pid, signal.SIGKILL)                    # its process dies mid-task
        outcomes = {o.name: o for o in (executor.next_outcome(), executor.next_outcome())}
        # the nanny starts a worker in its place; the next tasks run on both, the new one with its own copy of the
        # data (the lost worker's copy went with it)
        deadline = time.monotonic() + 60
        while len(c.ncores()) < 2 or where in c.ncores():
            assert time.monotonic() < deadline, "no worker took the lost one's place"
            time.sleep(0.2)
        for name in ("after-a", "after-b"):
            executor.submit(_job(tmp_path, name))
        after = [executor.next_outcome() for _ in range(2)]
    assert outcomes["short"].row is not None and np.isfinite(outcomes["short"].row["qwk_thresholds_oof"])
    long = outcomes["long"]
    assert long.row is None and long.tags == LOST_WORKER and long.lost and "worker was lost" in long.stopped
    assert all(o.row is not None for o in after) and len({o.where for o in after}) == 2


def test_each_worker_keeps_its_own_copy_of_the_data_and_no_task_fetches_it(client, ds, tmp_path):
    """The data goes to each worker once, with its first task, and stays there. A broadcast's extra copies are dropped
    by Dask's active memory manager within seconds, after which Dask queued the next tasks behind the one worker that
    held the data (or would fetch it again): two candidates ran one after the other on a 2-worker cluster."""
    from distributed import get_task_stream

    executor = DaskExecutor(client, ds, Budget(600), tmp_path)
    with get_task_stream(client) as stream:
        for turn in range(2):
            for name in ("a", "b"):
                executor.submit(_job(tmp_path, f"{name}{turn}", rounds=10))
            assert all(executor.next_outcome().row is not None for _ in range(2))
            time.sleep(2.5)                 # longer than the memory manager's interval (2 s)
    copies = executor.pool._copies
    assert sorted(copies) == sorted(client.ncores())
    assert {w: client.who_has([f])[f.key] for w, f in copies.items()} == {w: (w,) for w in copies}
    ran = [t for t in stream.data if str(t["key"]).startswith("qwkboost-")]
    assert len(ran) == 4
    for turn in range(2):       # side by side each time, not queued behind the worker that holds the data
        assert {t["worker"] for t in ran if f"{turn}-" in str(t["key"])} == set(copies), turn
    assert not [s for t in ran for s in t["startstops"] if s["action"] == "transfer"]


def test_a_rows_job_waits_for_the_running_one_then_trains_across_both_workers(client, ds, tmp_path):
    """A candidate placed across the workers' rows (its data too large for one worker) holds the cluster: it starts
    once the running candidate has ended, and its folds' tasks run on both workers."""
    from distributed import get_task_stream

    executor = DaskExecutor(client, ds, Budget(600), tmp_path)
    executor.submit(_job(tmp_path, "whole"))
    assert executor.free == 1
    executor.submit(replace(_job(tmp_path, "rows"), rows=True))
    assert executor.free == 0                       # nothing more starts while it waits
    with get_task_stream(client) as stream:
        first = executor.next_outcome()
        ended = time.time()
        second = executor.next_outcome()
    assert first.name == "whole" and first.where in client.scheduler_info()["workers"]
    assert second.name == "rows" and second.where == "rows across 2 workers" and second.row is not None
    engine_tasks = [t for t in stream.data if not str(t["key"]).startswith("qwkboost-")]
    assert {t["worker"] for t in engine_tasks} == set(client.scheduler_info()["workers"])
    assert min(s["start"] for t in engine_tasks for s in t["startstops"]) >= ended - 0.5
    assert (tmp_path / "candidates" / "rows" / "oof.parquet").exists()
    assert executor.free == 2
    # the same candidate in this process, its rows on one machine: the same model up to XGBoost's sketch of them
    here = LocalExecutor(ds, Budget(600)).run(_job(tmp_path, "here"))
    assert abs(second.row["qwk_thresholds_oof"] - here.row["qwk_thresholds_oof"]) < 0.02


def test_a_stop_reaches_a_rows_job_that_waits(client, ds, tmp_path):
    executor = DaskExecutor(client, ds, Budget(600), tmp_path)
    executor.submit(_job(tmp_path, "long", n_splits=2, long=True))
    executor.submit(replace(_job(tmp_path, "rows"), rows=True))
    _wait_running(client, ["long"])
    outcomes = {o.name: o for o in executor.stop()}
    assert set(outcomes) == {"long", "rows"}
    assert all(o.row is None and o.tags == STOPPED for o in outcomes.values())
    assert not (tmp_path / "candidates" / "rows").exists()      # it never began


def _busy(client):
    return sum(client.run(lambda dask_worker: len(dask_worker.state.executing)).values())


def _free_within(client, seconds):
    deadline = time.monotonic() + seconds
    while _busy(client):
        assert time.monotonic() < deadline, "the workers are still training"
        time.sleep(0.2)


def test_a_rows_job_stops_at_the_time_limit_on_every_worker_at_once(client, ds, tmp_path):
    executor = DaskExecutor(client, ds, Budget(8), tmp_path)
    t0 = time.monotonic()
    outcome = executor.run(replace(_job(tmp_path, "rows", n_splits=2, long=True), rows=True))
    assert outcome.row is None and "time limit" in outcome.stopped
    assert time.monotonic() - t0 < 20               # not the 200,000 rounds of its fold
    _free_within(client, 5)


@pytest.mark.timeout(180)
def test_ctrl_c_on_a_rows_job_frees_the_workers_between_rounds(client, ds, tmp_path):
    import _thread
    import threading

    executor = DaskExecutor(client, ds, Budget(120), tmp_path)
    executor.submit(replace(_job(tmp_path, "rows", n_splits=2, long=True), rows=True))
    # as Ctrl-C on the client: Python's own handler, which a suite started in the background has set to ignore
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(3, _thread.interrupt_main).start()
        with pytest.raises(KeyboardInterrupt):
            executor.next_outcome()
    finally:
        signal.signal(signal.SIGINT, before)
    (outcome,) = executor.stop()
    assert outcome.name == "rows" and outcome.tags == STOPPED and outcome.where == "rows across 2 workers"
    _free_within(client, 10)                        # its fold's rounds end on both workers


def _held(seconds):
    """A task that holds its worker's one thread, as an XGBoost worker waiting for a lost peer does."""
    time.sleep(seconds)
    return seconds


def test_a_worker_left_waiting_by_a_lost_rows_job_is_restarted_and_a_pool_task_is_not_touched(ds, tmp_path):
    """A fold's rows trained across two workers, one of them lost: the other went on waiting for it in XGBoost's
    exchange (30 min by default), holding its one thread, and the candidate's second try waited behind it past the
    time limit without end (the edge sweep's ``cluster-rows-kill-worker``). ``free_workers`` restarts a worker
    whose thread runs a task nobody waits for, and leaves one running the pool's own task."""
    from distributed import wait

    from qwkboost.distributed.tasks import free_workers

    with connect(ClusterSpec(n_workers=2, threads_per_worker=1)) as c:
        executor = DaskExecutor(c, ds, Budget(600), tmp_path)
        executor.submit(_job(tmp_path, "mine", n_splits=2, long=True))
        pool_worker = _wait_running(c, ["mine"])["mine"]
        other = next(w for w in c.ncores() if w != pool_worker)
        held = c.submit(_held, 600, workers=[other], pure=False)
        deadline = time.monotonic() + 60
        while not any(c.run(_executing, workers=[other]).values()):
            assert time.monotonic() < deadline, "the held task never started"
            time.sleep(0.1)
        held.release()                 # released as a failed xgboost.dask.train releases its tasks: it runs on
        time.sleep(0.5)
        assert free_workers(c, [pool_worker], keep=executor.pool.keys()) == {}     # the pool's task is its own
        freed = free_workers(c, [pool_worker, other], keep=executor.pool.keys())
        assert freed == {other: "OK"}
        c.wait_for_workers(2, timeout=60)
        # the restarted worker runs the next task at once, not 600 s later
        quick = c.submit(_held, 0, workers=[w for w in c.ncores() if w != pool_worker], pure=False)
        wait([quick], timeout=60)
        assert quick.result() == 0
        assert executor.running == 1 and pool_worker in c.ncores()
        executor.stop()


def test_a_fold_cut_short_on_a_worker_comes_back_with_how_far_it_got(client, ds, tmp_path):
    """A candidate whose first fold reaches its share of the time before early stopping stops where it runs, on a
    worker as in this process, and its source learns the fold's rounds and seconds to restart it faster."""
    from qwkboost.autoblend.budget import NOT_CONVERGED

    # the tail counted as a fold: the first fold's share is a quarter of the time, and a restart at about 2.5x fits
    # the rest, with room for a fold checked late on a busy machine
    job = _job(tmp_path, "cut", n_splits=3, long=True)
    job = replace(job, guard=replace(job.guard, share_folds=True, converge=True, tail_folds=1.0))
    outcome = DaskExecutor(client, ds, Budget(10), tmp_path).run(job)
    assert outcome.row is None and outcome.tags == NOT_CONVERGED and outcome.where in client.scheduler_info()["workers"]
    cut = outcome.cut
    assert cut is not None and cut.fold == 0 and cut.rounds > 0 and cut.seconds >= cut.share > 0
