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

The outputs are written beside the previous ones and swapped in when complete
(:func:`qwkboost.tracking.writing.staged`): a resume that fails or is stopped keeps the last good submission. One
command writes a directory at a time (:class:`qwkboost.tracking.writing.OutputLock`), and only a directory that is
new, empty or its own (:func:`qwkboost.tracking.writing.claim`).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import time
from pathlib import Path
from typing import Mapping

import numpy as np

from qwkboost import tracking
from qwkboost.autoblend.budget import (CANDIDATE_SECONDS_PER_MB, PYFUNC_SECONDS, READ_SECONDS_PER_MB, SECONDS_PER_MB,
                                      SECONDS_PER_MB_TRACKED, WRITE_SECONDS, Budget)
from qwkboost.autoblend.candidates import Candidate, CostModel
from qwkboost.autoblend.executor import Executor, GuardSpec, Job, LocalExecutor, Outcome
from qwkboost.autoblend.finish import AutoResult, fall_back, finish
from qwkboost.autoblend.progress import Progress
from qwkboost.autoblend.ranking import rank, shape_of
from qwkboost.autoblend.schedule import finish_running, run_defaults, screen_rest
from qwkboost.autoblend.settings import AutoSettings
from qwkboost.autoblend.state import AutoState, SessionStatus, Status, config_hash, shared_part
from qwkboost.autoblend.tuning import tune_best
from qwkboost.blending.methods import GREEDY_STEPS, _binned_qwk
from qwkboost.cv.crossval import progress_enabled
from qwkboost.data.dataset import Dataset, class_range
from qwkboost.data.fingerprint import fingerprint
from qwkboost.exceptions import ClusterLost, ConfigError
from qwkboost.tracking.interrupt import raise_if_swallowed, stop_mark
from qwkboost.tracking.writing import OutputLock, claim, manifest

__all__ = ["AutoRun", "AutoResult"]

log = logging.getLogger("qwkboost.autoblend")


def diverse_pool(done: list[tuple[str, dict]], size: int) -> list[tuple[str, dict]]:
    """At most ``size`` finished candidates for the blend to choose from, taken in rounds: each (engine,
    objective) pair's best nested out-of-fold QWK first (pairs in the order of that QWK), then each pair's second
    best, and so on.

    Ensemble selection gains from members that err differently (Caruana et al., ICML 2004); the best ``size``
    by score alone were, at 900 s on InstEval, 13 tuning trials of LightGBM's squared error whose blend scored
    0.4074 nested out-of-fold QWK, below the 0.4166 that 300 s reached with six engines and objectives."""
    def score(nr: tuple[str, dict]) -> float:
        q = nr[1].get("qwk_thresholds_oof_nested")
        return -np.inf if q is None or np.isnan(q) else q        # a missing score sorts last, never first

    groups: dict[tuple, list[tuple[str, dict]]] = {}
    for n, r in sorted(done, key=score, reverse=True):
        groups.setdefault((r.get("engine"), r.get("objective")), []).append((n, r))
    pool: list[tuple[str, dict]] = []
    for i in range(max((len(g) for g in groups.values()), default=0)):
        pool += [g[i] for g in groups.values() if i < len(g)]   # groups keep their best-first order
    return pool[:size]


def _megabytes(directory: Path) -> float:
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file()) / 2 ** 20


def _stop_status(outcome: Outcome) -> Status:
    """A stopped candidate's status in ``leaderboard.csv``, from its stop's tags."""
    if outcome.tags.get("qwkboost.trial_state") == "PRUNED":
        return Status.PRUNED
    return {"LOST_WORKER": Status.LOST, "STOPPED": Status.INTERRUPTED}.get(outcome.tags.get("qwkboost.auto"),
                                                                          Status.STOPPED)


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
    executor : Executor, optional
        Where the candidates run (:mod:`qwkboost.autoblend.executor`); default: in this process, one at a time. A
        cluster's (:class:`~qwkboost.autoblend.cluster.DaskExecutor`) runs as many at once as it has workers.
    hydra : tuple of str, optional
        What Hydra made in the output directory (:func:`~qwkboost.tracking.writing.hydra_entries`), which does not
        make it another command's (:func:`~qwkboost.tracking.writing.claim`).
    """

    def __init__(self, settings: AutoSettings, configs: Mapping[tuple[str, str], dict], dataset: Dataset,
                 output_dir, experiment_id: str | None = None, run_name: str = "auto", budget: Budget | None = None,
                 progress: bool | None = None, command: str | None = None,
                 data_names: tuple[str, str] = ("the training data", "the test data"),
                 dir_key: str = "hydra.run.dir", executor: Executor | None = None,
                 hydra: tuple[str, ...] | None = None):

        self.settings, self.ds = settings, dataset
        # the candidates in the order for this data's shape, each with the reason (ranking)
        self.shape = shape_of(dataset)
        ranked = rank(configs, self.shape)
        self.configs = {pair: configs[pair] for pair, _ in ranked}
        self.why = dict(ranked)
        self.data_names, self.dir_key, self.hydra = data_names, dir_key, hydra
        self._end: dict = {}
        self._members, self._written = 0, False
        self.fingerprint = fingerprint(dataset)
        self._checked: dict[str, str | None] = {}      # candidate -> its damage, as read by this invocation
        self.out = Path(output_dir)
        self.experiment_id, self.run_name, self.command = experiment_id, run_name, command
        self.budget = budget or Budget(settings.time_limit)
        self.progress = Progress(self.budget, progress_enabled() if progress is None else progress)
        #: where candidates run (:mod:`qwkboost.autoblend.executor`): this process, one at a time, unless given
        self.executor: Executor = executor or LocalExecutor(dataset, self.budget, self.progress.tick)
        self._started: dict[str, tuple[dict, str, str]] = {}       # a started job's record so far
        #: candidates a step left running on the executor for the next (name -> (candidate, None)): the last default
        #: candidates on a cluster, while tuning starts beside them
        self.running: dict[str, tuple] = {}
        self.cost = CostModel(self.shape)
        self.coming_mb = 0.0        # the pipeline expected of the candidate about to run (set_reserve)
        first = next(iter(self.configs.values()))
        self.base = first
        self.n_folds = int(first["cv"]["n_splits"]) * int(first["cv"].get("repeats", 1))
        self.parent_id: str | None = None
        self._eval_seconds = self._time_one_blend_score()

    # ------------------------------------------------------------------ the budget's shape
    def _time_one_blend_score(self) -> float:
        """Seconds to score one blend on these rows (what the greedy search repeats), measured once."""
        y = self.ds.y_train
        classes = class_range(self.ds.classes)
        y_idx = (y - classes[0]).astype(np.int64)
        s = y_idx + np.random.default_rng(0).normal(size=y.size)
        t = time.perf_counter()
        _binned_qwk(s, y_idx, classes.size, None, "exact", 1024)
        return time.perf_counter() - t

    def set_reserve(self, state: AutoState, coming: int = 1, coming_seconds: float | None = None,
                    coming_pair: tuple[str, str] | None = None) -> None:
        """Set the budget's reserve: seconds kept for the end, the greedy blend of the finished candidates and
        ``coming`` more (its in-sample fit and one per fold for the nested estimate), its files and its MLflow model,
        which grow with the size of the members' pipelines (seconds per megabyte by engine,
        :data:`~qwkboost.autoblend.budget.SECONDS_PER_MB` and :data:`~qwkboost.autoblend.budget.READ_SECONDS_PER_MB`):
        the blend's pool as it stands (:meth:`members`, all of which the blend may weigh), and each coming
        candidate's, expected from its seconds (``coming_seconds``) times the megabytes per second of cross-validation
        that its engine's finished candidates wrote (pipelines grow with the rounds), or, for an engine not yet
        measured, the largest of those rates and at least the largest pipeline so far, and at least what its screen's
        model says (``coming_pair``, :meth:`CostModel.pipeline_mb`): on MovieLens, CatBoost's pipeline of 627 MB was
        4.6 times what LightGBM's rate said."""
        coming_engine = coming_pair[0] if coming_pair else None
        done = [r for r in state.candidates.values() if r.get("status") == Status.FINISHED]
        m = min(len(done) + coming, self.settings.max_members)
        blend_s = 0.0 if m < 2 else 1.3 * self._eval_seconds * m * GREEDY_STEPS * (self.n_folds + 1)
        tracked = self.experiment_id is not None
        per_mb = SECONDS_PER_MB_TRACKED if tracked else SECONDS_PER_MB

        def seconds_per_mb(engine) -> float:
            return per_mb + READ_SECONDS_PER_MB.get(engine, max(READ_SECONDS_PER_MB.values()))

        pool = diverse_pool([(n, r) for n, r in state.candidates.items()
                             if r.get("status") == Status.FINISHED and self.allowed(r)], self.settings.max_members)
        pooled = sum(r.get("pipeline_mb", 0.0) * seconds_per_mb(r.get("engine")) for _, r in pool)
        rates = {}
        for r in done:
            if r.get("seconds"):
                rates[r.get("engine")] = max(rates.get(r.get("engine"), 0.0), r.get("pipeline_mb", 0.0) / r["seconds"])
        if coming_seconds is not None and coming_engine in rates:
            coming_mb = rates[coming_engine] * coming_seconds
        else:
            coming_mb = max(max((r.get("pipeline_mb", 0.0) for r in done), default=0.0),
                            max(rates.values(), default=0.0) * (coming_seconds or 0.0),
                            (self.cost.pipeline_mb(coming_pair, self.n_folds) or 0.0) if coming_pair else 0.0)
        self.coming_mb = coming_mb
        self.budget.reserve = blend_s + WRITE_SECONDS + pooled + \
            coming * coming_mb * seconds_per_mb(coming_engine) + (PYFUNC_SECONDS if tracked else 0.0)

    # ------------------------------------------------------------------ candidates
    def _n_finished(self, state: AutoState) -> int:
        return sum(1 for r in state.candidates.values() if r.get("status") == Status.FINISHED and self.allowed(r))

    def run_candidate(self, state: AutoState, cand: Candidate, cfg: dict, reporter=None,
                      why: str = "") -> dict | None:
        """Cross-validate one candidate within the budget (or reuse it); its record, or ``None`` if it was left out
        (it would not fit in the time left) or stopped (out of time, or pruned by ``reporter``). ``why`` is the
        reason for its place (the leaderboard's); its screen, if it had one, stays in its record."""
        job = self.start_candidate(state, cand, cfg, rescue=reporter is None, why=why)
        if not isinstance(job, Job):
            return job
        return self.end_candidate(state, cand, self.executor.run(job, reporter))

    def start_candidate(self, state: AutoState, cand: Candidate, cfg: dict, rescue: bool = True, why: str = "",
                        running: int = 0) -> Job | dict | None:
        """The :class:`~qwkboost.autoblend.executor.Job` that cross-validates ``cand`` within the budget, to hand to
        the executor; or its record when it is reused, or ``None`` when it is left out (it would not fit in the time
        left). ``rescue``: its folds may shorten to finish within the limit (a default candidate, not a tuning
        trial); ``running``: how many candidates an executor is running now (their blend members and pipelines are
        kept in the reserve too)."""
        cfg_hash = config_hash(cfg)
        rec = state.finished(cand.name, cfg_hash)
        damage = None if rec is None else self._damage(state, cand.name)
        if damage is not None:
            log.warning("auto: %s runs again: %s", cand.name, damage)
            rec = None
        if rec is not None:
            self.cost.record(cand, rec["seconds"], rec.get("fit_seconds"))
            self.progress.finished(rec.get("qwk_thresholds_oof_nested"))
            log.info("auto: %s reused (%.0f s, nested OOF QWK %.4f)", cand.name, rec["seconds"],
                     rec.get("qwk_thresholds_oof_nested", float("nan")))
            return rec
        where = self.executor.place(cfg)        # whole on one worker, or its rows across a cluster's workers
        if where.how == "none":
            if state.candidates.get(cand.name, {}).get("status") != Status.FINISHED:
                log.warning("auto: %s left out: %s", cand.name, where.why)
                state.candidates[cand.name] = {**self._kept(state, cand), "status": Status.LEFT_OUT,
                                               "reason": where.why, "why": why, "engine": cand.engine,
                                               "objective": cand.objective}
            return None
        estimate = self.cost.estimate(cand)
        self.set_reserve(state, coming=1 + running, coming_seconds=estimate, coming_pair=cand.pair)
        # what the candidate spends after its folds (scores, cut points, writing its pipeline) is kept out of them
        tail = self.cost.overhead(cand.pair) + CANDIDATE_SECONDS_PER_MB * self.coming_mb
        # left out when it would not fit, or when its tail leaves its folds no time (its guard would stop it at
        # once: on Diamonds at 240 s, 25 candidates and trials in a row were started and stopped in 0.1 s each)
        if estimate is not None and (estimate > self.budget.left_for_work or tail >= self.budget.left_for_work):
            log.debug("auto: %s left out: it would take about %.0f s (%.0f s after its folds) and %.0f s are left",
                      cand.name, estimate, tail, max(self.budget.left_for_work, 0))
            if state.candidates.get(cand.name, {}).get("status") != Status.FINISHED:    # an earlier finish stays
                state.candidates[cand.name] = {**self._kept(state, cand), "status": Status.LEFT_OUT,
                                               "estimate": round(estimate, 1), "why": why,
                                               "engine": cand.engine, "objective": cand.objective}
            return None
        self.progress.step(cand.name)
        guard = GuardSpec(
            self.n_folds,
            # until one candidate has finished, the folds share the time left rather than risk ending with nothing
            share_folds=self._n_finished(state) == 0,
            # a default candidate whose estimate was a little short finishes with shorter folds rather than being
            # dropped (a tuning trial is stopped: its pruned QWK would mislead the study)
            rescue=rescue, fold_seconds=None if estimate is None else estimate / self.n_folds, tail_seconds=tail)
        run_cfg = copy.deepcopy(cfg)
        # a candidate's pipeline stays in its directory; MLflow gets the blend's, in the parent run (copying every
        # candidate's models, tens of megabytes each at competition size, would cost seconds of the budget apiece)
        run_cfg["tracking"] = {**run_cfg.get("tracking", {}), "log_models": False, "log_pyfunc": False,
                               "explain": False}
        directory = f"candidates/{cand.name}"
        for d in (self.out / "candidates", self.out / directory):    # a link in their place is not followed
            if d.is_symlink() or (d.exists() and not d.is_dir()):
                d.unlink()
        if where.why:
            log.info("auto: %s: %s", cand.name, where.why)
        started = {"why": f"{why}; {where.why}" if where.why else why, "started_at": round(self.budget.elapsed, 1),
                   **({"estimate": round(estimate, 1)} if estimate is not None else {})}
        self._started[cand.name] = (started, cfg_hash, directory)
        return Job(cand.name, run_cfg, self.out / directory, guard, self.experiment_id, self.parent_id,
                   rows=where.rows)

    def end_candidate(self, state: AutoState, cand: Candidate, outcome: Outcome) -> dict | None:
        """Record what became of ``cand``'s job (:meth:`start_candidate`): its record, or ``None`` if it was
        stopped (out of time, pruned, its worker lost)."""
        started, cfg_hash, directory = self._started.pop(cand.name)
        started = {**started, **({"worker": outcome.where} if outcome.where != "this process" else {})}
        if outcome.row is None:
            # a trial the pruner stopped is "pruned", one the time guard stopped "stopped", one Ctrl-C stopped
            # "interrupted", one whose worker went "lost": the leaderboard tells each from the others
            state.candidates[cand.name] = {**self._kept(state, cand), "status": _stop_status(outcome),
                                           "reason": outcome.stopped, "engine": cand.engine,
                                           "objective": cand.objective, "seconds": round(outcome.seconds, 2),
                                           **started}
            state.save()
            log.info("auto: %s %s", cand.name, outcome.stopped)
            return None
        row, seconds = outcome.row, outcome.seconds
        self.cost.record(cand, seconds, row.get("fit_seconds"))
        rec = {**self._kept(state, cand), **started, "status": Status.FINISHED, "engine": cand.engine,
               "objective": cand.objective,
               "params": dict(cand.params), "trial": cand.trial, "dir": directory, "config_hash": cfg_hash,
               **({"speedup": round(cand.speedup, 4)} if cand.speedup != 1.0 else {}),
               "seconds": round(seconds, 2), "run_id": row.get("run_id"), "capped_folds": outcome.capped,
               "pipeline_mb": round(_megabytes(self.out / directory / "pipeline"), 2),
               "files": manifest(self.out / directory),      # just written: as _damage would find it
               **{k: row[k] for k in ("qwk_thresholds_oof", "qwk_thresholds_oof_nested", "qwk_thresholds",
                                      "best_iteration_mean", "fit_seconds") if k in row}}
        state.candidates[cand.name] = rec
        self._checked[cand.name] = None
        plain = state.candidates.get(Candidate(*cand.pair).name)
        if cand.speedup != 1.0 and plain is not None and plain.get("status") != Status.FINISHED:
            plain.update(status=Status.REPLACED, why=f"ran as {cand.name}")      # its faster variant finished
        state.save()
        if outcome.capped:
            log.info("auto: %s: %d of %d folds ended at their share of the time, before early stopping%s", cand.name,
                     outcome.capped, self.n_folds,
                     " (it would have ended past the limit: its folds shared the time left)" if outcome.rescued else "")
        self.progress.finished(rec.get("qwk_thresholds_oof_nested"))
        return rec

    @staticmethod
    def _kept(state: AutoState, cand: Candidate) -> dict:
        """What a candidate's new record keeps of its old one: its screen (a faster variant's, its pair's)."""
        for name in (cand.name, Candidate(*cand.pair).name if cand.trial is None else cand.name):
            old = state.candidates.get(name, {})
            if isinstance(old.get("screen"), dict):
                return {"screen": old["screen"]}
        return {}

    # ------------------------------------------------------------------ the end
    def _damage(self, state: AutoState, name: str) -> str | None:
        """:meth:`~qwkboost.autoblend.state.AutoState.damage`, read once per invocation: a candidate checked when
        it was reused, or written by this invocation, is not digested again for the blend."""
        if name not in self._checked:
            self._checked[name] = state.damage(name)
        return self._checked[name]

    def config_of(self, rec: Mapping) -> dict | None:
        """The config a candidate's record ran with: its pair's, with the engine parameters it changed (a faster
        variant's learning rate, a trial's draw); ``None`` for a pair this invocation does not run."""
        pair = (rec.get("engine"), rec.get("objective"))
        if pair not in self.configs:
            return None
        cfg = copy.deepcopy(self.configs[pair])
        cfg["engine"]["params"] = {**(cfg["engine"].get("params") or {}), **(rec.get("params") or {})}
        return cfg

    def allowed(self, rec: Mapping) -> bool:
        """Whether a candidate's engine and objective are among this invocation's (``auto.engines``,
        ``auto.objectives``): a resume that narrows them blends none of the others."""
        return (rec.get("engine"), rec.get("objective")) in self.configs

    def members(self, state: AutoState) -> list[tuple[str, dict]]:
        """The blend's pool: the finished candidates this invocation allows (:meth:`allowed`) whose files are as
        they were left (:meth:`~qwkboost.autoblend.state.AutoState.damage`), at most ``auto.max_members``.

        See :func:`diverse_pool`: each (engine, objective) pair's best run first, then each pair's second best, and
        so on, so that tuning trials of one pair cannot crowd the other pairs out of the pool."""
        done = []
        for n, r in state.candidates.items():
            if r.get("status") != Status.FINISHED or not self.allowed(r):
                continue
            damage = self._damage(state, n)
            if damage is not None:
                log.warning("auto: %s is left out of the blend: %s", n, damage)
                continue
            done.append((n, r))
        return diverse_pool(done, self.settings.max_members)

    def finish(self, state: AutoState, stopped: bool = False) -> AutoResult:
        """Blend the finished candidates, write the outputs (beside the previous ones, swapped in when complete),
        log them in the parent run; the result (:func:`~qwkboost.autoblend.finish.finish`)."""
        return finish(self, state, stopped)

    # ------------------------------------------------------------------ the whole
    def run(self) -> AutoResult:
        """Run the candidates, then tuning, then the blend, within the budget (module docstring).

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
            if state.migrate(self.config_of):
                log.info("auto: the finished candidates an earlier qwkboost recorded are reused as they are")
            self._check_time_left(state)
            session = state.begin(self.settings.as_dict())
            status, self._members, self._end = SessionStatus.FAILED, 0, {}
            try:
                result = self._run(state, len(state.sessions))
                status = SessionStatus.FINISHED
                return result
            except KeyboardInterrupt:
                status = SessionStatus.STOPPED
                raise
            finally:
                self.progress.close()
                with contextlib.suppress(OSError):      # the record never hides the error that ended the run
                    state.end(session, status, stopped=status == SessionStatus.STOPPED, members=self._members,
                              n_finished=self._n_finished(state), time_limit=self.settings.time_limit,
                              seconds=round(self.budget.elapsed, 2), **self._end)

    def check_directory(self) -> AutoState:
        """The output directory's record, refused (:class:`ConfigError`) if it holds another configuration's or other
        data's candidates or a study file that is not one; :meth:`run` calls it under the directory's lock, a cluster's
        command before it connects."""
        claim(self.out, "auto", self.dir_key, self.hydra)      # a folder of the user's files is refused
        state = AutoState.open(self.out, shared_part(self.base), self.fingerprint, self.data_names, self.dir_key)
        if self.settings.tune:
            from qwkboost.runs.tuning.storage import check_study_file  # slow to import: optuna

            try:
                check_study_file(self.out / "tuning.db", "auto's tuning study")
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        return state

    def _run(self, state: AutoState, number: int) -> AutoResult:
        parent = contextlib.nullcontext() if self.experiment_id is None else \
            tracking.run(self.experiment_id, self.run_name, run_id=self._resumable(state.parent_run_id),
                         tags={"qwkboost.auto": "parent", "data": self.base["data"].get("name", "data"),
                               **({"command": self.command} if self.command else {})})
        from tqdm.contrib.logging import logging_redirect_tqdm  # slow to import: tqdm

        # with the progress line on a terminal, log lines print above it
        redirect = logging_redirect_tqdm(loggers=[logging.getLogger()]) if self.progress.enabled else \
            contextlib.nullcontext()
        with redirect, parent as active:
            if active is not None:
                resumed = state.parent_run_id == active.info.run_id
                self.parent_id = state.parent_run_id = active.info.run_id
                if not resumed:     # what every session shares (the directory refuses other values of them)
                    tracking.log_params({"data": self.base["data"], "cv": self.base["cv"],
                                         "thresholds": self.base["thresholds"], "seed": self.base.get("seed", 0)})
                # each session's own settings (a resumed directory may get another budget, other engines)
                tracking.log_dict(self.settings.as_dict(), f"sessions/{number}/auto.json")
                tracking.set_tags({f"version.{k}": v for k, v in tracking.library_versions().items()})
            state.save()
            stop, mark = None, stop_mark()
            try:
                run_defaults(self, state)
                if self.settings.tune:
                    tune_best(self, state)
                finish_running(self, state)
                screen_rest(self, state)
            except KeyboardInterrupt as exc:
                if not self.members(state):
                    log.warning("auto: stopped before any candidate finished: nothing to blend%s",
                                "; the previous outputs are kept" if (self.out / "submission.csv").exists() else "")
                    raise
                log.warning("auto: stopped; writing the blend of the %d candidate(s) that finished",
                            self._n_finished(state))
                stop = exc
            except ClusterLost as exc:      # the scheduler is gone: the budget ends with what finished
                self._end["cluster_lost"] = str(exc)
                log.warning("auto: %s; the candidates running there are lost, and the budget ends with the blend of "
                            "the %d that finished (the same command again resumes it)", exc, self._n_finished(state))
            try:
                result = self.finish(state, stopped=stop is not None)
            except KeyboardInterrupt:
                fall_back(self, state)      # a stop during the blend: the best outputs at hand
                raise
            if stop is not None:
                raise stop
            raise_if_swallowed(mark)        # a stop Python dropped while the blend was written ends the run stopped
            return result

    def _check_time_left(self, state: AutoState) -> None:
        """Refuse a time limit that leaves no time to start a candidate (after reading the data and keeping the
        reserve for the end), unless finished candidates can be blended again.

        Raises
        ------
        ConfigError
            Naming ``auto.time_limit`` and the least that can start one.
        """
        self.set_reserve(state)
        if self.budget.left_for_work > 0:
            return
        least = math.ceil(self.budget.elapsed + self.budget.reserve) + 1
        done = self._n_finished(state)
        if done:        # a resume that only blends again what finished: said, not refused
            log.warning("auto: auto.time_limit=%g s cannot start a candidate (give auto.time_limit=%d or more for "
                        "that); blending again the %d that finished", self.settings.time_limit, least, done)
            return
        raise ConfigError(f"auto.time_limit={self.settings.time_limit:g} s cannot start a candidate: reading the data "
                          f"took {self.budget.elapsed:.1f} s and {self.budget.reserve:.0f} s are kept for the blend's "
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
