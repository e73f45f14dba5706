"""The candidates' order and costs, and the settings' refusals (no training)."""

import pytest

from qwkboost.autoblend.budget import Budget, TimeGuard
from qwkboost.autoblend.candidates import Candidate
from qwkboost.autoblend.costs import CostModel
from qwkboost.autoblend.ranking import ORDER, diverse_pool, plan
from qwkboost.autoblend.state import CandidateRecord
from qwkboost.autoblend.settings import AutoSettings
from qwkboost.exceptions import RunStopped


def test_the_default_plan_is_the_order_and_starts_with_lightgbm_squared_error():
    cands = plan()
    assert [c.pair for c in cands] == list(ORDER)
    assert cands[0].pair == ("lightgbm", "squared_error")


def test_narrowed_plans_keep_the_order_then_add_the_other_pairs_cheapest_first():
    cands = plan(["native", "lightgbm"], ["squared_error", "soft_qwk"])
    pairs = [c.pair for c in cands]
    assert pairs[:2] == [("lightgbm", "squared_error"), ("native", "squared_error")]
    assert pairs[2:] == [("lightgbm", "soft_qwk"), ("native", "soft_qwk")]
    assert [c.pair for c in plan(engines=["xgboost"])] == [p for p in ORDER if p[0] == "xgboost"]


def test_cost_model_scales_what_it_measured_by_the_priors():
    cost = CostModel()
    assert cost.estimate(Candidate("lightgbm", "squared_error")) is None
    cost.record(Candidate("lightgbm", "squared_error"), 10.0)
    assert cost.estimate(Candidate("lightgbm", "squared_error")) == 10.0
    assert cost.estimate(Candidate("lightgbm", "ordinal_logit")) == pytest.approx(20.0)      # same engine
    assert cost.estimate(Candidate("xgboost", "squared_error")) == pytest.approx(17.0)       # same objective
    cost.record(Candidate("xgboost", "squared_error"), 34.0)      # xgboost twice as slow as its prior says
    assert cost.estimate(Candidate("xgboost", "extended_qwk")) == pytest.approx(34.0)
    cost.record(Candidate("xgboost", "squared_error", (("max_depth", 8),), trial=3), 90.0)   # a trial: kept out
    assert cost.estimate(Candidate("xgboost", "squared_error")) == 34.0


@pytest.mark.parametrize("auto, match", [
    ({"time_limit": 0}, r"auto.time_limit must be a number of seconds > 0"),
    ({"time_limit": "600"}, r"auto.time_limit"),
    ({"time_limit": float("inf")}, r"auto.time_limit"),
    ({"time_limit": 60, "engines": ["lightgbm", "lightgm"]}, r"auto.engines has unknown name\(s\) \['lightgm'\]"),
    ({"time_limit": 60, "engines": []}, r"auto.engines must be a non-empty list"),
    ({"time_limit": 60, "engines": "lightgbm"}, r"auto.engines must be a non-empty list"),
    ({"time_limit": 60, "objectives": ["kappa"]}, r"auto.objectives has unknown name\(s\) \['kappa'\]"),
    ({"time_limit": 60, "objectives": ["squared_error", "squared_error"]}, r"names 'squared_error' twice"),
    ({"time_limit": 60, "tune": "yes"}, r"auto.tune"),
    ({"time_limit": 60, "max_members": 0}, r"auto.max_members"),
    ({"time_limit": 60, "blend_method": "stack"}, r"auto.blend_method='stack' is unknown"),
    ({"time_limit": 60, "pruner": "hyperband"}, r"auto.pruner='hyperband' is unknown"),
    ({"time_limit": 60, "time_limt": 5}, r"auto has no setting\(s\) \['time_limt'\]"),
])
def test_settings_are_refused_naming_the_setting(auto, match):
    with pytest.raises(ValueError, match=match):
        AutoSettings.from_config(auto)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_the_guard_stops_a_candidate_whose_other_folds_would_end_past_the_limit():
    clock = Clock()
    budget = Budget(100.0, started=0.0, reserve=10.0, clock=clock)
    guard = TimeGuard(budget, n_folds=5)
    clock.now = 20.0                         # fold 1 took 20 s: 4 more need 80 s, 70 s are left for work
    with pytest.raises(RunStopped, match="other folds would take about 80 s and 70 s are left") as info:
        guard.on_fold(0, None, None)
    assert info.value.tags == {"qwkboost.auto": "OUT_OF_TIME"}
    ok = TimeGuard(budget, n_folds=5)
    clock.now = 30.0                         # 10 s for fold 1: 40 s more fit in 60
    ok.on_fold(0, None, None)
    ok.on_round(1, 5, {})
    clock.now = 95.0                         # inside the reserve: stopped in the middle of a fold
    with pytest.raises(RunStopped, match="stopped in fold 2/5 at the time limit"):
        ok.on_round(1, 6, {})


def test_the_first_candidate_s_folds_share_the_time_and_end_early_instead_of_being_dropped():
    from qwkboost.callback import EarlyStopException

    clock = Clock()
    budget = Budget(100.0, started=0.0, reserve=10.0, clock=clock)
    guard = TimeGuard(budget, n_folds=3, share_folds=True)
    guard.on_round(0, 0, {})                      # fold 1 starts with 90 s for work: 30 s for it
    clock.now = 29.0
    guard.on_round(0, 40, {})
    clock.now = 31.0
    with pytest.raises(EarlyStopException) as info:
        guard.on_round(0, 41, {})
    assert info.value.best_iteration == 41 and guard.capped == {0}
    guard.on_fold(0, None, None)                  # never dropped: every fold ends
    guard.on_round(1, 0, {})                      # fold 2: (100 - 31 - 10) / 2 = 29.5 s
    clock.now = 60.0
    guard.on_round(1, 3, {})
    clock.now = 61.0
    with pytest.raises(EarlyStopException):
        guard.on_round(1, 4, {})
    assert guard.capped == {0, 1}


def test_a_fold_that_runs_longer_than_the_folds_after_it_can_get_is_stopped_in_the_middle():
    clock = Clock()
    budget = Budget(100.0, started=0.0, reserve=10.0, clock=clock)
    guard = TimeGuard(budget, n_folds=5)
    guard.on_round(0, 0, {})                      # fold 1 starts at 0 s
    clock.now = 17.0                              # 4 folds after it need >= 68 s; 73 s are left
    guard.on_round(0, 50, {})
    clock.now = 19.0                              # >= 76 s needed, 71 s left: it cannot finish
    with pytest.raises(RunStopped, match=r"stopped in fold 1/5: it has run 19 s, and the 4 folds after it would "
                                         r"need at least 76 s of the 71 s left"):
        guard.on_round(0, 60, {})


def test_a_candidate_a_little_over_its_estimate_finishes_with_shorter_folds_instead_of_being_dropped():
    from qwkboost.callback import EarlyStopException

    clock = Clock()
    budget = Budget(100.0, started=0.0, reserve=10.0, clock=clock)
    guard = TimeGuard(budget, n_folds=5, rescue=True, fold_seconds=16.0)
    guard.on_round(0, 0, {})
    clock.now = 20.0                         # fold 1 took 20 s: 4 more need 80 s, 70 s are left
    guard.on_fold(0, None, None)             # 17.5 s a fold is at least half of 20 s: not dropped
    assert guard.rescued and guard.share_folds
    guard.on_round(1, 0, {})                 # fold 2 gets 70 / 4 = 17.5 s
    clock.now = 37.0
    guard.on_round(1, 30, {})
    clock.now = 38.0
    with pytest.raises(EarlyStopException):
        guard.on_round(1, 31, {})
    assert guard.capped == {1}
    guard.on_fold(1, None, None)             # never dropped after that


def test_a_candidate_far_over_its_estimate_is_still_dropped():
    clock = Clock()
    budget = Budget(100.0, started=0.0, reserve=10.0, clock=clock)
    guard = TimeGuard(budget, n_folds=5, rescue=True)
    clock.now = 40.0                         # 4 more folds of 40 s: 12.5 s each is less than half of one
    with pytest.raises(RunStopped, match="other folds would take about 160 s and 50 s are left"):
        guard.on_fold(0, None, None)
    assert not guard.rescued
    # in the middle of a fold, the expected time of a fold counts too: 80 s expected, 17.5 s a fold left
    clock.now = 0.0
    budget = Budget(100.0, started=0.0, reserve=10.0, clock=clock)
    mid = TimeGuard(budget, n_folds=5, rescue=True, fold_seconds=80.0)
    mid.on_round(0, 0, {})
    clock.now = 19.0                         # >= 76 s needed after it, 71 s left
    with pytest.raises(RunStopped, match="stopped in fold 1/5"):
        mid.on_round(0, 60, {})
    ok = TimeGuard(Budget(100.0, started=0.0, reserve=10.0, clock=clock), n_folds=5, rescue=True, fold_seconds=18.0)
    clock.now = 0.0
    ok.on_round(0, 0, {})
    clock.now = 19.0                         # the same, expected 18 s a fold: its folds share the 71 s
    ok.on_round(0, 60, {})
    clock.now = 19.0 + 71.0 / 5 + 0.1       # fold 1 ends at its share from then
    with pytest.raises(Exception) as info:
        ok.on_round(0, 61, {})
    assert type(info.value).__name__ == "EarlyStopException" and ok.capped == {0}


def test_the_folds_leave_the_time_the_candidate_needs_after_them():
    from qwkboost.callback import EarlyStopException

    clock = Clock()
    budget = Budget(100.0, started=0.0, reserve=10.0, clock=clock)
    guard = TimeGuard(budget, n_folds=5, tail_seconds=15.0)
    assert guard.left == 75.0
    clock.now = 16.0                         # 4 more folds of 16 s fit in the 74 s left for work, not with 15 s after
    with pytest.raises(RunStopped, match="other folds would take about 64 s and 59 s are left"):
        guard.on_fold(0, None, None)
    shared = TimeGuard(Budget(100.0, started=0.0, reserve=10.0, clock=clock), n_folds=3, share_folds=True,
                       tail_seconds=15.0)
    shared.on_round(0, 0, {})                # (100 - 16 - 10 - 15) / 3 = 19.67 s for fold 1
    clock.now = 35.5
    shared.on_round(0, 5, {})
    clock.now = 35.8
    with pytest.raises(EarlyStopException):
        shared.on_round(0, 6, {})


def test_the_blend_pool_takes_every_pair_s_best_before_any_pair_s_second():
    def rec(engine, objective, q):
        return CandidateRecord("finished", engine, objective, qwk_thresholds_oof_nested=q)

    # twenty tuning trials of one pair score above every other pair's run
    trials = [(f"lightgbm-squared_error-trial-{i}", rec("lightgbm", "squared_error", 0.50 - i / 1000))
              for i in range(20)]
    others = [("catboost-squared_error", rec("catboost", "squared_error", 0.40)),
              ("xgboost-extended_qwk", rec("xgboost", "extended_qwk", 0.45)),
              ("xgboost-extended_qwk-trial-0", rec("xgboost", "extended_qwk", 0.46)),
              ("native-squared_error", rec("native", "squared_error", float("nan")))]   # nan: never first
    pool = [n for n, _ in diverse_pool(trials + others, 5)]
    # round 1: each pair's best, pairs by that score (nan last); round 2: second bests, by their own order
    assert pool == ["lightgbm-squared_error-trial-0", "xgboost-extended_qwk-trial-0", "catboost-squared_error",
                    "native-squared_error", "lightgbm-squared_error-trial-1"]
    assert [n for n, _ in diverse_pool(trials + others, 100)][-1] == "lightgbm-squared_error-trial-19"
    assert len(diverse_pool(trials + others, 100)) == 24 and diverse_pool([], 5) == []
