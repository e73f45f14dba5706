"""Where a budget spends its time: the ranking by the data's shape, screening before cross-validation (never mixed
with full out-of-fold scores, reused on resume), cost estimates from this data, and the budget used and kept."""

import json
import math

import numpy as np
import pandas as pd
import pytest

import qwkboost as qb
from qwkboost.autoblend.candidates import Candidate
from qwkboost.autoblend.costs import CostModel, objective_cost
from qwkboost.autoblend.ranking import ID_LEVELS, ORDER, PROMISING, DataShape, order, rank, shape_of
from qwkboost.autoblend.budget import Budget
from qwkboost.autoblend.fit import FIT_SHARE, MAX_SPEEDUP, fitted
from qwkboost.autoblend.state import AutoState
from qwkboost.autoblend.screening import screen
from qwkboost.autoblend.api import candidate_config
from qwkboost.data.features import EncodedFeatures
from qwkboost.data.files import from_file
from qwkboost.engines import train
from qwkboost.engines.registry import get_engine

pytest.importorskip("catboost")


def id_frames(n=2400, n_test=800, users=150, items=120, seed=0):
    """Ratings driven by two id-like columns (``user``, ``item``, as strings) and one numeric feature."""
    rng = np.random.default_rng(seed)
    ue, ie = rng.normal(size=users), rng.normal(size=items)

    def draw(m):
        u, i = rng.integers(0, users, m), rng.integers(0, items, m)
        x = rng.normal(size=m)
        s = ue[u] + ie[i] + 0.5 * x + rng.normal(scale=0.7, size=m)
        return pd.DataFrame({"user": [f"u{v}" for v in u], "item": [f"i{v}" for v in i], "x": x}), s

    X, s = draw(n)
    Xt, st = draw(n_test)
    cuts = np.quantile(s, [0.25, 0.5, 0.75])
    Xt["rating"] = np.digitize(st, cuts) + 1
    return X, pd.Series(np.digitize(s, cuts) + 1, name="rating"), Xt


# ------------------------------------------------------------------ the ranking's rules
def test_catboost_squared_error_comes_second_on_every_shape_and_the_reason_names_id_like_columns():
    plain = DataShape(rows=50_000, columns=8, levels=(5, 12), classes=5)
    ids = DataShape(rows=50_000, columns=8, levels=(5, 2_400, 900), classes=5)
    assert plain.id_like == 0 and ids.id_like == 2
    for shape in (plain, ids, None):
        pairs = [p for p, _ in rank(ORDER, shape)]
        assert sorted(pairs) == sorted(ORDER)                   # the same candidates, another order
        assert pairs[:3] == [("lightgbm", "squared_error"), ("catboost", "squared_error"),
                             ("xgboost", "squared_error")]
        others = [p for p in ORDER if p != ("catboost", "squared_error")]
        assert [p for p in pairs if p != ("catboost", "squared_error")] == others
    why = dict(rank(ORDER, ids))
    assert "2 id-like column(s)" in why[("catboost", "squared_error")]
    assert "id-like" not in dict(rank(ORDER, plain))[("catboost", "squared_error")]
    assert why[("xgboost", "squared_error")] == "default order"
    # without CatBoost among the candidates, the order is the default one
    no_cat = [p for p in ORDER if p[0] != "catboost"]
    assert rank(no_cat, ids) == [(p, "default order") for p in no_cat]


def test_a_rule_never_moves_a_pair_down():
    pairs = [("catboost", "squared_error"), ("catboost", "extended_qwk")]
    assert rank(pairs, None) == [(p, "default order") for p in pairs]
    pairs = [("catboost", "extended_qwk"), ("catboost", "squared_error")]
    assert [p for p, _ in rank(pairs, None)] == pairs


def test_a_rule_for_id_like_columns_moves_a_pair_on_such_data_only():
    moves = ((("catboost", "extended_qwk"), 1, True),)
    ids = DataShape(rows=10_000, columns=3, levels=(ID_LEVELS,), classes=4)
    below = DataShape(rows=10_000, columns=3, levels=(ID_LEVELS - 1,), classes=4)
    assert ids.id_like == 1 and below.id_like == 0
    assert [p for p, _ in rank(ORDER, ids, moves)][1] == ("catboost", "extended_qwk")
    assert [p for p, _ in rank(ORDER, below, moves)] == list(ORDER)


def test_the_class_objectives_cost_grows_with_the_classes():
    few, many = DataShape(1000, 3, (), 3), DataShape(1000, 3, (), 10)
    assert objective_cost("multiclass", many, 3.0) == 5.0 and objective_cost("multiclass", few, 3.0) == 1.5
    assert objective_cost("squared_error", many, 1.0) == 1.0
    cost = CostModel(many)
    cost.record(Candidate("lightgbm", "squared_error"), 10.0)
    assert math.isclose(cost.estimate(Candidate("lightgbm", "multiclass")), 50.0)


def _dataset(tmp_path):
    X, y, X_test = id_frames()
    X.assign(rating=y).to_parquet(tmp_path / "train.parquet")
    X_test.to_parquet(tmp_path / "test.parquet")
    return from_file(str(tmp_path / "train.parquet"), "rating", test_path=str(tmp_path / "test.parquet"))


def test_the_shape_of_a_dataset(tmp_path):
    ds = _dataset(tmp_path)
    shape = shape_of(ds)
    assert (shape.rows, shape.columns, shape.classes, shape.id_like) == (2400, 3, 4, 2)
    assert sorted(shape.levels) == [120, 150]
    assert shape.describe() == "2,400 rows x 3 columns, 2 categorical (2 id-like: 150, 120 levels), 4 classes"


# ------------------------------------------------------------------ screening and the order after it
def test_promising_screens_first_then_the_unscreened_then_the_rest():
    pairs = [("lightgbm", "extended_qwk"), ("catboost", "squared_error"), ("xgboost", "squared_error"),
             ("native", "squared_error")]
    screens = {("lightgbm", "extended_qwk"): {"qwk": 0.50}, ("catboost", "squared_error"): {"qwk": 0.56},
               ("xgboost", "squared_error"): {"qwk": 0.56 - PROMISING / 2}}
    got = order(pairs, screens, {})
    assert [p for p, _ in got] == [("catboost", "squared_error"), ("xgboost", "squared_error"),
                                   ("native", "squared_error"), ("lightgbm", "extended_qwk")]
    assert got[0][1].startswith("screened 0.5600: within") and got[2][1].startswith("not screened")
    assert "0.0600 below the best screen" in got[3][1]
    assert order(pairs, {}, {}) == [(p, "default order") for p in pairs]


def test_a_capped_screen_already_among_the_best_is_promising():
    """A screen stopped at its time cap understates its candidate: when even its QWK is within PROMISING of the
    best screen that ended by itself, it runs among the promising ones, not after them; a capped screen below that
    waits with the unscreened, in the ranked order."""
    pairs = [("catboost", "squared_error"), ("native", "squared_error"), ("xgboost", "extended_qwk"),
             ("catboost", "ordinal_logit"), ("lightgbm", "multiclass")]
    screens = {("native", "squared_error"): {"qwk": 0.5084}, ("xgboost", "extended_qwk"): {"qwk": 0.5079},
               ("catboost", "squared_error"): {"qwk": 0.5199, "capped": True},
               ("catboost", "ordinal_logit"): {"qwk": 0.4900, "capped": True},
               ("lightgbm", "multiclass"): {"qwk": 0.4859}}
    got = order(pairs, screens, {})
    assert [p for p, _ in got] == [("catboost", "squared_error"), ("native", "squared_error"),
                                   ("xgboost", "extended_qwk"), ("catboost", "ordinal_logit"),
                                   ("lightgbm", "multiclass")]
    assert got[0][1] == ("screened 0.5199 (stopped at its time cap, which understates it): within 0.01 of the best "
                         "screen (0.5084)")
    assert got[3][1].startswith("screen stopped at its time cap (0.4900)")
    assert got[4][1].startswith("screened 0.4859: 0.0225 below the best screen")


def test_promising_screens_keep_the_ranked_order():
    """Within PROMISING of the best screen, a screen's QWK on a sample does not reorder the candidates: the ranked
    order (CatBoost's squared error second, the by-hand evidence) stands; below it, the better screen goes first."""
    pairs = [("catboost", "squared_error"), ("xgboost", "squared_error"), ("catboost", "extended_qwk"),
             ("catboost", "ordinal_logit"), ("lightgbm", "multiclass"), ("native", "squared_error")]
    screens = {("catboost", "squared_error"): {"qwk": 0.5236, "capped": True, "rounds_upper": 748},
               ("catboost", "extended_qwk"): {"qwk": 0.5254, "capped": True, "rounds_upper": 1220},
               ("catboost", "ordinal_logit"): {"qwk": 0.5230}, ("native", "squared_error"): {"qwk": 0.5314},
               ("xgboost", "squared_error"): {"qwk": 0.4732}, ("lightgbm", "multiclass"): {"qwk": 0.5044}}
    got = [p for p, _ in order(pairs, screens, {})]
    assert got == [("catboost", "squared_error"), ("catboost", "extended_qwk"), ("catboost", "ordinal_logit"),
                   ("native", "squared_error"), ("lightgbm", "multiclass"), ("xgboost", "squared_error")]


def test_a_screen_measures_a_fold_on_a_sample_and_projects_the_cross_validation(tmp_path):
    ds = _dataset(tmp_path)
    cfg = candidate_config("lightgbm", "squared_error", n_splits=4, n_jobs=1)
    s = screen(ds, cfg, rows=1000)
    assert 990 <= s.rows <= 1000 and not s.capped and s.rounds > 0 and 0.3 < s.qwk <= 1
    assert math.isclose(s.projected, s.seconds * 1800 / s.rows * 4, rel_tol=1e-9)    # 1,800 rows per fold
    model_text = get_engine("lightgbm").dump(train(EncodedFeatures(ds.X_train[:10], ds.schema), ds.y_train[:10],
                                                   engine="lightgbm", num_boost_round=1).booster)
    assert s.mb > len(model_text) / 1e6                          # its model, many rounds, weighs more than one
    again = screen(ds, cfg, rows=1000)
    assert again.qwk == s.qwk and again.rounds == s.rounds                          # seeded
    capped = screen(ds, cfg, cap_seconds=0.0)
    assert capped.capped and capped.rounds == 1 and capped.rows == 1800


def test_screens_correct_the_cost_model_by_what_finished():
    cost = CostModel()
    assert cost.estimate(Candidate("catboost", "squared_error")) is None
    cost.screened(("lightgbm", "squared_error"), 10.0)
    cost.screened(("catboost", "squared_error"), 100.0)
    # trained 18 s where its screen projected 10: projections are 1.8x short; 2 s went to scoring and files
    cost.record(Candidate("lightgbm", "squared_error"), 20.0, fit_seconds=18.0)
    assert cost.correction() == pytest.approx(1.8) and cost.overhead() == pytest.approx(2.0)
    assert cost.estimate(Candidate("catboost", "squared_error")) == pytest.approx(182.0)
    # a pair without a screen: its engine's screen, corrected, times the objective's prior
    assert cost.estimate(Candidate("catboost", "extended_qwk")) == pytest.approx(182.0)
    assert cost.estimate(Candidate("catboost", "ordinal_logit")) == pytest.approx(364.0)
    # a tuning trial never replaces its pair's default
    cost.record(Candidate("lightgbm", "squared_error", trial=3), 5.0, fit_seconds=4.0)
    assert cost.estimate(Candidate("lightgbm", "squared_error")) == 20.0


def test_what_a_candidate_spends_after_its_folds_is_its_pair_s_then_its_objective_s():
    """On Diamonds LightGBM's multiclass spent 42 s after its folds and squared error 1 s: the mean of all, kept out
    of every candidate's folds, left a squared-error trial no time, and 25 were started and stopped at once."""
    cost = CostModel()
    cost.record(Candidate("lightgbm", "multiclass"), 83.0, fit_seconds=41.0)
    cost.record(Candidate("lightgbm", "squared_error"), 13.0, fit_seconds=12.0)
    cost.record(Candidate("xgboost", "multiclass"), 60.0, fit_seconds=30.0)
    assert cost.overhead(("lightgbm", "squared_error")) == pytest.approx(1.0)           # its own
    assert cost.overhead(("catboost", "multiclass")) == pytest.approx((42.0 + 30.0) / 2)  # its objective's
    assert cost.overhead(("catboost", "ordinal_logit")) == pytest.approx((42.0 + 1.0 + 30.0) / 3)
    assert cost.overhead() == pytest.approx((42.0 + 1.0 + 30.0) / 3)


def test_a_screen_s_model_sizes_its_pipeline_grown_as_its_training_time():
    cost = CostModel()
    cost.screened(("lightgbm", "squared_error"), 10.0, mb=1.0)
    cost.screened(("catboost", "squared_error"), 100.0, mb=40.0)
    assert cost.pipeline_mb(("catboost", "squared_error"), 5) == pytest.approx(200.0)     # nothing finished yet
    assert cost.pipeline_mb(("xgboost", "squared_error"), 5) is None                      # never screened
    cost.record(Candidate("lightgbm", "squared_error"), 37.0, fit_seconds=35.0)            # trained 3.5x projected
    assert cost.pipeline_mb(("catboost", "squared_error"), 5) == pytest.approx(700.0)
    cost.record(Candidate("catboost", "squared_error"), 50.0, fit_seconds=50.0)            # half its projection
    assert cost.pipeline_mb(("catboost", "squared_error"), 5) == pytest.approx(200.0)     # never below the screen


def _context(tmp_path, configs, cost, budget, ds=None):
    """A budget's context as the deciding functions see it, on a directory of no candidates and no tracking."""
    from qwkboost.autoblend.context import Context
    from qwkboost.autoblend.progress import Progress
    from qwkboost.autoblend.settings import AutoSettings

    return Context(AutoSettings(time_limit=budget.time_limit), configs, {}, ds, None, tmp_path, budget,
                   AutoState(tmp_path / "out", {}), cost, None, Progress(budget, False), None, 5, 0.0, None,
                   ("the training data", "the test data"))


def test_a_failed_screen_is_logged_and_ranks_nothing(tmp_path, caplog):
    from qwkboost.autoblend.schedule import screen_one

    ds = _dataset(tmp_path)
    cfg = candidate_config("lightgbm", "squared_error", n_jobs=1)
    cfg["engine"]["params"] = {**cfg["engine"]["params"], "num_leaves": -3}       # LightGBM refuses it
    ctx = _context(tmp_path, {("lightgbm", "squared_error"): cfg}, CostModel(), Budget(60.0), ds)
    caplog.set_level("WARNING", logger="qwkboost.autoblend")
    assert screen_one(ctx, ("lightgbm", "squared_error"), 10.0) is None
    assert "screening lightgbm-squared_error failed" in caplog.text and ctx.state.candidates == {}


def test_a_screen_sample_keeps_every_class_and_its_shares():
    from qwkboost.autoblend.screening import stratified_sample

    y = np.r_[np.zeros(5000), np.ones(4990), np.full(10, 2.0)]        # a rare top class
    rows = np.arange(y.size)
    got = stratified_sample(rows, y, 500, np.random.default_rng(0))
    assert got.size <= 500 and np.all(np.diff(got) > 0)
    assert set(y[got]) == {0.0, 1.0, 2.0} and abs((y[got] == 0).mean() - 0.5) < 0.01
    assert np.array_equal(stratified_sample(rows[:300], y, 500, np.random.default_rng(0)), rows[:300])


def test_a_candidate_too_slow_for_the_time_left_runs_with_a_higher_learning_rate(tmp_path):
    from qwkboost.autoblend.costs import MEMBER_SECONDS, WRITE_SECONDS
    from qwkboost.autoblend.fit import room
    from qwkboost.autoblend.state import CandidateRecord

    clock = [0.0]
    # 100 s left for work: the reserve of a first candidate without tracking is the outputs' writing
    budget = Budget(100.0 + WRITE_SECONDS + MEMBER_SECONDS, started=0.0, clock=lambda: clock[0])
    cost = CostModel()
    run = _context(tmp_path, {("catboost", "squared_error"): candidate_config("catboost", "squared_error")}, cost,
                   budget)
    assert room(run).left == pytest.approx(100.0)
    pair = ("catboost", "squared_error")
    cand, cfg, why = fitted(run, pair)          # nothing known of its cost: as configured
    assert cand == Candidate(*pair) and why == "" and cfg is run.configs[pair]
    cost.screened(pair, 95.0)
    assert fitted(run, pair)[0] == Candidate(*pair)        # fits in the 100 s left
    cost.screened(pair, 200.0)
    cand, cfg, why = fitted(run, pair)
    rate = run.configs[pair]["engine"]["params"]["learning_rate"]
    assert cfg["engine"]["params"]["learning_rate"] == pytest.approx(rate * 200 / (FIT_SHARE * 100), rel=1e-2)
    assert cand.speedup == pytest.approx(cfg["engine"]["params"]["learning_rate"] / rate)
    assert cand.name == f"catboost-squared_error-lr{cfg['engine']['params']['learning_rate']:g}"
    assert cost.estimate(cand) == pytest.approx(FIT_SHARE * 100, rel=1e-2) and "to fit the 100 s left" in why
    assert run.configs[pair]["engine"]["params"]["learning_rate"] == rate        # the plan's config untouched
    cost.screened(pair, (MAX_SPEEDUP + 0.5) * FIT_SHARE * 100)
    assert fitted(run, pair)[0] == Candidate(*pair)     # too slow even so: as configured, to be left out
    cost.record(cand, 50.0)             # measured at its raised rate: the pair's cost is that times the speed-up
    assert cost.estimate(Candidate(*pair)) == pytest.approx(50.0 * cand.speedup)
    # with its screen's rounds known, early stopping's patience (100 rounds) does not shrink: a larger factor
    fresh = CostModel()
    run.cost = fresh
    fresh.screened(pair, 200.0)
    run.state.record_screen("catboost-squared_error", pair, {"qwk": 0.5, "rounds": 1000})
    assert isinstance(run.state.candidates["catboost-squared_error"], CandidateRecord)
    cand, cfg, _ = fitted(run, pair)
    factor = cfg["engine"]["params"]["learning_rate"] / rate
    assert cand.speedup == pytest.approx(1100 / (1000 / factor + 100))
    assert cand.speedup == pytest.approx(200 / (FIT_SHARE * 100), rel=2e-2) and factor > 200 / (FIT_SHARE * 100)



def test_what_follows_the_folds_does_not_shrink_with_a_raised_learning_rate(tmp_path):
    """A raised learning rate shortens the folds, not the scores, cut points and files after them: with 13 s of
    those measured (LightGBM's), a CatBoost variant must fit its folds in what they leave, or it is left out."""
    from qwkboost.autoblend.costs import MEMBER_SECONDS, WRITE_SECONDS

    pair = ("catboost", "squared_error")
    configs = {pair: candidate_config(*pair)}
    cost = CostModel()
    cost.record(Candidate("lightgbm", "squared_error"), 23.0, fit_seconds=10.0)    # 13 s besides its folds
    cost.screened(pair, 30.0)
    assert cost.overhead(pair) == pytest.approx(13.0) and cost.estimate(Candidate(*pair)) == pytest.approx(43.0)
    assert cost.estimate(Candidate(*pair, speedup=2.0)) == pytest.approx(30.0 / 2 + 13.0)

    def left(seconds):
        return _context(tmp_path, configs, cost, Budget(seconds + WRITE_SECONDS + MEMBER_SECONDS, started=0.0,
                                                        clock=lambda: 0.0))

    assert fitted(left(20.0), pair)[0] == Candidate(*pair)      # 16 s to fit in, 13 s after the folds: no variant
    cand, cfg, why = fitted(left(40.0), pair)
    rate = configs[pair]["engine"]["params"]["learning_rate"]
    assert cand.speedup == pytest.approx(30.0 / (FIT_SHARE * 40.0 - 13.0), rel=1e-2)
    assert cost.estimate(cand) == pytest.approx(FIT_SHARE * 40.0, rel=1e-2) and "to fit the 40 s left" in why
    assert cfg["engine"]["params"]["learning_rate"] == pytest.approx(rate * cand.speedup, rel=1e-2)
    cost.record(cand, 32.0, fit_seconds=19.0)       # measured at that rate: its folds scale back, not the rest
    assert cost.estimate(Candidate(*pair)) == pytest.approx(19.0 * cand.speedup + 13.0)

# ------------------------------------------------------------------ end to end
@pytest.fixture(scope="module")
def screened(tmp_path_factory):
    X, y, X_test = id_frames()
    out = tmp_path_factory.mktemp("screen") / "run"
    result = qb.auto(X, y, X_test, time_limit=90, engines=["lightgbm", "catboost"],
                     objectives=["squared_error", "extended_qwk"], tune=False, n_splits=3, n_jobs=1, progress=False,
                     screen="always", output_dir=out)
    return (X, y, X_test), out, result


def test_every_candidate_is_screened_and_only_full_cross_validations_are_blended(screened):
    (X, _, _), out, result = screened
    record = json.loads((out / "auto.json").read_text())["candidates"]
    assert set(record) == {"lightgbm-squared_error", "lightgbm-extended_qwk", "catboost-squared_error",
                           "catboost-extended_qwk"}
    for name, rec in record.items():
        assert rec["screen"]["rows"] <= 1600 and 0 < rec["screen"]["qwk"] <= 1, name
    board = result.leaderboard.set_index("candidate")
    assert board["screen_qwk"].notna().all() and board["why"].str.len().gt(0).all()
    assert board.loc["lightgbm-squared_error", "why"].startswith("first:")
    # after the first candidate, the promising ones ran best screen first
    started = board[board["status"] == "finished"].sort_values("started_at")
    assert started.index[0] == "lightgbm-squared_error"
    promising = started[started["why"].str.contains("within")]
    assert promising["screen_qwk"].is_monotonic_decreasing
    # the blend: only candidates that finished every fold, each with an out-of-fold score for every row
    members = board[board["weight"] > 0].index
    assert len(members) and (board.loc[members, "status"] == "finished").all()
    blend_oof = pd.read_parquet(out / "oof.parquet")
    assert len(blend_oof) == len(X)
    for name in members:
        oof = pd.read_parquet(out / "candidates" / name / "oof.parquet")
        assert len(oof) == len(X) and oof.select_dtypes("number").notna().all().all(), name
    # a screen is never a candidate's out-of-fold score: its QWK is the screen's, not the cross-validation's
    fin = board[board["status"] == "finished"]
    assert (fin["screen_qwk"] != fin["oof_qwk"]).all()


def test_a_resume_reuses_the_screens_and_the_finished_candidates(screened, caplog):
    (X, y, X_test), out, first = screened
    before = json.loads((out / "auto.json").read_text())["candidates"]
    caplog.set_level("INFO", logger="qwkboost.autoblend")
    again = qb.auto(X, y, X_test, time_limit=40, engines=["lightgbm", "catboost"],
                    objectives=["squared_error", "extended_qwk"], tune=False, n_splits=3, n_jobs=1, progress=False,
                    screen="always", output_dir=out)
    after = json.loads((out / "auto.json").read_text())["candidates"]
    assert not [r for r in caplog.records if r.message.startswith("auto: screened")]
    for name, rec in before.items():
        assert after[name]["screen"] == rec["screen"], name
        if rec["status"] == "finished":
            assert after[name]["seconds"] == rec["seconds"], name
    assert again.metrics["nested_oof_qwk"] == pytest.approx(first.metrics["nested_oof_qwk"])


def test_the_budget_is_kept_and_used_while_a_trial_fits(tmp_path):
    X, y, X_test = id_frames(n=1200, n_test=400, seed=1)
    limit = 20.0
    result = qb.auto(X, y, X_test, time_limit=limit, engines=["lightgbm", "xgboost"],
                     objectives=["squared_error", "extended_qwk"], n_splits=3, n_jobs=1, progress=False,
                     output_dir=tmp_path / "used")
    session = json.loads((tmp_path / "used" / "auto.json").read_text())["sessions"][-1]
    assert session["status"] == "finished" and session["seconds"] <= 1.1 * limit        # kept
    board = result.leaderboard
    trials = board[board["candidate"].str.contains("-trial-") & (board["status"] == "finished")]
    assert len(trials), "the time after the default candidates went to tuning"
    # used: when the work ended, less time was left for it than one more trial of any tuned pair takes
    assert session["unused_for_work"] <= trials["seconds"].max() + 1.0, session
    assert session["work_ended_at"] + session["reserve"] >= limit - trials["seconds"].max() - 1.0, session


def test_never_screens_not_even_with_time_to_spare(tmp_path):
    X, y, X_test = id_frames(n=600, n_test=200, seed=2)
    qb.auto(X, y, X_test, time_limit=20, engines=["lightgbm"], objectives=["squared_error", "extended_qwk"],
            tune=False, n_splits=3, n_jobs=1, progress=False, screen="never", output_dir=tmp_path / "never")
    record = json.loads((tmp_path / "never" / "auto.json").read_text())["candidates"]
    assert record and not any("screen" in r for r in record.values())


def test_a_bad_screen_setting_is_refused(tmp_path):
    X, y, X_test = id_frames(n=200, n_test=50)
    with pytest.raises(ValueError, match=r"auto.screen='sometimes' is unknown; choose one of: auto, always, never"):
        qb.auto(X, y, X_test, time_limit=30, screen="sometimes", output_dir=tmp_path / "x")


def test_the_leaderboard_notes_an_estimate_missed_more_than_twofold():
    from qwkboost.autoblend.board import leaderboard

    records = {
        "a": {"status": "finished", "engine": "lightgbm", "objective": "squared_error", "seconds": 30.0,
              "estimate": 10.0, "why": "first: default order"},
        "b": {"status": "finished", "engine": "xgboost", "objective": "squared_error", "seconds": 12.0,
              "estimate": 10.0, "screen": {"qwk": 0.5, "seconds": 1.0, "rows": 100}},
        "c": {"status": "finished", "engine": "catboost", "objective": "squared_error", "seconds": 3.0,
              "estimate": 1.0},             # 3x, but by 2 s: within the noise of a short run
        "d": {"status": "screened", "engine": "native", "objective": "squared_error",
              "screen": {"qwk": 0.4, "seconds": 2.0, "rows": 100}},
        "e": {"status": "pruned", "engine": "lightgbm", "objective": "squared_error", "seconds": 1.0,
              "estimate": 30.0},            # a pruned trial stops early by design
    }
    from qwkboost.autoblend.state import CandidateRecord

    records = {n: CandidateRecord.from_dict(r) for n, r in records.items()}
    board = leaderboard(records, {"a": 1.0}, lambda r: True, test_labels=False).set_index("candidate")
    assert board.loc["a", "note"] == "took 3.0x its estimate (30 s for 10 s)"
    assert board.loc[["b", "c", "d", "e"], "note"].eq("").all()
    assert board.loc["d", "status"] == "screened" and board.loc["d", "screen_qwk"] == 0.4
    assert "test_qwk" not in board.columns and board.index[0] == "a"      # the member first


def test_the_first_candidate_is_tried_even_past_the_time_left_the_others_are_not(tmp_path, caplog):
    """The first candidate's folds share whatever time is left (its guard), so it is always tried; the others wait
    for time left for work."""
    from qwkboost.autoblend.executor import LocalExecutor
    from qwkboost.autoblend.jobs import Started
    from qwkboost.autoblend.schedule import Defaults

    clock = [0.0]
    budget = Budget(10.0, started=0.0, clock=lambda: clock[0])
    pairs = [("lightgbm", "squared_error"), ("xgboost", "squared_error")]
    ctx = _context(tmp_path, {p: candidate_config(*p) for p in pairs}, CostModel(), budget)
    ctx.executor = LocalExecutor(None, budget)
    clock[0] = 9.5          # less than the reserve is left: nothing fits
    source = Defaults(ctx)
    caplog.set_level("INFO", logger="qwkboost.autoblend")
    started = source.next(ctx, [])
    # the line says how much of the time left the candidate leaves for the end
    assert f"auto: lightgbm-squared_error (0 s left, {started.job.guard.reserve:.0f} s of them kept for the blend)" \
        in caplog.messages
    assert isinstance(started, Started) and started.name == "lightgbm-squared_error"
    assert started.why.startswith("first: ") and started.job.guard.share_folds
    assert started.job.guard.reserve > 0.5          # the job carries the reserve it started with
    assert source.next(ctx, ["lightgbm-squared_error"]) is None and not source.exhausted   # it waits for the first
    source.waiting = False
    assert source.next(ctx, []) is None and source.exhausted        # no time: the rest is not started


def test_a_trial_stopped_before_it_ran_is_failed_in_its_study(tmp_path, monkeypatch):
    """A stop (or an error) between a trial's draw and its start leaves it FAIL in the study, never RUNNING."""
    import optuna

    from qwkboost.autoblend import jobs
    from qwkboost.autoblend.executor import LocalExecutor
    from qwkboost.autoblend.state import CandidateRecord
    from qwkboost.autoblend.tuning import Tuning
    from qwkboost.data.fingerprint import fingerprint

    ds = _dataset(tmp_path)
    pair = ("lightgbm", "squared_error")
    budget = Budget(600.0)
    ctx = _context(tmp_path, {pair: candidate_config(*pair)}, CostModel(), budget, ds)
    ctx.executor, ctx.fingerprint = LocalExecutor(ds, budget), fingerprint(ds)
    ctx.state.candidates["lightgbm-squared_error"] = CandidateRecord("finished", *pair, seconds=1.0,
                                                                    qwk_thresholds_oof_nested=0.5)

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(jobs, "start", stopped)
    with pytest.raises(KeyboardInterrupt):
        Tuning().next(ctx, [])
    study = optuna.load_study(study_name=optuna.get_all_study_names(f"sqlite:///{tmp_path / 'tuning.db'}")[0],
                              storage=f"sqlite:///{tmp_path / 'tuning.db'}")
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.FAIL]


def test_every_estimate_says_what_it_rests_on_and_its_error_once_finished():
    """The leaderboard names each estimate's kind (a capped screen's is a lower bound) and, once the candidate
    finished, its error: seconds taken over seconds estimated."""
    from qwkboost.autoblend.board import leaderboard
    from qwkboost.autoblend.state import CandidateRecord

    cost = CostModel()
    lgb, cat, xgb = (Candidate(e, "squared_error") for e in ("lightgbm", "catboost", "xgboost"))
    assert cost.kind(lgb) is None and cost.estimate(lgb) is None
    cost.screened(cat.pair, 40.0, capped=True)
    assert cost.kind(cat) == "bound" and cost.kind(xgb) == "scaled"
    cost.screened(cat.pair, 50.0)           # screened again, to its end
    assert cost.kind(cat) == "projected"
    cost.record(lgb, 10.0, 8.0)
    assert cost.kind(lgb) == "measured"
    records = {"a": CandidateRecord("finished", "lightgbm", "squared_error", seconds=30.0, estimate=20.0,
                                    estimate_kind="scaled"),
               "b": CandidateRecord("left out", "catboost", "squared_error", estimate=90.0, estimate_kind="bound")}
    board = leaderboard(records, {"a": 1.0}, lambda r: True, test_labels=False).set_index("candidate")
    assert board.loc["a", "estimate_kind"] == "scaled" and board.loc["a", "estimate_error"] == 1.5
    assert board.loc["b", "estimate_kind"] == "bound" and pd.isna(board.loc["b", "estimate_error"])
