"""The blend methods on their own: weights that maximise QWK after cut points, the vote, ranks, nesting."""

import numpy as np
import pytest

from qwkboost.blending.methods import (
    _binned_qwk,
    apply_rank,
    fit_blend,
    fit_greedy,
    fit_nested,
    fit_weights,
    rank_transform,
    vote,
)
from qwkboost.evaluation.metrics import qwk
from qwkboost.evaluation.thresholds import apply_thresholds, fit_exact


def _members(n=3000, seed=0):
    rs = np.random.RandomState(seed)
    y = rs.randint(0, 4, n)
    good = y + rs.normal(0, 0.8, n)
    other = y + rs.normal(0, 1.0, n)       # independent errors: blending them helps
    noise = rs.normal(1.5, 1.0, n)         # knows nothing
    return y, np.column_stack([good, other, noise])


def _qwk_after_cuts(s, y):
    return qwk(y, apply_thresholds(s, fit_exact(s, y, n_classes=4)), n_classes=4)


def test_weights_are_a_distribution_that_beats_each_member_and_ignores_noise():
    y, S = _members()
    w = fit_weights(S, y, 4)
    assert np.all(w >= 0) and w.sum() == pytest.approx(1.0)
    assert w[2] < 0.05 and w[0] > w[1] > 0.2
    best_single = max(_qwk_after_cuts(S[:, j], y) for j in range(3))
    assert _qwk_after_cuts(S @ w, y) > best_single
    assert _qwk_after_cuts(S @ w, y) >= _qwk_after_cuts(S.mean(axis=1), y)
    np.testing.assert_array_equal(w, fit_weights(S, y, 4))            # deterministic


def test_row_weights_count_in_the_weight_fit():
    y, S = _members(2000, seed=1)
    # rows of weight 0 are the only ones where the noise member is right: they must not pull weight to it
    zero = np.arange(y.size) < 1000
    S2 = S.copy()
    S2[zero, 2] = y[zero]
    w_rows = np.where(zero, 0.0, 1.0)
    assert fit_weights(S2, y, 4, sample_weight=w_rows)[2] < 0.05
    assert fit_weights(S2, y, 4)[2] > 0.15


def test_vote_is_the_median_class_and_breaks_ties_toward_the_mean_score():
    classes = np.array([[0, 1, 3], [2, 2, 0], [1, 2, 2], [0, 3, 3]])
    np.testing.assert_array_equal(vote(classes, classes.astype(float)), [1, 2, 2, 3])
    even = np.array([[1, 2], [1, 2]])
    scores = np.array([[1.0, 1.6], [1.5, 1.7]])     # means 1.3 and 1.6 against the middle 1.5
    np.testing.assert_array_equal(vote(even, scores), [1, 2])


def test_rank_transform_maps_onto_the_unit_interval_in_order():
    rs = np.random.RandomState(0)
    ref = rs.exponential(2.0, 5000)
    q = rank_transform(ref)
    r = apply_rank(ref, q)
    assert r.min() >= 0 and r.max() <= 1
    assert np.all(np.diff(r[np.argsort(ref)]) >= -1e-12)
    assert np.mean(r) == pytest.approx(0.5, abs=0.01)
    np.testing.assert_allclose(apply_rank(np.array([-5.0, 1e9]), q), [0.0, 1.0])
    # a score many rows share sits in the middle of its run
    tied = np.r_[np.zeros(500), np.ones(500)]
    assert apply_rank(np.array([0.0]), rank_transform(tied))[0] == pytest.approx(0.25, abs=0.01)


def test_greedy_selection_picks_the_informed_members_and_beats_each_of_them():
    y, S = _members()
    w = fit_greedy(S, y, 4)
    assert np.all(w >= 0) and w.sum() == pytest.approx(1.0)
    assert w[2] == 0 and w[0] >= w[1] > 0                   # the noise is never chosen
    best_single = max(_qwk_after_cuts(S[:, j], y) for j in range(3))
    assert _qwk_after_cuts(S @ w, y) > best_single
    np.testing.assert_array_equal(w, fit_greedy(S, y, 4))            # deterministic


def test_greedy_selection_keeps_the_best_point_of_its_path():
    y, S = _members(2000, seed=3)
    lone = np.column_stack([S[:, 0], 3.0 - S[:, 1]])         # a member ranking the rows backwards only hurts
    np.testing.assert_array_equal(fit_greedy(lone, y, 4), [1.0, 0.0])


def test_binned_scoring_ranks_blends_as_the_exact_fit_does():
    rs = np.random.RandomState(4)
    y = rs.randint(0, 5, 20_000)
    for noise in (0.6, 1.0, 1.6):
        s = y + rs.normal(0, noise, y.size)
        exact = qwk(y, apply_thresholds(s, fit_exact(s, y, n_classes=5)), n_classes=5)
        assert _binned_qwk(s, y, 5, None, "exact", 1024) == pytest.approx(exact, abs=2e-3)
    few = y[:500], y[:500] + rs.normal(0, 1, 500)           # few rows: the exact fit itself
    assert _binned_qwk(few[1], few[0], 5, None, "exact", 1024) == \
        qwk(few[0], apply_thresholds(few[1], fit_exact(few[1], few[0], n_classes=5)), n_classes=5)


@pytest.mark.parametrize("method", ["weights", "mean", "rank_mean", "greedy", "vote"])
def test_nested_classes_come_from_fits_without_the_rows_fold(method):
    y, S = _members(1500, seed=2)
    fold = np.arange(y.size) % 3
    fit, nested = fit_nested(method, S, y, 4, None, fold)
    for f in range(3):
        inner = fit_blend(method, S[fold != f], y[fold != f], 4, None, "exact")
        np.testing.assert_array_equal(nested[fold == f], inner.classes(S[fold == f]))
    assert qwk(y, nested) <= qwk(y, fit.classes(S)) + 1e-12
