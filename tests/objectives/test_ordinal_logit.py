"""ordinal_logit: the cumulative-link likelihood's gradient and hessian against finite differences, its starting
cut points, the cut points' Newton steps against a direct maximisation, every engine end to end."""

import numpy as np
import pytest
from scipy import optimize, special

import qwkboost as qb
from qwkboost.objectives import get


@pytest.mark.parametrize("link", ["logit", "probit"])
def test_gradient_and_hessian_against_finite_differences(link):
    rs = np.random.RandomState(0)
    y = rs.randint(0, 5, 40).astype(float)
    obj = get("ordinal_logit", link=link, cut_steps=0).fit(y)
    s = rs.normal(size=40)
    g, h = obj.grad_hess(y, s)
    total = lambda v: obj.metric(y, v) * y.size
    eps = 1e-5
    for i in (0, 7, 22, 39):
        up, dn = s.copy(), s.copy()
        up[i] += eps
        dn[i] -= eps
        assert g[i] == pytest.approx((total(up) - total(dn)) / (2 * eps), rel=1e-6, abs=1e-9)
        # the hessian as the derivative of the (checked) gradient: second differences of the loss lose digits
        assert h[i] == pytest.approx((obj.grad_hess(y, up)[0][i] - obj.grad_hess(y, dn)[0][i]) / (2 * eps), rel=1e-5)
    assert np.all(h > 0)                       # the likelihood is log-concave in the score


@pytest.mark.parametrize("link, inverse", [("logit", special.logit), ("probit", special.ndtri)])
def test_with_no_trees_the_cut_points_are_the_link_of_the_cumulative_proportions(link, inverse):
    y = np.array([1, 1, 2, 2, 2, 3, 4, 4, 4, 4.0])
    obj = get("ordinal_logit", link=link).fit(y)
    np.testing.assert_allclose(obj.cuts_, inverse(np.array([2, 5, 6]) / 10))
    assert obj.init_score_ == 0.0
    # the model with F = 0 gives back the class proportions
    np.testing.assert_allclose(obj.predict_proba(np.zeros(1))[0], [0.2, 0.3, 0.1, 0.4], atol=1e-12)


def test_the_cut_points_newton_steps_reach_the_maximum_likelihood():
    rs = np.random.RandomState(1)
    latent = rs.normal(size=2000)
    y = np.digitize(latent + rs.logistic(size=2000) * 0.5, [-1.0, 0.0, 1.2]).astype(float)
    score = latent * 2.0
    obj = get("ordinal_logit", cut_steps=25).fit(y)
    before = obj.metric(y, score)
    obj.update_cuts(y, score)
    assert obj.metric(y, score) < before and np.all(np.diff(obj.cuts_) > 0)
    idx = y.astype(int)
    nll = lambda c: -np.mean(np.log(np.maximum(np.diff(np.concatenate(
        [np.zeros((y.size, 1)), special.expit(np.sort(c)[None, :] - score[:, None]), np.ones((y.size, 1))],
        axis=1))[np.arange(y.size), idx], 1e-300)))
    best = optimize.minimize(nll, obj.cuts_, method="Nelder-Mead", options={"xatol": 1e-9, "fatol": 1e-12,
                                                                             "maxiter": 5000})
    np.testing.assert_allclose(obj.cuts_, np.sort(best.x), atol=1e-4)


@pytest.fixture(scope="module")
def data():
    from qwkboost.data.sources import quartiles

    ds = quartiles(n_train=8000, n_test=4000)
    return ds.X_train, ds.y_train + 1, ds.X_test, ds.y_test + 1


@pytest.mark.parametrize("engine", ["xgboost", "lightgbm", "native"])
def test_every_engine_learns_the_cut_points_and_saves_them(engine, data, tmp_path):
    X, y, Xt, yt = data
    m = qb.train(X, y, engine, "ordinal_logit", {"learning_rate": 0.1}, num_boost_round=60, eval_set=(Xt, yt))
    start = get("ordinal_logit").fit(y).cuts_
    assert m.objective.cuts_ != start and np.all(np.diff(m.objective.cuts_) > 0)    # re-estimated while boosting
    curve = m.evals_result["valid"]["logloss"]
    assert curve[-1] < curve[0] - 0.1
    P = m.predict_proba(Xt)
    np.testing.assert_allclose(m.predict(Xt), P @ [1, 2, 3, 4])
    assert qb.qwk(yt - 1, P.argmax(axis=1)) > 0.6
    back = qb.load_model(m.save(tmp_path / "m.json"))
    assert back.objective.cuts_ == m.objective.cuts_
    np.testing.assert_array_equal(back.predict_proba(Xt), P)


def test_bad_input():
    X = np.random.RandomState(0).rand(50, 2)
    with pytest.raises(ValueError, match="single class"):
        qb.train(X, np.ones(50), "native", "ordinal_logit", num_boost_round=1)
    with pytest.raises(ValueError, match="link must be one of"):
        get("ordinal_logit", link="cloglog")


def test_early_stopping_keeps_the_cut_points_of_the_best_round(data):
    X, y, Xt, yt = data
    m = qb.train(X, y, "native", "ordinal_logit", {"learning_rate": 0.5, "max_depth": 6}, num_boost_round=300,
                 eval_set=(Xt, yt), early_stopping_rounds=10)
    assert m.best_iteration < m.num_rounds                  # it trained past the best round
    valid = m.evals_result["valid"]["logloss"][m.best_iteration - 1]
    assert m.objective.metric(yt, m.predict_raw(Xt)) == pytest.approx(valid, rel=1e-9)
