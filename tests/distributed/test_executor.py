"""A budget's candidate as a Dask task on a real LocalCluster: the same out-of-fold scores as in this process,
the data sent once, a stop from the client, a lost worker."""

import copy

import numpy as np
import pandas as pd
import pytest

from conftest import TINY
from qwkboost.autoblend.budget import Budget
from qwkboost.autoblend.executor import GuardSpec, Job, LocalExecutor
from qwkboost.distributed.cluster import ClusterSpec, connect
from qwkboost.distributed.executor import LOST_WORKER, STOPPED, DaskExecutor
from qwkboost.runs.experiment import load_dataset


@pytest.fixture(scope="module")
def client():
    with connect(ClusterSpec(n_workers=2, threads_per_worker=1)) as c:
        yield c


def _job(tmp_path, name, rounds=60, n_splits=3):
    cfg = copy.deepcopy(TINY)
    cfg["engine"]["num_boost_round"] = rounds
    cfg["cv"]["n_splits"] = n_splits
    cfg["tracking"] = {"log_models": False, "log_pyfunc": False, "explain": False}
    return Job(name, cfg, tmp_path / name, GuardSpec(n_splits))


def test_a_candidate_on_a_worker_scores_what_this_process_scores(client, tmp_path):
    ds = load_dataset(TINY["data"], 0)
    here = LocalExecutor(ds, Budget(600)).run(_job(tmp_path, "here"))
    executor = DaskExecutor(client, ds, Budget(600))
    there = executor.run(_job(tmp_path, "there"))
    assert there.row is not None and there.where.startswith("tcp://127.0.0.1:")
    assert there.where in client.scheduler_info()["workers"]
    a, b = (pd.read_parquet(tmp_path / n / "oof.parquet") for n in ("here", "there"))
    pd.testing.assert_frame_equal(a, b)                 # XGBoost on one thread: bit-identical
    assert here.row["qwk_thresholds_oof_nested"] == there.row["qwk_thresholds_oof_nested"]


def test_two_candidates_run_at_once_and_a_stop_reaches_them(client, tmp_path):
    ds = load_dataset(TINY["data"], 0)
    executor = DaskExecutor(client, ds, Budget(600))
    assert executor.slots == 2
    for name in ("a", "b"):
        executor.submit(_job(tmp_path, name, rounds=200_000, n_splits=2))     # long enough to be stopped
    executor.stop()
    outcomes = [executor.next_outcome() for _ in range(2)]
    assert {o.name for o in outcomes} == {"a", "b"}
    assert all(o.row is None and o.tags == STOPPED for o in outcomes)
    assert len({o.where for o in outcomes}) == 2 or all(o.where for o in outcomes)


def test_a_lost_worker_loses_only_its_task(tmp_path):
    ds = load_dataset(TINY["data"], 0)
    with connect(ClusterSpec(n_workers=2, threads_per_worker=1)) as c:
        executor = DaskExecutor(c, ds, Budget(600))
        executor.submit(_job(tmp_path, "long", rounds=200_000, n_splits=2))
        executor.submit(_job(tmp_path, "short"))
        import time

        deadline = time.monotonic() + 60
        where = None
        while where is None and time.monotonic() < deadline:      # the worker the long task runs on
            processing = c.processing()
            where = next((w for w, keys in processing.items() if any("long" in k for k in keys)), None)
            time.sleep(0.2)
        assert where is not None
        c.run(lambda: __import__("os")._exit(1), workers=[where])     # the worker dies mid-task
        outcomes = {o.name: o for o in (executor.next_outcome(), executor.next_outcome())}
        assert outcomes["short"].row is not None
        assert outcomes["long"].row is None and outcomes["long"].tags == LOST_WORKER
        assert np.isfinite(outcomes["short"].row["qwk_thresholds_oof"])
