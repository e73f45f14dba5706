import numpy as np
import pytest

from qwkboost.objectives import SquaredError


def test_grad_hess_init(rng):
    y = rng.normal(size=20)
    s = rng.normal(size=20)
    obj = SquaredError().fit(y)
    g, h = obj.grad_hess(y, s)
    np.testing.assert_allclose(g, s - y)
    assert np.all(h == 1)
    assert obj.init_score_ == pytest.approx(y.mean())
    assert obj.metric(y, s) == pytest.approx(np.sqrt(np.mean((s - y) ** 2)))
    assert not obj.higher_is_better


def test_gradient_is_derivative_of_loss(rng):
    y = rng.normal(size=10)
    s = rng.normal(size=10)
    obj = SquaredError().fit(y)
    g, _ = obj.grad_hess(y, s)
    eps = 1e-6
    for k in range(10):
        up, dn = s.copy(), s.copy()
        up[k] += eps
        dn[k] -= eps
        assert (obj.loss(y, up) - obj.loss(y, dn)) / (2 * eps) * y.size == pytest.approx(g[k], rel=1e-5)
