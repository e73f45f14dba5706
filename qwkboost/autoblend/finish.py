"""The end of a time budget: the blend of every finished candidate, written beside the previous outputs and swapped
in when complete, and logged in the parent MLflow run (:func:`finish`); and, when a stop (Ctrl-C, SIGTERM) comes
while that blend is fitted or written, the best outputs already at hand (:func:`fall_back`).

A stop during the blend does not leave the directory without a submission: the outputs the directory already holds
(the last good ones, an earlier invocation's) are kept, else the best finished candidate's files are written as the
outputs (its ``pipeline/`` linked, not copied). Nothing is written when nothing finished.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from qwkboost import tracking
from qwkboost.autoblend.board import closing_rows, leaderboard
from qwkboost.autoblend.context import Context
from qwkboost.autoblend.fit import room
from qwkboost.autoblend.state import CandidateRecord
from qwkboost.blending import blend, read_members, write_blend
from qwkboost.blending.fit import BlendResult, log_blend_contents
from qwkboost.exceptions import ConfigError
from qwkboost.tracking.files import link_or_copy
from qwkboost.tracking.interrupt import held_stops
from qwkboost.tracking.loading import load_pipeline
from qwkboost.tracking.writing import staged

__all__ = ["AutoResult", "finish", "fall_back", "OUTPUTS"]

log = logging.getLogger("qwkboost.autoblend")

#: What the budget writes into its directory from the blend (an earlier session's that the new one lacks go).
OUTPUTS = ("oof.parquet", "predictions.parquet", "submission.csv", "blend.json", "plots", "pipeline",
           "leaderboard.csv")
#: A single candidate's files that become the budget's outputs (its ``pipeline/`` too).
_RUN_FILES = ("oof.parquet", "predictions.parquet", "submission.csv")


@dataclass
class AutoResult:
    """What a time budget returns.

    Attributes
    ----------
    output_dir : Path
        Its directory: the outputs of a run, ``leaderboard.csv``, ``auto.json`` and ``candidates/``.
    leaderboard : DataFrame
        Every candidate of the directory: status, seconds, out-of-fold QWK (in-sample and nested) and weight.
    blend : BlendResult or None
        The blend; ``None`` when a single candidate finished (its outputs are then the run's).
    pipeline : FittedBlend or FittedPipeline
        Scores and classes for new rows (:meth:`predict`).
    metrics : dict
        ``nested_oof_qwk`` (the estimate to trust), ``oof_qwk``, ``seconds``, ``time_limit``, ``overrun``
        (seconds past the limit, 0 within it), ``n_finished``, and ``test_qwk`` when the test rows have labels.
    run_id : str or None
        The MLflow parent run.
    stopped : bool
        Whether it was stopped (Ctrl-C, SIGTERM) before its budget ran out.
    """

    output_dir: Path
    leaderboard: Any
    blend: BlendResult | None
    pipeline: Any
    metrics: dict
    run_id: str | None = None
    stopped: bool = False

    def predict(self, X):
        """Classes for the rows of ``X`` (the user's labels)."""
        return self.pipeline.predict(X)

    def predict_score(self, X):
        """The blended score of the rows of ``X``."""
        return self.pipeline.predict_score(X)


def _write_candidate(new: Path, src: Path) -> None:
    """A single candidate's outputs (its files copied, its ``pipeline/`` linked) into the staged folder ``new``."""
    for f in _RUN_FILES:
        shutil.copy2(src / f, new / f)
    shutil.copytree(src / "pipeline", new / "pipeline", copy_function=link_or_copy)


def _candidate_metrics(rec: CandidateRecord) -> dict:
    return {"oof_qwk": rec.qwk_thresholds_oof, "nested_oof_qwk": rec.qwk_thresholds_oof_nested,
            **({"test_qwk": rec.qwk_thresholds} if rec.qwk_thresholds is not None else {})}


def finish(ctx: Context, stopped: bool = False) -> AutoResult:
    """Blend the finished candidates of ``ctx``, write the outputs (beside the previous ones, swapped in when
    complete, then recorded in ``auto.json``), log them in the parent run; the result. Writes ``ctx.closing``.

    Raises
    ------
    ConfigError
        If no candidate finished.
    """
    state, closing = ctx.state, ctx.closing
    ctx.progress.step("blend")
    # when the work ended, how much of it was left unused, and the reserve kept for what follows
    done = {r.pair for r in state.candidates.values() if r.finished}
    now = room(ctx, coming=0)       # nothing more is coming: what is kept for the end now
    closing.facts.update({"work_ended_at": round(ctx.budget.elapsed, 2), "reserve": round(now.reserve.seconds, 2),
                          "unused_for_work": round(max(now.left, 0.0), 2),
                          "pairs_not_run": sorted(f"{e}-{o}" for e, o in ctx.configs if (e, o) not in done)})
    members = ctx.members()
    if not members:
        tried = ", ".join(f"{n}: {r.reason or r.status}" for n, r in state.candidates.items() if ctx.allowed(r))
        if "cluster_lost" in closing.facts:
            raise ConfigError(f"{closing.facts['cluster_lost']} before any candidate finished "
                              f"({tried or 'none started'}); start the cluster again and run the same command")
        raise ConfigError(f"no candidate finished within auto.time_limit={ctx.settings.time_limit:g} s "
                          f"({tried or 'none started'}); raise auto.time_limit")
    t_blend = time.monotonic()
    result, written = None, {}
    # recorded once swapped in, before a stop held during the swap is acted on (fall_back then knows them written)
    with staged(ctx.out, remove=OUTPUTS, swapped=lambda: _record(ctx, **written)) as new:
        if len(members) == 1:
            name, rec = members[0]
            _write_candidate(new, ctx.out / rec.dir)
            weights = {name: 1.0}
            metrics = _candidate_metrics(rec)
        else:
            read = read_members([ctx.out / r.dir for _, r in members])
            read = [replace(m, name=n) for m, (n, _) in zip(read, members)]
            result = blend(read, method=ctx.settings.blend_method, thresholds=ctx.base["thresholds"]["method"])
            write_blend(result, new)
            weights = {m.name: float(w) for m, w in zip(result.members, result.weights)}
            metrics = dict(result.metrics)
        blend_seconds = time.monotonic() - t_blend
        board = leaderboard(state.candidates, weights, ctx.allowed, ctx.ds.has_test_labels)
        board.to_csv(new / "leaderboard.csv", index=False)
        pipeline = load_pipeline(new / "pipeline")       # read before the swap: a broken one keeps the old
        written.update(kind="blend" if result is not None else "candidate", weights=weights,
                       nested=float(metrics["nested_oof_qwk"]))
    shown, others = closing_rows(board)
    elapsed = ctx.budget.elapsed
    n_done = ctx.n_finished()
    metrics.update({"seconds": elapsed, "time_limit": float(ctx.settings.time_limit),
                    "overrun": max(elapsed - ctx.settings.time_limit, 0.0), "n_finished": float(n_done),
                    "pool_size": float(len(members)), "n_blended": float(sum(w > 0 for w in weights.values())),
                    "blend_seconds": blend_seconds})
    if ctx.parent_id is not None:
        _log(ctx, result, board, metrics, pipeline, weights)
    if ctx.settings.keep == "blend":
        _drop_models(ctx, {n for n, w in weights.items() if w > 0})
    metrics["seconds"] = ctx.budget.elapsed
    metrics["overrun"] = max(metrics["seconds"] - ctx.settings.time_limit, 0.0)
    closing.members = len(members)
    ctx.progress.close()
    over = metrics["overrun"]
    limit = ctx.settings.time_limit
    log.info("auto: %s in %.0f s of auto.time_limit=%g s%s; %d candidate(s) finished, %s; nested out-of-fold QWK "
             "%.4f%s\n%s\n  submission: %s", "stopped" if stopped else "done", metrics["seconds"], limit,
             f" ({over:.1f} s over, {100 * over / limit:.1f} %)" if over > 0 else "", n_done,
             "one run (nothing to blend)" if result is None else
             f"blended {sum(w > 0 for w in weights.values())} of a pool of {len(members)} "
             f"({ctx.settings.blend_method})",
             metrics["nested_oof_qwk"], f", test QWK {metrics['test_qwk']:.4f}" if "test_qwk" in metrics else "",
             shown.to_string(index=False, float_format=lambda v: f"{v:.4f}") + others + _cut_note(ctx, weights),
             ctx.out / "submission.csv")
    return AutoResult(ctx.out, board, result, pipeline, metrics, ctx.parent_id, stopped)


def _drop_models(ctx: Context, kept: set[str]) -> None:
    """``auto.keep=blend``: the fold models of the finished candidates outside the outputs' ``kept`` members deleted
    (the outputs' ``pipeline/`` links its members' files, so nothing it holds goes), each recorded first."""
    state = ctx.state
    gone = [n for n, r in state.candidates.items()
            if r.finished and not r.models_dropped and n not in kept and r.dir == f"candidates/{n}"]
    if not gone:
        return
    for n in gone:
        state.record_models_dropped(n)
    state.save()
    freed = 0
    for n in gone:
        folder = ctx.out / "candidates" / n / "pipeline"
        if folder.is_dir() and not folder.is_symlink():
            freed += sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and f.stat().st_nlink == 1)
            shutil.rmtree(folder, ignore_errors=True)
    log.info("auto: auto.keep=blend: the fold models of %d candidate(s) outside the blend deleted (%.1f MB)",
             len(gone), freed / 2 ** 20)


def _record(ctx: Context, kind: str, weights: Mapping[str, float], nested: float) -> None:
    """What the directory's outputs now are, in ``auto.json`` (what :func:`fall_back` names when it keeps them), and
    that this invocation wrote them (a stop after this leaves them whole)."""
    ctx.state.outputs = {"kind": kind, "nested_oof_qwk": nested,
                         "members": {n: round(float(w), 6) for n, w in weights.items() if w > 0},
                         "written": time.strftime("%Y-%m-%d %H:%M:%S")}
    ctx.state.save()
    ctx.closing.written = True


def _cut_note(ctx: Context, weights: Mapping[str, float]) -> str:
    """A line per candidate of the result whose folds were cut at their share of the time before early stopping
    (nothing else fitted, or its restart was cut too): what it cost, for the reader of the closing lines."""
    used = {n for n, w in weights.items() if w > 0} or {n for n, r in ctx.state.candidates.items() if r.finished}
    lines = [f"\n  note: {n}: {r.capped_folds} of {ctx.n_folds} folds ended at their share of the time before early "
             f"stopping (its out-of-fold QWK understates a converged run of it)"
             + (f"; weight {weights[n]:.2f} in the blend" if n in weights else "")
             for n, r in ctx.state.candidates.items() if n in used and r.finished and r.capped_folds]
    return "".join(lines)


def _log(ctx: Context, result: BlendResult | None, board, metrics: Mapping[str, float], pipeline,
         weights: Mapping[str, float]) -> None:
    """The blend (or the single run), the leaderboard and the time in the parent run; ``pipeline`` is the one
    written in the output directory, already read. This invocation's figures are logged at its step (the first
    invocation 0, a resumed one 1, ...), then the servable model linked to them; each member of the result gets a
    logged model in its own run (:func:`~qwkboost.tracking.serving.log_member_models`)."""
    step = max(len(ctx.state.sessions) - 1, 0)
    # the blend's own figures are logged with it (once: a second point at the step would be linked twice)
    tracking.log_metrics({f"auto.{k}" if k in ("time_limit", "overrun", "n_finished", "pool_size",
                                               "n_blended", "blend_seconds") else k: float(v)
                          for k, v in metrics.items()
                          if v is not None and (result is None or k not in result.metrics)}, step=step)
    if result is not None:      # as tags: a resumed parent run may hold another blend than before
        model_id = log_blend_contents(result, ctx.out, log_pyfunc=True, pipe=pipeline, settings_as_tags=True,
                                      step=step, name="blend")
    else:
        for f in _RUN_FILES:
            tracking.log_file(ctx.out / f, "predictions")
        model_id = tracking.log_pyfunc(ctx.out / "pipeline", tracking.example_frame([pipeline.schema]),
                                       pipe=pipeline, name=next(iter(weights)), step=step)
    tracking.log_file(ctx.out / "leaderboard.csv")
    kept = {n: w for n, w in zip(board["candidate"], board["weight"]) if w > 0} if "weight" in board else {}
    tracking.set_tags({"mlflow.note.content": (
        f"auto in {metrics['seconds']:.0f} s of auto.time_limit={ctx.settings.time_limit:g} s: "
        f"{metrics['n_finished']:.0f} candidate(s) finished; "
        + ", ".join(f"{n} {w:.2f}" for n, w in kept.items()) + f"; nested out-of-fold QWK "
        f"{metrics['nested_oof_qwk']:.4f}" + (f", test {metrics['test_qwk']:.4f}" if "test_qwk" in metrics else ""))})
    runs = {n: (ctx.state.candidates[n].run_id, float(w)) for n, w in weights.items()
            if w > 0 and n in ctx.state.candidates and ctx.state.candidates[n].run_id}
    tracking.log_member_models(runs, model_id)
    log.info("MLflow model: models:/%s", model_id)


def fall_back(ctx: Context) -> str:
    """After a stop during the blend: the outputs the directory holds (the last good ones, an earlier invocation's)
    are kept; else the best finished candidate, by nested out-of-fold QWK, is written as the outputs, with a
    ``leaderboard.csv`` naming it, Ctrl-C and SIGTERM held while it is (a second one then acts as usual). A line
    says what was kept; it is returned."""
    state = ctx.state
    members = ctx.members()
    if not members:
        said = "nothing had finished: nothing is written" + (
            "; the previous outputs are kept" if (ctx.out / "submission.csv").exists() else "")
        log.warning("auto: stopped during the blend; %s", said)
        return said

    def nested(nr) -> float:
        return nr[1].nested

    name, rec = max(members, key=nested)
    if ctx.closing.written:
        said = (f"its outputs were written before the stop ({ctx.out / 'submission.csv'}); their MLflow model was "
                "not logged (the same command again logs it)")
        log.warning("auto: stopped after the blend; %s", said)
        return said
    if (ctx.out / "submission.csv").exists():
        before = state.outputs if isinstance(state.outputs, dict) else {}
        said = "kept the outputs already there" + (
            f" ({before.get('kind')} of {len(before.get('members', {}))} written {before.get('written')}, nested "
            f"out-of-fold QWK {before['nested_oof_qwk']:.4f})" if "nested_oof_qwk" in before else "") + \
            f"; the best finished candidate is {name} ({nested((name, rec)):.4f}): run again to blend"
        log.warning("auto: stopped during the blend; %s", said)
        return said
    said = (f"wrote the best finished candidate, {name} (nested out-of-fold QWK {nested((name, rec)):.4f}), as the "
            f"submission instead of the blend of {len(members)}: {ctx.out / 'submission.csv'}")
    try:
        with held_stops():
            with staged(ctx.out, remove=OUTPUTS,
                        swapped=lambda: _record(ctx, "candidate", {name: 1.0}, nested((name, rec)))) as new:
                _write_candidate(new, ctx.out / rec.dir)
                board = leaderboard(state.candidates, {name: 1.0}, ctx.allowed, ctx.ds.has_test_labels)
                board.to_csv(new / "leaderboard.csv", index=False)
            ctx.closing.members = 1
            log.warning("auto: stopped during the blend; %s", said)
    except Exception as exc:  # noqa: BLE001 - the stop is the news; what kept it from writing is said beside it
        said = f"its best finished candidate could not be written ({type(exc).__name__}: {exc})"
        log.warning("auto: stopped during the blend; %s", said)
    return said
