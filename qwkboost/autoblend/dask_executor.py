"""A budget on a Dask cluster: each candidate a whole cross-validated run on one worker, as many at once as the
cluster has workers (the cluster's side of :mod:`qwkboost.autoblend.executor`; the tasks themselves run through
:class:`~qwkboost.distributed.tasks.WorkerPool`: data sent once, stops, lost workers, files).

- **Time.** A task carries the seconds its candidate may use, counted on the worker's own clock from its start (a
  task is submitted only to a free worker, so it starts as it is submitted); its
  :class:`~qwkboost.autoblend.budget.TimeGuard` keeps it within them as in one process.
- **Stops.** Ctrl-C or SIGTERM on the client stops every running candidate between rounds: each ends KILLED in
  MLflow and comes back as a stopped outcome tagged :data:`STOPPED`.
- **A lost worker** loses only its candidate, whole on it or training its rows across it: it comes back as a
  stopped outcome tagged :data:`LOST_WORKER`, its MLflow run is marked KILLED from the client, and the driver
  decides whether to run it again.
- **A lost scheduler** raises :class:`~qwkboost.exceptions.ClusterLost` from the executor's calls; the driver then
  takes every running candidate back as lost (:meth:`DaskExecutor.abandon`) and ends with the blend of what finished.
- **Room.** Workers too small for every candidate are refused before any training (:func:`check_local_room` before a
  ``LocalCluster`` starts, :meth:`DaskExecutor.check_room` once connected).
- **Threads.** A candidate whose config leaves ``n_jobs`` unset trains on its worker's threads.
- **Rows.** A candidate whose data does not fit one worker, or every one with ``cluster.parallel=rows``, trains each
  fold's rows across all the workers instead (:mod:`qwkboost.autoblend.placement`): it waits until the running
  candidates have ended, then runs alone, driven from this process.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from dataclasses import replace

import qwkboost.runs.tuning as tuning_face
from qwkboost.autoblend.budget import Budget
from qwkboost.autoblend.executor import Job, Outcome, run_job
from qwkboost.autoblend.placement import Placement, check_room, pause_fraction, place
from qwkboost.distributed.connection import ClusterSpec
from qwkboost.distributed.tasks import LOST_ERRORS, RoundStop, TaskResult, WorkerPool, check_scheduler, free_workers
from qwkboost.exceptions import ClusterLost, RunStopped
from qwkboost.tracking.store import mark_killed

__all__ = ["DaskExecutor", "LOST_WORKER", "STOPPED", "check_local_room"]

log = logging.getLogger("qwkboost.autoblend")

#: How long a rows job's error waits for the scheduler to see a worker under it go, before it counts as the job's own.
LEAVE_SECONDS = 1.0
#: The tag of a candidate whose worker was lost.
LOST_WORKER = {"qwkboost.auto": "LOST_WORKER"}
#: The tag of a candidate stopped from the client (Ctrl-C, SIGTERM).
STOPPED = {"qwkboost.auto": "STOPPED"}
#: What :meth:`distributed.Client.restart_workers` answers, as the log line says it.
_RESTART_SAID = {"OK": "restarted", "removed": "removed (no nanny to restart it)",
                 "timed out": "not restarted in time"}


def check_local_room(spec, configs, dataset) -> None:
    """Refuse, before a ``LocalCluster`` starts, a ``cluster.memory_limit`` too small for every candidate of
    ``configs`` (:func:`~qwkboost.autoblend.placement.check_room`); nothing for a scheduler's address (its workers'
    limits are read once connected: :meth:`DaskExecutor.check_room`)."""
    limit = spec.worker_memory() if isinstance(spec, ClusterSpec) else None
    if limit is None:
        return
    check_room(configs, dataset, pause_fraction() * limit, spec.n_workers, spec.parallel,
               f"cluster.memory_limit={spec.memory_limit}", "give cluster.memory_limit={} or more")


def _candidate(dataset, directory, stopped, where: str, nthreads: int, job: Job, seconds: float,
               deadline: float) -> Outcome:
    """On the worker: ``job`` within ``seconds`` from now and before ``deadline`` (the client's wall clock: a task
    that waited, or that Dask moved from a worker that died before it began, starts late), its files in
    ``directory``."""
    seconds = min(seconds, deadline - time.time())
    config = job.config if job.config.get("n_jobs") is not None else {**job.config, "n_jobs": nthreads}

    def report(fold: int, rnd: int) -> None:
        if stopped():
            raise RunStopped(f"stopped in fold {fold + 1}/{job.guard.n_folds}: the budget was stopped",
                             tags=STOPPED)

    return run_job(replace(job, config=config, directory=directory), dataset, Budget(seconds), report, where=where)


class DaskExecutor:
    """Runs :class:`~qwkboost.autoblend.executor.Job` objects as Dask tasks, one per worker (module docstring).

    Parameters
    ----------
    client : distributed.Client
    dataset : Dataset
        Sent to each worker once, with its first candidate.
    budget : Budget
        The client's: each task gets the seconds left for work when it is submitted.
    output_dir : path
        The budget's directory (whether the workers see it decides where they write).
    tracking_uri : str, optional
        The MLflow store the workers log the candidates' runs in; ``None`` logs nothing.
    parallel : {"runs", "rows"}
        ``cluster.parallel``: ``rows`` trains every candidate that can across the workers' rows
        (:func:`~qwkboost.autoblend.placement.place`).

    Raises
    ------
    ConfigError
        If the cluster has no worker, or the MLflow store is a file of this machine some worker does not see.
    """

    def __init__(self, client, dataset, budget: Budget, output_dir, tracking_uri: str | None = None,
                 parallel: str | None = "runs"):
        self.client, self.dataset, self.budget, self.tracking_uri = client, dataset, budget, tracking_uri
        self.parallel = parallel or "runs"
        self.pool = WorkerPool(client, dataset, output_dir, tracking_uri)
        #: How many candidates run at once: one per worker.
        self.slots = self.pool.slots
        limits = [w.get("memory_limit") or 0 for w in client.scheduler_info().get("workers", {}).values()]
        pause = pause_fraction()
        #: The bytes the smallest worker may use before Dask pauses it (``None``: no worker is limited).
        self.worker_memory = pause * min(limits) if limits and min(limits) > 0 else None
        self._jobs: dict[str, Job] = {}
        self._rows: list[Job] = []          # rows jobs waiting for the running ones to end
        self._stopped: list[Outcome] = []   # a rows job Ctrl-C stopped while it ran here
        self._lost: list[Outcome] = []      # a rows job whose scheduler was lost while it ran here
        self._sent: dict[str, float] = {}   # when each job was sent (time.time())

    @property
    def free(self) -> int:
        """Free workers; none while a candidate training across the workers' rows waits or runs."""
        return 0 if self._rows else self.slots - self.pool.running

    def check_room(self, configs) -> None:
        """Refuse, before any training, workers too small for every candidate of ``configs``
        (:func:`~qwkboost.autoblend.placement.check_room`)."""
        address = getattr(self.client.scheduler, "address", "the scheduler")
        check_room(configs, self.dataset, self.worker_memory, self.slots, self.parallel,
                   f"the memory_limit of the Dask workers at {address}",
                   "start the workers with more (dask worker --memory-limit {}), or give a cluster of larger workers")

    def place(self, config: dict) -> Placement:
        """Whether ``config``'s candidate trains whole on one worker or across the workers' rows
        (:func:`~qwkboost.autoblend.placement.place`)."""
        return place(config, self.dataset, self.worker_memory, self.slots, self.parallel)

    @property
    def shared(self) -> bool:
        """Whether the workers see the budget's directory (:attr:`~qwkboost.distributed.tasks.WorkerPool.shared`)."""
        return self.pool.shared

    def trial_storage(self, study, url: str):
        """The study's own storage when the workers see the budget's directory; else a working copy in the Dask
        scheduler's memory (:func:`~qwkboost.runs.tuning.storage.on_the_scheduler`, each trial written back to the
        file as it ends), or ``None`` (trials unpruned) when optuna-integration is not installed."""
        if self.shared:
            return study, url
        work = tuning_face.on_the_scheduler(study, self.client)       # optuna, loaded on first use
        return None if work is None else (work, tuning_face.scheduler_url(work))

    @property
    def running(self) -> int:
        return self.pool.running

    def submit(self, job: Job) -> str:
        """Start ``job`` on a free worker with the seconds left for work (the budget's less the reserve the job
        carries); a rows job (:attr:`~qwkboost.autoblend.executor.Job.rows`) once no other runs. Its handle."""
        self._jobs[job.name] = job
        if job.rows:
            self._rows.append(job)
            return job.name
        seconds = self.budget.left - job.guard.reserve
        self._sent[job.name] = time.time()
        self.pool.submit(job.name, job.directory, _candidate, job, seconds, time.time() + seconds)
        return job.name

    def next_outcome(self) -> Outcome:
        """The outcome of the next job to end (a lost worker's as a stopped outcome tagged :data:`LOST_WORKER`).

        Raises
        ------
        Exception
            What a job raised that is not a stop (a candidate's own error ends the budget, as in one process).
        """
        if self._rows and not self.pool.running:
            return self._run_rows(self._rows.pop(0))
        return self._outcome(self.pool.next_result())

    def _run_rows(self, job: Job) -> Outcome:
        """``job``'s folds, each trained across every worker, driven from here on the budget's own clock; the
        workers stop between rounds at the time limit, or at once on Ctrl-C (:class:`RoundStop`)."""
        from distributed import Event  # optional: distributed

        self._jobs.pop(job.name)
        budget = replace(self.budget, reserve=job.guard.reserve)
        stop = RoundStop(f"qwkboost-rows-stop-{uuid.uuid4().hex}", time.time() + max(budget.left_for_work, 0.0))
        where = f"rows across {self.slots} workers"
        before: set[str] = set()
        try:
            before = self._workers()
            outcome = run_job(job, self.dataset, budget, where=where, client=self.client, dask_stop=stop)
        except KeyboardInterrupt:
            with contextlib.suppress(Exception):     # a scheduler already gone has nothing to stop
                Event(stop.event, client=self.client).set()     # the workers' fold ends after its current round
            self._stopped.append(Outcome(job.name, None, "stopped: the budget was stopped", dict(STOPPED),
                                         where=where))
            raise
        except Exception as exc:  # noqa: BLE001 - a worker lost under the rows, or the job's own error
            return self._rows_lost(job, exc, before, where)
        with contextlib.suppress(Exception):        # a finished job is kept, whatever the cluster does next
            gone = before - self._workers()
            if gone:        # the folds finished without it (between folds, or Dask moved its part): say so all the same
                log.info("auto: %s: %d of its %d workers was lost while it trained across their rows; its folds "
                         "still finished, on the workers left", job.name, len(gone), len(before))
        return outcome

    def _rows_lost(self, job: Job, exc: Exception, before: set[str], where: str) -> Outcome:
        """The outcome of a rows job that raised ``exc``: lost, when a worker under it went away or Dask reports it
        lost; its MLflow run KILLED. A lost scheduler is recorded for :meth:`abandon` and raised on.

        Raises
        ------
        Exception
            ``exc``, when it is the job's own error; :class:`~qwkboost.exceptions.ClusterLost` for a lost
            scheduler."""
        try:
            check_scheduler(self.client)
            gone = before - self._workers()
            if not gone and type(exc).__name__ not in LOST_ERRORS:
                time.sleep(LEAVE_SECONDS)      # the scheduler may not have seen a killed worker go yet
                gone = before - self._workers()
        except ClusterLost:
            self._kill_run(job, ("RUNNING", "FAILED"))
            self._lost.append(Outcome(job.name, None, "stopped: the Dask scheduler was lost", dict(LOST_WORKER),
                                      where=where))
            raise
        if not gone and type(exc).__name__ not in LOST_ERRORS and not isinstance(exc, ClusterLost):
            raise exc       # the job's own error (a full disk is not a lost worker)
        self._kill_run(job, ("RUNNING", "FAILED"))
        lost = f"{len(gone)} of its {len(before)} workers" if gone else "a worker"
        log.debug("auto: %s's rows job ended with %s: %s", job.name, type(exc).__name__, exc)
        self._free(job, before - gone)
        return Outcome(job.name, None, f"stopped: {lost} training its rows was lost", dict(LOST_WORKER), where=where)

    def _free(self, job: Job, workers: set[str]) -> None:
        """Restart the workers a lost rows job left waiting for their lost peer (:func:`free_workers`), saying so;
        the pool's own tasks are not theirs to wait on."""
        try:
            freed = free_workers(self.client, workers, keep=self.pool.keys())
        except Exception as exc:  # noqa: BLE001 - the scheduler went too: the caller's next call says so
            log.debug("auto: freeing %s's workers: %s", job.name, exc)
            return
        if freed:
            log.info("auto: %s: %s it trained on beside the lost one still waited for it: %s", job.name,
                     "the worker" if len(freed) == 1 else f"{len(freed)} workers",
                     "; ".join(f"{w} {_RESTART_SAID.get(v, v)}" for w, v in sorted(freed.items())))

    def _workers(self) -> set[str]:
        """The workers connected now (a worker restarted by its nanny comes back at another address)."""
        try:
            return set(self.client.scheduler_info(n_workers=-1).get("workers", {}))
        except Exception:  # noqa: BLE001 - the scheduler is gone (check_scheduler says so)
            check_scheduler(self.client)
            raise

    def abandon(self) -> list[Outcome]:
        """Every job started or waiting as lost, without asking the cluster: its scheduler is gone
        (:class:`~qwkboost.exceptions.ClusterLost`); their MLflow runs are marked KILLED."""
        out, self._lost = self._lost, []
        for r in self.pool.abandon():
            job = self._jobs.pop(r.name)
            done = self._written_on_worker(job, r.where)
            if done is not None:        # its files are whole; its MLflow run may have been cut while it logged
                self._kill_run(job, why="its worker was lost while it logged; its files are complete")
                out.append(done)
                continue
            self._kill_run(job)
            out.append(Outcome(job.name, None, "stopped: the Dask scheduler was lost", dict(LOST_WORKER),
                               where=r.where))
        for job in self._rows:
            self._jobs.pop(job.name, None)
            out.append(Outcome(job.name, None, "stopped: the Dask scheduler was lost before it started",
                               dict(LOST_WORKER)))
        self._rows.clear()
        return out

    def _written_on_worker(self, job: Job, where: str) -> Outcome | None:
        """A job that finished on a worker seeing this directory before its result could come back (the scheduler
        was lost in between): its outcome from the files it wrote (``result.json``, written after its outputs),
        or ``None``."""
        path = job.directory / "result.json"
        sent = self._sent.get(job.name, float("inf"))
        try:
            if not self.pool.shared or path.stat().st_mtime < sent:
                return None
            row = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return Outcome(job.name, row, None, {}, path.stat().st_mtime - sent, where=where)

    def _outcome(self, result: TaskResult) -> Outcome:
        job = self._jobs.pop(result.name)
        if not result.lost:
            return result.value
        self._kill_run(job)
        if result.cancelled:
            return Outcome(job.name, None, "stopped: the budget was stopped (cancelled)", dict(STOPPED))
        return Outcome(job.name, None, "stopped: its worker was lost", dict(LOST_WORKER), where=result.where)

    def _kill_run(self, job: Job, statuses: tuple[str, ...] = ("RUNNING",), why: str = "its Dask worker was lost"
                  ) -> None:
        """Mark KILLED the MLflow run a lost worker left RUNNING (its process cannot), or a rows job's that ended
        FAILED when a worker under it was lost; tagged ``qwkboost.stopped`` with ``why``."""
        if self.tracking_uri is None or job.experiment_id is None:
            return
        import mlflow  # slow to import: mlflow

        parent = f" and tags.mlflow.parentRunId = '{job.parent_run_id}'" if job.parent_run_id else ""
        client = mlflow.MlflowClient(self.tracking_uri)
        runs = [r for status in statuses for r in client.search_runs(
            [job.experiment_id], f"tags.mlflow.runName = '{job.name}'{parent} and attributes.status = '{status}'")]
        for r in runs:
            mark_killed(client, r.info.run_id, why)

    def run(self, job: Job) -> Outcome:
        """Run ``job`` on a worker and wait for it."""
        self.submit(job)
        return self.next_outcome()

    def stop(self) -> list[Outcome]:
        """Stop every running job after its current round; their outcomes (a rows job that was waiting, as
        stopped)."""
        out, self._stopped = self._stopped, []
        try:
            stopped = [self._outcome(r) for r in self.pool.stop()]
        except ClusterLost:             # the scheduler went as it was stopped
            return out + self.abandon()
        for job in self._rows:
            self._jobs.pop(job.name, None)
            out.append(Outcome(job.name, None, "stopped: the budget was stopped", dict(STOPPED)))
        self._rows.clear()
        return out + stopped
