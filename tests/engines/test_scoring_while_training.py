"""Rows scored as the engine boosts (:func:`qwkboost.engines.engine.train_scoring`, ``RowScores``): LightGBM keeps
its validation rows' scores up to date on their binned values. They must be the scores a prediction of the same
rows gives afterwards, on every kind of column and row the prediction meets, or be missing (and predicted)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from qwkboost.callback import EarlyStopException
from qwkboost.data.features import EncodedFeatures, FeatureSchema
from qwkboost.engines.engine import train_scoring

LGB = {"verbose": -1, "num_threads": 1, "deterministic": True, "learning_rate": 0.2, "num_leaves": 15}


def _frame(n: int, seed: int, cities: list[str]) -> pd.DataFrame:
    rs = np.random.RandomState(seed)
    x = rs.normal(size=n)
    x[rs.rand(n) < 0.1] = np.nan                                     # missing numbers
    return pd.DataFrame({"x": x, "z": rs.randint(0, 5, n).astype(float) * 0.5,
                         "city": pd.Categorical(rs.choice(cities, n)), "w": rs.rand(n)})


@pytest.fixture(scope="module")
def data():
    cities = [f"c{i}" for i in range(40)]
    def label(f):
        return np.clip(np.round(2 + f["x"].fillna(0) + (f["city"].cat.codes % 3) - 1 + f["w"]), 0, 5).to_numpy()

    train, valid = _frame(1200, 0, cities), _frame(300, 1, cities)
    schema, X = FeatureSchema.fit_encode(train, None, "X")
    # test rows with categories training never saw, a missing category and numbers outside training's range
    test = _frame(400, 2, cities + ["new1", "new2"])
    test.loc[:20, "city"] = np.nan
    test.loc[21:40, "x"] *= 50
    return schema, X, (label(train), label(valid)), schema.encode(valid, "valid"), schema.encode(test, "test")


@pytest.mark.parametrize("objective", ["squared_error", "extended_qwk", "ordinal_logit", "multiclass"])
@pytest.mark.parametrize("stopping", [10, None])
def test_lightgbm_scores_the_rows_as_a_prediction_afterwards_would(data, objective, stopping):
    """At the best round (early stopping) or the last (none), one output or several, the label offset added back:
    the scores kept while boosting equal :meth:`Model.predict_raw`'s, up to rounding."""
    schema, X, y, valid, test = data
    fit = train_scoring(EncodedFeatures(X, schema), y[0], engine="lightgbm", objective=objective, params=LGB,
                        num_boost_round=300 if stopping else 40, eval_set=(EncodedFeatures(valid, schema), y[1]),
                        early_stopping_rounds=stopping, score_rows=(EncodedFeatures(test, schema), EncodedFeatures(valid[:7], schema)))
    m = fit.model
    if stopping:
        assert m.num_rounds < 300
        if objective == "squared_error":
            assert m.best_iteration < m.num_rounds        # the kept scores are an earlier round's than the last
    else:
        assert m.best_iteration == m.num_rounds == 40
    for kept, rows in ((fit.valid, valid), (fit.rows[0], test), (fit.rows[1], valid[:7])):
        assert kept is not None
        np.testing.assert_allclose(kept, m.predict_raw(EncodedFeatures(rows, schema)), rtol=1e-12, atol=1e-12)


def test_a_stop_the_engine_did_not_keep_leaves_the_rows_to_be_predicted(data):
    """A user's callback that stops training at a best round of its own: no scores were kept for that round, so
    none are returned (the caller predicts); engines that do not score while training return none either."""
    schema, X, y, valid, test = data

    def stop(rnd, evals):
        if rnd == 25:
            raise EarlyStopException(12, 0.0)

    fit = train_scoring(EncodedFeatures(X, schema), y[0], engine="lightgbm", params=LGB, num_boost_round=100,
                        eval_set=(EncodedFeatures(valid, schema), y[1]), callbacks=[stop],
                        score_rows=(EncodedFeatures(test, schema),))
    assert fit.model.best_iteration == 13 and fit.valid is None and fit.rows == (None,)
    fit = train_scoring(EncodedFeatures(X, schema), y[0], engine="xgboost", params={"nthread": 1},
                        num_boost_round=20, eval_set=(EncodedFeatures(valid, schema), y[1]),
                        early_stopping_rounds=5, score_rows=(EncodedFeatures(test, schema),))
    assert fit.valid is None and fit.rows == (None,)


def test_score_rows_are_checked_as_prediction_rows_are(data):
    schema, X, y, _, test = data
    with pytest.raises(ValueError, match=r"score_rows\[0\] must be 2-dimensional with 4 columns; got shape \(400, 3\)"):
        train_scoring(EncodedFeatures(X, schema), y[0], engine="lightgbm", params=LGB, num_boost_round=5,
                      score_rows=(test[:, :3],))
    narrow, _ = FeatureSchema.fit_encode(np.zeros((4, 3)), None, "X")
    with pytest.raises(ValueError, match=r"score_rows\[1\] has 3 features; X has 4"):
        train_scoring(EncodedFeatures(X, schema), y[0], engine="lightgbm", params=LGB, num_boost_round=5,
                      score_rows=(EncodedFeatures(test, schema), EncodedFeatures(test[:, :3], narrow)))


@pytest.mark.parametrize("objective", ["squared_error", "ordinal_logit"])
def test_scores_at_other_rounds_come_from_the_best_rounds_plus_or_minus_the_rounds_between(data, objective):
    """:meth:`Model.predict_raw_from` gives :meth:`Model.predict_raw`'s scores at fewer rounds, more, or the same,
    from the best round's; without those scores it predicts."""
    schema, X, y, valid, _ = data
    fit = train_scoring(EncodedFeatures(X, schema), y[0], engine="lightgbm", objective=objective, params=LGB,
                        num_boost_round=300, eval_set=(EncodedFeatures(valid, schema), y[1]),
                        early_stopping_rounds=10)
    m, rows = fit.model, EncodedFeatures(valid, schema)
    assert m.best_iteration > 5
    for n in (1, m.best_iteration - 3, m.best_iteration, m.best_iteration + 4, m.num_rounds):
        np.testing.assert_allclose(m.predict_raw_from(rows, fit.valid, n), m.predict_raw(rows, n),
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(m.predict_raw_from(rows, None, n), m.predict_raw(rows, n))
    with pytest.raises(ValueError, match="num_iteration"):
        m.predict_raw_from(rows, fit.valid, m.num_rounds + 1)


@pytest.mark.parametrize("params", [{}, {"boosting": "goss"}, {"data_sample_strategy": "goss"},
                                    {"bagging_fraction": 0.5, "bagging_freq": 1}, {"extra_trees": True},
                                    {"use_missing": False}, {"zero_as_missing": True}, {"path_smooth": 1.0},
                                    {"monotone_constraints": [1, 0, 0]},
                                    {"boosting_type": "dart"}, {"linear_tree": True}])
def test_every_boosting_setting_gets_its_predictions_or_none(data, params):
    """The scores LightGBM keeps as it boosts are the model's predictions under every setting that changes how trees
    are grown; DART scales earlier trees after they scored (0.38 apart here) and linear trees score binned rows in
    single precision (1e-7 apart): those return none, and the caller predicts."""
    schema, X, y, valid, test = data
    Xn, Xt = np.nan_to_num(X[:, [0, 1, 3]]), test[:, [0, 1, 3]]      # numbers only: linear trees take no categories
    fit = train_scoring(Xn, y[0], engine="lightgbm", params={**LGB, **params}, num_boost_round=60,
                        eval_set=(valid[:, [0, 1, 3]], y[1]), early_stopping_rounds=5, score_rows=(Xt,))
    if params.get("boosting_type") == "dart" or params.get("linear_tree"):
        assert fit.valid is None and fit.rows == (None,)
    else:
        np.testing.assert_allclose(fit.rows[0], fit.model.predict_raw(Xt), rtol=1e-12, atol=1e-12)


def test_lightgbm_s_random_forest_is_refused_before_training():
    """LightGBM's random forest takes no initial score (its own check fails deep inside training): refused with the
    parameter named, before any data is read."""
    from qwkboost.engines.engine import check_engine_params

    for params in ({"boosting": "rf"}, {"boosting_type": "random_forest", "bagging_fraction": 0.5}):
        with pytest.raises(ValueError, match=r"lightgbm parameter boosting='(rf|random_forest)' cannot be used.*"
                                             r"use gbdt, goss or dart"):
            check_engine_params("lightgbm", params, None)
