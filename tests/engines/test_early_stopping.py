"""Early stopping's ``min_delta`` (issue 23): the rule against XGBoost's and LightGBM's own early stopping and
against the rule before it, on every engine through ``qwkboost.train``, the defaults, and bad values refused."""

import numpy as np
import pytest

import qwkboost as qb
from qwkboost.callback import CallbackEnv, EarlyStopException, EarlyStopping


class OldEarlyStopping:
    """qwkboost.callback.EarlyStopping as it was before issue 23 (commit 1fd4ab2), verbatim."""

    def __init__(self, rounds: int, metric: str, higher_is_better: bool, data: str = "valid"):
        self.rounds = int(rounds)
        self.metric = metric
        self.sign = 1.0 if higher_is_better else -1.0
        self.data = data
        self.best_iteration = None
        self.best_score = None

    def __call__(self, env: CallbackEnv) -> None:
        score = env.evals[self.data][self.metric]
        if self.best_score is None or self.sign * score > self.sign * self.best_score:
            self.best_iteration, self.best_score = env.iteration, score
        elif env.iteration - self.best_iteration >= self.rounds:
            raise EarlyStopException(self.best_iteration, self.best_score)


def ours(stopper, curve):
    """(round stopped after, best round), 0-based; the stop is ``None`` when the curve ran out."""
    for i, v in enumerate(curve):
        try:
            stopper(CallbackEnv(i, {"valid": {"kappa": float(v)}}))
        except EarlyStopException as stop:
            return i, stop.best_iteration
    return None, stopper.best_iteration


def xgboost_rule(curve, rounds, delta, maximize):
    import xgboost as xgb

    cb = xgb.callback.EarlyStopping(rounds=rounds, min_delta=delta, maximize=maximize, data_name="valid",
                                    metric_name="kappa")
    # a booster to hold the best round's attributes (training starts at round 0: no before_training)
    model = xgb.train({"verbosity": 0}, xgb.DMatrix(np.arange(4.0).reshape(2, 2), label=[0.0, 1.0]), 1)
    for i in range(len(curve)):
        if cb.after_iteration(model, i, {"valid": {"kappa": [float(v) for v in curve[:i + 1]]}}):
            return i, int(model.attr("best_iteration"))
    return None, int(model.attr("best_iteration"))


def lightgbm_rule(curve, rounds, delta, maximize):
    import lightgbm as lgb

    cb = lgb.early_stopping(rounds, min_delta=delta, verbose=False)
    for i, v in enumerate(curve):
        env = lgb.callback.CallbackEnv(model=None, params={}, iteration=i, begin_iteration=0,
                                       end_iteration=len(curve) + 1,
                                       evaluation_result_list=[lgb.EvalResult("valid", "kappa", float(v), maximize)])
        try:
            cb(env)
        except lgb.callback.EarlyStopException as stop:
            return i, stop.best_iteration
    return None, cb.best_iter[0]


def creeping(seed, n=600, maximize=True):
    """A validation curve that rises, then creeps by tiny gains (the shape issue 23 found)."""
    rs = np.random.RandomState(seed)
    t = np.arange(n)
    curve = 0.6 * (1 - np.exp(-t / 40)) + 1e-5 * t + 2e-4 * rs.normal(size=n)
    return curve if maximize else -curve


@pytest.mark.parametrize("maximize", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_min_delta_zero_is_the_rule_before_it(seed, maximize):
    curve = creeping(seed, maximize=maximize)
    for rounds in (5, 20, 100):
        assert ours(EarlyStopping(rounds, "kappa", maximize), curve) == \
            ours(OldEarlyStopping(rounds, "kappa", maximize), curve)


@pytest.mark.parametrize("maximize", [True, False])
@pytest.mark.parametrize("delta", [0.0, 1e-4, 1e-3, 5e-3])
@pytest.mark.parametrize("seed", range(4))
def test_min_delta_stops_by_xgboosts_and_lightgbms_rule_and_keeps_the_best_round(seed, delta, maximize):
    curve = creeping(seed, maximize=maximize)
    for rounds in (10, 50):
        stop, best = ours(EarlyStopping(rounds, "kappa", maximize, min_delta=delta), curve)
        theirs = xgboost_rule(curve, rounds, delta, maximize)
        assert theirs == lightgbm_rule(curve, rounds, delta, maximize)
        assert stop == theirs[0]
        # they keep the last round that gained more than delta; the best round trained is kept here
        trained = curve if stop is None else curve[:stop + 1]
        assert best == int(np.argmax(trained) if maximize else np.argmin(trained)) >= theirs[1]
        if delta == 0:
            assert best == theirs[1]


def test_a_larger_min_delta_stops_sooner_on_a_creeping_curve():
    curve = creeping(0, n=3000)
    stops = [ours(EarlyStopping(100, "kappa", True, min_delta=d), curve)[0] for d in (0.0, 2e-3, 1e-2)]
    assert stops[0] is None                                    # strict improvements go on to the end
    assert stops[2] < stops[1] < 3000 - 1                      # it gains 1e-3 per 100 rounds


@pytest.fixture(scope="module")
def data():
    from qwkboost.data.sources import quartiles

    ds = quartiles(n_train=3000, n_test=10)
    return ds.X_train[:2000], ds.y_train[:2000], ds.X_train[2000:], ds.y_train[2000:]


def replayed(model, rounds, delta):
    """(rounds, best round), 1-based, that the rule gives on the model's own validation curve."""
    curve = model.evals_result["valid"][model.objective.metric_name]
    stop, best = ours(EarlyStopping(rounds, "kappa", model.objective.higher_is_better, min_delta=delta), curve)
    return (len(curve) if stop is None else stop + 1), best + 1


@pytest.mark.parametrize("engine", ["xgboost", "lightgbm", "native"])
def test_every_engine_stops_by_min_delta(engine, data):
    X, y, Xv, yv = data
    params = {"learning_rate": 0.3, "max_depth": 3} if engine != "lightgbm" else {"learning_rate": 0.3}
    fits = {d: qb.train(X, y, engine, "extended_qwk", params, num_boost_round=400, eval_set=(Xv, yv),
                        early_stopping_rounds=15, early_stopping_min_delta=d, n_jobs=1)
            for d in (0.0, 2e-3, 2e-2)}
    for d, m in fits.items():
        assert (m.num_rounds, m.best_iteration) == replayed(m, 15, d)
    assert fits[2e-2].num_rounds < fits[0.0].num_rounds
    assert fits[2e-2].best_iteration <= fits[2e-3].best_iteration <= fits[0.0].best_iteration
    # the first rounds are the same trees whatever the setting
    k = fits[2e-2].num_rounds
    np.testing.assert_array_equal(fits[2e-2].predict(Xv, num_iteration=k), fits[0.0].predict(Xv, num_iteration=k))


@pytest.mark.parametrize("objective, per_rate", [("extended_qwk", 0.01), ("squared_error", 0.0), ("multiclass", 0.0),
                                                 ("ordinal_logit", 0.0), ("soft_qwk", 0.0)])
def test_the_default_is_the_objectives_own_at_the_learning_rate(objective, per_rate, data):
    from qwkboost.engines.engine import learning_rate
    from qwkboost.objectives import get

    assert get(objective).default_min_delta(0.1) == pytest.approx(0.1 * per_rate)
    assert learning_rate("lightgbm", {}) == 0.1 and learning_rate("xgboost", {"eta": 0.05}) == 0.05
    assert learning_rate("native", {}) == 0.3
    X, y, Xv, yv = data
    kw = dict(num_boost_round=120, eval_set=(Xv, yv), early_stopping_rounds=10, n_jobs=1)
    a = qb.train(X, y, "lightgbm", objective, {"shrinkage_rate": 0.3}, **kw)
    b = qb.train(X, y, "lightgbm", objective, {"shrinkage_rate": 0.3}, early_stopping_min_delta=0.3 * per_rate, **kw)
    assert (a.num_rounds, a.best_iteration) == (b.num_rounds, b.best_iteration)
    assert (a.num_rounds, a.best_iteration) == replayed(a, 10, 0.3 * per_rate)


def test_cross_validate_and_the_estimator_pass_it_on(data):
    X, y, _, _ = data
    kw = dict(engine="native", objective="extended_qwk", params={"learning_rate": 0.3, "max_depth": 3},
              num_boost_round=300, early_stopping_rounds=10, n_splits=2, progress=False, n_jobs=1)
    loose, strict = (qb.cross_validate(X, y, early_stopping_min_delta=d, **kw) for d in (0.0, 5e-2))
    assert sum(strict.best_iterations) < sum(loose.best_iterations)
    est = qb.QWKClassifier(engine="native", objective="extended_qwk", params={"learning_rate": 0.3, "max_depth": 3},
                           n_splits=2, early_stopping_rounds=10, early_stopping_min_delta=5e-2, n_jobs=1).fit(X, y)
    assert [m.best_iteration for m in est.pipeline_.models] == strict.best_iterations


@pytest.mark.parametrize("value", [-1e-3, float("nan"), float("inf"), "0.001", True, [0.1]])
def test_bad_values_are_refused_naming_the_setting(value, data, tiny_cfg):
    from qwkboost.config import check_config

    X, y, Xv, yv = data
    with pytest.raises(ValueError, match=r"early_stopping_min_delta must be a finite number >= 0"):
        qb.train(X, y, "lightgbm", "extended_qwk", num_boost_round=5, eval_set=(Xv, yv), early_stopping_rounds=2,
                 early_stopping_min_delta=value)
    with pytest.raises(ValueError, match=r"early_stopping_min_delta must be a finite number >= 0"):
        qb.cross_validate(X, y, engine="lightgbm", objective="extended_qwk", num_boost_round=5,
                          early_stopping_rounds=2, early_stopping_min_delta=value, progress=False)
    with pytest.raises(ValueError, match=r"early_stopping_min_delta must be a finite number >= 0"):
        qb.QWKClassifier(num_boost_round=5, early_stopping_min_delta=value).fit(X, y)
    cfg = {**tiny_cfg, "engine": {**tiny_cfg["engine"], "early_stopping_min_delta": value}}
    with pytest.raises(ValueError, match=r"engine\.early_stopping_min_delta must be a finite number >= 0"):
        check_config(cfg)
    with pytest.raises(ValueError, match=r"min_delta must be a finite number >= 0"):
        EarlyStopping(10, "kappa", True, min_delta=value)


def test_min_delta_without_early_stopping_is_refused(data, tiny_cfg):
    from qwkboost.config import check_config

    X, y, Xv, yv = data
    with pytest.raises(ValueError, match="early_stopping_min_delta needs early_stopping_rounds"):
        qb.train(X, y, "native", "extended_qwk", num_boost_round=5, eval_set=(Xv, yv), early_stopping_min_delta=0.1)
    cfg = {**tiny_cfg, "engine": {**tiny_cfg["engine"], "early_stopping_rounds": None,
                                  "early_stopping_min_delta": 0.01}}
    with pytest.raises(ValueError, match=r"engine\.early_stopping_min_delta needs engine\.early_stopping_rounds"):
        check_config(cfg)
    check_config({**tiny_cfg, "engine": {**tiny_cfg["engine"], "early_stopping_min_delta": 0.01}})
    check_config({**tiny_cfg, "engine": {**tiny_cfg["engine"], "early_stopping_min_delta": None}})
