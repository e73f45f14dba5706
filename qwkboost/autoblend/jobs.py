"""From a candidate to a job, and from its outcome to its record: the two ends of every candidate's path.

:func:`start` reuses a candidate that finished before (its files as they were left), leaves out one that cannot run
here or would not fit (:func:`~qwkboost.autoblend.fit.fits`), or prepares the :class:`Started` job the loop hands to
the executor; :func:`end` records what became of it. These are the only functions that write a candidate's record
after its screen (through :class:`~qwkboost.autoblend.state.AutoState`'s ``record_*`` methods) and that record
measured times in the cost model.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qwkboost.autoblend.candidates import Candidate
from qwkboost.autoblend.executor import GuardSpec, Job, Outcome
from qwkboost.autoblend.fit import fits, room, tail
from qwkboost.autoblend.state import CandidateRecord, Status, config_hash
from qwkboost.tracking.writing import manifest

if TYPE_CHECKING:
    from qwkboost.autoblend.context import Context

__all__ = ["Started", "start", "end", "stop_status", "TAIL_FOLDS"]

log = logging.getLogger("qwkboost.autoblend")


@dataclass(frozen=True)
class Started:
    """A candidate's job as handed to the executor, and what its record will say of its start.

    Attributes
    ----------
    cand : Candidate
    job : Job
    why : str
        The reason for its place (and where it runs, when that was decided for it).
    started_at : float
        Seconds into the budget.
    estimate : float or None
    estimate_kind : str or None
        What the estimate rests on (:meth:`~qwkboost.autoblend.costs.CostModel.kind`).
    cfg_hash : str
        The hash of the config it runs with.
    payload : object
        What the source that started it keeps with it (a default candidate's place, a trial), handed back with its
        outcome: the loop's one map of jobs in flight carries it.
    """

    cand: Candidate
    job: Job
    why: str
    started_at: float
    estimate: float | None
    estimate_kind: str | None
    cfg_hash: str
    payload: Any = None

    @property
    def name(self) -> str:
        return self.cand.name


#: What the first candidate is taken to spend after its folds, in folds of its own, until one has measured it:
#: LightGBM on MovieLens (75,003 rows, one core) spent 1.14 and 1.13 of its mean fold there in two runs (scoring
#: each fold's rows at the other folds' rounds, its cut points and files, and a cut fold's predictions after its
#: share); with one fold kept, the second of them ended 1.2 s over its 60 s limit. Since LightGBM scores its test
#: rows as it boosts it spends about half a fold there (0.50 on MovieLens, 0.76 on diamonds, one core); the other
#: engines still predict after their folds, so the first candidate of any engine keeps this.
TAIL_FOLDS = 1.25


def _pair_name(cand: Candidate) -> str | None:
    """The name of the record whose screen a candidate's record keeps besides its own: its pair's, for a default
    candidate (a faster variant's); none for a tuning trial."""
    return Candidate(*cand.pair).name if cand.trial is None else None


def _megabytes(directory: Path) -> float:
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file()) / 2 ** 20


def stop_status(outcome: Outcome) -> Status:
    """A stopped candidate's status in ``leaderboard.csv``, from its stop's tags."""
    if outcome.tags.get("qwkboost.trial_state") == "PRUNED":
        return Status.PRUNED
    return {"LOST_WORKER": Status.LOST, "STOPPED": Status.INTERRUPTED,
            "NOT_CONVERGED": Status.NOT_CONVERGED}.get(outcome.tags.get("qwkboost.auto"), Status.STOPPED)


def start(ctx: Context, cand: Candidate, cfg: dict, rescue: bool = True, why: str = "",
          running: int = 0, converge: bool = True, always: bool = False) -> Started | CandidateRecord | None:
    """The :class:`Started` job that cross-validates ``cand`` within the budget; or its record when it is reused, or
    ``None`` when it is left out (it cannot run here, or would not fit in the time left). ``rescue``: its folds may
    shorten to finish within the limit (a default candidate, not a tuning trial); ``running``: how many candidates
    the executor is running now (their blend members and pipelines are kept in the reserve too); ``converge``: with
    ``rescue``, a fold that reaches its share of the time before early stopping stops it so that it restarts at a
    raised learning rate (:func:`~qwkboost.autoblend.fit.converging`) rather than going on cut short; ``always``:
    it starts whatever its estimate (the first candidate, or its restart, when nothing has finished)."""
    state = ctx.state
    cfg_hash = config_hash(cfg)
    rec = state.finished(cand.name, cfg_hash)
    damage = None if rec is None else ctx.damage(cand.name)
    if damage is not None:
        log.warning("auto: %s runs again: %s", cand.name, damage)
        rec = None
    if rec is not None:
        ctx.cost.record(cand, rec.seconds, rec.fit_seconds)
        ctx.progress.finished(rec.qwk_thresholds_oof_nested)
        log.info("auto: %s reused (%.0f s, nested OOF QWK %.4f)", cand.name, rec.seconds,
                 rec.qwk_thresholds_oof_nested if rec.qwk_thresholds_oof_nested is not None else float("nan"))
        return rec
    where = ctx.executor.place(cfg)        # whole on one worker, or its rows across a cluster's workers
    if where.how == "none":
        if not getattr(state.candidates.get(cand.name), "finished", False):
            log.warning("auto: %s left out: %s", cand.name, where.why)
        state.record_left_out(cand.name, cand.pair, _pair_name(cand), why, reason=where.why)
        return None
    estimate = ctx.cost.estimate(cand)
    now = room(ctx, coming=1 + running, coming_seconds=estimate, coming_pair=cand.pair)
    after = tail(ctx, cand.pair, now)      # scores, cut points, its pipeline: kept out of its folds
    if not always and not fits(estimate, now.left, after):
        log.debug("auto: %s left out: it would take about %.0f s (%.0f s after its folds) and %.0f s are left",
                  cand.name, estimate, after, max(now.left, 0))
        state.record_left_out(cand.name, cand.pair, _pair_name(cand), why, estimate=round(estimate, 1),
                              estimate_kind=ctx.cost.kind(cand))
        return None
    ctx.progress.step(cand.name, kept=now.reserve.seconds)
    guard = GuardSpec(
        ctx.n_folds,
        # until one candidate has finished, the folds share the time left rather than risk ending with nothing
        share_folds=ctx.n_finished() == 0,
        # a default candidate whose estimate was a little short finishes with shorter folds rather than being
        # dropped (a tuning trial is stopped: its pruned QWK would mislead the study)
        rescue=rescue, fold_seconds=None if estimate is None else estimate / ctx.n_folds, tail_seconds=after,
        reserve=now.reserve.seconds,
        converge=converge and rescue and bool((cfg["engine"].get("params") or {}).get("learning_rate")),
        # until a candidate has measured what follows its folds, TAIL_FOLDS folds' time is kept for it
        tail_folds=0.0 if ctx.cost.trained else TAIL_FOLDS,
        patience=int(cfg["engine"].get("early_stopping_rounds") or 0))
    run_cfg = copy.deepcopy(cfg)
    # a candidate's pipeline stays in its directory; MLflow gets the blend's, in the parent run (copying every
    # candidate's models, tens of megabytes each at competition size, would cost seconds of the budget apiece)
    run_cfg["tracking"] = {**run_cfg.get("tracking", {}), "log_models": False, "log_pyfunc": False,
                           "explain": False}
    directory = f"candidates/{cand.name}"
    for d in (ctx.out / "candidates", ctx.out / directory):    # a link in their place is not followed
        if d.is_symlink() or (d.exists() and not d.is_dir()):
            d.unlink()
    if where.why:
        log.info("auto: %s: %s", cand.name, where.why)
    job = Job(cand.name, run_cfg, ctx.out / directory, guard, ctx.experiment_id, ctx.parent_id, rows=where.rows)
    return Started(cand, job, f"{why}; {where.why}" if where.why else why, round(ctx.budget.elapsed, 1),
                   None if estimate is None else round(estimate, 1), ctx.cost.kind(cand), cfg_hash)


def end(ctx: Context, started: Started, outcome: Outcome) -> CandidateRecord | None:
    """Record what became of a :class:`Started` job: its record, or ``None`` if it was stopped (out of time, pruned,
    interrupted, its worker lost)."""
    cand = started.cand
    facts = {"why": started.why, "started_at": started.started_at,
             **({"estimate": started.estimate, "estimate_kind": started.estimate_kind}
                if started.estimate is not None else {}),
             **({"worker": outcome.where} if outcome.where != "this process" else {})}
    if outcome.row is None:
        # a trial the pruner stopped is "pruned", one the time guard stopped "stopped", one Ctrl-C stopped
        # "interrupted", one whose worker went "lost": the leaderboard tells each from the others
        ctx.state.record_stopped(cand.name, cand.pair, _pair_name(cand), stop_status(outcome), outcome.stopped,
                                 round(outcome.seconds, 2), **facts)
        log.info("auto: %s %s", cand.name, outcome.stopped)
        return None
    row, seconds = outcome.row, outcome.seconds
    ctx.cost.record(cand, seconds, row.get("fit_seconds"))
    directory = started.job.directory
    rec = CandidateRecord(
        Status.FINISHED, cand.engine, cand.objective, params=dict(cand.params), trial=cand.trial,
        dir=f"candidates/{cand.name}", config_hash=started.cfg_hash,
        speedup=round(cand.speedup, 4) if cand.speedup != 1.0 else None, seconds=round(seconds, 2),
        run_id=row.get("run_id"), capped_folds=outcome.capped, pipeline_mb=round(_megabytes(directory / "pipeline"), 2),
        files=manifest(directory),      # just written: as damage() would find it
        **facts, **{k: row[k] for k in ("qwk_thresholds_oof", "qwk_thresholds_oof_nested", "qwk_thresholds",
                                        "best_iteration_mean", "fit_seconds", "predict_seconds") if k in row})
    ctx.state.record_finished(cand.name, _pair_name(cand) if cand.speedup != 1.0 else None, rec)
    ctx.checked(cand.name)
    if outcome.capped:
        log.info("auto: %s: %d of %d folds ended at their share of the time, before early stopping%s", cand.name,
                 outcome.capped, ctx.n_folds,
                 " (it would have ended past the limit: its folds shared the time left)" if outcome.rescued else "")
    ctx.progress.finished(rec.qwk_thresholds_oof_nested)
    return rec
