r"""Does it fit: the one place a budget compares what something is expected to take with the time left.

The time left for work is computed when asked, never stored: the budget's seconds until the limit less the
:func:`~qwkboost.autoblend.costs.reserve` for the end, which depends on the finished candidates and on what is
coming (:func:`room`). :func:`fits` is the comparison itself; :func:`fitted` picks the variant of a default
candidate that fits (its learning rate raised); :func:`needs_screening` asks it of every candidate left. Nothing
here writes to the record or the cost model.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING

from qwkboost.autoblend.candidates import Candidate
from qwkboost.autoblend.costs import BOUND_FACTOR, CANDIDATE_SECONDS_PER_MB, Reserve, reserve
from qwkboost.autoblend.state import Status, config_hash

if TYPE_CHECKING:
    from qwkboost.autoblend.budget import CutShort
    from qwkboost.autoblend.context import Context

__all__ = ["Room", "room", "tail", "fits", "fitted", "converging", "restart_factor", "needs_screening", "MAX_SPEEDUP", "FIT_SHARE",
           "MIN_RESTART_SPEEDUP"]

#: A default candidate expected to take longer than the time left runs with its learning rate raised by up to this
#: factor, when that makes it expected to take :data:`FIT_SHARE` of the time left.
MAX_SPEEDUP = 4.0
FIT_SHARE = 0.8
#: A candidate restarted because a fold reached its share of the time before early stopping has its learning rate
#: raised by at least this factor: that fold was cut short by how much is not known, so a smaller step would
#: likely be cut again.
MIN_RESTART_SPEEDUP = 2.0


@dataclass(frozen=True)
class Room:
    """The time left for work now, for what is coming.

    Attributes
    ----------
    left : float
        Seconds until the limit, less :attr:`reserve`'s (negative when past it).
    reserve : Reserve
        What is kept back for the end (:func:`~qwkboost.autoblend.costs.reserve`).
    """

    left: float
    reserve: Reserve


def room(ctx: Context, coming: int = 1, coming_seconds: float | None = None,
         coming_pair: tuple[str, str] | None = None) -> Room:
    """The time left for work in ``ctx``'s budget now, with ``coming`` more candidates expected to join the blend
    (``coming_seconds`` long, of ``coming_pair``: a longer run writes a larger pipeline); see
    :func:`~qwkboost.autoblend.costs.reserve`. A function of the record and the clock, asked where it is needed."""
    kept = reserve([r for r in ctx.state.candidates.values() if r.finished], ctx.pool(), ctx.cost,
                   n_folds=ctx.n_folds, eval_seconds=ctx.eval_seconds, max_members=ctx.settings.max_members,
                   tracked=ctx.experiment_id is not None, coming=coming, coming_seconds=coming_seconds,
                   coming_pair=coming_pair)
    return Room(ctx.budget.left - kept.seconds, kept)


def tail(ctx: Context, pair: tuple[str, str], now: Room) -> float:
    """Seconds a candidate of ``pair`` is expected to spend after its folds (its scores, cut points and the
    pipeline it writes, :data:`~qwkboost.autoblend.costs.CANDIDATE_SECONDS_PER_MB` times ``now``'s coming
    megabytes): kept out of its folds' time by its guard."""
    return ctx.cost.overhead(pair) + CANDIDATE_SECONDS_PER_MB * now.reserve.coming_mb


def fits(estimate: float | None, left: float, tail: float = 0.0) -> bool:
    """Whether work expected to take ``estimate`` seconds (``None``: not known, so it is tried), ``tail`` of them
    after its folds, fits in ``left`` seconds: :math:`\\hat T \\le L` and :math:`t_{\\text{tail}} < L` (a tail that
    leaves the folds no time would have its guard stop it at once: on Diamonds at 240 s, 25 candidates and trials in a
    row were started and stopped in 0.1 s each)."""
    return estimate is None or (estimate <= left and tail < left)


def fitted(ctx: Context, pair: tuple[str, str]) -> tuple[Candidate, dict, str]:
    r"""The candidate to run for ``pair``, its config and the reason when it is not the configured one.

    As configured when it is expected to fit in the time left, when nothing is known of its cost, or when it has
    no ``learning_rate``, unless as configured it did not converge in an earlier invocation (``not converged``).
    Else a faster variant of an earlier invocation that finished, if any. Else, when raising
    the learning rate :math:`\eta` by a factor :math:`f \le` :data:`MAX_SPEEDUP` makes it fit in
    :data:`FIT_SHARE` of the time left, that variant: boosting needs about :math:`f` times fewer rounds
    (Friedman, *Annals of Statistics* 2001, sec. 5), but early stopping's patience :math:`P` does not shrink, so
    with :math:`R` rounds kept at :math:`\eta` (its screen's, fewer than the full data keeps: the estimate errs
    long) the folds' time falls by :math:`s = (R + P) / (R / f + P)`; what follows the folds
    (:meth:`~qwkboost.autoblend.costs.CostModel.overhead`, :math:`o`) does not, so :math:`s` must bring
    :math:`\hat T - o` within :data:`FIT_SHARE` of the time left less :math:`o` (on diamonds on one busy core,
    LightGBM's 13 s besides its folds, taken as CatBoost's, had a variant at 3.2x its rate expected at 16 s; its
    folds alone were expected to need 11 s of the 6 s its tail left them; it and six others were started and
    stopped in a row). Else the candidate as configured, which the budget then leaves out."""
    cfg = ctx.configs[pair]
    plain = Candidate(*pair)
    estimate = ctx.cost.estimate(plain)
    left = room(ctx, coming_seconds=estimate, coming_pair=pair).left     # a longer run, a larger pipeline
    rate = (cfg["engine"].get("params") or {}).get("learning_rate")
    # as configured, it did not converge in an earlier invocation: the faster variant it restarted as, if it finished
    cut = getattr(ctx.state.candidates.get(plain.name), "status", None) == Status.NOT_CONVERGED
    if (fits(estimate, left) and not cut) or not rate or left <= 0 or \
            ctx.state.finished(plain.name, config_hash(cfg)) is not None:
        return plain, cfg, ""
    for name, rec in ctx.state.candidates.items():       # a faster variant that finished earlier is kept
        if rec.finished and (rec.speedup or 1.0) != 1.0 and rec.trial is None and rec.pair == pair:
            done = copy.deepcopy(cfg)
            done["engine"]["params"] = {**done["engine"].get("params", {}), **(rec.params or {})}
            if ctx.state.finished(name, config_hash(done)) is not None:
                return Candidate(*pair, tuple(sorted(rec.params.items())), None, rec.speedup), done, rec.why or ""
    if estimate is None or fits(estimate, left):
        return plain, cfg, ""
    after = min(ctx.cost.overhead(pair), estimate)  # what follows its folds does not shrink with the rate
    if FIT_SHARE * left <= after:
        return plain, cfg, ""
    need = (estimate - after) / (FIT_SHARE * left - after)     # the folds' speed-up that makes it fit
    s = getattr(ctx.state.candidates.get(plain.name), "screened", None)
    patience = int(cfg["engine"].get("early_stopping_rounds") or 0)
    rounds = s.get("rounds_upper") or s.get("rounds") if s is not None else None
    rounds = int(rounds) if rounds else None
    if rounds is None or patience == 0:
        factor = need
    elif (rounds + patience) / need > patience:
        factor = rounds / ((rounds + patience) / need - patience)
    else:
        return plain, cfg, ""
    if factor > MAX_SPEEDUP:
        return plain, cfg, ""
    faster = float(f"{rate * factor:.3g}")
    factor = faster / rate
    speedup = factor if rounds is None or patience == 0 else (rounds + patience) / (rounds / factor + patience)
    out = copy.deepcopy(cfg)
    out["engine"]["params"] = {**out["engine"]["params"], "learning_rate": faster}
    return (Candidate(*pair, (("learning_rate", faster),), None, speedup), out,
            f"learning rate {rate:g} -> {faster:g} to fit the {left:.0f} s left (about {estimate:.0f} s at {rate:g})")


def converging(ctx: Context, cand: Candidate, cfg: dict, cut: CutShort,
               must: bool = False) -> tuple[Candidate, dict, str] | None:
    r"""The variant that restarts ``cand`` (run with ``cfg``) after its fold ``cut`` reached its share of the time
    before early stopping, its config and the reason; or ``None``: it is left out.

    The fold trained :math:`r` rounds in :math:`t` seconds and was still improving, so at the rate :math:`\eta`
    that failed it needed more than :math:`r`; :data:`~qwkboost.autoblend.costs.BOUND_FACTOR` :math:`\cdot r` is
    taken as its upper estimate :math:`\hat R` (recorded in the cost model,
    :meth:`~qwkboost.autoblend.costs.CostModel.cut_short`). At :math:`f\eta` a fold needs about
    :math:`\hat R / f` rounds and early stopping's patience :math:`P` (Friedman 2001, sec. 5), at the fold's
    :math:`t / r` seconds a round; the factor is the smallest that makes the :math:`K` folds take
    :data:`FIT_SHARE` of the time left for them (less its :func:`tail`), at least :data:`MIN_RESTART_SPEEDUP`. Above :data:`MAX_SPEEDUP` the
    candidate is left out, unless ``must`` (nothing has finished: the budget must end with something), when it
    restarts at that factor.
    """
    params = cfg["engine"].get("params") or {}
    rate = params.get("learning_rate")
    if not rate or cut.rounds < 1:
        return None
    patience = int(cfg["engine"].get("early_stopping_rounds") or 0)
    per_round = cut.seconds / cut.rounds
    needed = BOUND_FACTOR * cut.rounds
    seconds = ctx.n_folds * (needed + patience) * per_round       # at the rate that failed
    ctx.cost.cut_short(cand.pair, seconds * cand.speedup)          # at the pair's own rate
    now = room(ctx, coming_pair=cand.pair)
    left = now.left - tail(ctx, cand.pair, now)                     # its folds' time, as its guard will see it
    factor = restart_factor(cut.rounds, cut.seconds, left, ctx.n_folds, patience)
    if factor > MAX_SPEEDUP:
        if not must:
            return None
        factor = MAX_SPEEDUP
    faster = float(f"{rate * factor:.3g}")
    factor = faster / rate
    out = copy.deepcopy(cfg)
    out["engine"]["params"] = {**params, "learning_rate": faster}
    base = (ctx.configs[cand.pair]["engine"].get("params") or {}).get("learning_rate", rate)
    speedup = seconds * cand.speedup / (ctx.n_folds * (needed / factor + patience) * per_round)
    why = (f"restarted at learning rate {rate:g} -> {faster:g}: fold {cut.fold + 1} reached its share of the time "
           f"({cut.share:.0f} s) at round {cut.rounds} before early stopping")
    return Candidate(*cand.pair, (("learning_rate", faster),) if faster != base else (), None,
                     speedup if faster != base else 1.0), out, why


def restart_factor(rounds: int, seconds: float, left: float, n_folds: int, patience: int) -> float:
    r"""The factor by which a candidate's learning rate is raised to restart it after its first fold trained
    ``rounds`` in ``seconds`` without early stopping, so that its ``n_folds`` folds are expected to take
    :data:`FIT_SHARE` of the ``left`` seconds for them: :math:`\hat R / (F\,L / (K\,t/r) - P)` with the upper
    estimate :math:`\hat R` = :data:`~qwkboost.autoblend.costs.BOUND_FACTOR` :math:`\cdot r` of the rounds it
    needed, at least :data:`MIN_RESTART_SPEEDUP`; infinite when nothing but the patience fits. Above
    :data:`MAX_SPEEDUP` no restart converges in time: its guard goes on with the fold cut instead
    (:class:`~qwkboost.autoblend.budget.TimeGuard`), and :func:`converging` leaves it out."""
    per_round = seconds / max(rounds, 1)
    fit_rounds = FIT_SHARE * max(left, 0.0) / n_folds / per_round - patience if per_round > 0 else float("inf")
    needed = BOUND_FACTOR * rounds
    return max(needed / fit_rounds if fit_rounds > 0 else float("inf"), MIN_RESTART_SPEEDUP)


def needs_screening(ctx: Context, pairs) -> bool:
    """Whether the unfinished ``pairs`` are expected to take longer, together, than the time left."""
    todo = [p for p in pairs if ctx.state.finished(Candidate(*p).name, config_hash(ctx.configs[p])) is None]
    expected = sum(ctx.cost.estimate(Candidate(*p)) or 0.0 for p in todo)
    return bool(todo) and not fits(expected, room(ctx).left)
