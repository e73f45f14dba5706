"""Estimates that carry their uncertainty, and folds that converge instead of being cut: a screen stopped at its
time cap is a lower bound (screened again at a raised learning rate for an upper estimate), and a fold that reaches
its share of the time before early stopping restarts its candidate at a rate that converges, or leaves it out,
never goes on cut short silently."""

import copy

import pytest

from qwkboost.autoblend.api import candidate_config
from qwkboost.autoblend.budget import NOT_CONVERGED, Budget, CutShort, NotConverged, TimeGuard
from qwkboost.autoblend.candidates import Candidate
from qwkboost.autoblend.costs import BOUND_FACTOR, CostModel
from qwkboost.autoblend.executor import LocalExecutor
from qwkboost.autoblend.fit import (FIT_SHARE, MAX_SPEEDUP, MIN_RESTART_SPEEDUP, converging, fitted,
                                   restart_factor, room)
from qwkboost.autoblend.loop import run_loop
from qwkboost.autoblend.schedule import Defaults, screen_one
from qwkboost.autoblend.screening import RESCREEN_SPEEDUP, raised, screen, upper_estimate
from qwkboost.autoblend.state import AutoState, Status
from qwkboost.callback import EarlyStopException
from test_schedule import _context, _dataset

PAIR = ("lightgbm", "squared_error")


def _clocked(limit):
    clock = [0.0]
    return clock, Budget(limit, started=0.0, clock=lambda: clock[0])


# ------------------------------------------------------------------ the guard
def test_the_first_fold_reaching_its_share_stops_the_candidate_with_how_far_it_got():
    clock, budget = _clocked(60.0)
    guard = TimeGuard(budget, 5, share_folds=True, converge=True)
    guard.on_round(0, 0, {})
    clock[0] = 13.0                 # past its share, 60 / 5 s
    with pytest.raises(NotConverged) as stop:
        guard.on_round(0, 499, {})
    assert stop.value.cut == CutShort(0, 500, 13.0, 12.0) and stop.value.tags == NOT_CONVERGED
    assert "fold 1/5 reached its share of the time (13 s, 500 rounds) before early stopping" in str(stop.value)
    assert not guard.capped


def test_after_a_first_fold_that_converged_a_later_one_is_cut_and_counted():
    """With the folds sharing the time from the start, only the first fold restarts the candidate: a later fold's
    share is at least the first one's."""
    clock, budget = _clocked(60.0)
    guard = TimeGuard(budget, 5, share_folds=True, converge=True)
    guard.on_round(0, 0, {})
    clock[0] = 5.0
    guard.on_fold(0, None, None)
    guard.on_round(1, 0, {})
    clock[0] = 30.0
    with pytest.raises(EarlyStopException):
        guard.on_round(1, 300, {})
    assert guard.capped == {1}


def test_without_converge_a_fold_is_cut_as_before():
    clock, budget = _clocked(60.0)
    guard = TimeGuard(budget, 5, share_folds=True)
    guard.on_round(0, 0, {})
    clock[0] = 13.0
    with pytest.raises(EarlyStopException):
        guard.on_round(0, 400, {})
    assert guard.capped == {0}


def test_a_fold_is_cut_and_the_candidate_goes_on_when_no_restart_would_converge_in_time():
    """A rescue shares the time left between the folds still to run. When its first fold reaches its share, a
    restart at up to MAX_SPEEDUP times the rate would not converge in what is left (the fold ran 37 s of 100 s):
    the fold is cut and counted, and the candidate goes on. So is a later fold (the folds before it converged)."""
    clock, budget = _clocked(100.0)
    guard = TimeGuard(budget, 5, rescue=True, fold_seconds=20.0, converge=True)
    guard.on_round(0, 0, {})
    clock[0] = 21.0                 # 21 s into fold 1: four more as long do not fit in 79 s; the folds share it
    guard.on_round(0, 700, {})
    assert guard.rescued and guard.share_folds
    clock[0] = 37.0                 # past fold 1's share, 21 s + 79 s / 5
    assert restart_factor(901, 37.0, guard.left, 5, 0) > MAX_SPEEDUP
    with pytest.raises(EarlyStopException):
        guard.on_round(0, 900, {})
    assert guard.capped == {0}

    clock, budget = _clocked(100.0)
    guard = TimeGuard(budget, 5, rescue=True, fold_seconds=20.0, converge=True)
    for i in range(2):
        guard.on_round(i, 0, {})
        clock[0] += 26.0
        guard.on_fold(i, None, None)    # after fold 1: four more of 26 s do not fit in 74 s; shared
    guard.on_round(2, 0, {})
    clock[0] += 26.0
    with pytest.raises(EarlyStopException):
        guard.on_round(2, 900, {})
    assert guard.rescued and guard.capped == {2}


def test_the_restart_s_rate_comes_from_the_fold_s_pace_and_the_time_left():
    # 1,000 rounds in 10 s; 100 s for five folds: 80 s of them fit 1,600 rounds a fold, less 100 of patience
    assert restart_factor(1000, 10.0, 100.0, 5, 100) == pytest.approx(max(2000 / 1500, MIN_RESTART_SPEEDUP))
    assert restart_factor(1000, 10.0, 40.0, 5, 100) == pytest.approx(2000 / (640 - 100))
    assert restart_factor(1000, 10.0, 5.0, 5, 100) == float("inf")     # not even the patience fits


def test_the_tail_counts_as_a_fold_until_it_is_measured():
    clock, budget = _clocked(60.0)
    guard = TimeGuard(budget, 5, share_folds=True, tail_folds=1.0)
    guard.on_round(0, 0, {})
    clock[0] = 10.5                 # within 60 / 5 s, past 60 / 6 s
    with pytest.raises(EarlyStopException):
        guard.on_round(0, 100, {})
    clock2, budget2 = _clocked(60.0)
    guard = TimeGuard(budget2, 5, share_folds=True, tail_folds=1.0)
    guard.on_round(0, 0, {})
    clock2[0] = 8.0
    guard.on_fold(0, None, None)
    assert guard.left == pytest.approx(60.0 - 8.0 - 8.0)       # one fold's mean kept for what follows


# ------------------------------------------------------------------ the plan: restart or leave out
def test_a_restart_takes_the_rate_that_fits_its_folds_or_leaves_the_candidate(tmp_path):
    clock, budget = _clocked(300.0)
    cost = CostModel()
    cfg = candidate_config(*PAIR)
    ctx = _context(tmp_path, {PAIR: cfg}, cost, budget)
    rate, patience = cfg["engine"]["params"]["learning_rate"], cfg["engine"]["early_stopping_rounds"]
    cut = CutShort(0, 1000, 10.0, 10.0)         # 1,000 rounds in 10 s, still improving
    cand, out, why = converging(ctx, Candidate(*PAIR), cfg, cut)
    factor = out["engine"]["params"]["learning_rate"] / rate
    left = room(ctx, coming_pair=PAIR).left
    rounds = FIT_SHARE * left / 5 / 0.01 - patience
    assert factor == pytest.approx(max(BOUND_FACTOR * 1000 / rounds, MIN_RESTART_SPEEDUP), rel=1e-2)
    assert cand.name == f"lightgbm-squared_error-lr{out['engine']['params']['learning_rate']:g}"
    assert "restarted at learning rate" in why and "fold 1 reached its share" in why
    # its cost is an upper estimate from that fold: twice its rounds and the patience, at the fold's pace
    assert cost.kind(Candidate(*PAIR)) == "upper"
    assert cost.estimate(Candidate(*PAIR)) == pytest.approx(5 * (2000 + patience) * 0.01)
    assert cost.estimate(cand) == pytest.approx(5 * (2000 / factor + patience) * 0.01)
    assert cfg["engine"]["params"]["learning_rate"] == rate         # the plan's config untouched
    # with 30 s left, no rate up to MAX_SPEEDUP fits: left out, unless nothing else finished
    clock[0] = 270.0
    assert converging(ctx, Candidate(*PAIR), cfg, cut) is None
    cand, out, _ = converging(ctx, Candidate(*PAIR), cfg, cut, must=True)
    assert out["engine"]["params"]["learning_rate"] == pytest.approx(rate * MAX_SPEEDUP, rel=1e-2)


def test_a_first_candidate_cut_short_restarts_faster_and_its_cut_restart_is_noted(tmp_path, caplog):
    """On real folds: a learning rate that cannot converge within the budget (1e-5) reaches its first fold's share;
    the candidate restarts once at a raised rate (nothing has finished: it must end with something), whose folds
    then go on cut and are counted in its record and the leaderboard, never silently."""
    from qwkboost.autoblend.board import leaderboard

    ds = _dataset(tmp_path)
    cfg = candidate_config(*PAIR, n_jobs=1)
    cfg["engine"]["params"]["learning_rate"] = 1e-5
    cfg["engine"]["num_boost_round"] = 10 ** 7
    budget = Budget(12.0)
    ctx = _context(tmp_path, {PAIR: cfg}, CostModel(), budget, ds)
    ctx.out, ctx.executor = ctx.state.directory, LocalExecutor(ds, budget)
    caplog.set_level("INFO", logger="qwkboost.autoblend")
    run_loop(ctx, [Defaults(ctx)])
    records = ctx.state.candidates
    plain = records["lightgbm-squared_error"]
    assert "fold 1/5 reached its share of the time" in plain.reason
    faster = [r for n, r in records.items() if n.startswith("lightgbm-squared_error-lr")]
    assert len(faster) == 1, records
    (name, rec), = [(n, r) for n, r in records.items() if r is faster[0]]
    assert rec.params["learning_rate"] >= MIN_RESTART_SPEEDUP * 1e-5 and "restarted at learning rate" in rec.why
    assert rec.status == Status.FINISHED and rec.capped_folds >= 1         # restarted once only: then cut, counted
    assert plain.status == Status.NOT_CONVERGED and plain.why == f"ran as {name}"
    assert any("restarted at learning rate" in m for m in caplog.messages)
    board = leaderboard(records, {name: 1.0}, lambda r: True, test_labels=False).set_index("candidate")
    assert board.loc[name, "capped_folds"] == rec.capped_folds
    assert board.loc["lightgbm-squared_error", "status"] == "not converged"
    # resumed, from the records as written: its restart is reused, not the rate that did not converge
    caplog.clear()
    budget = Budget(12.0)
    again = _context(tmp_path, {PAIR: cfg}, CostModel(), budget, ds)
    again.state = AutoState.open(ctx.out, {})
    again.out = ctx.out
    assert again.state.candidates["lightgbm-squared_error"].status == Status.NOT_CONVERGED
    again.executor = LocalExecutor(ds, budget)
    run_loop(again, [Defaults(again)])
    assert any(m.startswith(f"auto: {name} reused") for m in caplog.messages), caplog.messages
    assert set(again.state.candidates) == set(records)


def test_a_later_candidate_cut_short_with_no_time_to_restart_is_left_out_with_a_line(tmp_path, caplog):
    from qwkboost.autoblend.executor import Outcome
    from qwkboost.autoblend.state import CandidateRecord

    clock, budget = _clocked(60.0)
    pairs = [PAIR, ("xgboost", "squared_error")]
    ctx = _context(tmp_path, {p: candidate_config(*p) for p in pairs}, CostModel(), budget)
    ctx.executor = LocalExecutor(None, budget)
    ctx.state.candidates["lightgbm-squared_error"] = CandidateRecord(Status.FINISHED, *PAIR, seconds=5.0)
    source = Defaults(ctx)
    source.queue, source.first = [(pairs[1], "default order")], None
    started = source.next(ctx, [])
    assert started.job.guard.converge and not started.job.guard.share_folds
    clock[0] = 50.0
    caplog.set_level("INFO", logger="qwkboost.autoblend")
    outcome = Outcome(started.name, None, "cut", dict(NOT_CONVERGED), 40.0, cut=CutShort(1, 800, 20.0, 20.0))
    source.ended(ctx, started, outcome, None, "ended")
    assert source.exhausted
    assert any("xgboost-squared_error left out: fold 2 reached its share" in m for m in caplog.messages)


# ------------------------------------------------------------------ a capped screen's upper estimate
def test_a_capped_screen_is_a_bound_and_a_raised_rate_gives_its_upper_estimate(tmp_path):
    """On small data with a tiny cap: the screen stops after its first round (a lower bound); the same screen at
    RESCREEN_SPEEDUP times the rate runs to early stopping, and its rounds give the upper estimate the plan raises
    the learning rate from."""
    from qwkboost.autoblend.costs import MEMBER_SECONDS, WRITE_SECONDS

    ds = _dataset(tmp_path)
    cfg = candidate_config(*PAIR, n_jobs=1)
    cfg["engine"]["early_stopping_rounds"] = 10
    first = screen(ds, cfg, cap_seconds=0.0)
    assert first.capped and first.trained >= first.rounds
    second = screen(ds, raised(cfg))
    assert not second.capped and second.rounds > 1
    patience = 10
    projected, rounds, mb = upper_estimate(first, second, RESCREEN_SPEEDUP, patience)
    assert rounds == round(RESCREEN_SPEEDUP * second.rounds)
    assert projected == pytest.approx(first.projected * (rounds + patience) / first.trained)
    assert mb == pytest.approx(first.mb * (rounds + patience) / first.trained)
    assert upper_estimate(first, first, RESCREEN_SPEEDUP, patience) is None        # capped both times: a bound
    cost = CostModel()
    cost.screened(PAIR, first.projected, capped=True)
    assert cost.kind(Candidate(*PAIR)) == "bound"
    assert cost.estimate(Candidate(*PAIR)) == pytest.approx(BOUND_FACTOR * first.projected)
    # the plan, short of time for that upper estimate, raises the rate by the rounds it expects
    budget = Budget(0.9 * projected + WRITE_SECONDS + MEMBER_SECONDS, started=0.0, clock=lambda: 0.0)     # 0.9 of it left
    ctx = _context(tmp_path, {PAIR: cfg}, cost, budget)
    cost.screened(PAIR, projected, capped=True, upper=True)
    assert cost.kind(Candidate(*PAIR)) == "upper"
    ctx.state.record_screen("lightgbm-squared_error", PAIR, {"qwk": first.qwk, "rounds": first.rounds,
                                                            "rounds_upper": rounds})
    cand, out, why = fitted(ctx, PAIR)
    assert out["engine"]["params"]["learning_rate"] > cfg["engine"]["params"]["learning_rate"]
    assert cand.speedup > 1 and "to fit" in why


def test_screen_one_screens_a_capped_candidate_again_and_records_both(tmp_path):
    ds = _dataset(tmp_path)
    cfg = candidate_config(*PAIR, n_jobs=1)
    ctx = _context(tmp_path, {PAIR: cfg}, CostModel(), Budget(600.0), ds)
    rec = screen_one(ctx, PAIR, 0.0)            # both capped after one round: a bound
    assert rec["capped"] and rec["raised"]["capped"] and "rounds_upper" not in rec
    assert rec["raised"]["learning_rate"] == pytest.approx(4 * cfg["engine"]["params"]["learning_rate"], rel=1e-2)
    assert ctx.cost.kind(Candidate(*PAIR)) == "bound"
    again = screen_one(ctx, PAIR, 0.0)          # a bound is screened again, not reused
    assert again is not rec and again["capped"]
    # the screens of leftover time (for the leaderboard only) take no second one: it would double their time
    assert "raised" not in screen_one(ctx, PAIR, 0.0, again=False)
    again = screen_one(ctx, PAIR, 0.0)
    # a record with an upper estimate is reused as one (a resume)
    upper = copy.deepcopy(again)
    upper.update(projected_upper=50.0, rounds_upper=400, mb_upper=1.0)
    ctx.state.record_screen("lightgbm-squared_error", PAIR, upper)
    fresh = _context(tmp_path, {PAIR: cfg}, CostModel(), Budget(600.0), ds)
    fresh.state = ctx.state
    assert screen_one(fresh, PAIR, 0.0) == upper
    assert fresh.cost.kind(Candidate(*PAIR)) == "upper" and fresh.cost.projected[PAIR] == 50.0


def test_the_closing_lines_name_a_result_member_whose_folds_were_cut(tmp_path):
    from qwkboost.autoblend.finish import _cut_note
    from qwkboost.autoblend.state import CandidateRecord

    ctx = _context(tmp_path, {PAIR: candidate_config(*PAIR)}, CostModel(), Budget(60.0))
    ctx.state.candidates.update({
        "catboost-squared_error-lr0.2": CandidateRecord(Status.FINISHED, "catboost", "squared_error", capped_folds=3),
        "lightgbm-squared_error": CandidateRecord(Status.FINISHED, *PAIR, capped_folds=0),
        "xgboost-squared_error": CandidateRecord(Status.FINISHED, "xgboost", "squared_error", capped_folds=2)})
    note = _cut_note(ctx, {"catboost-squared_error-lr0.2": 0.7, "lightgbm-squared_error": 0.3,
                           "xgboost-squared_error": 0.0})
    assert note == ("\n  note: catboost-squared_error-lr0.2: 3 of 5 folds ended at their share of the time before early "
                    "stopping (its out-of-fold QWK understates a converged run of it); weight 0.70 in the blend")
    # one candidate and no blend: its own cut folds are named
    assert "xgboost-squared_error: 2 of 5 folds" in _cut_note(ctx, {})
