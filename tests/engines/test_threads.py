"""Threads that share (issue 45): the default thread count is the cores free when training starts, decided in one
place (:func:`qwkboost.engines.threads.engine_threads`) and read alike by every engine. Behaviour only: the time
it saves is measured in ``benchmarks/threads_shared.py``, never here."""

import hashlib
import json
import os
import subprocess
import sys
import threading
import time

import pytest

import qwkboost as qb
from qwkboost.engines import threads
from qwkboost.engines.registry import get_engine

#: the engines whose thread pools wait for each other every round: LightGBM's and XGBoost's OpenMP, CatBoost's own
ENGINES = ["lightgbm", "xgboost", "catboost"]


@pytest.fixture
def every_core(monkeypatch):
    """Every core of the machine, not a pytest-xdist worker's share (``LOKY_MAX_CPU_COUNT``)."""
    monkeypatch.delenv("LOKY_MAX_CPU_COUNT", raising=False)


@pytest.fixture
def busy():
    """A real busy process, pinned nowhere, for the duration of the test."""
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    time.sleep(0.3)
    yield spin
    spin.kill()
    spin.wait()


def booster_threads(engine: str, model) -> int:
    """The thread count the engine's booster was handed."""
    if engine == "xgboost":
        return int(json.loads(model.booster.save_config())["learner"]["generic_param"]["nthread"])
    if engine == "lightgbm":
        return int(model.booster.params["num_threads"])
    return int(model.booster.get_params()["thread_count"])


needs_proc = pytest.mark.skipif(not os.path.exists(threads.LOADAVG), reason="counts runnable tasks in Linux's /proc")


@needs_proc
def test_a_busy_process_is_counted_and_takes_a_core(every_core, busy):
    assert threads.others_running() >= 1           # always runnable, so every reading sees it
    cores = threads.available_cores()
    assert 1 <= threads.free_cores() <= max(1, cores - 1)


@needs_proc
def test_the_free_cores_never_fall_below_one(every_core, tmp_path, monkeypatch):
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(threads.available_cores() + 1)]
    try:
        time.sleep(0.3)
        assert threads.free_cores() == 1
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    fake = tmp_path / "loadavg"
    fake.write_text("9.00 9.00 9.00 1000/2000 1\n")
    monkeypatch.setattr(threads, "LOADAVG", str(fake))
    assert threads.free_cores() == 1


def test_this_process_own_running_threads_are_not_counted_as_others(every_core, tmp_path, monkeypatch):
    # a thread that hashes outside the GIL stays runnable beside the main thread
    stop = threading.Event()
    data = b"x" * (64 << 20)

    def work():
        while not stop.is_set():
            hashlib.sha256(data).digest()

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    try:
        seen = max(threads._running_here() for _ in range(50))
        fake = tmp_path / "loadavg"
        fake.write_text(f"0.00 0.00 0.00 {seen}/100 1\n")      # every running task is one of ours
        monkeypatch.setattr(threads, "LOADAVG", str(fake))
        free = threads.available_cores()
        assert seen >= 2 and threads.others_running() <= 1 and threads.free_cores() >= max(1, free - 1)
    finally:
        stop.set()
        worker.join()


def test_without_proc_the_default_is_every_core(every_core, monkeypatch):
    monkeypatch.setattr(threads, "LOADAVG", "/nonexistent/loadavg")
    assert threads.others_running() is None
    assert threads.free_cores() == threads.available_cores()


def test_n_jobs_is_used_as_given_and_the_default_reads_the_free_cores(monkeypatch):
    monkeypatch.setattr(threads, "free_cores", lambda: 7)
    assert threads.engine_threads(None) == threads.engine_threads(-1) == 7
    assert threads.engine_threads(1) == 1 and threads.engine_threads(3) == 3


@pytest.mark.parametrize("engine", ENGINES)
def test_every_engine_gets_its_default_threads_from_the_one_function(engine, small_quartiles, monkeypatch):
    ds = small_quartiles
    monkeypatch.setattr(threads, "free_cores", lambda: 3)
    assert booster_threads(engine, qb.train(ds.X_train, ds.y_train, engine, num_boost_round=2)) == 3
    assert booster_threads(engine, qb.train(ds.X_train, ds.y_train, engine, num_boost_round=2, n_jobs=2)) == 2


@needs_proc
@pytest.mark.parametrize("engine", ENGINES)
def test_beside_a_busy_process_the_default_leaves_it_a_core(engine, small_quartiles, every_core, busy):
    ds = small_quartiles
    cores = threads.available_cores()
    model = qb.train(ds.X_train, ds.y_train, engine, num_boost_round=2)
    assert 1 <= booster_threads(engine, model) <= max(1, cores - 1)
    assert booster_threads(engine, qb.train(ds.X_train, ds.y_train, engine, num_boost_round=2, n_jobs=cores)) == cores


@pytest.mark.parametrize("engine, name", [("lightgbm", "num_threads"), ("lightgbm", "n_jobs"), ("xgboost", "nthread"),
                                          ("xgboost", "n_jobs"), ("catboost", "thread_count")])
def test_the_engines_own_thread_parameter_wins(engine, name, monkeypatch):
    monkeypatch.setattr(threads, "free_cores", lambda: 3)
    adapter = get_engine(engine)
    assert adapter.with_threads({name: 5}, threads.engine_threads(None)) == {name: 5}
    assert name in adapter.thread_params


def test_import_leaves_the_openmp_wait_policy_to_the_user():
    code = ("import os, qwkboost as qb\n"
            "from qwkboost.data.sources import quartiles\n"
            "ds = quartiles(n_train=500, n_test=10)\n"
            "for e in ('lightgbm', 'xgboost'):\n"
            "    qb.train(ds.X_train, ds.y_train, e, num_boost_round=2)\n"
            "print(os.environ.get('OMP_WAIT_POLICY'), os.environ.get('GOMP_SPINCOUNT'))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["None", "None"]
    out = subprocess.run([sys.executable, "-c", code], env={**env, "OMP_WAIT_POLICY": "ACTIVE"},
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["ACTIVE", "None"]
