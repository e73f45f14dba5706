"""The study's statistics against scipy and statsmodels on known inputs."""

import numpy as np
import pytest
from scipy import stats

from qwkboost.evaluation.stats import holm, mean_interval, paired_comparison


def test_mean_interval_is_students_t_interval():
    x = np.array([0.61, 0.63, 0.60, 0.64, 0.62, 0.65, 0.59])
    iv = mean_interval(x)
    lo, hi = stats.t.interval(0.95, x.size - 1, loc=x.mean(), scale=stats.sem(x))
    assert (iv.mean, iv.low, iv.high, iv.n) == pytest.approx((x.mean(), lo, hi, 7), rel=1e-12)
    lo90, hi90 = stats.t.interval(0.90, x.size - 1, loc=x.mean(), scale=stats.sem(x))
    assert (mean_interval(x, 0.90).low, mean_interval(x, 0.90).high) == pytest.approx((lo90, hi90), rel=1e-12)
    one = mean_interval([0.5])
    assert (one.low, one.high) == (0.5, 0.5)


def test_paired_comparison_matches_scipy():
    rs = np.random.RandomState(3)
    b = rs.uniform(0.55, 0.65, 20)
    a = b + rs.normal(0.004, 0.003, 20)
    pc = paired_comparison(a, b)
    assert pc.p_value == pytest.approx(stats.wilcoxon(a, b).pvalue, rel=1e-12)
    d = a - b
    assert pc.diff.mean == pytest.approx(d.mean())
    assert (pc.diff.low, pc.diff.high) == pytest.approx(stats.t.interval(0.95, 19, d.mean(), stats.sem(d)))
    assert (pc.wins, pc.losses, pc.ties) == ((d > 0).sum(), (d < 0).sum(), 0)
    assert pc.p_value < 0.01     # a consistent positive shift is found
    # identical methods: nothing to test, p = 1, not an error
    same = paired_comparison(b, b)
    assert same.p_value == 1.0 and same.ties == 20 and same.diff.mean == 0.0


def test_holm_matches_statsmodels():
    from statsmodels.stats.multitest import multipletests

    for p in ([0.01, 0.04, 0.03, 0.005], [0.2, 0.2, 0.01], [0.5], np.random.RandomState(0).uniform(0, 0.2, 15)):
        expect = multipletests(p, method="holm")[1]
        np.testing.assert_allclose(holm(p), expect, rtol=1e-12)
    # monotone in the sorted order, never below the raw p-values
    p = np.array([0.03, 0.001, 0.02, 0.5])
    adj = holm(p)
    assert (adj >= p).all() and (np.diff(adj[np.argsort(p)]) >= 0).all()


@pytest.mark.parametrize("call,match", [
    (lambda: mean_interval([]), "non-empty"),
    (lambda: mean_interval([0.1, np.nan]), "NaN"),
    (lambda: paired_comparison([1, 2], [1, 2, 3]), "one length"),
    (lambda: holm([0.1, 1.2]), r"\[0, 1\]"),
])
def test_bad_input_is_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_the_paired_t_test_matches_scipy_and_can_decide_with_five_seeds():
    b = np.array([0.60, 0.62, 0.61, 0.63, 0.60])
    a = b + np.array([0.010, 0.012, 0.009, 0.011, 0.010])
    t = paired_comparison(a, b, test="t")
    assert t.p_value == pytest.approx(stats.ttest_rel(a, b).pvalue, rel=1e-12) and t.p_value < 0.001
    # the signed-rank test cannot go below 2 / 2**5 with five pairs, however clear the shift
    assert paired_comparison(a, b).p_value == pytest.approx(0.0625)
    assert paired_comparison(b + 0.01, b, test="t").p_value == 0.0          # one constant shift: certain
    assert paired_comparison(b, b, test="t").p_value == 1.0
    assert paired_comparison(a[:1], b[:1], test="t").p_value == 1.0         # one seed decides nothing
    with pytest.raises(ValueError, match="test='z' is unknown; choose one of: wilcoxon, t"):
        paired_comparison(a, b, test="z")
