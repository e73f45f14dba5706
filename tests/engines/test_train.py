"""qwkboost.train across engines: parity with built-ins, initial score, persistence, bad input."""

import lightgbm as lgb
import numpy as np
import pytest
import xgboost as xgb

import qwkboost as qb
from qwkboost.objectives import Objective, register
from qwkboost import objectives

ENGINES = ["xgboost", "lightgbm", "native"]


@pytest.fixture(scope="module")
def regression():
    rs = np.random.RandomState(3)
    X = rs.normal(size=(3000, 6))
    y = (X ** 2).sum(axis=1) + rs.normal(scale=0.5, size=3000)
    return X, y


def test_squared_error_matches_xgboost_builtin(regression):
    X, y = regression
    p = {"max_depth": 4, "learning_rate": 0.1}
    ours = qb.train(X, y, "xgboost", "squared_error", params=p, num_boost_round=60).predict(X)
    builtin = xgb.train({**p, "objective": "reg:squarederror", "tree_method": "hist", "seed": 0,
                         "base_score": float(y.mean())}, xgb.DMatrix(X, label=y), 60).predict(xgb.DMatrix(X))
    np.testing.assert_allclose(ours, builtin, rtol=1e-5, atol=1e-5)


def test_squared_error_matches_xgboost_default_intercept(regression):
    # XGBoost estimates its own intercept for reg:squarederror; ours starts at the mean too
    X, y = regression
    p = {"max_depth": 4, "learning_rate": 0.1}
    ours = qb.train(X, y, "xgboost", "squared_error", params=p, num_boost_round=60).predict(X)
    builtin = xgb.train({**p, "objective": "reg:squarederror", "tree_method": "hist", "seed": 0},
                        xgb.DMatrix(X, label=y), 60).predict(xgb.DMatrix(X))
    np.testing.assert_allclose(ours, builtin, rtol=1e-4, atol=1e-4)


def test_squared_error_matches_lightgbm_builtin(regression):
    X, y = regression
    p = {"num_leaves": 15, "learning_rate": 0.1}
    ours = qb.train(X, y, "lightgbm", "squared_error", params=p, num_boost_round=60).predict(X)
    builtin = lgb.train({**p, "objective": "regression", "verbose": -1, "seed": 0},
                        lgb.Dataset(X, label=y), 60).predict(X)
    np.testing.assert_allclose(ours, builtin, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("objective", ["squared_error", "extended_qwk"])
def test_zero_rounds_predicts_initial_score(engine, objective, small_quartiles):
    ds = small_quartiles
    m = qb.train(ds.X_train, ds.y_train, engine, objective, num_boost_round=0)
    np.testing.assert_allclose(m.predict(ds.X_test), ds.y_train.mean(), rtol=1e-6)
    assert m.init_score == pytest.approx(ds.y_train.mean())


@pytest.mark.parametrize("engine", ENGINES)
def test_first_round_starts_from_initial_score(engine, small_quartiles):
    # without our F0 the first trees would start at 0 (LightGBM) or 0.5 (XGBoost); one shallow
    # round at a small learning rate must stay near the label mean
    ds = small_quartiles
    p = {"learning_rate": 0.01, "num_leaves": 4} if engine == "lightgbm" else {"learning_rate": 0.01, "max_depth": 2}
    pred = qb.train(ds.X_train, ds.y_train, engine, "extended_qwk", params=p, num_boost_round=1).predict(ds.X_test)
    assert abs(pred.mean() - ds.y_train.mean()) < 0.05


@pytest.mark.parametrize("engine", ENGINES)
def test_save_load_round_trip(engine, small_quartiles, tmp_path):
    ds = small_quartiles
    m = qb.train(ds.X_train, ds.y_train, engine, "extended_qwk", objective_params={"clip": "hold"},
                 params={"learning_rate": 0.1}, num_boost_round=300,
                 eval_set=(ds.X_test, ds.y_test), early_stopping_rounds=20)
    path = m.save(tmp_path / "model.json")
    back = qb.load_model(path)
    np.testing.assert_array_equal(back.predict(ds.X_test), m.predict(ds.X_test))
    assert back.init_score == m.init_score
    assert back.objective.name == "extended_qwk" and back.objective.clip == "hold"
    assert back.best_iteration == m.best_iteration
    assert back.learning_curve == m.learning_curve


@pytest.mark.parametrize("engine", ENGINES)
def test_early_stopping_uses_objective_metric(engine, small_quartiles):
    ds = small_quartiles
    # min_delta 0: any gain counts, so the best round is the curve's maximum (extended QWK's default is 1e-3)
    m = qb.train(ds.X_train, ds.y_train, engine, "extended_qwk", params={"learning_rate": 0.3},
                 num_boost_round=2000, eval_set=(ds.X_test, ds.y_test), early_stopping_rounds=30,
                 early_stopping_min_delta=0.0)
    curve = m.learning_curve["valid"]
    assert len(curve) < 2000
    assert m.best_iteration == int(np.argmax(curve)) + 1
    # the reported curve is kappa of clipped predictions
    full = m.predict(ds.X_test, num_iteration=m.best_iteration)
    assert curve[m.best_iteration - 1] == pytest.approx(m.objective.metric(ds.y_test, full), abs=1e-5)
    assert len(m.learning_curve["train"]) == len(curve)


@pytest.mark.parametrize("engine", ENGINES)
def test_callbacks_see_every_round(engine, small_quartiles):
    ds = small_quartiles
    seen = []
    qb.train(ds.X_train, ds.y_train, engine, "squared_error", num_boost_round=5,
             eval_set=(ds.X_test, ds.y_test), callbacks=[lambda r, ev: seen.append((r, ev["valid"]["rmse"]))])
    assert [r for r, _ in seen] == list(range(5))
    assert seen[-1][1] < seen[0][1]


@pytest.mark.parametrize("engine", ENGINES)
def test_user_objective_runs_unchanged(engine, small_quartiles):
    @register("test_scaled_se", overwrite=True)
    class ScaledSE(Objective):
        def grad_hess(self, y, score):
            return 2.0 * (score - y), np.full_like(score, 2.0)

    try:
        ds = small_quartiles
        # no hessian-scale-dependent regularisation, so 2x gradient and hessian give the same trees
        p = {} if engine == "lightgbm" else {"reg_lambda": 0.0, "min_child_weight": 0.0}
        a = qb.train(ds.X_train, ds.y_train, engine, "test_scaled_se", params=p, num_boost_round=20)
        b = qb.train(ds.X_train, ds.y_train, engine, "squared_error", params=p, num_boost_round=20)
        a, b = a.predict(ds.X_test), b.predict(ds.X_test)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    finally:
        objectives._REGISTRY.pop("test_scaled_se")


def test_deterministic_for_a_seed(small_quartiles):
    ds = small_quartiles
    p = {"learning_rate": 0.1, "subsample": 0.7, "colsample_bytree": 0.8}
    a = qb.train(ds.X_train, ds.y_train, "xgboost", params=p, num_boost_round=20, seed=5).predict(ds.X_test)
    b = qb.train(ds.X_train, ds.y_train, "xgboost", params=p, num_boost_round=20, seed=5).predict(ds.X_test)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"engine": "h2o"}, r"unknown engine 'h2o'; available engines: xgboost, lightgbm, native, catboost"),
        ({"objective": "qwk3"}, r"unknown objective 'qwk3'; available objectives: .*extended_qwk"),
        ({"y": np.r_[np.nan, np.zeros(9)]}, r"y contains 1 NaN or inf"),
        ({"y": np.r_[np.inf, np.zeros(9)]}, r"y contains 1 NaN or inf"),
        ({"y": np.zeros(8)}, r"X and y have different lengths: 10 != 8"),
        ({"X": np.empty((0, 3)), "y": np.empty(0)}, r"X has no rows"),
        ({"num_boost_round": -1}, r"num_boost_round must be an integer >= 0"),
        ({"early_stopping_rounds": 5}, r"early_stopping_rounds needs an eval_set"),
        ({"eval_set": (np.zeros((3, 2)), np.zeros(3))}, r"eval_set X has 2 features but X has 3"),
        ({"X": np.array([["a", "b", "c"]] * 10)}, r"X must be numeric"),
        ({"X": np.full((10, 3), np.inf)}, r"X contains 30 inf"),
        ({"objective": "extended_qwk", "objective_params": {"hessian": "newton"}}, r"hessian must be one of"),
    ],
)
def test_bad_input_names_the_argument(kwargs, match):
    args = {"X": np.random.RandomState(0).rand(10, 3), "y": np.arange(10) % 4, "num_boost_round": 2}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        qb.train(**args)


def test_load_rejects_non_model(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{}")
    with pytest.raises(ValueError, match="not a qwkboost model file"):
        qb.load_model(p)
    with pytest.raises(ValueError, match="does not exist"):
        qb.load_model(tmp_path / "nope.json")


def test_predict_checks_features(small_quartiles):
    ds = small_quartiles
    m = qb.train(ds.X_train, ds.y_train, "xgboost", num_boost_round=2)
    with pytest.raises(ValueError, match="X has 3 features but the model was trained on 5"):
        m.predict(ds.X_test[:, :3])
    with pytest.raises(ValueError, match=r"num_iteration must be an integer in \[0, 2\]"):
        m.predict(ds.X_test, num_iteration=9)


@pytest.mark.parametrize("engine", ["xgboost", "lightgbm", "native"])
def test_base_score_overrides_the_initial_score(engine, small_quartiles):
    ds = small_quartiles
    m = qb.train(ds.X_train, ds.y_train, engine, "extended_qwk", params={"base_score": 1.25},
                 num_boost_round=0)
    np.testing.assert_allclose(m.predict(ds.X_test[:5]), 1.25)
    assert m.init_score == 1.25
    with pytest.raises(ValueError, match="params.base_score must be a finite number"):
        qb.train(ds.X_train, ds.y_train, engine, params={"base_score": float("nan")}, num_boost_round=1)


@pytest.mark.parametrize("engine", ENGINES)
def test_every_trained_round_is_kept_after_early_stopping(engine, small_quartiles, tmp_path):
    ds = small_quartiles
    m = qb.train(ds.X_train, ds.y_train, engine, "squared_error", params={"learning_rate": 0.5},
                 num_boost_round=500, eval_set=(ds.X_test, ds.y_test), early_stopping_rounds=10)
    assert m.num_rounds == len(m.learning_curve["valid"]) == m.best_iteration + 10
    last = m.predict(ds.X_test, num_iteration=m.num_rounds)
    assert not np.allclose(last, m.predict(ds.X_test))
    back = qb.load_model(m.save(tmp_path / "m.json"))
    assert back.num_rounds == m.num_rounds
    np.testing.assert_array_equal(back.predict(ds.X_test, num_iteration=m.num_rounds), last)
