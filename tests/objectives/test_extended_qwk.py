import numpy as np
import pytest

from qwkboost.evaluation.metrics import extended_qwk, qwk
from qwkboost.objectives import ExtendedQWK


def _fd_grad(obj, y, s, eps=1e-6):
    n = y.size
    out = np.empty(n)
    for k in range(n):
        up, dn = s.copy(), s.copy()
        up[k] += eps
        dn[k] -= eps
        out[k] = (obj.loss(y, up) - obj.loss(y, dn)) / (2 * eps)
    return out * n


@pytest.mark.parametrize("clip", ["range", "none"])
def test_gradient_matches_finite_differences(clip, rng):
    y = rng.integers(0, 4, 40).astype(float)
    obj = ExtendedQWK(clip=clip).fit(y)
    # keep inside (0, 3) so that clipping is inactive for the differences
    s = rng.uniform(0.05, 2.95, y.size)
    g, _ = obj.grad_hess(y, s)
    np.testing.assert_allclose(g, _fd_grad(obj, y, s), rtol=1e-5, atol=1e-7)


def test_gradient_unclipped_outside_range_matches_finite_differences(rng):
    y = rng.integers(0, 4, 30).astype(float)
    obj = ExtendedQWK(clip="none").fit(y)
    s = rng.uniform(-1.5, 4.5, y.size)
    g, _ = obj.grad_hess(y, s)
    np.testing.assert_allclose(g, _fd_grad(obj, y, s), rtol=1e-5, atol=1e-7)


def test_gradient_matches_the_article_formula(rng):
    # the DSB2019 article's qwk_obj, written out
    y = rng.integers(0, 4, 50).astype(float)
    s = rng.normal(1.5, 1.2, y.size)
    a, b = y.mean(), y.var()
    p = s.clip(0, 3)
    f = 0.5 * np.sum((p - y) ** 2)
    g = 0.5 * np.sum((p - a) ** 2 + b)
    article_grad = ((p - y) / g - f * (p - a) / g ** 2) * len(y)
    ours, hess = ExtendedQWK().fit(y).grad_hess(y, s)
    np.testing.assert_allclose(ours, article_grad, rtol=1e-12)
    assert np.all(hess == 1.0)


def test_gauss_newton_hessian_is_positive_and_scales_with_spread(rng):
    y = rng.integers(0, 4, 100).astype(float)
    obj = ExtendedQWK(hessian="gauss_newton").fit(y)
    for s in (np.full(y.size, y.mean()), y + rng.normal(0, 0.3, y.size)):
        _, h = obj.grad_hess(y, s)
        assert np.all(h > 0)
        p = np.clip(s, 0, 3)
        assert h[0] == pytest.approx(y.size / (0.5 * np.sum((p - y.mean()) ** 2 + y.var())))


def test_init_score_is_label_mean_and_ab_from_labels():
    y = np.array([0, 1, 1, 2, 3, 3], dtype=float)
    obj = ExtendedQWK().fit(y)
    assert obj.init_score_ == pytest.approx(y.mean())
    assert (obj.a_, obj.b_) == pytest.approx((y.mean(), y.var()))
    explicit = ExtendedQWK(a=1.85, b=1.63).fit(y)
    assert (explicit.a_, explicit.b_) == (1.85, 1.63)


def test_range_clip_drifts_outward_and_hold_stops_it():
    # a row already past the top label with y = max keeps a negative gradient under "range"
    y = np.array([0.0, 1.0, 2.0, 3.0, 3.0])
    s = np.array([0.2, 1.1, 1.9, 3.4, 2.9])
    g_range, _ = ExtendedQWK(clip="range").fit(y).grad_hess(y, s)
    g_hold, _ = ExtendedQWK(clip="hold").fit(y).grad_hess(y, s)
    assert g_range[3] < 0          # descent pushes the score further above 3
    assert g_hold[3] == 0.0       # held
    np.testing.assert_array_equal(g_hold[[0, 1, 2, 4]], g_range[[0, 1, 2, 4]])


def test_metric_is_extended_qwk_of_clipped_scores_and_equals_qwk_on_integers(rng):
    y = rng.integers(0, 4, 200).astype(float)
    obj = ExtendedQWK().fit(y)
    s = rng.normal(1.5, 2.0, y.size)
    assert obj.metric(y, s) == pytest.approx(extended_qwk(y, np.clip(s, 0, 3)))
    ints = rng.integers(0, 4, y.size).astype(float)
    assert obj.metric(y, ints) == pytest.approx(qwk(y, ints), abs=1e-12)


def test_bad_options():
    with pytest.raises(ValueError, match="hessian must be one of"):
        ExtendedQWK(hessian="exact")
    with pytest.raises(ValueError, match="clip must be one of"):
        ExtendedQWK(clip="wrap")
    with pytest.raises(ValueError, match="single class"):
        ExtendedQWK().fit(np.ones(5))
