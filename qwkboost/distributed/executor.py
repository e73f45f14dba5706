"""The cluster's side of a budget's executor seam (:mod:`qwkboost.autoblend.executor`): each candidate a Dask task,
a whole cross-validated run on one worker, as many at once as the cluster has workers.

The data goes to every worker once (:meth:`distributed.Client.scatter`), never once per task. A task carries the
seconds its candidate may use, counted on the worker's own clock from its start (the driver submits only to a free
worker, so a task starts as it is submitted); its :class:`~qwkboost.autoblend.budget.TimeGuard` keeps it within
them as in one process. A stop (Ctrl-C or SIGTERM on the client) sets a Dask :class:`~distributed.Event` that
every running task reads between rounds (at most once a second), so each ends KILLED in MLflow rather than
running on after its client has gone. A task whose worker is lost comes back as a stopped outcome naming the
worker; the driver decides whether to run it again.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable

from qwkboost.autoblend.budget import Budget
from qwkboost.autoblend.executor import Job, Outcome, run_job
from qwkboost.exceptions import RunStopped

__all__ = ["DaskExecutor", "LOST_WORKER", "STOPPED"]

#: The tag of a candidate whose worker was lost.
LOST_WORKER = {"qwkboost.auto": "LOST_WORKER"}
#: The tag of a candidate stopped from the client (Ctrl-C, SIGTERM).
STOPPED = {"qwkboost.auto": "STOPPED"}
#: How often a running task asks whether the client has stopped, in seconds.
STOP_POLL_SECONDS = 1.0


def _on_worker(job: Job, dataset, seconds: float, tracking_uri: str | None, stop_name: str) -> Outcome:
    """A :class:`Job` on the worker this task runs on, within ``seconds`` from now."""
    from distributed import Event, get_worker  # optional: distributed

    if tracking_uri is not None:
        import mlflow  # slow to import: mlflow

        mlflow.set_tracking_uri(tracking_uri)
    stop, last = Event(stop_name), [time.monotonic()]

    def report(fold: int, rnd: int) -> None:
        now = time.monotonic()
        if now - last[0] >= STOP_POLL_SECONDS:
            last[0] = now
            if stop.is_set():
                raise RunStopped(f"stopped in fold {fold + 1}/{job.guard.n_folds}: the budget was stopped",
                                 tags=STOPPED)

    return run_job(job, dataset, Budget(seconds), report, where=get_worker().address)


class DaskExecutor:
    """Runs :class:`~qwkboost.autoblend.executor.Job` objects as Dask tasks (module docstring).

    Parameters
    ----------
    client : distributed.Client
    dataset : Dataset
        Sent to every worker once.
    budget : Budget
        The client's: each task gets the seconds left for work when it is submitted.
    tracking_uri : str, optional
        The MLflow store the workers log the candidates' runs in (it must be reachable from them: a server, or
        PostgreSQL; a SQLite file only on one machine).
    """

    def __init__(self, client, dataset, budget: Budget, tracking_uri: str | None = None):
        from distributed import Event  # optional: distributed

        self.client, self.budget, self.tracking_uri = client, budget, tracking_uri
        self.slots = max(1, len(client.scheduler_info().get("workers", {})))
        self._data = client.scatter(dataset, broadcast=True, hash=False)
        self._stop_name = f"qwkboost-stop-{uuid.uuid4().hex}"
        self._stop = Event(self._stop_name, client=client)
        self._running: dict[Any, Job] = {}

    @property
    def running(self) -> int:
        return len(self._running)

    def submit(self, job: Job) -> None:
        """Start ``job`` on a free worker with the budget's seconds left for work."""
        future = self.client.submit(_on_worker, job, self._data, self.budget.left_for_work, self.tracking_uri,
                                    self._stop_name, key=f"qwkboost-{job.name}-{uuid.uuid4().hex[:8]}", pure=False,
                                    retries=0)
        self._running[future] = job

    def next_outcome(self) -> Outcome:
        """The outcome of the next job to end (a lost worker's job as a stopped outcome naming it)."""
        from distributed import wait  # optional: distributed

        if not self._running:
            raise RuntimeError("no job is running")
        done = next(iter(wait(list(self._running), return_when="FIRST_COMPLETED").done))
        job = self._running.pop(done)
        try:
            return done.result()
        except RunStopped as stop:       # raised before the run began (it is an Outcome once the run has begun)
            return Outcome(job.name, None, str(stop), dict(stop.tags))
        except Exception as exc:  # noqa: BLE001 - KilledWorker, CancelledError, a worker's own failure
            name = type(exc).__name__
            if name in ("KilledWorker", "CancelledError", "CommClosedError"):
                return Outcome(job.name, None, f"its worker was lost ({name})", dict(LOST_WORKER))
            raise

    def run(self, job: Job, reporter: Callable | None = None) -> Outcome:
        """Run ``job`` on a worker and wait for it. A fold ``reporter`` (a tuning trial's pruner) runs here, so a
        trial with one is run in this process."""
        if reporter is not None:
            raise ValueError("a job with a fold reporter runs in the client's process")
        self.submit(job)
        return self.next_outcome()

    def stop(self) -> None:
        """Ask every running task to stop after its current round, and wait for them to end."""
        from distributed import wait  # optional: distributed

        self._stop.set()
        if self._running:
            wait(list(self._running))
