"""A real Dask cluster as a user starts one: ``dask scheduler`` and ``dask worker`` processes on 127.0.0.1.

Each process is started in its own session (a Ctrl-C sent to a command under test does not reach it), and all are
stopped afterwards. Used by tests that claim the cluster path works from the command line.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

__all__ = ["DaskProcesses", "running_dask", "can_hide", "DiesOnArrival"]


def can_hide() -> bool:
    """Whether this machine lets a process mount over a folder in a namespace of its own (``running_dask(hide=)``)."""
    try:
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                               "mount -t tmpfs qwkboost-hidden /mnt"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False

def _cli(*args: str) -> list[str]:
    """The ``dask`` command of this interpreter's environment (as a user types it)."""
    return [str(Path(sys.executable).parent / "dask"), *args]


@dataclass
class DaskProcesses:
    """The scheduler's address and the worker processes (``workers[i].pid``)."""

    address: str
    scheduler: subprocess.Popen
    workers: list = field(default_factory=list)
    logs: Path | None = None

    def worker_addresses(self, timeout: float = 60.0) -> list[str]:
        """The addresses of the workers connected now (waits for ``len(workers)`` of them)."""
        from distributed import Client

        with Client(self.address, timeout="10s") as c:
            c.wait_for_workers(len(self.workers), timeout=timeout)
            return sorted(c.scheduler_info()["workers"])


def _wait_for_file(path: Path, proc: subprocess.Popen, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the Dask scheduler exited with {proc.returncode}")
        with contextlib.suppress(FileNotFoundError, json.JSONDecodeError):
            info = json.loads(path.read_text())
            if info.get("address"):
                return info
        time.sleep(0.2)
    raise TimeoutError("the Dask scheduler wrote no scheduler file in time")


@contextlib.contextmanager
def running_dask(directory, n_workers: int = 2, nthreads: int = 1, nanny: bool = False,
                 hide: Path | None = None, memory_limit: str | None = None) -> Iterator[DaskProcesses]:
    """A scheduler and ``n_workers`` workers of ``nthreads`` threads, their files and logs in ``directory``;
    ``memory_limit``: each worker's (``dask worker --memory-limit``).

    ``hide``: a folder of this machine the workers do not see, as workers on other machines would not. Each worker
    runs in a mount namespace of its own (``unshare -m``) with an empty ``tmpfs`` over that folder.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    scheduler_file = directory / "scheduler.json"
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    procs: list[subprocess.Popen] = []

    def start(args, log_name, hidden=None):
        log = open(directory / log_name, "w")
        cmd = _cli(*args)
        if hidden is not None:
            cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                   'mount -t tmpfs qwkboost-hidden "$0" && exec "$@"', str(hidden), *cmd]
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=directory,
                             start_new_session=True)
        procs.append(p)
        return p

    try:
        scheduler = start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                           "--scheduler-file", str(scheduler_file)], "scheduler.log")
        info = _wait_for_file(scheduler_file, scheduler, 60.0)
        workers = [start(["worker", "--scheduler-file", str(scheduler_file), "--host", "127.0.0.1",
                          "--nthreads", str(nthreads), "--nworkers", "1", "--no-dashboard",
                          "--nanny" if nanny else "--no-nanny", "--name", f"w{i}",
                          *(["--memory-limit", memory_limit] if memory_limit else [])], f"worker{i}.log", hide)
                   for i in range(n_workers)]
        d = DaskProcesses(info["address"], scheduler, workers, directory)
        d.worker_addresses()
        yield d
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)


class DiesOnArrival:
    """A study's objective (what ``tune.py`` sends every worker) that ends the process of the first worker to receive
    it, as it is unpickled there (``os._exit``): a worker that dies while the objective is sent to it, for real. The
    first to remove ``marker`` dies; the others, and every later copy, get a plain objective (``x`` drawn, returned).
    """

    pruner = "none"

    def __init__(self, marker: str):
        self.marker, self.on_round, self.n_jobs = marker, None, None

    def __getstate__(self):
        return {"marker": self.marker}

    def __setstate__(self, state):
        self.__init__(state["marker"])
        try:
            os.remove(self.marker)
        except FileNotFoundError:
            return
        os._exit(1)

    def __call__(self, trial) -> float:
        return trial.suggest_float("x", 0.0, 1.0)
