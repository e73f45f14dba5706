"""Tests of qwkboost.evaluation.thresholds: the exact method against brute force, the baselines, and input checks."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from qwkboost.evaluation.metrics import qwk
from qwkboost.evaluation.thresholds import (
    METHODS,
    apply_thresholds,
    fit_distribution,
    fit_exact,
    fit_nelder_mead,
    fit_thresholds,
    round_cuts,
)


# ----------------------------------------------------------------------------- helpers

def brute_force_best(scores, y, k):
    """Max QWK over every monotone labelling: all boundary vectors 0 <= p_1 <= ... <= p_{K-1} <= G."""
    u, grp = np.unique(scores, return_inverse=True)
    best = -np.inf
    for pos in itertools.combinations_with_replacement(range(u.size + 1), k - 1):
        labels = np.searchsorted(np.array(pos), grp, side="right")
        best = max(best, qwk(y, labels, n_classes=k))
    return best


def brute_force_k3_prefix(scores, y):
    """Max QWK for K = 3 over all (p1 <= p2) boundary pairs, by prefix sums (an independent O(G^2) check)."""
    u, grp = np.unique(scores, return_inverse=True)
    g = u.size
    n = y.size
    cnt = np.bincount(grp, minlength=g)
    s1 = np.bincount(grp, weights=y, minlength=g)
    P0 = np.concatenate([[0], np.cumsum(cnt)])
    P1 = np.concatenate([[0], np.cumsum(s1)])
    a, b = y.mean(), y.var()
    p1, p2 = np.meshgrid(np.arange(g + 1), np.arange(g + 1), indexing="ij")
    ok = p1 <= p2
    # class 1 on [p1, p2), class 2 on [p2, G)
    n1, n2 = P0[p2] - P0[p1], n - P0[p2]
    y1, y2 = P1[p2] - P1[p1], P1[g] - P1[p2]
    # N = sum c^2 - 2 sum c y + sum y^2;  D = sum c^2 - 2 a sum c + n (a^2 + b)
    num = (n1 + 4 * n2) - 2 * (y1 + 2 * y2) + y @ y
    den = (n1 + 4 * n2) - 2 * a * (n1 + 2 * n2) + n * (a * a + b)
    kappa = 1 - num / den
    return kappa[ok].max()


def kappa_of(cuts, scores, y, k):
    return qwk(y, apply_thresholds(scores, cuts), n_classes=k)


@st.composite
def small_cases(draw):
    k = draw(st.integers(3, 4))
    n = draw(st.integers(2, 9))
    # few distinct values -> many ties
    scores = draw(st.lists(st.integers(0, 4).map(float) | st.floats(-3, 3, allow_nan=False, width=32),
                           min_size=n, max_size=n))
    y = draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n))
    return k, np.array(scores, dtype=float), np.array(y)


# ----------------------------------------------------------------------------- exact vs brute force

@settings(max_examples=400, deadline=None, derandomize=True)
@given(small_cases())
def test_exact_matches_brute_force_hypothesis(case):
    k, s, y = case
    if y.min() == y.max():
        with pytest.raises(ValueError, match="single class"):
            fit_exact(s, y, k)
        return
    cuts = fit_exact(s, y, k)
    assert cuts.shape == (k - 1,)
    assert np.all(np.diff(cuts) > 0)
    assert kappa_of(cuts, s, y, k) == pytest.approx(brute_force_best(s, y, k), abs=1e-12)


def test_exact_matches_brute_force_seeded_loop():
    rng = np.random.default_rng(2024)
    checked = 0
    for _ in range(400):
        k = int(rng.integers(2, 6))
        n = int(rng.integers(2, 10))
        s = rng.integers(0, 4, n).astype(float) if rng.random() < 0.5 else rng.normal(size=n)
        y = rng.integers(0, k, n)
        if y.min() == y.max():
            continue
        cuts = fit_exact(s, y, k)
        assert np.all(np.diff(cuts) > 0)
        assert kappa_of(cuts, s, y, k) == pytest.approx(brute_force_best(s, y, k), abs=1e-12)
        checked += 1
    assert checked > 300


@pytest.mark.parametrize("seed", range(6))
def test_exact_matches_prefix_sum_brute_force_k3_medium_n(seed):
    rng = np.random.default_rng(seed)
    n = 300
    y = rng.integers(0, 3, n)
    s = np.round(y + rng.normal(0, 1.2, n), 1)          # ~60 distinct values, heavy ties
    best = brute_force_k3_prefix(s, y.astype(float))
    assert kappa_of(fit_exact(s, y, 3), s, y, 3) == pytest.approx(best, abs=1e-12)


def test_tied_scores_get_one_class():
    # every score tied in pairs with conflicting labels
    s = np.array([0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0])
    y = np.array([0, 1, 1, 0, 2, 1, 3, 2])
    cuts = fit_exact(s, y, 4)
    lab = apply_thresholds(s, cuts)
    assert np.all(lab[0::2] == lab[1::2])
    assert kappa_of(cuts, s, y, 4) == pytest.approx(brute_force_best(s, y, 4), abs=1e-12)


def test_exact_cuts_are_midpoints_between_distinct_scores():
    s = np.array([0.0, 1.0, 2.0, 4.0, 5.0, 9.0])
    y = np.array([0, 0, 1, 1, 2, 2])
    np.testing.assert_allclose(fit_exact(s, y), [1.5, 4.5])


def test_empty_classes_still_give_strictly_increasing_cuts():
    # y uses classes 0 and 3 only, K = 5: the optimum leaves classes empty
    s = np.array([0.0, 0.1, 0.2, 3.0, 3.1, 3.2])
    y = np.array([0, 0, 0, 3, 3, 3])
    cuts = fit_exact(s, y, 5)
    assert cuts.shape == (4,) and np.all(np.diff(cuts) > 0)
    lab = apply_thresholds(s, cuts)
    assert kappa_of(cuts, s, y, 5) == pytest.approx(1.0)
    np.testing.assert_array_equal(lab, y)
    # class 1 and 2 cuts lie inside the gap (0.2, 3.0]; class 4's cut lies above every score
    assert 0.2 < cuts[0] < cuts[1] < cuts[2] <= 3.0 < 3.2 < cuts[3]


def test_cuts_reproduce_labelling_in_a_gap_of_one_ulp():
    lo = 1.0
    hi = np.nextafter(lo, 2.0)
    s = np.array([0.0, lo, hi, 2.0])
    y = np.array([0, 0, 1, 1])
    cuts = fit_exact(s, y)
    np.testing.assert_array_equal(apply_thresholds(s, cuts), y)


def test_exact_invariant_to_increasing_affine_maps():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 4, 500)
    s = y + rng.normal(0, 1, 500)
    lab = apply_thresholds(s, fit_exact(s, y))
    s2 = 10.0 * s - 7.0
    np.testing.assert_array_equal(apply_thresholds(s2, fit_exact(s2, y)), lab)


def test_all_scores_equal_gives_one_class():
    s = np.full(5, 2.0)
    y = np.array([0, 1, 2, 1, 0])
    cuts = fit_exact(s, y, 3)
    assert np.all(np.diff(cuts) > 0)
    assert np.unique(apply_thresholds(s, cuts)).size == 1


# ----------------------------------------------------------------------------- exact vs baselines

@pytest.mark.parametrize("seed", range(8))
def test_exact_never_worse_than_nelder_mead_round_distribution(seed):
    rng = np.random.default_rng(100 + seed)
    k = 4 + seed % 3
    n = 400
    y = rng.integers(0, k, n)
    s = 0.7 * y + 0.4 + rng.normal(0, 0.8, n)           # biased, shrunk scores: rounding is poor
    q_exact = kappa_of(fit_exact(s, y, k), s, y, k)
    for method in ("round", "nelder_mead", "distribution"):
        q = kappa_of(fit_thresholds(method, s, y, k), s, y, k)
        assert q_exact >= q - 1e-12, method
    # Nelder-Mead started at the exact cuts cannot improve either
    q_nm = kappa_of(fit_nelder_mead(s, y, k, init=fit_exact(s, y, k)), s, y, k)
    assert q_exact >= q_nm - 1e-12


def test_exact_on_the_articles_scale_beats_baselines(small_quartiles):
    d = small_quartiles
    s = d.X_train.sum(axis=1)              # the Bayes-sufficient statistic, not on the label scale
    y = d.y_train.astype(int)
    qs = {m: kappa_of(fit_thresholds(m, s, y), s, y, 4) for m in METHODS}
    assert all(qs["exact"] >= v - 1e-12 for v in qs.values())


def test_exact_is_fast_at_100k():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 100_000)
    s = y + rng.normal(0, 1, y.size)
    cuts = fit_exact(s, y)
    assert cuts.shape == (3,) and np.all(np.diff(cuts) > 0)
    assert kappa_of(cuts, s, y, 4) >= kappa_of(fit_distribution(s, y), s, y, 4)


# ----------------------------------------------------------------------------- simple methods

def test_apply_thresholds_semantics():
    cuts = np.array([0.5, 1.5, 2.5])
    s = np.array([-10, 0.49, 0.5, 1.0, 1.5, 2.4999, 2.5, 99.0])
    np.testing.assert_array_equal(apply_thresholds(s, cuts), [0, 0, 1, 1, 2, 2, 3, 3])
    assert apply_thresholds(s, cuts).dtype == np.int64
    rng = np.random.default_rng(1)
    r = rng.normal(0, 3, 1000)
    c = np.sort(rng.normal(0, 2, 4))
    np.testing.assert_array_equal(apply_thresholds(r, c), np.searchsorted(c, r, side="right"))
    # equal cuts leave a class empty
    np.testing.assert_array_equal(apply_thresholds([0.0, 1.0, 2.0], [1.0, 1.0]), [0, 2, 2])


def test_round_cuts():
    np.testing.assert_array_equal(round_cuts(4), [0.5, 1.5, 2.5])
    np.testing.assert_array_equal(round_cuts(2), [0.5])
    s = np.array([-3.0, 0.2, 0.7, 1.4, 2.6, 3.49, 7.0])
    np.testing.assert_array_equal(apply_thresholds(s, round_cuts(4)), np.clip(np.floor(s + 0.5), 0, 3))
    for bad in (1, 0, 2.5, "4", True, None):
        with pytest.raises(ValueError, match="n_classes"):
            round_cuts(bad)


def test_distribution_matches_label_proportions():
    rng = np.random.default_rng(5)
    y = rng.choice(5, size=1000, p=[0.1, 0.2, 0.4, 0.2, 0.1])
    s = rng.normal(size=1000)                 # continuous: no ties
    cuts = fit_distribution(s, y)
    assert np.all(np.diff(cuts) > 0)
    np.testing.assert_array_equal(np.bincount(apply_thresholds(s, cuts), minlength=5),
                                  np.bincount(y, minlength=5))
    # quantile formulation: fraction below each cut is the cumulative label proportion
    cum = np.cumsum(np.bincount(y, minlength=5))[:-1] / y.size
    np.testing.assert_allclose([(s < c).mean() for c in cuts], cum)


def test_distribution_with_ties_and_empty_class():
    s = np.array([0.0, 0.0, 0.0, 1.0, 2.0, 3.0])
    y = np.array([0, 1, 1, 1, 3, 3])                      # class 2 empty
    cuts = fit_distribution(s, y, 4)
    assert np.all(np.diff(cuts) > 0)
    # 1 sample of class 0 but 3 tied scores at 0.0: nearest boundary is 0 samples below
    np.testing.assert_array_equal(np.bincount(apply_thresholds(s, cuts), minlength=4), [0, 4, 0, 2])


def test_nelder_mead_sorted_and_improves_on_rounding():
    rng = np.random.default_rng(7)
    y = rng.integers(0, 4, 2000)
    s = 0.6 * y + 0.5 + rng.normal(0, 0.5, y.size)
    cuts = fit_nelder_mead(s, y)
    assert np.all(np.diff(cuts) >= 0)
    assert kappa_of(cuts, s, y, 4) >= kappa_of(round_cuts(4), s, y, 4)


def test_fit_thresholds_dispatch():
    rng = np.random.default_rng(8)
    y = rng.integers(0, 3, 200)
    s = y + rng.normal(0, 0.7, 200)
    np.testing.assert_array_equal(fit_thresholds("round", s, y), round_cuts(3))
    np.testing.assert_array_equal(fit_thresholds("exact", s, y), fit_exact(s, y))
    np.testing.assert_array_equal(fit_thresholds("nelder_mead", s, y), fit_nelder_mead(s, y))
    np.testing.assert_array_equal(fit_thresholds("distribution", s, y), fit_distribution(s, y))
    assert fit_thresholds("exact", s, y, n_classes=5).shape == (4,)
    with pytest.raises(ValueError, match="round, exact, nelder_mead, distribution"):
        fit_thresholds("optimized", s, y)


# ----------------------------------------------------------------------------- bad input

GOOD_S = np.array([0.1, 0.5, 1.2, 2.2])
GOOD_Y = np.array([0, 1, 1, 2])


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("scores, y, n_classes, match", [
    ([0.1, np.nan, 1.2, 2.2], GOOD_Y, None, "scores"),
    ([0.1, np.inf, 1.2, 2.2], GOOD_Y, None, "scores"),
    (GOOD_S, [0, 1.5, 1, 2], None, "y must hold integer"),
    (GOOD_S, [0, -1, 1, 2], None, "y must hold class labels"),
    (GOOD_S, [0, np.nan, 1, 2], None, "y contains"),
    (GOOD_S, [0, 1, 2], None, "scores and y have different lengths"),
    ([], [], None, "scores is empty"),
    (GOOD_S, [1, 1, 1, 1], None, "y contains a single class"),
    (GOOD_S, GOOD_Y, 2, "n_classes=2 is too small"),
    (GOOD_S, GOOD_Y, 1, "n_classes must be an integer in \\[2, "),
    (GOOD_S, GOOD_Y, 3.5, "n_classes must be an integer in \\[2, "),
    (GOOD_S, GOOD_Y, float("nan"), "n_classes must be an integer in \\[2, "),
    (["a", "b", "c", "d"], GOOD_Y, None, "scores must be numeric"),
])
def test_bad_inputs(method, scores, y, n_classes, match):
    with pytest.raises(ValueError, match=match):
        fit_thresholds(method, scores, y, n_classes)


def test_apply_thresholds_bad_inputs():
    with pytest.raises(ValueError, match="cuts must be non-decreasing"):
        apply_thresholds([0.0, 1.0], [1.5, 0.5])
    with pytest.raises(ValueError, match="cuts"):
        apply_thresholds([0.0, 1.0], [np.nan])
    with pytest.raises(ValueError, match="scores"):
        apply_thresholds([0.0, np.inf], [0.5])
    with pytest.raises(ValueError, match="cuts is empty"):
        apply_thresholds([0.0, 1.0], [])


def test_nelder_mead_bad_init():
    with pytest.raises(ValueError, match="init must have n_classes - 1 = 2 values"):
        fit_nelder_mead(GOOD_S, GOOD_Y, init=[0.5])
    with pytest.raises(ValueError, match="init"):
        fit_nelder_mead(GOOD_S, GOOD_Y, init=[0.5, np.nan])


def test_cuts_on_the_labels_scale_give_labels_with_their_classes():
    """What thresholds.json holds: cuts between labels 1..5 and the classes themselves."""
    scores = np.array([0.2, 1.4, 1.6, 2.5, 3.49, 4.51, 9.0])
    cuts = [1.5, 2.5, 3.5, 4.5]
    np.testing.assert_array_equal(apply_thresholds(scores, cuts, classes=[1, 2, 3, 4, 5]), [1, 1, 2, 3, 3, 5, 5])
    np.testing.assert_array_equal(apply_thresholds(scores, cuts), [0, 0, 1, 2, 2, 4, 4])
    with pytest.raises(ValueError, match="classes must list one label per class, 5 for 4 cuts; got 4"):
        apply_thresholds(scores, cuts, classes=[1, 2, 3, 4])


def test_exact_method_refuses_a_programme_that_does_not_fit():
    rs = np.random.RandomState(0)
    y = rs.randint(0, 4, 50_000) + 100_000
    with pytest.raises(ValueError, match=r"would need .* GiB for 100004 classes .* pass y - 100000"):
        fit_exact(y + rs.rand(50_000), y)


def test_nested_classes_fit_each_fold_on_the_others():
    from qwkboost.evaluation.thresholds import nested_classes

    rs = np.random.RandomState(3)
    y = rs.randint(0, 4, 900)
    s = y + rs.normal(0, 0.9, y.size)
    fold = rs.randint(0, 3, y.size)
    got = nested_classes("exact", s, y, fold, n_classes=4)
    for f in range(3):
        cuts = fit_exact(s[fold != f], y[fold != f], n_classes=4)
        np.testing.assert_array_equal(got[fold == f], apply_thresholds(s[fold == f], cuts))
    in_sample = qwk(y, apply_thresholds(s, fit_exact(s, y, n_classes=4)))
    assert qwk(y, got) < in_sample        # cut points scored on their own rows flatter themselves
    np.testing.assert_array_equal(nested_classes("round", s, y, fold, n_classes=4),
                                  apply_thresholds(s, round_cuts(4)))
    with pytest.raises(ValueError, match="at least two folds"):
        nested_classes("exact", s, y, np.zeros(y.size), n_classes=4)
