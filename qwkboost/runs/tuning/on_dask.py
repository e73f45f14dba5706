"""``experiments/tune.py cluster=...``: a study's trials side by side on a Dask cluster, one at a time per worker.

Each worker runs Optuna's own loop (:meth:`optuna.study.Study.optimize`) on the same study, as parallel processes
do (:mod:`qwkboost.runs.tuning.study`): trials drawn from ``(seed, trial number)`` never repeat, each trial's folds
report to the pruner on the worker, and every worker stops once the study holds ``tune.n_trials`` finished trials.
The study's storage is one the workers reach: its SQLite file when they see it (a ``LocalCluster``, a shared disk),
or a database server (``tune.storage=postgresql://...``). Workers that do not see the SQLite file (on other
machines) run their trials on a copy of the study kept in the Dask scheduler's memory
(:func:`~qwkboost.runs.tuning.storage.on_the_scheduler`), and each trial is copied into the file as it ends: no
server is needed. That copy has no heartbeat, so a lost worker's trial is failed when the study ends rather than
retried. The data and the objective go to each worker once.

Ctrl-C or SIGTERM on the client sets a Dask :class:`~distributed.Event` that every running trial reads between
rounds: the trial fails (its MLflow run KILLED) and the same command later retries it. A lost worker loses only
its trial, which the study's heartbeat fails and retries; the other workers go on to the study's total.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from typing import Any, Mapping

import optuna        # as in the rest of runs/tuning: this module serves study.py, which loads Optuna anyway

from qwkboost.distributed.connection import TRACKING_FIX, blind_workers, check_reachable_by_workers, connect
from qwkboost.distributed.tasks import (
    STOP_WAIT_SECONDS,
    RoundStop,
    check_scheduler,
    is_lost_error,
    lost_worker,
    may_send_again,
    prepare_worker,
)
from qwkboost.exceptions import ConfigError, RunStopped
from qwkboost.runs.tuning.pruners import make_pruner
from qwkboost.runs.tuning.samplers import make_sampler
from qwkboost.runs.tuning.storage import (
    SCHEDULER_SCHEME,
    load_storage,
    on_the_scheduler,
    open_storage,
    scheduler_url,
    shown_url,
    write_back,
)

__all__ = ["optimize_on_cluster"]

log = logging.getLogger(__name__)

#: How often finished trials are copied back from the scheduler's copy of a study, in seconds.
COPY_SECONDS = 2.0


class _StudyCopy:
    """Study ``name`` of ``url`` (an SQLite file some worker does not see) and its working copy on the Dask
    scheduler, whose finished trials are copied back (module docstring)."""

    def __init__(self, record, work):
        self.record, self.work, self.copied = record, work, set()

    @classmethod
    def make(cls, client, url: str, name: str, t: Mapping[str, Any]) -> "_StudyCopy":
        record = optuna.load_study(study_name=name, storage=open_storage(url, t))
        work = on_the_scheduler(record, client)
        if work is None:
            raise ConfigError(f"tune.storage={shown_url(url)!r} is a file of this machine that the Dask workers do not "
                              "see; install optuna-integration (pip install 'qwkboost[cluster]') to keep the study "
                              "on the scheduler, or give a database the workers reach "
                              "(tune.storage=postgresql://user@host/db)")
        log.info("study %r: the Dask workers do not see %s; their trials run on a copy of the study on the "
                 "scheduler, each copied back as it ends", name, shown_url(url))
        copy = cls(record, work)
        copy.copied = {tr.number for tr in work.get_trials(deepcopy=False)}       # those it came with
        return copy

    @property
    def url(self) -> str:
        return scheduler_url(self.work)

    def write_back(self, last: bool = False) -> None:
        """Copy the trials finished since the last call; with ``last``, those still running as failed (their
        worker was lost, or a stop left them)."""
        for tr in self.work.get_trials(deepcopy=False):
            if tr.number in self.copied or not (tr.state.is_finished() or last):
                continue
            write_back(self.work, tr._trial_id, self.record,
                       None if tr.state.is_finished() else optuna.trial.TrialState.FAIL)
            self.copied.add(tr.number)


def _trials_on_worker(objective, url: str, name: str, t: Mapping[str, Any], n_trials: int, seed: int,
                      tracking_uri: str | None, stop_name: str, finished: tuple) -> int:
    """Trials of study ``name`` on this worker until the study holds ``n_trials`` finished ones; how many it
    finished."""
    _, nthreads = prepare_worker(tracking_uri)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    stop = RoundStop(stop_name)         # the client's stop, read between rounds at most once a second

    def on_round(fold: int, rnd: int, evals) -> None:
        if stop():
            raise RunStopped("stopped: the study was stopped from its client", tags={"qwkboost.tune": "STOPPED"})

    objective.on_round = on_round
    objective.n_jobs = nthreads
    storage = load_storage(url) if url.startswith(SCHEDULER_SCHEME) else open_storage(url, t)
    study = optuna.load_study(study_name=name, storage=storage,
                              sampler=make_sampler(t.get("sampler", "tpe"), seed), pruner=make_pruner(objective.pruner))
    mine: list[int] = []

    def count(study, trial) -> None:
        if trial.state in finished:
            mine.append(trial.number)
        if stop.is_set():
            study.stop()

    if stop.is_set() or len(study.get_trials(deepcopy=False, states=finished)) >= n_trials:
        return 0            # stopped, or run again after its worker died once the study was done
    study.optimize(objective, n_trials=n_trials, gc_after_trial=True,
                   callbacks=[optuna.study.MaxTrialsCallback(n_trials, states=finished), count])
    return len(mine)


def _start(client, objective, workers: list[str], args: tuple) -> tuple[list[str], list]:
    """The objective sent to every worker and one task of trials started on each; a worker lost as they are sent
    (the send fails) is left out and the rest sent again, a few times."""
    attempt = 0
    while True:
        try:
            shared = client.scatter(objective, broadcast=True, hash=False)
            return workers, [client.submit(_trials_on_worker, shared, *args, workers=[w], allow_other_workers=True,
                                           pure=False, key=f"qwkboost-trials-{uuid.uuid4().hex[:12]}")
                             for w in workers]
        except Exception as exc:  # noqa: BLE001 - a worker that died as the objective was sent to it
            if not may_send_again(client, exc, attempt):
                raise
            attempt += 1
            time.sleep(1.0)
            workers = list(client.scheduler_info()["workers"])
            if not workers:
                raise ConfigError(f"the Dask cluster at {client.scheduler.address} has no worker left; start one "
                                  f"(dask worker {client.scheduler.address})") from None
            log.info("a Dask worker was lost as the trials were sent (%s); sending them to the %d left",
                     type(exc).__name__, len(workers))


def optimize_on_cluster(spec, objective, url: str, name: str, t: Mapping[str, Any], n_trials: int, seed: int,
                        finished: tuple) -> None:
    """Run trials of study ``name`` (in ``url``) on every worker of the cluster ``spec`` until it holds
    ``n_trials`` trials in the states ``finished`` (module docstring).

    Raises
    ------
    ConfigError
        If the study's SQLite file or the MLflow store is a file some worker does not see.
    KeyboardInterrupt
        After asking every running trial to stop (Ctrl-C, SIGTERM).
    qwkboost.exceptions.ClusterLost
        When the client lost the Dask scheduler: the trials that finished are in the study.
    """
    import mlflow  # slow to import: mlflow
    from distributed import Event, wait  # optional: distributed

    tracking_uri = mlflow.get_tracking_uri()
    with connect(spec) as client:
        check_reachable_by_workers(client, tracking_uri, "tracking.uri", TRACKING_FIX)
        copy = _StudyCopy.make(client, url, name, t) if blind_workers(client, url) else None
        if copy is not None:
            url = copy.url
        workers = list(client.scheduler_info()["workers"])
        log.info("study %r: trials on the Dask cluster at %s, %d at once (one per worker)", name,
                 spec.address or "127.0.0.1 (LocalCluster)", len(workers))
        stop_name = f"qwkboost-tune-stop-{uuid.uuid4().hex}"
        stop = Event(stop_name, client=client)
        workers, futures = _start(client, objective, workers, (url, name, dict(t), n_trials, seed, tracking_uri,
                                                               stop_name, tuple(finished)))
        try:
            while not all(f.done() for f in futures):
                try:
                    wait(futures, timeout=COPY_SECONDS)
                except TimeoutError:
                    pass
                except Exception as exc:  # noqa: BLE001 - a lost worker's trials come back below; a lost scheduler
                    check_scheduler(client)
                    if not is_lost_error(exc):
                        raise
                if copy is not None:
                    copy.write_back()
            check_scheduler(client)
        except KeyboardInterrupt:
            with contextlib.suppress(Exception):       # a scheduler already gone has nothing to stop
                stop.set()
                wait(futures, timeout=STOP_WAIT_SECONDS)
            raise
        finally:
            if copy is not None and client.status == "running":     # a copy on a lost scheduler went with it
                copy.write_back(last=True)
        for f, w in zip(futures, workers):
            try:
                log.info("study %r: %d trial(s) finished on %s", name, f.result(), w)
            except RunStopped:
                raise KeyboardInterrupt from None
            except Exception as exc:  # noqa: BLE001 - a lost worker loses its trial; a trial's error is the news
                if not lost_worker(exc):
                    raise
                log.warning("study %r: the worker at %s was lost (%s); its trial is %s", name, w,
                            type(exc).__name__, "recorded as failed (the scheduler's copy of the study has no "
                            "heartbeat)" if copy is not None else "retried when its heartbeat stops")
