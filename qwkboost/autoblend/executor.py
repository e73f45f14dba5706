r"""Where a candidate runs: the loop (:mod:`qwkboost.autoblend.loop`) submits a :class:`Job` and gets a handle,
and takes each :class:`Outcome` as it completes.

The sources decide what runs, in which order and whether it fits; an executor only runs what it is given, within
the time the job carries (its :class:`GuardSpec`, read by a :class:`~qwkboost.autoblend.budget.TimeGuard` where
the folds train). :class:`LocalExecutor` is a cluster of one slot in this process; a cluster's executor
(:class:`~qwkboost.autoblend.dask_executor.DaskExecutor`) runs as many at once as it has free workers, behind the
same calls: no caller asks which one it has. An executor writes nothing of the budget's records; the jobs module
(:mod:`qwkboost.autoblend.jobs`) records its outcomes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Protocol

import qwkboost.runs.tuning as tuning_face
from qwkboost.autoblend.budget import Budget, CutShort, NotConverged, TimeGuard
from qwkboost.autoblend.placement import WHOLE, Placement
from qwkboost.data.dataset import Dataset
from qwkboost.exceptions import RunStopped
from qwkboost.runs.experiment import run_experiment

__all__ = ["GuardSpec", "TrialSpec", "Job", "Outcome", "Executor", "LocalExecutor", "run_job", "trial_reporter"]


@dataclass(frozen=True)
class GuardSpec:
    """How a job's folds keep within the budget (:class:`~qwkboost.autoblend.budget.TimeGuard`'s settings).

    Attributes
    ----------
    n_folds : int
    share_folds : bool
        The folds share the time left from the start (the first candidate).
    rescue : bool
        A candidate a little over its estimate finishes with shortened folds rather than being stopped.
    fold_seconds : float or None
        The expected seconds of one fold.
    tail_seconds : float
        What the candidate is expected to spend after its last fold.
    reserve : float
        Seconds kept back for the end when it started (:func:`~qwkboost.autoblend.costs.reserve`): its folds may use
        the time until the limit less these.
    converge : bool
        A fold that reaches its share of the time before early stopping stops the candidate
        (:class:`~qwkboost.autoblend.budget.NotConverged`) rather than being cut short.
    tail_folds : float
        The candidate's tail counted as this many of its folds while nothing has measured it.
    patience : int
        Early stopping's patience (for ``converge``).
    """

    n_folds: int
    share_folds: bool = False
    rescue: bool = False
    fold_seconds: float | None = None
    tail_seconds: float = 0.0
    reserve: float = 0.0
    converge: bool = False
    tail_folds: float = 0.0
    patience: int = 0


@dataclass(frozen=True)
class TrialSpec:
    """A tuning trial's place in its Optuna study, so that its pruner runs where the trial runs.

    Attributes
    ----------
    storage : str
        The study's storage URL (one the workers reach: a file on a shared disk, PostgreSQL, or the Dask scheduler's
        memory, :func:`~qwkboost.runs.tuning.storage.on_the_scheduler`).
    study_name : str
    trial_id : int
        Optuna's id of the trial (``trial._trial_id``), not its number.
    pruner : str
        :data:`~qwkboost.runs.tuning.pruners.PRUNERS`.
    metric, method : str
        What each fold reports (:class:`~qwkboost.runs.tuning.pruners.FoldReporter`).
    """

    storage: str
    study_name: str
    trial_id: int
    pruner: str
    metric: str = "qwk_thresholds_oof"
    method: str = "exact"


@dataclass(frozen=True)
class Job:
    """One candidate's cross-validation, as the driver hands it to an executor.

    Attributes
    ----------
    name : str
        The candidate's name (``lightgbm-squared_error``, ``...-trial-3``).
    config : dict
        Its resolved run config (tracking of models and explanations already turned off).
    directory : Path
        Where its files go (``<output dir>/candidates/<name>``).
    guard : GuardSpec
    experiment_id, parent_run_id : str or None
        Its MLflow experiment and the budget's parent run; ``None`` logs nothing.
    trial : TrialSpec or None
        A tuning trial's study, for its pruner where it runs (:func:`run_job`).
    rows : bool
        Each fold's rows are trained across every worker of a cluster, through the engine's Dask interface
        (:mod:`qwkboost.autoblend.placement`), rather than the whole candidate on one worker.
    """

    name: str
    config: dict
    directory: Path
    guard: GuardSpec
    experiment_id: str | None = None
    parent_run_id: str | None = None
    trial: TrialSpec | None = None
    rows: bool = False


@dataclass
class Outcome:
    """What became of a :class:`Job`.

    Attributes
    ----------
    name : str
    row : dict or None
        The run's metrics (:func:`~qwkboost.runs.experiment.run_experiment`'s row); ``None`` if it was stopped.
    stopped : str or None
        Why it was stopped (by the time guard or a pruner); ``None`` if it finished.
    tags : dict
        The stop's tags (``qwkboost.trial_state=PRUNED`` for a pruned trial).
    seconds : float
        Its wall time where it ran.
    capped : int
        Folds that ended at their share of the time.
    rescued : bool
        Whether its folds shared the time left to finish within the limit.
    where : str
        ``this process``, or the address of the worker that ran it.
    cut : CutShort or None
        The fold that reached its share before early stopping, when that stopped it
        (:class:`~qwkboost.autoblend.budget.NotConverged`).
    """

    name: str
    row: dict | None
    stopped: str | None = None
    tags: dict = field(default_factory=dict)
    seconds: float = 0.0
    capped: int = 0
    rescued: bool = False
    where: str = "this process"
    cut: CutShort | None = None

    @property
    def lost(self) -> bool:
        """Whether it stopped because its worker was lost (a cluster's)."""
        return self.tags.get("qwkboost.auto") == "LOST_WORKER"


class Executor(Protocol):
    """Runs :class:`Job` objects (the loop's side of the seam)."""

    #: How many jobs it runs at once.
    slots: int

    @property
    def free(self) -> int:
        """How many more jobs it would start now."""

    def place(self, config: dict) -> Placement:
        """Where a candidate of ``config`` would train (:class:`~qwkboost.autoblend.placement.Placement`)."""

    def trial_storage(self, study, url: str) -> tuple[Any, str] | None:
        """Where a tuning trial's folds report to its pruner: ``(study, storage URL)`` that the jobs reach (the
        study's own when they see it, a working copy otherwise), or ``None`` when they cannot report (the trials
        then run unpruned)."""

    def submit(self, job: Job) -> str:
        """Start ``job`` (with ``slots > 1``: while others run); its handle, the name its :class:`Outcome` bears."""

    def next_outcome(self) -> Outcome:
        """Wait for the next started job to end; its outcome."""

    def stop(self) -> list[Outcome]:
        """Stop every started job; their outcomes."""

    def abandon(self) -> list[Outcome]:
        """Every started job as lost, without asking where it runs (a cluster whose scheduler is gone)."""


def run_job(job: Job, dataset: Dataset, budget: Budget, report: Callable[[int, int], None] | None = None,
            where: str = "this process", client=None, dask_stop=None) -> Outcome:
    """Cross-validate ``job`` on ``dataset`` within ``budget`` (:class:`~qwkboost.autoblend.budget.TimeGuard` from its
    :class:`GuardSpec`); ``report(fold, round)`` after every round, and a tuning trial's folds reported to the
    pruner of ``job.trial``, which may stop it. With a Dask ``client``, each fold's rows train across its workers
    (:attr:`Job.rows`): the guard then acts between folds, and ``dask_stop``
    (:class:`~qwkboost.distributed.tasks.RoundStop`) between the workers' rounds."""
    g = job.guard
    reporter = None if job.trial is None else trial_reporter(job.trial, dataset)
    guard = TimeGuard(budget, g.n_folds, report=report, share_folds=g.share_folds, rescue=g.rescue,
                      fold_seconds=g.fold_seconds, tail_seconds=g.tail_seconds, converge=g.converge,
                      tail_folds=g.tail_folds, patience=g.patience)

    def on_fold(i, valid, scores):
        if reporter is not None:
            reporter(i, valid, scores)
        guard.on_fold(i, valid, scores)

    t0 = time.monotonic()
    try:
        row = run_experiment(job.config, job.experiment_id, parent_run_id=job.parent_run_id, run_name=job.name,
                             output_dir=job.directory, dataset=dataset, on_fold=on_fold, on_round=guard.on_round,
                             progress=False, client=client, dask_stop=dask_stop,
                             fold_scores=reporter is not None,       # the guard reads the clock, not the scores
                             kind="candidate" if job.trial is None else "trial", tags={"candidate": job.name},
                             mlflow_name=mlflow_name(job))
    except RunStopped as stop:
        return Outcome(job.name, None, str(stop), dict(stop.tags), time.monotonic() - t0, len(guard.capped),
                       guard.rescued, where, stop.cut if isinstance(stop, NotConverged) else None)
    return Outcome(job.name, row, None, {}, time.monotonic() - t0, len(guard.capped), guard.rescued, where)


def trial_reporter(spec: TrialSpec, dataset: Dataset):
    """The fold reporter of the trial ``spec`` names, on its study in ``spec.storage``
    (:class:`~qwkboost.runs.tuning.pruners.FoldReporter`)."""
    return tuning_face.stored_fold_reporter(spec.storage, spec.study_name, spec.trial_id, spec.pruner, spec.method,
                                            dataset, spec.metric)


class LocalExecutor:
    """Runs one job at a time in this process, on the budget's own clock (:func:`run_job`).

    Parameters
    ----------
    dataset : Dataset
    budget : Budget
    report : callable, optional
        ``report(fold, round, n_folds)``: the progress line.
    """

    slots = 1

    def __init__(self, dataset: Dataset, budget: Budget, report: Callable[[int, int, int], Any] | None = None):
        self.dataset, self.budget, self.report = dataset, budget, report
        self._queue: list[Job] = []

    @property
    def free(self) -> int:
        return self.slots - len(self._queue)

    def place(self, config: dict) -> Placement:
        return WHOLE

    def trial_storage(self, study, url: str) -> tuple[Any, str]:
        return study, url           # this process sees the study's file

    def submit(self, job: Job) -> str:
        self._queue.append(job)
        return job.name

    def next_outcome(self) -> Outcome:
        return self.run(self._queue.pop(0))

    def stop(self) -> list[Outcome]:
        self._queue.clear()
        return []

    def abandon(self) -> list[Outcome]:
        return self.stop()          # nothing runs elsewhere

    def run(self, job: Job) -> Outcome:
        """Run ``job`` now, on the budget's clock less the reserve it carries; its outcome."""
        n = job.guard.n_folds
        report = None if self.report is None else (lambda i, rnd: self.report(i, rnd, n))
        return run_job(job, self.dataset, replace(self.budget, reserve=job.guard.reserve), report)


def mlflow_name(job: Job) -> str:
    """A candidate's MLflow run name as every run is named, ``engine/objective`` and what sets it apart
    (``native/squared_error lr0.344``, ``lightgbm/squared_error trial 3``); its folder keeps ``job.name``."""
    engine, objective = job.config["engine"]["name"], job.config["objective"]["name"]
    pair = f"{engine}-{objective}"
    rest = job.name[len(pair):].strip("-").replace("-", " ") if job.name.startswith(pair) else job.name
    return f"{engine}/{objective}" + (f" {rest}" if rest else "")
