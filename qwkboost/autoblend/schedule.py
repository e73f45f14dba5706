r"""Which default candidate a budget cross-validates next, and when it screens first.

1. The first candidate of the ranked order (:mod:`~qwkboost.autoblend.ranking`) is cross-validated whole:
   whatever else happens, the budget ends with it.
2. If the other candidates' expected costs (:class:`~qwkboost.autoblend.candidates.CostModel`, scaled from the
   first one's measured time) add up to more than the time left, they are **screened** in the ranked order
   (:mod:`~qwkboost.autoblend.screening`), with at most :data:`SCREEN_SHARE` of the time left, each screen given
   an equal share of what is left of it; the first candidate is screened too, so that its measured time corrects
   every screen's projection. Without screening (everything fits) the candidates run in the ranked order.
   ``auto.screen=always`` screens whether or not they fit, ``never`` never does.
3. After screening, the **promising** candidates (a screen's QWK within :data:`PROMISING` of the best screen's)
   are cross-validated first, best screen first. A screen stopped at its time cap before early stopping
   understates its candidate, so it is promising when even its QWK is within :data:`PROMISING` of the best
   screen that ended by itself (on MovieLens, CatBoost's capped screen was the best of all and had waited behind
   two promising ones whose runs left it no time); else screening could not judge it. Then those screening
   could not judge (not screened, or capped below that), in the ranked order; then the others, best screen
   first.
4. A candidate whose estimate does not fit in the time left runs with its learning rate raised, when that makes it
   fit in :data:`FIT_SHARE` of it (:func:`fitted`); else it is left out, and the next one is tried.

Every candidate's place is recorded with a reason (``why`` in ``leaderboard.csv``).
"""

from __future__ import annotations

import copy
import logging

from qwkboost.autoblend.candidates import Candidate
from qwkboost.autoblend.screening import screen
from qwkboost.autoblend.state import Status, config_hash
from qwkboost.exceptions import ClusterLost

__all__ = ["run_defaults", "run_at_once", "screen_rest", "fitted", "order", "SCREEN_SHARE", "PROMISING", "MIN_SCREEN_SECONDS",
           "MAX_SPEEDUP", "FIT_SHARE"]

log = logging.getLogger("qwkboost.autoblend")

#: The share of the time left after the first candidate that screening may use.
SCREEN_SHARE = 0.25
#: A screened candidate within this QWK of the best screen is promising.
PROMISING = 0.01
#: A screen is not started with fewer seconds than this for it.
MIN_SCREEN_SECONDS = 2.0
#: A default candidate expected to take longer than the time left runs with its learning rate raised by up to this
#: factor, when that makes it expected to take :data:`FIT_SHARE` of the time left.
MAX_SPEEDUP = 4.0
FIT_SHARE = 0.8


def _pair_screen(state, pair) -> dict | None:
    rec = state.candidates.get(Candidate(*pair).name, {})
    s = rec.get("screen")
    return s if isinstance(s, dict) and "qwk" in s else None


def fitted(run, state, pair) -> tuple[Candidate, dict, str]:
    r"""The candidate to run for ``pair``, its config and the reason when it is not the configured one.

    As configured when it is expected to fit in the time left, when nothing is known of its cost, or when it has
    no ``learning_rate``. Else a faster variant of an earlier invocation that finished, if any. Else, when raising
    the learning rate :math:`\eta` by a factor :math:`f \le` :data:`MAX_SPEEDUP` makes it fit in
    :data:`FIT_SHARE` of the time left, that variant: boosting needs about :math:`f` times fewer rounds
    (Friedman, *Annals of Statistics* 2001, sec. 5), but early stopping's patience :math:`P` does not shrink, so
    with :math:`R` rounds kept at :math:`\eta` (its screen's, fewer than the full data keeps: the estimate errs
    long) the time falls by :math:`s = (R + P) / (R / f + P)`. Else the candidate as configured, which the budget
    then leaves out."""
    cfg = run.configs[pair]
    plain = Candidate(*pair)
    estimate = run.cost.estimate(plain)
    run.set_reserve(state, coming_seconds=estimate, coming_pair=pair)     # a longer run, a larger pipeline
    left = run.budget.left_for_work
    rate = (cfg["engine"].get("params") or {}).get("learning_rate")
    if estimate is None or estimate <= left or not rate or left <= 0 or \
            state.finished(plain.name, config_hash(cfg)) is not None:
        return plain, cfg, ""
    for name, rec in state.candidates.items():       # a faster variant that finished earlier is kept
        if rec.get("status") == Status.FINISHED and rec.get("speedup", 1.0) != 1.0 and rec.get("trial") is None and \
                (rec.get("engine"), rec.get("objective")) == pair:
            done = copy.deepcopy(cfg)
            done["engine"]["params"] = {**done["engine"].get("params", {}), **rec.get("params", {})}
            if state.finished(name, config_hash(done)) is not None:
                return Candidate(*pair, tuple(sorted(rec["params"].items())), None, rec["speedup"]), done, \
                    rec.get("why", "")
    need = estimate / (FIT_SHARE * left)            # the time's speed-up that makes it fit
    s = _pair_screen(state, pair)
    patience = int(cfg["engine"].get("early_stopping_rounds") or 0)
    rounds = int(s["rounds"]) if s is not None and s.get("rounds") else None
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


def _screen_one(run, state, pair, cap: float) -> dict | None:
    """Screen ``pair`` (or reuse its screen of the same configuration that was not stopped at its cap); its
    record's ``screen``, or ``None`` when the screen failed (logged: a screen only ranks, and the candidate's own
    run will say what is wrong)."""
    cfg = run.configs[pair]
    name = Candidate(*pair).name
    h = config_hash(cfg)
    old = state.candidates.get(name, {}).get("screen")
    if isinstance(old, dict) and old.get("config_hash") == h and "qwk" in old and not old.get("capped"):
        run.cost.screened(pair, old["projected"], old.get("mb"))
        return old
    run.progress.step(f"screen {name}")
    try:
        result = screen(run.ds, cfg, cap_seconds=cap)
    except Exception as exc:  # noqa: BLE001 - a screen that fails ranks nothing; the run itself reports the error
        log.warning("auto: screening %s failed (%s: %s); it keeps its place in the order", name,
                    type(exc).__name__, exc)
        return None
    rec = state.candidates.setdefault(name, {"status": Status.SCREENED, "engine": pair[0], "objective": pair[1]})
    rec["screen"] = {**result.to_dict(), "config_hash": h}
    run.cost.screened(pair, result.projected, result.mb)
    state.save()
    log.info("auto: screened %s: QWK %.4f on %d rows in %.1f s%s; its cross-validation: about %.0f s", name,
             result.qwk, result.rows, result.seconds,
             " (stopped at its time cap: both understate it)" if result.capped else "",
             run.cost.estimate(Candidate(*pair)))
    return rec["screen"]


def _screen_all(run, state, pairs) -> dict:
    """Screen ``pairs`` in order within :data:`SCREEN_SHARE` of the time left, each with an equal share of what
    is left of it; ``pair -> screen`` of those screened."""
    run.set_reserve(state)
    until = run.budget.elapsed + SCREEN_SHARE * max(run.budget.left_for_work, 0.0)
    screens = {}
    for i, pair in enumerate(pairs):
        left = until - run.budget.elapsed
        if left < MIN_SCREEN_SECONDS:
            break
        rec = _screen_one(run, state, pair, max(left / (len(pairs) - i), MIN_SCREEN_SECONDS))
        if rec is not None:
            screens[pair] = rec
    return screens


def _needs_screening(run, state, pairs) -> bool:
    """Whether the unfinished ``pairs`` are expected to take longer than the time left."""
    todo = [p for p in pairs if state.finished(Candidate(*p).name, config_hash(run.configs[p])) is None]
    expected = [run.cost.estimate(Candidate(*p)) for p in todo]
    return bool(todo) and sum(e or 0.0 for e in expected) > run.budget.left_for_work


def order(pairs, screens: dict, why: dict) -> list[tuple[tuple[str, str], str]]:
    """``pairs`` (the ranked order) after screening: promising ones by their screen, those screening could not
    judge in the ranked order, the others by their screen; each with the reason for its place (module
    docstring)."""
    if not screens:
        return [(p, why.get(p, "default order")) for p in pairs]
    judged = {p: s for p, s in screens.items() if not s.get("capped")}
    best = max((s["qwk"] for s in judged.values()), default=max(s["qwk"] for s in screens.values()))
    # a capped screen's QWK is a lower bound: within PROMISING of the best, its candidate is promising too
    hopeful = {p: s for p, s in screens.items() if p in judged or s["qwk"] >= best - PROMISING}
    scored = sorted((p for p in pairs if p in hopeful), key=lambda p: -hopeful[p]["qwk"])

    def note(p):
        capped = " (stopped at its time cap, which understates it)" if p not in judged else ""
        return f"screened {hopeful[p]['qwk']:.4f}{capped}: within {PROMISING} of the best screen ({best:.4f})"
    promising = [(p, note(p)) for p in scored if hopeful[p]["qwk"] >= best - PROMISING]
    unjudged = [(p, (f"screen stopped at its time cap ({screens[p]['qwk']:.4f}): " if p in screens else
                     "not screened (its share of the time was spent): ") + why.get(p, "default order"))
                for p in pairs if p not in hopeful]
    rest = [(p, f"screened {judged[p]['qwk']:.4f}: {best - judged[p]['qwk']:.4f} below the best screen")
            for p in scored if hopeful[p]["qwk"] < best - PROMISING]
    return promising + unjudged + rest


def run_defaults(run, state) -> None:
    """Cross-validate the default candidates of ``run`` (an :class:`~qwkboost.autoblend.driver.AutoRun`) within its
    budget (module docstring); on a cluster's executor, :func:`run_at_once`."""
    pairs = list(run.configs)
    if run.executor.remote:
        run_at_once(run, state, [(p, f"first: {run.why.get(p)}" if i == 0 else run.why.get(p, "default order"))
                                 for i, p in enumerate(pairs)])
        return
    first, rest = pairs[0], pairs[1:]
    run.run_candidate(state, Candidate(*first), run.configs[first], why=f"first: {run.why.get(first)}")
    if not rest or run.budget.left_for_work <= 0:
        return
    screens = {}
    mode = run.settings.screen
    if mode == "always" or (mode == "auto" and _needs_screening(run, state, rest)):
        log.info("auto: the other %d candidates would take longer than the %.0f s left: screening them first "
                 "(at most %.0f s)", len(rest), run.budget.left_for_work,
                 SCREEN_SHARE * run.budget.left_for_work)
        screens = _screen_all(run, state, [first] + rest)
    for pair, reason in order(rest, screens, run.why):
        if run.budget.left_for_work <= 0:
            break
        cand, cfg, faster = fitted(run, state, pair)
        run.run_candidate(state, cand, cfg, why=f"{reason}; {faster}" if faster else reason)


def screen_rest(run, state) -> None:
    """With time left that no candidate or trial fits in, screen the candidates never screened nor finished
    (their figures go in the leaderboard; a screen is never blended). Not with ``auto.screen=never``."""
    if run.settings.screen == "never":
        return
    run.set_reserve(state, coming=0)       # a screen never joins the blend
    finished = {(r.get("engine"), r.get("objective")) for r in state.candidates.values()
                if r.get("status") == Status.FINISHED}
    for pair in run.configs:
        if pair in finished or _pair_screen(state, pair) is not None:
            continue
        left = run.budget.left_for_work
        if left < 2 * MIN_SCREEN_SECONDS:
            return
        _screen_one(run, state, pair, 0.5 * left)     # scoring the screen's rows comes after its cap


def _finished_default(state, run) -> bool:
    return any(r.get("status") == Status.FINISHED and r.get("trial") is None
               and (r.get("engine"), r.get("objective")) in run.configs for r in state.candidates.values())


def finish_running(run, state) -> None:
    """Wait for the candidates a step left running (:attr:`~qwkboost.autoblend.driver.AutoRun.running`: the last
    default candidates, when tuning started beside them) and record them; Ctrl-C stops them."""
    try:
        while run.running:
            outcome = run.executor.next_outcome()
            cand, _ = run.running.pop(outcome.name)
            run.end_candidate(state, cand, outcome)
    except KeyboardInterrupt:
        for outcome in run.executor.stop():
            run.end_candidate(state, run.running.pop(outcome.name)[0], outcome)
        raise
    except ClusterLost:
        for outcome in run.executor.abandon():
            run.end_candidate(state, run.running.pop(outcome.name)[0], outcome)
        raise


def run_at_once(run, state, queue) -> None:
    """Cross-validate ``queue`` (``(pair, reason)`` in order) on ``run``'s executor, as many at once as it has slots
    (a cluster's free workers).

    Whenever a slot is free the next candidate that fits in the time left is started (:func:`fitted`, with the
    running candidates' blend members and pipelines kept in the reserve); a finished one corrects the cost model
    for the rest. A candidate that trains across the workers' rows (:mod:`qwkboost.autoblend.placement`) holds the
    free workers until it has run. A candidate whose worker was lost runs again once, if it still fits, else is
    dropped, with a log line. Ctrl-C or SIGTERM stops every running candidate after its current round and records
    them as stopped. Screening is not used here: every slot already gives a candidate a look.

    When every candidate has started and a worker is free, the running ones are left running for tuning to start
    beside them (with ``auto.tune``, once one has finished): they are handed on in ``run.running``, which tuning and
    :func:`finish_running` wait for."""
    from qwkboost.autoblend.executor import Job  # slow to import: matplotlib (a run's plots)

    executor = run.executor
    queue, running, retried = list(queue), {}, set()
    try:
        while queue or running:
            while queue and executor.free > 0 and run.budget.left_for_work > 0:
                pair, reason = queue.pop(0)
                cand, cfg, faster = fitted(run, state, pair)
                job = run.start_candidate(state, cand, cfg, why=f"{reason}; {faster}" if faster else reason,
                                          running=len(running))
                if isinstance(job, Job):
                    executor.submit(job)
                    running[job.name] = (cand, pair, reason)
            if not running:
                break
            if not queue and executor.free > 0 and run.settings.tune and _finished_default(state, run):
                # a worker is free and no default candidate is left to start: tuning starts on it now, and the
                # running candidates end while it goes on (finish_running)
                run.running.update({name: (cand, None) for name, (cand, _, _) in running.items()})
                log.info("auto: every default candidate has started; tuning starts on the free worker beside %s",
                         ", ".join(sorted(running)))
                return
            outcome = executor.next_outcome()
            cand, pair, reason = running.pop(outcome.name)
            run.end_candidate(state, cand, outcome)
            if outcome.lost:
                again = pair not in retried and run.budget.left_for_work > 0
                log.warning("auto: %s lost its Dask worker; %s", cand.name,
                            "it runs again" if again else "it is dropped (it ran again once, or no time is left)")
                if again:
                    retried.add(pair)
                    queue.insert(0, (pair, reason))
    except KeyboardInterrupt:
        for outcome in executor.stop():
            cand, _, _ = running.pop(outcome.name)
            run.end_candidate(state, cand, outcome)
        raise
    except ClusterLost:         # the scheduler is gone: what ran there is lost, what finished is kept
        for outcome in executor.abandon():
            cand, _, _ = running.pop(outcome.name)
            run.end_candidate(state, cand, outcome)
        raise
