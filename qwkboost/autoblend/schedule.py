r"""Which default candidate a budget cross-validates next, and when it screens first: the first source of the loop
(:class:`Defaults`, :mod:`qwkboost.autoblend.loop`).

1. The first candidate of the ranked order (:mod:`~qwkboost.autoblend.ranking`) is cross-validated whole:
   whatever else happens, the budget ends with it.
2. With one slot (this process, or a cluster of one worker), if the other candidates' expected costs
   (:class:`~qwkboost.autoblend.costs.CostModel`, scaled from the first one's measured time) add up to more than the
   time left (:func:`~qwkboost.autoblend.fit.needs_screening`), they are **screened** in the ranked order
   (:mod:`~qwkboost.autoblend.screening`), with at most :data:`SCREEN_SHARE` of the time left, each screen given
   an equal share of what is left of it; the first candidate is screened too, so that its measured time corrects
   every screen's projection. Without screening (everything fits) the candidates run in the ranked order.
   ``auto.screen=always`` screens whether or not they fit, ``never`` never does. With more slots, every slot
   already gives a candidate a look: they start in the ranked order as slots free up.
3. After screening, the **promising** candidates are cross-validated first
   (:func:`~qwkboost.autoblend.ranking.order`).
4. A candidate whose estimate does not fit in the time left runs with its learning rate raised, when that makes it
   fit (:func:`~qwkboost.autoblend.fit.fitted`); else it is left out, and the next one is tried.
5. A candidate whose fold reached its share of the time before early stopping restarts once, first, at a learning
   rate expected to converge, or is left out with a line (:func:`~qwkboost.autoblend.fit.converging`); its
   restart goes on with capped folds if they still reach their share (``capped_folds`` in the leaderboard).
6. A candidate whose Dask worker was lost runs again once, if it still fits, else is dropped, with a log line.

Every candidate's place is recorded with a reason (``why`` in ``leaderboard.csv``). Screens are written here
(:meth:`~qwkboost.autoblend.state.AutoState.record_screen`); everything else of a record by
:mod:`~qwkboost.autoblend.jobs`.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

from qwkboost.autoblend import jobs
from qwkboost.autoblend.candidates import Candidate
from qwkboost.autoblend.fit import MAX_SPEEDUP, converging, fitted, needs_screening, room
from qwkboost.autoblend.jobs import Started
from qwkboost.autoblend.ranking import order
from qwkboost.autoblend.screening import RESCREEN_SPEEDUP, raised, screen, upper_estimate
from qwkboost.autoblend.state import CandidateRecord, config_hash

if TYPE_CHECKING:
    from qwkboost.autoblend.context import Context
    from qwkboost.autoblend.executor import Outcome

__all__ = ["Defaults", "screen_rest", "SCREEN_SHARE", "MIN_SCREEN_SECONDS"]

log = logging.getLogger("qwkboost.autoblend")

#: The share of the time left after the first candidate that screening may use.
SCREEN_SHARE = 0.25
#: A screen is not started with fewer seconds than this for it.
MIN_SCREEN_SECONDS = 2.0


def screen_one(ctx: Context, pair: tuple[str, str], cap: float, again: bool = True) -> dict | None:
    """Screen ``pair`` (or reuse its screen of the same configuration, unless that stopped at its cap with no
    upper estimate); its record's ``screen``, or ``None`` when the screen failed (logged: a screen only ranks, and
    the candidate's own run will say what is wrong). A screen stopped at its cap is screened again at a raised
    learning rate (:func:`~qwkboost.autoblend.screening.upper_estimate`): its record keeps that one as ``raised``,
    with ``rounds_upper`` and ``projected_upper`` when it reached early stopping, and its QWK as the screen's
    (it ran to early stopping; the first one's is ``qwk_capped``). Not with ``again=False`` (a screen for the
    leaderboard only, in the time no candidate fits)."""
    cfg = ctx.configs[pair]
    name = Candidate(*pair).name
    h = config_hash(cfg)
    old = getattr(ctx.state.candidates.get(name), "screened", None)
    if old is not None and old.get("config_hash") == h and (not old.get("capped") or old.get("rounds_upper")):
        _screened(ctx, pair, old)
        return old
    ctx.progress.step(f"screen {name}")
    try:
        result = screen(ctx.ds, cfg, cap_seconds=cap)
        record = result.to_dict()
        faster = raised(cfg) if result.capped and again else None
        if faster is not None:
            second = screen(ctx.ds, faster, cap_seconds=cap)
            record["raised"] = {"learning_rate": faster["engine"]["params"]["learning_rate"], **second.to_dict()}
            upper = upper_estimate(result, second, RESCREEN_SPEEDUP,
                                   int(cfg["engine"].get("early_stopping_rounds") or 0))
            if upper is not None:
                record.update(projected_upper=round(upper[0], 4), rounds_upper=upper[1], mb_upper=round(upper[2], 4),
                              qwk=round(second.qwk, 4), qwk_capped=record["qwk"])
    except Exception as exc:  # noqa: BLE001 - a screen that fails ranks nothing; the run itself reports the error
        log.warning("auto: screening %s failed (%s: %s); it keeps its place in the order", name,
                    type(exc).__name__, exc)
        return None
    ctx.state.record_screen(name, pair, {**record, "config_hash": h})
    _screened(ctx, pair, record)
    if not result.capped:
        note = ""
    elif record.get("rounds_upper"):
        note = (f" (stopped at its time cap; at learning rate {record['raised']['learning_rate']:g} it converged in "
                f"{record['raised']['rounds']} rounds)")
    else:
        note = " (stopped at its time cap: a lower bound)"
    cand = Candidate(*pair)
    log.info("auto: screened %s: QWK %.4f on %d rows in %.1f s%s; its cross-validation: about %.0f s (%s)", name,
             record["qwk"], result.rows, result.seconds, note, ctx.cost.estimate(cand), ctx.cost.kind(cand))
    return ctx.state.candidates[name].screen


def _screened(ctx: Context, pair: tuple[str, str], record: dict) -> None:
    """A screen's record into the cost model: its projection, an upper estimate when it has one."""
    upper = record.get("projected_upper")
    ctx.cost.screened(pair, upper if upper is not None else record["projected"],
                      record.get("mb_upper", record.get("mb")), bool(record.get("capped")), upper is not None)


def screen_all(ctx: Context, pairs) -> dict:
    """Screen ``pairs`` in order within :data:`SCREEN_SHARE` of the time left, each with an equal share of what
    is left of it; ``pair -> screen`` of those screened."""
    until = ctx.budget.elapsed + SCREEN_SHARE * max(room(ctx).left, 0.0)
    screens = {}
    for i, pair in enumerate(pairs):
        left = until - ctx.budget.elapsed
        if left < MIN_SCREEN_SECONDS:
            break
        rec = screen_one(ctx, pair, max(left / (len(pairs) - i), MIN_SCREEN_SECONDS))
        if rec is not None:
            screens[pair] = rec
    return screens


def screen_rest(ctx: Context) -> None:
    """With time left that no candidate or trial fits in, screen the candidates never screened nor finished
    (their figures go in the leaderboard; a screen is never blended). Not with ``auto.screen=never``."""
    if ctx.settings.screen == "never":
        return
    finished = {r.pair for r in ctx.state.candidates.values() if r.finished}
    for pair in ctx.configs:
        if pair in finished or getattr(ctx.state.candidates.get(Candidate(*pair).name), "screened", None):
            continue
        left = room(ctx, coming=0).left       # a screen never joins the blend
        if left < 2 * MIN_SCREEN_SECONDS:
            return
        screen_one(ctx, pair, 0.5 * left, again=False)      # scoring the screen's rows comes after its cap


class Defaults:
    """The default candidates as a source of the loop (module docstring).

    Parameters
    ----------
    ctx : Context
        Its ranked configs and their reasons are the queue.
    """

    def __init__(self, ctx: Context):
        pairs = list(ctx.configs)
        self.queue: list[tuple[tuple[str, str], str]] = [
            (p, f"first: {ctx.why.get(p)}" if i == 0 else ctx.why.get(p, "default order")) for i, p in enumerate(pairs)]
        self.first: tuple[str, str] | None = pairs[0] if pairs else None
        #: with one slot, the rest waits for the first candidate's outcome and is screened when it does not fit
        self.waiting = False
        self.retried: set[tuple[str, str]] = set()
        #: pairs restarted at a raised learning rate (once each), and the variant each restarts as
        self.restarted: set[tuple[str, str]] = set()
        self.restarts: dict[tuple[str, str], tuple[Candidate, dict, str]] = {}

    @property
    def exhausted(self) -> bool:
        return not self.queue and not self.waiting

    def next(self, ctx: Context, running: Sequence[str]) -> Started | None:
        if self.waiting:
            return None
        # the first candidate is always tried (its guard shares the time left between its folds); the others while
        # time is left with the running ones' members and pipelines kept in the reserve
        while self.queue and (self.queue[0][0] == self.first or room(ctx, coming=1 + len(running)).left > 0):
            pair, reason = self.queue.pop(0)
            restart = self.restarts.pop(pair, None)
            if restart is not None:         # a restart at the rate that converges, decided when it stopped
                cand, cfg, faster = restart
                always = ctx.n_finished() == 0
            else:
                (cand, cfg, faster), always = fitted(ctx, pair), False
            started = jobs.start(ctx, cand, cfg, why=f"{reason}; {faster}" if faster else reason,
                                 running=len(running), converge=pair not in self.restarted, always=always)
            if not isinstance(started, Started):        # reused, or left out: the next one
                self._after_first(ctx, pair)
                continue
            if pair == self.first and ctx.executor.slots == 1 and self.queue:
                self.waiting = True                     # the rest is ordered once the first one is measured
            return replace(started, payload=(pair, reason))
        self.queue.clear()      # out of time: what is left is not started
        return None

    def ended(self, ctx: Context, started: Started, outcome: Outcome | None, rec: CandidateRecord | None,
              how: str) -> None:
        pair, reason = started.payload
        if outcome is not None and outcome.cut is not None and how == "ended" and self._restart(ctx, started, outcome):
            self.waiting = False            # the first candidate restarts before the rest is ordered
            return
        if self.waiting and how == "ended":
            self.waiting = False
            self._after_first(ctx, pair)
        if outcome is not None and outcome.lost and how == "ended":
            again = pair not in self.retried and room(ctx).left > 0
            log.warning("auto: %s lost its Dask worker; %s", started.name,
                        "it runs again" if again else "it is dropped (it ran again once, or no time is left)")
            if again:
                self.retried.add(pair)
                self.queue.insert(0, (pair, reason))

    def _restart(self, ctx: Context, started: Started, outcome: Outcome) -> bool:
        """A candidate whose fold reached its share of the time before early stopping: queued first again at a
        learning rate that converges, once (:func:`~qwkboost.autoblend.fit.converging`), or left out with a line.
        Whether it restarts."""
        pair, reason = started.payload
        cut = outcome.cut
        must = ctx.n_finished() == 0
        cfg = copy.deepcopy(ctx.configs[pair])     # as it ran (the tracking settings of a job aside)
        cfg["engine"]["params"] = {**(cfg["engine"].get("params") or {}), **dict(started.cand.params)}
        variant = converging(ctx, started.cand, cfg, cut, must=must)
        if variant is None:
            log.warning("auto: %s left out: fold %d reached its share of the time (%.0f s, %d rounds) before early "
                        "stopping, and no learning rate up to %gx its own converges in the %.0f s left",
                        started.name, cut.fold + 1, cut.share, cut.rounds, MAX_SPEEDUP, max(room(ctx).left, 0))
            return False
        log.info("auto: %s %s", started.name, variant[2])
        self.restarted.add(pair)
        self.restarts[pair] = variant
        self.queue.insert(0, (pair, reason))
        return True

    def _after_first(self, ctx: Context, pair: tuple[str, str]) -> None:
        """Once the first candidate is measured (or reused), with one slot: the rest screened if they do not fit,
        and ordered by their screens."""
        if pair != self.first or ctx.executor.slots != 1 or not self.queue:
            return
        self.first = None
        rest = [p for p, _ in self.queue]
        if room(ctx).left <= 0:
            self.queue.clear()
            return
        screens = {}
        mode = ctx.settings.screen
        if mode == "always" or (mode == "auto" and needs_screening(ctx, rest)):
            left = room(ctx).left
            log.info("auto: the other %d candidates would take longer than the %.0f s left: screening them first "
                     "(at most %.0f s)", len(rest), left, SCREEN_SHARE * left)
            screens = screen_all(ctx, [pair] + rest)
        self.queue = order(rest, screens, ctx.why)
