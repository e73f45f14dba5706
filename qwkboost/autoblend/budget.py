"""The clock of a time budget, and the guard that stops a candidate that cannot finish within it.

Two lessons from the tools practitioners use with a time limit shape it. A limit is only kept if the steps after
the candidates (the blend, its files, the MLflow model) are counted in it, so a *reserve* for them is kept back
(:func:`~qwkboost.autoblend.costs.reserve`, computed when a job starts) and candidates get what is left. And a
candidate stopped part-way is dropped, never kept with part of its folds:
out-of-fold scores from some folds are not comparable with full ones, so after each fold the guard projects the
remaining folds from the measured ones and, when they would end past the limit, either shortens them (each still
gets half a fold's time or more: the folds share the time left) or stops the candidate early.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from qwkboost.autoblend.fit import MAX_SPEEDUP, restart_factor
from qwkboost.callback import EarlyStopException
from qwkboost.exceptions import RunStopped

__all__ = ["Budget", "TimeGuard", "CutShort", "NotConverged", "OUT_OF_TIME", "NOT_CONVERGED", "RESCUE_SHARE"]

#: The tag a candidate stopped by the budget ends its MLflow run with (it ends KILLED).
OUT_OF_TIME = {"qwkboost.auto": "OUT_OF_TIME"}
#: The tag of a candidate stopped because a fold reached its share of the time before early stopping.
NOT_CONVERGED = {"qwkboost.auto": "NOT_CONVERGED"}
#: A candidate that would end past the limit finishes with its folds sharing the time left (``rescue``) when each
#: gets at least this share of the time a fold takes; else it is stopped.
RESCUE_SHARE = 0.5

@dataclass(frozen=True)
class Budget:
    """Seconds given to the whole command, counted from ``started`` on a monotonic clock.

    Frozen: nothing changes a budget once made. The command's own budget keeps nothing back (``reserve`` 0); a
    job's is the same clock with the seconds kept for what follows it, fixed when the job starts
    (``dataclasses.replace(budget, reserve=...)``, :class:`~qwkboost.autoblend.executor.GuardSpec`), and read by
    its :class:`TimeGuard`.

    Attributes
    ----------
    time_limit : float
        ``auto.time_limit``.
    reserve : float
        Seconds kept back from a job for the blend and the files written after the last candidate
        (:func:`~qwkboost.autoblend.costs.reserve`).
    """

    time_limit: float
    started: float = field(default_factory=time.monotonic)
    reserve: float = 0.0
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    @property
    def elapsed(self) -> float:
        return self.clock() - self.started

    @property
    def left(self) -> float:
        """Seconds until the limit."""
        return self.time_limit - self.elapsed

    @property
    def left_for_work(self) -> float:
        """Seconds candidates may still use: until the limit, less the reserve."""
        return self.left - self.reserve


@dataclass(frozen=True)
class CutShort:
    """A fold that reached its share of the time before early stopping: what it tells of the rate that failed.

    Attributes
    ----------
    fold : int
        The fold (0-based, over all repeats).
    rounds : int
        Rounds it trained, a lower bound of the rounds it needed.
    seconds : float
        Its seconds until then.
    share : float
        The seconds it was given.
    """

    fold: int
    rounds: int
    seconds: float
    share: float


class NotConverged(RunStopped):
    """Raised by a :class:`TimeGuard` with ``converge`` instead of cutting a fold short (tagged
    :data:`NOT_CONVERGED`); :attr:`cut` says how far it got."""

    def __init__(self, reason: str, cut: CutShort):
        super().__init__(reason, tags=NOT_CONVERGED)
        self.cut = cut


class TimeGuard:
    """``on_fold`` and ``on_round`` hooks of one candidate's cross-validation that keep it within the budget.

    By default a candidate that cannot finish is stopped (:class:`~qwkboost.exceptions.RunStopped`, tagged
    :data:`OUT_OF_TIME`): after fold :math:`i` of :math:`n`, the remaining folds are projected to take the mean time
    of the folds so far each, :math:`(n - i)\\,\\bar t`, and if that exceeds :attr:`left` (the budget's time left for
    work less what the candidate spends after its folds) the candidate stops. During fold :math:`i`, it stops as soon
    as nothing is left for work, or as soon as the time the fold has run, :math:`t`, times the folds after it,
    :math:`(n - i - 1)\\,t`, exceeds what is left: those folds cannot fit if each takes at least as long.

    With ``share_folds`` (the first candidate, when nothing has finished yet and a budget without any result
    would be worth nothing) every fold instead gets an equal share of the time left when it starts,
    :math:`t_{\\max} = \\text{left} / (\\text{folds left})`, and a fold that reaches it ends its boosting there
    (:class:`~qwkboost.callback.EarlyStopException`: the model keeps the rounds it trained), so the
    candidate finishes with every fold, each with fewer rounds than early stopping would have given it
    (``capped`` counts those folds).

    With ``rescue``, a candidate that would be stopped shares the time left that way instead, when each fold
    still gets at least :data:`RESCUE_SHARE` of the time a fold takes (the mean of its finished folds, at least
    the current fold's time so far and ``fold_seconds``, the expected time of one): the folds it has run are
    not thrown away for an estimate that was a little short (``rescued`` says it happened).

    With ``converge``, a first fold that reaches its share before early stopping is not cut when a restart at a
    raised learning rate is expected to converge in the time left
    (:func:`~qwkboost.autoblend.fit.restart_factor` at most :data:`~qwkboost.autoblend.fit.MAX_SPEEDUP`, from the
    fold's rounds and seconds and early stopping's ``patience``): the candidate stops with :class:`NotConverged`,
    whose :class:`CutShort` tells its source how far off the learning rate was, so that it restarts at a rate that
    converges (:func:`~qwkboost.autoblend.fit.converging`). When none is, the fold is cut and the candidate goes on,
    as without ``converge``: leaving it out cost more than the cut (on MovieLens at 300 s on one core, CatBoost's
    squared error, the best candidate there, was left out after 45 s of its first fold: −0.004 test QWK). A model cut
    short at a low learning rate is worse than one that converged at a raised one (boosting trades rounds for
    shrinkage, Friedman 2001, sec. 5). Only the first fold does so, whether its share came from the start (the
    first candidate) or from a rescue: a restart then costs one fold. A later fold is cut (``capped``): the folds
    before it converged at this rate, and throwing them away cost more than the cut did (on Diamonds at 300 s on
    one core, a CatBoost candidate restarted at its third fold, lost 17 s of folds and then found no time).

    Parameters
    ----------
    budget : Budget
    n_folds : int
        Folds of the candidate's cross-validation (over all repeats).
    report : callable, optional
        Called as ``report(fold, round)`` after every round (the progress line).
    share_folds : bool, default False
    rescue : bool, default False
    fold_seconds : float, optional
        The expected seconds of one fold (for ``rescue``).
    tail_seconds : float, default 0
        What the candidate is expected to spend after its last fold (its scores, cut points and files): the
        folds are given the time left for work less this (:attr:`left`).
    converge : bool, default False
    patience : int, default 0
        Early stopping's patience (``converge``'s restart needs that many rounds besides those that converge).
    tail_folds : float, default 0
        Before anything has measured what a candidate spends after its folds (the first candidate), that tail is
        taken to be this many of its folds (their mean once one has run; before, each fold's share of the time
        counts it as that many more folds). On MovieLens (75,003 rows, one core) LightGBM spent 10.5 s after its
        last fold of 9.2 s on average, scoring each fold's rows at the other folds' rounds.
    """

    def __init__(self, budget: Budget, n_folds: int, report: Callable[[int, int], None] | None = None,
                 share_folds: bool = False, rescue: bool = False, fold_seconds: float | None = None,
                 tail_seconds: float = 0.0, converge: bool = False, tail_folds: float = 0.0, patience: int = 0):
        self.budget, self.n_folds, self.report, self.share_folds = budget, int(n_folds), report, share_folds
        self.converge, self.patience = converge, int(patience or 0)
        self.tail, self.tail_folds = max(float(tail_seconds), 0.0), max(float(tail_folds), 0.0)
        self._done, self._done_at = 0, budget.clock()      # folds finished, and when the last one did
        self.rescue, self.fold_seconds, self.rescued = rescue, fold_seconds or 0.0, False
        self.started = budget.clock()
        self.capped: set[int] = set()
        self._fold, self._fold_end, self._fold_start = -1, float("inf"), budget.clock()

    @property
    def left(self) -> float:
        """Seconds the folds may still use: the budget's time left for work, less the candidate's tail (at least
        ``tail_folds`` of its folds' mean once one has run)."""
        tail = self.tail
        if self.tail_folds and self._done:
            tail = max(tail, self.tail_folds * (self._done_at - self.started) / self._done)
        return self.budget.left_for_work - tail

    def _rescued(self, i: int, now: float, per_fold: float, done: int) -> bool:
        """Whether the candidate, at fold ``i`` (``done`` folds finished, a fold taking at least ``per_fold``
        seconds as measured), goes on with its folds sharing the time left rather than being stopped (class
        docstring)."""
        if not self.rescue:
            return False
        share = max(self.left, 0.0) / (self.n_folds - done)
        if share < RESCUE_SHARE * max(per_fold, self.fold_seconds):
            return False
        self.share_folds = self.rescued = True
        # the current fold, if one runs, gets its share from now; the next starts with its own
        self._fold, self._fold_end = (i, now + share) if done == i else (-1, float("inf"))
        return True

    def on_round(self, i: int, rnd: int, evals: dict) -> None:
        if self.report is not None:
            self.report(i, rnd)
        if self.share_folds:
            now = self.budget.clock()
            if i != self._fold:     # a fold starts: its share of the time left
                self._fold, self._fold_start = i, now
                ahead = self.n_folds - i + (0 if self._done else self.tail_folds)     # the tail as folds
                self._fold_end = now + max(self.left, 0.0) / ahead
            if now >= self._fold_end and rnd > 0:
                spent = now - self._fold_start
                if self.converge and i == 0 and \
                        restart_factor(rnd + 1, spent, self.left, self.n_folds, self.patience) <= MAX_SPEEDUP:
                    raise NotConverged(
                        f"fold {i + 1}/{self.n_folds} reached its share of the time ({spent:.0f} s, {rnd + 1} "
                        "rounds) before early stopping", CutShort(i, rnd + 1, spent, self._fold_end - self._fold_start))
                self.capped.add(i)
                raise EarlyStopException(rnd)
            return
        if self.budget.left_for_work <= 0:
            raise RunStopped(f"stopped in fold {i + 1}/{self.n_folds} at the time limit "
                             f"({self.budget.time_limit:g} s, {self.budget.reserve:.0f} s kept for the blend)",
                             tags=OUT_OF_TIME)
        now = self.budget.clock()
        if i != self._fold:
            self._fold, self._fold_start = i, now
        # the folds after this one, each at least as long as this one has run so far, cannot fit: stop now
        # rather than at the fold's end
        spent = now - self._fold_start
        if spent * (self.n_folds - i - 1) > self.left and \
                not self._rescued(i, now, max(spent, (self._fold_start - self.started) / i if i else 0.0), i):
            raise RunStopped(f"stopped in fold {i + 1}/{self.n_folds}: it has run {spent:.0f} s, and the "
                             f"{self.n_folds - i - 1} folds after it would need at least "
                             f"{spent * (self.n_folds - i - 1):.0f} s of the {max(self.left, 0):.0f} "
                             "s left", tags=OUT_OF_TIME)

    def on_fold(self, i: int, valid_rows, scores) -> None:
        done = i + 1
        self._done, self._done_at = done, self.budget.clock()
        if done >= self.n_folds or self.share_folds:
            return
        spent = self.budget.clock() - self.started
        projected = spent / done * (self.n_folds - done)
        if projected > self.left and not self._rescued(done, self.budget.clock(), spent / done, done):
            raise RunStopped(f"stopped after fold {done}/{self.n_folds}: the other folds would take about "
                             f"{projected:.0f} s and {max(self.left, 0):.0f} s are left",
                             tags=OUT_OF_TIME)
