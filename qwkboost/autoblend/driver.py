r"""A time budget: candidates cross-validated in the order of expected gain per second, the most promising one
tuned while time remains, and the greedy blend of every candidate that finished, with its nested estimate.

The candidates are ordinary runs (:func:`qwkboost.runs.experiment.run_experiment`): each writes its outputs
into ``<output dir>/candidates/<engine>-<objective>[-trial-<n>]/`` and is a child of the budget's MLflow run, so
``experiments/blend.py``, ``load_run`` and ``predict.py`` work on them as on any run. The budget's own directory
holds what a run writes (``submission.csv``, ``predictions.parquet``, ``oof.parquet``, ``pipeline/``), from the
blend, and ``leaderboard.csv``. Stopped with Ctrl-C or SIGTERM, it writes the blend of what finished (stopped during
that blend, the outputs at hand: :mod:`qwkboost.autoblend.finish`); run again on the same directory, it reuses
finished candidates (:mod:`qwkboost.autoblend.state`) of the same data whose files are as they were left, and blends
only those the current ``auto.engines`` and ``auto.objectives`` allow. On a Dask cluster, a lost scheduler ends it
the same way, with the blend of what finished (:class:`~qwkboost.exceptions.ClusterLost`).

How it decides is not here: the driver opens the directory's record, makes the :class:`~qwkboost.autoblend.context.Context`
and hands it to the loop (:func:`~qwkboost.autoblend.loop.run_loop`) with its sources (the default candidates, then
tuning), then to the end (:func:`~qwkboost.autoblend.finish.finish`). No function it calls calls back into it.

The outputs are written beside the previous ones and swapped in when complete
(:func:`qwkboost.tracking.writing.staged`): a resume that fails or is stopped keeps the last good submission. One
command writes a directory at a time (:class:`qwkboost.tracking.writing.OutputLock`), and only a directory that is
new, empty or its own (:func:`qwkboost.tracking.writing.claim`).
"""

from __future__ import annotations

import contextlib
import logging
import math
from pathlib import Path
from typing import Mapping

from qwkboost import tracking
from qwkboost.autoblend.budget import Budget
from qwkboost.autoblend.context import Context
from qwkboost.autoblend.costs import CostModel, time_one_blend_score
from qwkboost.autoblend.executor import Executor, LocalExecutor
from qwkboost.autoblend.finish import AutoResult, fall_back, finish
from qwkboost.autoblend.fit import room
from qwkboost.autoblend.loop import run_loop
from qwkboost.autoblend.progress import Progress
from qwkboost.autoblend.ranking import rank, shape_of
from qwkboost.autoblend.schedule import Defaults, screen_rest
from qwkboost.autoblend.settings import AutoSettings
from qwkboost.autoblend.state import AutoState, SessionStatus, shared_part
from qwkboost.autoblend.tuning import Tuning
import qwkboost.runs.tuning as tuning_face
from qwkboost.cv.crossval import progress_enabled
from qwkboost.data.dataset import Dataset
from qwkboost.data.fingerprint import fingerprint
from qwkboost.exceptions import ClusterLost, ConfigError
from qwkboost.tracking.interrupt import raise_if_swallowed, stop_mark
from qwkboost.tracking.writing import OutputLock, claim

__all__ = ["AutoRun", "AutoResult"]

log = logging.getLogger("qwkboost.autoblend")


class AutoRun:
    """One invocation of a time budget over one data set (see the module docstring).

    Parameters
    ----------
    settings : AutoSettings
    configs : dict
        ``(engine, objective) -> config`` of every planned candidate, in the order to run them (resolved configs,
        as :func:`~qwkboost.runs.experiment.run_experiment` takes them).
    dataset : Dataset
        Loaded once, shared by every candidate.
    output_dir : path
    experiment_id : str or None
        The MLflow experiment; ``None`` logs nothing.
    run_name : str
    budget : Budget, optional
        Started by the caller when loading the data counts; default: from now.
    progress : bool, optional
        The progress line (default: on a terminal).
    command : str, optional
        The command line, tagged on the parent run.
    data_names : (str, str)
        How messages name the training and the test data (``data.path='train.csv'``, ``X``).
    dir_key : str
        How the user names the output directory (``hydra.run.dir``, ``output_dir``).
    hydra : tuple of str, optional
        What Hydra made in the output directory (:func:`~qwkboost.tracking.writing.hydra_entries`), which does not
        make it another command's (:func:`~qwkboost.tracking.writing.claim`).
    """

    def __init__(self, settings: AutoSettings, configs: Mapping[tuple[str, str], dict], dataset: Dataset,
                 output_dir, experiment_id: str | None = None, run_name: str = "auto", budget: Budget | None = None,
                 progress: bool | None = None, command: str | None = None,
                 data_names: tuple[str, str] = ("the training data", "the test data"),
                 dir_key: str = "hydra.run.dir", hydra: tuple[str, ...] | None = None):
        self.settings, self.ds = settings, dataset
        # the candidates in the order for this data's shape, each with the reason (ranking)
        self.shape = shape_of(dataset)
        ranked = rank(configs, self.shape)
        self.configs = {pair: configs[pair] for pair, _ in ranked}
        self.why = dict(ranked)
        self.data_names, self.dir_key, self.hydra = data_names, dir_key, hydra
        self.fingerprint = fingerprint(dataset)
        self.out = Path(output_dir)
        self.experiment_id, self.run_name, self.command = experiment_id, run_name, command
        self.budget = budget or Budget(settings.time_limit)
        self.progress = Progress(self.budget, progress_enabled() if progress is None else progress)
        self.base = next(iter(self.configs.values()))
        self.n_folds = int(self.base["cv"]["n_splits"]) * int(self.base["cv"].get("repeats", 1))
        self._eval_seconds = time_one_blend_score(dataset)

    def context(self, state: AutoState, executor: Executor) -> Context:
        """The :class:`~qwkboost.autoblend.context.Context` of this invocation on ``state`` and ``executor``."""
        return Context(self.settings, self.configs, self.why, self.ds, self.shape, self.out, self.budget, state,
                       CostModel(self.shape), executor, self.progress, self.experiment_id, self.n_folds,
                       self._eval_seconds, self.fingerprint, self.data_names)

    # ------------------------------------------------------------------ the whole
    def run(self, executor: Executor | None = None) -> AutoResult:
        """Run the candidates, then tuning, then the blend, within the budget (module docstring), on ``executor``
        (:mod:`qwkboost.autoblend.executor`; default: this process, one candidate at a time; a cluster's,
        :class:`~qwkboost.autoblend.dask_executor.DaskExecutor`, runs as many at once as it has workers).

        Raises
        ------
        ConfigError
            If the output directory is another command's (its lock held), belongs to another configuration or
            other data, the time limit cannot start a candidate, or no candidate finished in time.
        KeyboardInterrupt
            When stopped with Ctrl-C or SIGTERM, after writing the blend of what finished (if any did); the parent
            run then ends KILLED and ``auto.json`` records the session as stopped.
        """
        claim(self.out, "auto", self.dir_key, self.hydra)      # before the lock's files: a user's folder gets none
        with OutputLock(self.out, self.dir_key):
            state = self.check_directory()
            for s in state.close_abandoned():
                log.warning("auto: the invocation of %s (pid %s) ended without closing its record in auto.json; it is "
                            "marked killed", s.get("started"), s.get("pid"))
            ctx = self.context(state, executor or LocalExecutor(self.ds, self.budget, self.progress.tick))
            if state.migrate(ctx.config_of):
                log.info("auto: the finished candidates an earlier qwkboost recorded are reused as they are")
            self._check_time_left(ctx)
            session = state.begin(self.settings.as_dict())
            status = SessionStatus.FAILED
            try:
                result = self._run(ctx, len(state.sessions))
                status = SessionStatus.FINISHED
                return result
            except KeyboardInterrupt:
                status = SessionStatus.STOPPED
                raise
            finally:
                self.progress.close()
                with contextlib.suppress(OSError):      # the record never hides the error that ended the run
                    state.end(session, status, stopped=status == SessionStatus.STOPPED, members=ctx.closing.members,
                              n_finished=ctx.n_finished(), time_limit=self.settings.time_limit,
                              seconds=round(self.budget.elapsed, 2), **ctx.closing.facts)

    def check_directory(self) -> AutoState:
        """The output directory's record, refused (:class:`ConfigError`) if it holds another configuration's or other
        data's candidates or a study file that is not one; :meth:`run` calls it under the directory's lock, a cluster's
        command before it connects."""
        claim(self.out, "auto", self.dir_key, self.hydra)      # a folder of the user's files is refused
        state = AutoState.open(self.out, shared_part(self.base), self.fingerprint, self.data_names, self.dir_key)
        if self.settings.tune:
            try:
                tuning_face.check_study_file(self.out / "tuning.db", "auto's tuning study")
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        return state

    def _run(self, ctx: Context, number: int) -> AutoResult:
        parent = contextlib.nullcontext() if self.experiment_id is None else \
            tracking.run(self.experiment_id, self.run_name, run_id=self._resumable(ctx.state.parent_run_id),
                         tags={"kind": "auto", "qwkboost.auto": "parent", "data": self.base["data"].get("name", "data"),
                               **({"command": self.command} if self.command else {})})
        from tqdm.contrib.logging import logging_redirect_tqdm  # slow to import: tqdm

        # with the progress line on a terminal, log lines print above it
        redirect = logging_redirect_tqdm(loggers=[logging.getLogger()]) if self.progress.enabled else \
            contextlib.nullcontext()
        state = ctx.state
        with redirect, parent as active:
            if active is not None:
                resumed = state.parent_run_id == active.info.run_id
                ctx.parent_id = state.parent_run_id = active.info.run_id
                if not resumed:     # what every session shares (the directory refuses other values of them)
                    tracking.log_params({"data": self.base["data"], "cv": self.base["cv"],
                                         "thresholds": self.base["thresholds"], "seed": self.base.get("seed", 0)})
                    tracking.log_datasets(self.fingerprint, self.base["data"])
                # each session's own settings (a resumed directory may get another budget, other engines)
                tracking.log_dict(self.settings.as_dict(), f"sessions/{number}/auto.json")
                tracking.set_tags(tracking.version_tags())
            state.save()
            stop, mark = None, stop_mark()
            try:
                run_loop(ctx, [Defaults(ctx), *([Tuning()] if self.settings.tune else [])])
                screen_rest(ctx)
            except KeyboardInterrupt as exc:
                if not ctx.members():
                    log.warning("auto: stopped before any candidate finished: nothing to blend%s",
                                "; the previous outputs are kept" if (self.out / "submission.csv").exists() else "")
                    raise
                log.warning("auto: stopped; writing the blend of the %d candidate(s) that finished",
                            ctx.n_finished())
                stop = exc
            except ClusterLost as exc:      # the scheduler is gone: the budget ends with what finished
                ctx.closing.facts["cluster_lost"] = str(exc)
                log.warning("auto: %s; the candidates running there are lost, and the budget ends with the blend of "
                            "the %d that finished (the same command again resumes it)", exc, ctx.n_finished())
            try:
                result = finish(ctx, stopped=stop is not None)
            except KeyboardInterrupt:
                fall_back(ctx)      # a stop during the blend: the best outputs at hand
                raise
            if stop is not None:
                raise stop
            raise_if_swallowed(mark)        # a stop Python dropped while the blend was written ends the run stopped
            if active is not None:
                log.info("MLflow run: %s", tracking.run_link(self.experiment_id, active.info.run_id))
            return result

    def _check_time_left(self, ctx: Context) -> None:
        """Refuse a time limit that leaves no time to start a candidate (after reading the data and keeping the
        reserve for the end), unless finished candidates can be blended again.

        Raises
        ------
        ConfigError
            Naming ``auto.time_limit`` and the least that can start one.
        """
        now = room(ctx)
        if now.left > 0:
            return
        least = math.ceil(self.budget.elapsed + now.reserve.seconds) + 1
        done = ctx.n_finished()
        if done:        # a resume that only blends again what finished: said, not refused
            log.warning("auto: auto.time_limit=%g s cannot start a candidate (give auto.time_limit=%d or more for "
                        "that); blending again the %d that finished", self.settings.time_limit, least, done)
            return
        raise ConfigError(f"auto.time_limit={self.settings.time_limit:g} s cannot start a candidate: reading the data "
                          f"took {self.budget.elapsed:.1f} s and {now.reserve.seconds:.0f} s are kept for the blend's "
                          f"files{' and its MLflow model' if self.experiment_id is not None else ''}; give "
                          f"auto.time_limit={least} or more")

    def _resumable(self, run_id: str | None) -> str | None:
        """``run_id`` if the store still has it (a resumed directory continues its parent run)."""
        if run_id is None:
            return None
        import mlflow  # slow to import: mlflow

        try:
            mlflow.MlflowClient().get_run(run_id)
            return run_id
        except Exception:  # noqa: BLE001 - another store, or the run was deleted: a new parent
            return None
