"""The XGBoost engine's boosting loop (qwkboost.engines.xgboost.boost) against xgb.train: the same trees, the same
metric values (rounded as xgb.train's eval strings round them) and the same stopping round."""

import numpy as np
import pytest
import xgboost as xgb

from qwkboost.callback import EarlyStopping
from qwkboost.engines.xgboost import boost


@pytest.fixture(scope="module")
def data():
    from qwkboost.data.sources import quartiles

    ds = quartiles(n_train=3000, n_test=10)
    return ds.X_train[:2200], ds.y_train[:2200], ds.X_train[2200:], ds.y_train[2200:]


def softmax(s):
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("k, extra", [(1, {}), (4, {}), (1, {"subsample": 0.7, "colsample_bynode": 0.6}),
                                      (4, {"booster": "dart", "rate_drop": 0.3, "skip_drop": 0.0})])
def test_boost_grows_xgb_trains_trees_and_metrics(k, extra, data):
    """The training set's metric predictions are reused as the next round's scores (gbtree; dart predicts
    again with its dropout): the trees and metrics stay xgb.train's, with row sampling and with dart."""
    X, y, Xv, yv = data
    labels = {}

    def dmatrix(A, b):
        d = xgb.DMatrix(A, label=b, base_margin=np.zeros((len(b), k)) if k > 1 else None)
        labels[id(d)] = b
        return d

    dtrain, dvalid = dmatrix(X, y), dmatrix(Xv, yv)
    evals = [(dtrain, "train"), (dvalid, "valid")]
    params = {"max_depth": 3, "learning_rate": 0.3, "nthread": 1, "seed": 0, "disable_default_eval_metric": 1,
              "tree_method": "hist", **extra, **({"num_class": k, "base_score": 0.0} if k > 1 else {"base_score": 1.5})}
    idx = y.astype(int)

    def obj(pred, d):
        if k == 1:
            return pred - y, np.ones_like(pred)
        g = softmax(pred.astype(np.float64))
        h = 2 * g * (1 - g)
        g[np.arange(len(y)), idx] -= 1
        return g, h

    def feval(pred, d):
        b = labels[id(d)]
        if k == 1:
            return "rmse", float(np.sqrt(np.mean((pred - b) ** 2)))
        return "logloss", float(-np.mean(np.log(softmax(pred.astype(np.float64))[np.arange(len(b)), b.astype(int)])))

    theirs: dict = {}
    a = xgb.train(params, dtrain, 25, evals=evals, obj=obj, custom_metric=feval, evals_result=theirs,
                  verbose_eval=False)
    ours: dict = {}
    b, stopped = boost(params, dtrain, 25, evals, obj, feval, [], ours)
    assert stopped is None and b.num_boosted_rounds() == 25
    assert a.get_dump() == b.get_dump()
    assert {n: dict(m) for n, m in theirs.items()} == ours
    v = next(iter(ours["valid"].values()))
    assert v == [round(x, 6) for x in v]                  # 6 decimals, as xgb.train's eval strings


def test_boost_stops_where_xgb_train_stops(data):
    X, y, Xv, yv = data
    dtrain, dvalid = xgb.DMatrix(X, label=y), xgb.DMatrix(Xv, label=yv)
    evals = [(dtrain, "train"), (dvalid, "valid")]
    params = {"max_depth": 4, "learning_rate": 0.5, "nthread": 1, "seed": 0, "disable_default_eval_metric": 1,
              "base_score": 1.5}
    obj = lambda pred, d: (pred - y, np.ones_like(pred))                          # noqa: E731
    feval = lambda pred, d: ("rmse", float(np.sqrt(np.mean((pred - d.get_label()) ** 2))))   # noqa: E731
    a = xgb.train(params, dtrain, 500, evals=evals, obj=obj, custom_metric=feval, verbose_eval=False,
                  callbacks=[xgb.callback.EarlyStopping(rounds=8, metric_name="rmse", data_name="valid",
                                                        save_best=False)])
    b, stopped = boost(params, dtrain, 500, evals, obj, feval, [EarlyStopping(8, "rmse", False)], {})
    assert b.num_boosted_rounds() == a.num_boosted_rounds() < 500
    assert stopped == a.best_iteration
    assert a.get_dump() == b.get_dump()
