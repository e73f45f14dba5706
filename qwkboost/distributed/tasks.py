"""Whole runs as Dask tasks, one per worker at a time: the cluster's side of a budget's executor
(:mod:`qwkboost.autoblend.dask_executor`), which says what a task runs; this module only runs it.

- **Data once per worker.** A worker gets its own copy of the data with its first task
  (:meth:`distributed.Client.scatter` to that worker), and each task runs on a worker the pool chose, beside its
  copy: never sent once per task. One copy that Dask's active memory manager could move would not do: it drops the
  replicas of a broadcast within seconds, so tasks fetched the data again, and a worker lost with the last copy
  lost every later task. A worker that replaces a lost one gets its copy with its first task.
- **Stops.** :meth:`WorkerPool.stop` sets a Dask :class:`~distributed.Event` that a running task reads through the
  ``stopped()`` it is given (at most once a second): the task ends by itself, between rounds, and its result comes
  back. A task still running after a grace period is cancelled.
- **A lost worker** loses only its task. Dask would run it again elsewhere with the arguments it had when first
  submitted (its seconds, for one); it comes back as lost instead (:attr:`TaskResult.lost`), and the caller
  decides whether to submit it again.
- **A lost scheduler** ends the pool: every call then raises :class:`~qwkboost.exceptions.ClusterLost`
  (``scheduler=True``), and :meth:`WorkerPool.abandon` hands back the running tasks as lost without asking the
  cluster, so the caller can keep what finished.
- **Files.** A worker that sees the client's output directory (a ``LocalCluster``, a shared disk) writes a task's
  files there; one that does not writes them to a temporary directory and sends them back with the result, and
  the client writes them in place (:attr:`WorkerPool.shared`).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from qwkboost.distributed.connection import TRACKING_FIX, check_reachable_by_workers, sees_path
from qwkboost.exceptions import ClusterLost, ConfigError

__all__ = ["WorkerPool", "TaskResult", "RoundStop", "STOP_POLL_SECONDS", "STOP_WAIT_SECONDS", "LOST_ERRORS",
           "SEND_ATTEMPTS", "is_lost_error", "lost_worker", "may_send_again", "prepare_worker", "check_scheduler",
           "quiet_lost_client"]

log = logging.getLogger(__name__)

#: How often a running task asks whether the client has stopped, in seconds.
STOP_POLL_SECONDS = 1.0
#: How long a stop waits for the running tasks to end by themselves before cancelling them.
STOP_WAIT_SECONDS = 30.0
#: How long a client that lost its connection to the scheduler may take to reconnect before the scheduler is lost.
RECONNECT_SECONDS = 5.0
#: How long the pool waits for a worker when a cluster has none left, before it gives up on the cluster.
WORKER_WAIT_SECONDS = 15.0
#: How many times a task is sent before a worker lost each time fails it.
SEND_ATTEMPTS = 3
#: Seconds to wait for a nanny to restart a worker left busy by a lost peer (:func:`free_workers`).
RESTART_SECONDS = 30.0
#: The errors by which Dask reports a task whose worker went away.
LOST_ERRORS = ("KilledWorker", "CancelledError", "CommClosedError", "FutureCancelledError", "FuturesCancelledError")


def is_lost_error(exc: BaseException) -> bool:
    """Whether ``exc`` is how Dask reports work whose worker or scheduler went away (:data:`LOST_ERRORS`, or a
    connection that failed: ``OSError``, ``TimeoutError``), rather than the work's own error."""
    return type(exc).__name__ in LOST_ERRORS or isinstance(exc, (OSError, TimeoutError, ClusterLost))


def lost_worker(exc: BaseException) -> bool:
    """Whether ``exc`` is how Dask reports a task whose worker went away (:data:`LOST_ERRORS`), rather than the
    task's own error."""
    return type(exc).__name__ in LOST_ERRORS


def may_send_again(client, exc: BaseException, attempt: int) -> bool:
    """After sending work to ``client``'s workers failed with ``exc`` on try ``attempt`` (from 0): whether a worker
    lost as it was sent failed it and a try is left (:data:`SEND_ATTEMPTS` in all).

    Raises
    ------
    qwkboost.exceptions.ClusterLost
        If the client lost its scheduler (:func:`check_scheduler`).
    """
    check_scheduler(client)
    return is_lost_error(exc) and attempt < SEND_ATTEMPTS - 1


def prepare_worker(tracking_uri: str | None) -> tuple[str, int]:
    """What a task does first on its worker: MLflow pointed at ``tracking_uri`` (when given) and qwkboost's own
    log lines kept to warnings (the client logs each task's end); the worker's address and threads."""
    from distributed import get_worker  # optional: distributed

    if tracking_uri is not None:
        import mlflow  # slow to import: mlflow

        mlflow.set_tracking_uri(tracking_uri)
    logging.getLogger("qwkboost").setLevel(logging.WARNING)
    worker = get_worker()
    return worker.address, int(worker.state.nthreads)


def check_scheduler(client) -> None:
    """Raise :class:`~qwkboost.exceptions.ClusterLost` (``scheduler=True``) if ``client`` has lost its scheduler:
    closed, or still reconnecting after :data:`RECONNECT_SECONDS` (a connection that comes back within them is not
    a lost scheduler, though the tasks it held may come back lost)."""
    deadline = time.monotonic() + RECONNECT_SECONDS
    while getattr(client, "status", "running") == "connecting" and time.monotonic() < deadline:
        time.sleep(0.2)
    if getattr(client, "status", "running") in ("connecting", "closing", "closed"):
        address = getattr(getattr(client, "scheduler", None), "address", None) or "its address"
        quiet_lost_client()
        raise ClusterLost(f"the Dask scheduler at {address} was lost (the client's connection to it closed)",
                          scheduler=True)


def quiet_lost_client() -> None:
    """Once qwkboost has said that the scheduler was lost, the client's own reports of it (its failed reconnection,
    with tracebacks, as it closes) add nothing: they are left out."""
    for name in ("distributed.client", "distributed.utils"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def _running_keys(dask_worker) -> list[str]:
    """On a worker: the keys its threads are running now (a task Dask has released still runs to its end)."""
    return [str(k) for k in list(dask_worker.active_threads.values())]


def free_workers(client, workers, keep=(), timeout: float = RESTART_SECONDS) -> dict[str, str]:
    """Restart those of ``workers`` whose threads still run a task not in ``keep``, and say which.

    A worker that trained a fold's rows with another one that was lost can wait for it without end: XGBoost's
    workers exchange gradients and histograms every round and wait for a lost peer up to the collective's timeout
    (30 min by default), holding the worker's one thread, which Dask cannot take back. A nanny restarts such a
    worker in a second or two; one started without a nanny is removed from the cluster (Dask's
    :meth:`~distributed.Client.restart_workers`).

    Parameters
    ----------
    client : distributed.Client
    workers : iterable of str
        The addresses to look at.
    keep : iterable of str
        Keys whose tasks are meant to run (the pool's own).
    timeout : float
        Seconds to wait for the restarts.

    Returns
    -------
    dict
        ``{address: "OK" | "removed" | "timed out" | <error>}`` for each worker restarted.
    """
    workers, keep = sorted(workers), {str(k) for k in keep}
    if not workers:
        return {}
    running = client.run(_running_keys, workers=workers, on_error="return")
    stuck = sorted(w for w, keys in running.items() if isinstance(keys, list) and set(keys) - keep)
    if not stuck:
        return {}
    return {w: str(v) for w, v in client.restart_workers(stuck, timeout=timeout, raise_for_error=False).items()}


@dataclass
class TaskResult:
    """What a task of :class:`WorkerPool` returned.

    Attributes
    ----------
    name : str
    value : object
        What the task's function returned; ``None`` if the task was lost or cancelled.
    where : str
        The address of the worker that ran it (``a lost worker`` when it was lost).
    lost : bool
        Its worker was lost (or it was cancelled by a stop).
    cancelled : bool
        A stop cancelled it after :data:`STOP_WAIT_SECONDS`.
    files : dict or None
        Its files (relative path -> bytes) from a worker that does not see the output directory; written in place
        by the pool before the result is handed on, then dropped.
    """

    name: str
    value: Any = None
    where: str = "a lost worker"
    lost: bool = False
    cancelled: bool = False
    files: dict | None = None


class RoundStop:
    """When the workers training one fold's rows together stop boosting
    (:func:`~qwkboost.distributed.training.train_dask`'s ``stop``): a Dask :class:`~distributed.Event` that the
    client sets (Ctrl-C), or a deadline on the wall clock.

    Called on each worker after each round (the Event read at most once every :data:`STOP_POLL_SECONDS`); the
    engine adds up the workers' answers, so all stop at the same round. :meth:`why` says on the client why the
    training stopped, if it did. Without a deadline it is also the ``stopped()`` a pool's task is given.

    Parameters
    ----------
    event : str
        The Event's name.
    deadline : float, optional
        ``time.time()`` past which no round starts (the workers' clocks, which on other machines may differ by
        what NTP leaves).
    """

    def __init__(self, event: str, deadline: float | None = None):
        self.event, self.deadline = event, deadline
        self._last, self._seen, self._event = float("-inf"), False, None

    def __getstate__(self):
        return {"event": self.event, "deadline": self.deadline}

    def __setstate__(self, state):
        self.__init__(state["event"], state["deadline"])

    def __call__(self) -> bool:
        """On a worker: whether to stop after this round."""
        if self.deadline is not None and time.time() >= self.deadline:
            return True
        if not self._seen and time.monotonic() - self._last >= STOP_POLL_SECONDS:
            self.is_set()
        return self._seen

    def is_set(self) -> bool:
        """Whether the client has set the Event, read now (not at most once a second)."""
        if not self._seen:
            if self._event is None:
                from distributed import Event  # optional: distributed

                self._event = Event(self.event)
            self._last, self._seen = time.monotonic(), self._event.is_set()
        return self._seen

    def why(self) -> str | None:
        """On the client, after training: why it stopped early, or ``None``."""
        from distributed import Event  # optional: distributed

        if Event(self.event).is_set():
            return "stopped: the budget was stopped"
        if self.deadline is not None and time.time() >= self.deadline:
            return "stopped at the time limit (its folds trained across the workers)"
        return None


def _pack(directory: Path) -> dict[str, bytes]:
    return {str(f.relative_to(directory)): f.read_bytes() for f in sorted(directory.rglob("*")) if f.is_file()}


def _unpack(files: dict[str, bytes], directory: Path) -> None:
    """Write ``files`` (relative path -> bytes) as ``directory``, replacing what was there."""
    if directory.exists():
        shutil.rmtree(directory)
    root = directory.resolve()
    for rel, data in files.items():
        path = (directory / rel).resolve()
        if root not in path.parents:
            raise ValueError(f"a worker sent a file outside its task's directory: {rel!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _task(fn: Callable, name: str, directory: str, data, token: str, stop_name: str, shared: bool,
          tracking_uri: str | None, args: tuple) -> TaskResult:
    """On the worker: ``fn(data, directory, stopped, where, nthreads, *args)`` (module docstring)."""
    from distributed import Event  # optional: distributed

    began = Event(f"qwkboost-began-{token}")
    if began.is_set():          # run again after its worker died: lost, not run twice
        return TaskResult(name, lost=True)
    began.set()
    where, nthreads = prepare_worker(tracking_uri)
    stopped = RoundStop(stop_name)          # the pool's stop, read as a fold's rows read theirs
    if shared:
        return TaskResult(name, fn(data, Path(directory), stopped, where, nthreads, *args), where)
    with tempfile.TemporaryDirectory(prefix="qwkboost-task-") as tmp:
        here = Path(tmp) / Path(directory).name
        value = fn(data, here, stopped, where, nthreads, *args)
        return TaskResult(name, value, where, files=_pack(here) if here.exists() else None)


class WorkerPool:
    """Runs functions as Dask tasks, one per worker at a time (module docstring).

    Parameters
    ----------
    client : distributed.Client
    data : object
        Sent to each worker once, with its first task; every task's function gets it first.
    output_dir : path
        Where the tasks' directories are (whether the workers see it decides where they write).
    tracking_uri : str, optional
        The MLflow store the tasks log in; it must be one the workers reach.

    Raises
    ------
    ConfigError
        If the cluster has no worker, or the MLflow store is a file of this machine some worker does not see.
    """

    def __init__(self, client, data, output_dir, tracking_uri: str | None = None):
        from distributed import Event  # optional: distributed

        self.client, self.tracking_uri = client, tracking_uri
        workers = client.scheduler_info().get("workers", {})
        if not workers:
            raise ConfigError(f"the Dask cluster at {client.scheduler.address} has no worker; start one "
                              f"(dask worker {client.scheduler.address})")
        #: How many tasks run at once: one per worker.
        self.slots = len(workers)
        out = Path(output_dir)
        out.mkdir(parents=True, exist_ok=True)
        marker = out / f".qwkboost-sees-{uuid.uuid4().hex}"
        marker.touch()
        try:
            seen = client.run(sees_path, str(marker.resolve()))       # a worker on another machine does not
        finally:
            marker.unlink()
        #: Whether every worker writes into ``output_dir`` itself (else files come back with the result).
        self.shared = all(seen.values())
        if tracking_uri is not None:
            check_reachable_by_workers(client, tracking_uri, "tracking.uri", TRACKING_FIX)
        #: each worker's copy of the data (address -> future), sent with its first task: a budget whose data fits
        #: no worker sends none
        self._given, self._copies = data, {}
        self._stop_name = f"qwkboost-stop-{uuid.uuid4().hex}"
        self._stop = Event(self._stop_name, client=client)
        self._running: dict[Any, tuple[str, Path, str]] = {}      # future -> (name, directory, worker)

    @property
    def running(self) -> int:
        """How many tasks are running."""
        return len(self._running)

    def keys(self) -> set[str]:
        """The Dask keys of the tasks running."""
        return {str(f.key) for f in self._running}

    def submit(self, name: str, directory, fn: Callable, *args) -> None:
        """Start ``fn(data, directory, stopped, where, nthreads, *args)`` on a free worker: ``directory`` is where
        its files go (on the worker: there, or a temporary one sent back), ``stopped()`` says whether the pool was
        stopped, ``where`` and ``nthreads`` are the worker's address and threads."""
        token = f"{name}-{uuid.uuid4().hex[:12]}"
        where = None
        for attempt in range(SEND_ATTEMPTS):
            try:
                where = self._free_worker()
                future = self.client.submit(_task, fn, name, str(directory), self._copies[where], token,
                                            self._stop_name, self.shared, self.tracking_uri, args,
                                            key=f"qwkboost-{token}", pure=False, retries=0, workers=[where],
                                            allow_other_workers=False)
                break
            except ClusterLost:
                raise
            except Exception as exc:  # noqa: BLE001 - a worker that died as its copy or task was sent
                if not may_send_again(self.client, exc, attempt):
                    raise
                log.info("a Dask worker was lost while a task was sent to it (%s); sending it to another",
                         type(exc).__name__)
                self._copies.pop(where, None)
                time.sleep(1.0)
        self._running[future] = (name, Path(directory), where)

    def _free_worker(self) -> str:
        """A worker running none of this pool's tasks (the least busy if every one is), with its copy of the data sent
        there first; the copies of workers that have left the cluster are dropped."""
        check_scheduler(self.client)
        alive = sorted(self.client.ncores())        # asks the scheduler: a lost worker's stand-in is listed
        if not alive:           # a nanny's restart takes a second or two; workers that do not come back end the work
            try:
                self.client.wait_for_workers(1, timeout=WORKER_WAIT_SECONDS)
            except TimeoutError:
                raise ClusterLost(f"the Dask cluster at {self.client.scheduler.address} has no worker left (none came "
                                  f"back within {WORKER_WAIT_SECONDS:g} s)", scheduler=True) from None
            alive = sorted(self.client.ncores())
        for gone in set(self._copies) - set(alive):
            self._copies.pop(gone).release()
        busy = Counter(w for _, _, w in self._running.values())
        where = min(alive, key=lambda w: busy[w])
        if where not in self._copies:
            self._copies[where] = self.client.scatter(self._given, workers=[where], hash=False)
        return where

    def next_result(self) -> TaskResult:
        """The result of the next task to end (a lost worker's task as :attr:`TaskResult.lost`).

        Raises
        ------
        Exception
            What a task raised (a run's own error).
        """
        from distributed import wait  # optional: distributed

        if not self._running:
            raise RuntimeError("no task is running")
        try:
            done = next(iter(wait(list(self._running), return_when="FIRST_COMPLETED").done))
        except Exception as exc:  # noqa: BLE001 - a task whose data went with its worker is cancelled, and says so here
            check_scheduler(self.client)        # or the scheduler went away: every task is lost
            if not lost_worker(exc):
                raise
            done = next(f for f in self._running if f.done())
        return self._result(done)

    def abandon(self) -> list[TaskResult]:
        """Every running task as lost, without asking the cluster (its scheduler is gone)."""
        out = [TaskResult(name, where=where, lost=True) for name, _, where in self._running.values()]
        self._running.clear()
        self._copies.clear()
        return out

    def _result(self, future) -> TaskResult:
        name, directory, _ = self._running.pop(future)
        try:
            result = future.result()
        except Exception as exc:  # noqa: BLE001 - KilledWorker, CancelledError, a task's own error
            if not lost_worker(exc):
                raise
            check_scheduler(self.client)
            return TaskResult(name, lost=True)
        if result.files is not None:
            _unpack(result.files, directory)
            result.files = None
        return result

    def stop(self, wait_seconds: float = STOP_WAIT_SECONDS) -> list[TaskResult]:
        """Ask every running task to stop (its ``stopped()`` turns true) and return their results; tasks still
        running after ``wait_seconds`` are cancelled (:attr:`TaskResult.cancelled`)."""
        from distributed import wait  # optional: distributed

        futures = list(self._running)
        try:
            self._stop.set()
            if futures:
                wait(futures, timeout=wait_seconds)
        except TimeoutError:
            pass
        except Exception as exc:  # noqa: BLE001 - the scheduler is gone: the tasks with it
            if not is_lost_error(exc):
                raise
            if getattr(self.client, "status", "running") != "running":
                return self.abandon()
        out = []
        for f in futures:
            name = self._running[f][0]
            if f.done():
                try:
                    out.append(self._result(f))
                except Exception:  # noqa: BLE001 - a stop reports what ended; an error then is not the news
                    self._running.pop(f, None)
                    out.append(TaskResult(name, lost=True))
            else:
                self._running.pop(f)
                f.cancel()
                out.append(TaskResult(name, lost=True, cancelled=True))
        return out
