"""qwkboost.train(..., engine="native") with the shipped objectives, like the other engines."""

import numpy as np
import pytest

import qwkboost as qb


@pytest.mark.parametrize("objective", ["squared_error", "extended_qwk"])
def test_both_objectives_learn_the_quartiles(small_quartiles, objective):
    ds = small_quartiles
    m = qb.train(ds.X_train, ds.y_train, engine="native", objective=objective,
                 params={"max_depth": 4, "learning_rate": 0.1}, num_boost_round=400,
                 eval_set=(ds.X_test, ds.y_test), early_stopping_rounds=30)
    assert isinstance(m, qb.Model) and m.engine == "native"
    assert m.init_score == pytest.approx(ds.y_train.mean())
    pred = np.clip(np.rint(m.predict(ds.X_test)), 0, 3)
    assert qb.qwk(ds.y_test, pred) > 0.5
    assert set(m.learning_curve) == {"train", "valid"}
    metric = m.objective.metric_name
    assert len(m.evals_result["valid"][metric]) == m.num_rounds


def test_native_is_close_to_xgboost_on_the_quartiles(small_quartiles):
    ds = small_quartiles
    p = {"max_depth": 5, "learning_rate": 0.1}
    scores = {}
    for engine in ("native", "xgboost"):
        extra = {"nthread": 1} if engine == "xgboost" else {}
        m = qb.train(ds.X_train, ds.y_train, engine=engine, objective="extended_qwk", params={**p, **extra},
                     num_boost_round=150)
        scores[engine] = qb.qwk(ds.y_test, np.clip(np.rint(m.predict(ds.X_test)), 0, 3))
    assert abs(scores["native"] - scores["xgboost"]) < 0.02


def test_zero_rounds_and_objective_instances(small_quartiles):
    ds = small_quartiles
    m = qb.train(ds.X_train, ds.y_train, engine="native", objective="extended_qwk", num_boost_round=0)
    np.testing.assert_allclose(m.predict(ds.X_test), ds.y_train.mean())
    from qwkboost.objectives import ExtendedQWK
    m = qb.train(ds.X_train, ds.y_train, engine="native", objective=ExtendedQWK(hessian="gauss_newton"),
                 params={"max_depth": 3}, num_boost_round=20)
    assert m.objective.hessian == "gauss_newton"
    assert m.evals_result["train"]["kappa"][-1] > m.evals_result["train"]["kappa"][0]


def test_callbacks_get_the_round_and_metrics(small_quartiles):
    ds = small_quartiles
    got = []
    qb.train(ds.X_train, ds.y_train, engine="native", objective="squared_error", num_boost_round=3,
             eval_set=(ds.X_test, ds.y_test), callbacks=[lambda r, e: got.append((r, e))])
    assert [r for r, _ in got] == [0, 1, 2]
    assert set(got[0][1]["train"]) == {"rmse"} and set(got[0][1]["valid"]) == {"rmse"}
