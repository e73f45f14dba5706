"""soft_qwk: gradients against finite differences of 1 - kappa, its two hessians, every engine end to end."""

import numpy as np
import pytest

import qwkboost as qb
from qwkboost.objectives import get


@pytest.mark.parametrize("weighted", [False, True])
def test_gradients_against_finite_differences(weighted):
    rs = np.random.RandomState(0)
    y = rs.randint(0, 4, 50).astype(float)
    w = rs.randint(1, 4, 50).astype(float) if weighted else None
    obj = get("soft_qwk").fit(y, sample_weight=w)
    s = rs.normal(size=(50, 4))
    g, h = obj.grad_hess(y, s, sample_weight=w)
    N = 50.0 if w is None else w.sum()
    eps = 1e-6
    for i, k in [(0, 0), (5, 3), (30, 1), (49, 2)]:
        up, dn = s.copy(), s.copy()
        up[i, k] += eps
        dn[i, k] -= eps
        fd = N * (obj.loss(y, up, w) - obj.loss(y, dn, w)) / (2 * eps)
        assert g[i, k] == pytest.approx(fd, rel=1e-5, abs=1e-9)
    assert np.all(h > 0)
    assert get("soft_qwk", hessian="constant").fit(y).grad_hess(y, s)[1].tolist() == np.ones((50, 4)).tolist()


def test_loss_is_one_minus_qwk_on_hard_probabilities():
    y = np.array([0, 1, 2, 3, 2, 1, 0, 3.0])
    pred = np.array([0, 1, 1, 3, 2, 2, 0, 2])
    obj = get("soft_qwk").fit(y)
    score = np.full((8, 4), -50.0)
    score[np.arange(8), pred] = 50.0                        # probabilities 0 or 1
    assert obj.loss(y, score) == pytest.approx(1 - qb.qwk(y, pred), abs=1e-9)
    assert obj.metric(y, score) == pytest.approx(qb.qwk(y, pred))


@pytest.mark.parametrize("engine", ["xgboost", "lightgbm", "native"])
def test_every_engine_trains_and_saves(engine, tmp_path):
    from qwkboost.data.sources import quartiles

    ds = quartiles(n_train=8000, n_test=4000)
    X, y, Xt, yt = ds.X_train, ds.y_train, ds.X_test, ds.y_test
    m = qb.train(X, y, engine, "soft_qwk", {"learning_rate": 0.3}, num_boost_round=60, eval_set=(Xt, yt))
    curve = m.evals_result["valid"]["kappa"]
    assert max(curve) > 0.55 and m.objective.higher_is_better
    P = m.predict_proba(Xt)
    np.testing.assert_allclose(m.predict(Xt), P @ [0, 1, 2, 3])
    back = qb.load_model(m.save(tmp_path / "m.json"))
    np.testing.assert_array_equal(back.predict_proba(Xt), P)
