"""Label-shift corrections: weights, probabilities and extended QWK's a, b under a known target distribution."""

import numpy as np
import pytest

from qwkboost.data.shift import class_proportions, shift_proba, shift_weights, target_moments


def test_weights_give_the_target_proportions():
    y = np.array([0] * 50 + [1] * 30 + [2] * 20)
    target = np.array([0.2, 0.3, 0.5])
    w = shift_weights(y, target)
    got = np.bincount(y, weights=w) / w.sum()
    np.testing.assert_allclose(got, target)
    np.testing.assert_allclose(class_proportions(y, 3), [0.5, 0.3, 0.2])


def test_shifted_probabilities_are_the_bayes_posterior_under_the_new_prior():
    # two classes with known likelihoods p(x|y): Gaussians at 0 and 1
    x = np.linspace(-2, 3, 11)
    lik = np.stack([np.exp(-0.5 * x ** 2), np.exp(-0.5 * (x - 1) ** 2)], axis=1)
    train, target = np.array([0.7, 0.3]), np.array([0.2, 0.8])
    post_train = lik * train / (lik * train).sum(1, keepdims=True)
    post_target = lik * target / (lik * target).sum(1, keepdims=True)
    np.testing.assert_allclose(shift_proba(post_train, train, target), post_target, rtol=1e-12)
    # the same prior changes nothing
    np.testing.assert_allclose(shift_proba(post_train, train, train), post_train, rtol=1e-12)


def test_target_moments():
    a, b = target_moments([1, 2, 3, 4], [0.1, 0.2, 0.3, 0.4])
    vals = np.repeat([1, 2, 3, 4], [1, 2, 3, 4]).astype(float)
    assert (a, b) == pytest.approx((vals.mean(), vals.var()))


def test_bad_prior_is_refused():
    with pytest.raises(ValueError, match="target_prior must be 3 non-negative"):
        shift_proba(np.full((2, 3), 1 / 3), [0.3, 0.3, 0.4], [0.5, 0.5])
