"""The tuning step of a time budget: the most promising candidate's engine parameters searched with Optuna while
time remains, every trial a candidate of the blend.

Tuning is the loop's second source (:class:`Tuning`, :mod:`qwkboost.autoblend.loop`): it starts once every default
candidate has started and one has finished, beside those still running on a cluster. The target is the finished
default candidate with the best nested out-of-fold QWK; when its trials no longer fit in the time left, the next
best whose trials do (a cheaper engine's) is tuned, and so on. Its engine's
``search_space`` (``conf/engine/<engine>.yaml``) is searched by the seeded multivariate TPE sampler of
``experiments/tune.py``, each trial a cross-validated run scored by its out-of-fold QWK after cut points and
stopped after a fold by the pruner (``auto.pruner``) or by the budget's guard. Trials are asked and told (Optuna's
ask-and-tell interface): each is drawn here, runs where a slot is free, and reports its folds to the study from
there, where its pruner runs (:meth:`~qwkboost.autoblend.executor.Executor.trial_storage`); no trial is asked once
the next would not fit. The study is kept in ``<output dir>/tuning.db`` (SQLite): a resumed budget goes on with new
trials, on one machine or a cluster alike. Each study is named after its candidate's configuration and its data
(:func:`study_name`) and records the data's fingerprint, as ``tune.py``'s do: a study of other rows is never
continued (a line says it is set aside).
"""

from __future__ import annotations

import hashlib
import logging
import statistics
from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

from qwkboost.autoblend import jobs
from qwkboost.autoblend.candidates import Candidate
from qwkboost.autoblend.executor import TrialSpec
from qwkboost.autoblend.fit import fits, room
from qwkboost.autoblend.jobs import Started
from qwkboost.autoblend.state import CandidateRecord, config_hash, legacy_config_hash
from qwkboost.data.fingerprint import DataFingerprint
import qwkboost.runs.tuning as tuning_face
from qwkboost.runs.tuning.space import draw

if TYPE_CHECKING:
    from qwkboost.autoblend.context import Context
    from qwkboost.autoblend.executor import Outcome

__all__ = ["Tuning", "study_name"]

log = logging.getLogger("qwkboost.autoblend")


def _draw(trial, pair: tuple[str, str], cfg: dict) -> tuple[Candidate, dict]:
    """The candidate of ``trial`` (its parameters drawn from ``cfg``'s search space,
    :func:`~qwkboost.runs.tuning.space.draw`) and its config."""
    drawn, trial_cfg = draw(trial, cfg)
    return Candidate(pair[0], pair[1], tuple(sorted(drawn.items())), trial.number), trial_cfg


def study_name(pair: tuple[str, str], cfg: dict, data: DataFingerprint) -> str:
    """The name of ``pair``'s study in ``tuning.db``: its configuration's hash (where it runs, one machine or a
    cluster, is not part of it) and its data's, so that the study of other data or settings is never continued."""
    rows = hashlib.sha256(f"{data.train}:{data.test}".encode()).hexdigest()[:8]
    return f"{pair[0]}-{pair[1]}-{config_hash(cfg)}-{rows}"


def _open_study(ctx: Context, pair: tuple[str, str], cfg: dict, sampler, pruner):
    """``pair``'s study in ``<output dir>/tuning.db`` (:func:`study_name`), opened as ``tune.py`` opens its own
    (:func:`~qwkboost.runs.tuning.study.open_study`: created on first use, its data checked, its dead trials cleaned
    up); studies of the pair on other data or settings stay in the file, set aside, with a line. A study an earlier
    qwkboost named (without the data's digest, with the ``cluster`` settings in its hash) goes on when ``auto.json``
    vouches for the data."""
    db = ctx.out / "tuning.db"
    earlier = [f"{pair[0]}-{pair[1]}-{h}" for h in (legacy_config_hash(cfg), config_hash(cfg))] \
        if ctx.state.resumed else []
    return tuning_face.open_study(
        f"sqlite:///{db.resolve()}", study_name(pair, cfg, ctx.fingerprint), sampler, pruner, ctx.fingerprint,
        ctx.data_names, f"move {db} away to start its studies afresh", what="auto's tuning study", where=str(db),
        earlier=earlier, stamp_earlier=True, say_earlier=False, aside=(f"{pair[0]}-{pair[1]}-", "auto: tuning.db"),
        logger=log)


class _Study:
    """One pair's study while it is tuned: the study, where its trials report, and its trials' seconds."""

    def __init__(self, ctx: Context, pair: tuple[str, str], first_seconds: float, why: str):
        import optuna  # slow to import: optuna

        self.pair, self.why, self.cfg = pair, why, ctx.configs[pair]
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.record = _open_study(ctx, pair, self.cfg,
                                  sampler=tuning_face.make_sampler("tpe", int(self.cfg.get("seed", 0))),
                                  pruner=tuning_face.make_pruner(ctx.settings.pruner))
        url = f"sqlite:///{(ctx.out / 'tuning.db').resolve()}"
        work = ctx.executor.trial_storage(self.record, url)
        if work is None:
            log.info("auto: the workers do not see %s and optuna-integration is not installed, so %s-%s's trials "
                     "run unpruned (pip install 'qwkboost[cluster]')", ctx.out, *pair)
            self.study, self.storage, self.prunable = self.record, url, False
        else:
            (self.study, self.storage), self.prunable = work, True
        self.seconds = [first_seconds]
        self.left_out = False       # a trial was left out: no more are asked, the running ones finish

    def out_of_time(self, ctx: Context) -> bool:
        """Whether the next trial, expected to take the median of this pair's, would not fit."""
        expected = statistics.median(self.seconds)
        return not fits(expected, room(ctx, coming_seconds=expected, coming_pair=self.pair).left)

    def tell(self, trial, *args, **kwargs) -> None:
        """Tell the study (and the file, when the trials report to a working copy) how ``trial`` ended."""
        self.study.tell(trial, *args, **kwargs)
        if self.study is not self.record:
            tuning_face.write_back(self.study, trial._trial_id, self.record)


class Tuning:
    """Tuning trials as the loop's second source (module docstring): the finished default candidates, best nested
    out-of-fold QWK first, each tuned until its next trial would not fit in the time left; when the best one's
    trials no longer fit, a cheaper one's may (so tuning goes on while a trial fits)."""

    def __init__(self):
        self.targets: list[tuple[tuple[str, str], float, str]] | None = None     # decided when tuning starts
        self.current: _Study | None = None
        self.done = False

    @property
    def exhausted(self) -> bool:
        return self.done

    def _begin(self, ctx: Context, running: Sequence[str]) -> bool:
        """The targets, once a default candidate has finished (``False`` until one has, while some run)."""
        best: dict[tuple[str, str], tuple[float, float]] = {}      # pair -> (nested QWK, seconds at its own rate)
        for r in ctx.state.candidates.values():
            if r.finished and r.trial is None and r.pair in ctx.configs:
                q = r.qwk_thresholds_oof_nested if r.qwk_thresholds_oof_nested is not None else -1.0
                if r.pair not in best or q > best[r.pair][0]:
                    best[r.pair] = (q, r.seconds * (r.speedup or 1.0))
        if not best:
            self.done = not running
            return False
        ranked = sorted(best.items(), key=lambda kv: -kv[1][0])
        self.targets = [(pair, seconds, "tuning the best candidate" if rank == 0 else
                         f"tuning the best candidate whose trial fits in the time left (#{rank + 1} by nested QWK)")
                        for rank, (pair, (_, seconds)) in enumerate(ranked)]
        if running:
            # a worker is free and no default candidate is left to start: tuning starts on it now, and the running
            # candidates end while it goes on
            log.info("auto: every default candidate has started; tuning starts on the free worker beside %s",
                     ", ".join(sorted(running)))
        return True

    def _target(self, ctx: Context) -> _Study | None:
        """The next pair whose trials fit, its study open; ``None`` when none is left."""
        while self.targets:
            pair, seconds, why = self.targets.pop(0)
            if not fits(seconds, room(ctx, coming_seconds=seconds, coming_pair=pair).left):
                continue
            if not (ctx.configs[pair]["engine"].get("search_space") or {}):
                log.info("auto: %s-%s has no search space to tune (conf/engine/%s.yaml)", *pair, pair[0])
                continue
            study = _Study(ctx, pair, seconds, why)
            if study.out_of_time(ctx):
                continue
            log.info("auto: tuning %s-%s (%d trial(s) in its study so far)", *pair, len(study.record.trials))
            return study
        return None

    def next(self, ctx: Context, running: Sequence[str]) -> Started | None:
        import optuna  # slow to import: optuna

        if self.targets is None and not self._begin(ctx, running):
            return None
        while True:
            if self.current is None or self.current.left_out or self.current.out_of_time(ctx):
                if self.current is not None and running:
                    return None         # the pair's running trials (and candidates beside them) end first
                self.current = self._target(ctx)
                if self.current is None:
                    self.done = True
                    return None
            cur = self.current
            trial = cur.study.ask()
            try:
                cand, trial_cfg = _draw(trial, cur.pair, cur.cfg)
                started = jobs.start(ctx, cand, trial_cfg, rescue=False, why=cur.why, running=len(running))
            except BaseException:       # a stop or an error before the trial ran: it failed, not left running
                cur.tell(trial, state=optuna.trial.TrialState.FAIL)
                raise
            if started is None:         # left out: no trial of this pair fits any more
                cur.tell(trial, state=optuna.trial.TrialState.PRUNED)
                cur.left_out = True
                continue
            if not isinstance(started, Started):        # the same trial finished before
                cur.seconds.append(started.seconds)
                cur.tell(trial, started.qwk_thresholds_oof)
                continue
            if cur.prunable:
                started = replace(started, job=replace(started.job, trial=TrialSpec(
                    cur.storage, cur.study.study_name, trial._trial_id, ctx.settings.pruner, "qwk_thresholds_oof",
                    cur.cfg["thresholds"]["method"])))
            return replace(started, payload=(cur, trial))

    def ended(self, ctx: Context, started: Started, outcome: Outcome | None, rec: CandidateRecord | None,
              how: str) -> None:
        import optuna  # slow to import: optuna

        study, trial = started.payload
        if how != "ended":
            if not (how == "lost" and study.study is not study.record):      # a copy on a lost scheduler is gone
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
        elif rec is None:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            study.seconds.append(rec.seconds)
            study.tell(trial, rec.qwk_thresholds_oof)
