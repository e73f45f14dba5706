"""The objective contract across objectives: outputs, hessian kinds, the native engine's use of them, and every
objective in the table on the command line."""

import numpy as np
import pytest

import qwkboost as qb
from qwkboost.objectives import available, get


def test_every_objective_declares_its_outputs_and_hessian():
    y = np.array([0, 1, 2, 3, 1, 2.0])
    expect = {"squared_error": (1, "exact"), "extended_qwk": (1, "constant"), "multiclass": (4, "approximate"),
              "ordinal_logit": (1, "exact"), "soft_qwk": (4, "approximate")}
    assert set(expect) <= set(available())            # (other tests may register objectives of their own)
    for name in expect:
        obj = get(name).fit(y)
        assert (obj.n_outputs_, obj.hessian_kind) == expect[name], name
    assert get("extended_qwk", hessian="gauss_newton").hessian_kind == "approximate"
    assert get("multiclass", hessian="diagonal").fit(y).hessian_kind == "exact"


@pytest.fixture(scope="module")
def data():
    from qwkboost.data.sources import quartiles

    ds = quartiles(n_train=6000, n_test=3000)
    return ds.X_train, ds.y_train, ds.X_test, ds.y_test


def test_native_refit_auto_line_searches_where_the_hessian_is_a_stand_in(data):
    X, y, Xt, _ = data
    for name, params, same_as in [("squared_error", {}, "none"), ("extended_qwk", {"hessian": "gauss_newton"}, "leaves"),
                                  ("extended_qwk", {}, "leaves")]:
        a = qb.train(X, y, "native", name, {"refit": "auto"}, 20, objective_params=params)
        b = qb.train(X, y, "native", name, {"refit": same_as}, 20, objective_params=params)
        np.testing.assert_array_equal(a.predict(Xt), b.predict(Xt))
    with pytest.raises(ValueError, match="refit='leaves' line-searches one score per row"):
        qb.train(X, y, "native", "multiclass", {"refit": "leaves"}, 2)


@pytest.mark.parametrize("params", [{"subsample": 0.7, "colsample_bytree": 0.6}, {"sampling_method": "goss"},
                                    {"monotone_constraints": [1, 0, 0, 0, 0]}, {"grow_policy": "lossguide",
                                                                               "max_leaves": 8, "max_depth": 0}])
def test_native_multi_output_keeps_sampling_constraints_and_early_stopping(data, params):
    X, y, Xt, yt = data
    m = qb.train(X, y, "native", "multiclass", {"learning_rate": 0.3, **params}, num_boost_round=200,
                 eval_set=(Xt, yt), early_stopping_rounds=10)
    assert m.best_iteration < m.num_rounds <= 200
    assert len(m.booster.trees) == 4 * m.num_rounds
    assert m.evals_result["valid"]["logloss"][m.best_iteration - 1] < 1.25


def test_every_objective_in_the_table_on_the_command_line(tmp_path, mlflow_store):
    """``experiments/run.py experiment=objectives_table ...``, composed as its command line and run in this process
    (:func:`conftest.run_in_process`)."""
    from conftest import run_in_process

    run_in_process(["experiment=objectives_table", "table.engines=[native]", "data.n_train=1500", "data.n_test=800",
                    "engine.num_boost_round=60", "engine.early_stopping_rounds=10", f"tracking.uri={mlflow_store}",
                    "tracking.experiment_name=objectives_table"], tmp_path / "out")
    table = (tmp_path / "out" / "objectives_table.md").read_text()
    for name in ("squared_error", "extended_qwk", "multiclass", "ordinal_logit", "soft_qwk", "Bayes ceiling"):
        assert name in table, name
