import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from sklearn.metrics import cohen_kappa_score

from qwkboost.evaluation.metrics import extended_qwk, qwk, rmse


@st.composite
def label_pairs(draw):
    k = draw(st.integers(2, 9))
    n = draw(st.integers(2, 60))
    yt = draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n))
    yp = draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n))
    return k, np.array(yt), np.array(yp)


@settings(max_examples=300, deadline=None)
@given(label_pairs())
def test_qwk_equals_sklearn_with_labels_including_absent_classes(case):
    k, yt, yp = case
    if yt.min() == yt.max():
        with pytest.raises(ValueError, match="single class"):
            qwk(yt, yp, n_classes=k)
        return
    expected = cohen_kappa_score(yt, yp, weights="quadratic", labels=list(range(k)))
    assert qwk(yt, yp, n_classes=k) == pytest.approx(expected, abs=1e-12)


def test_absent_classes_are_why_labels_matter():
    # class 1 is absent from both; sklearn without labels= returns another number
    yt = np.array([0, 0, 2, 3, 3, 2])
    yp = np.array([0, 2, 2, 3, 2, 0])
    exact = cohen_kappa_score(yt, yp, weights="quadratic", labels=range(4))
    dropped = cohen_kappa_score(yt, yp, weights="quadratic")
    assert dropped != pytest.approx(exact)
    assert qwk(yt, yp) == pytest.approx(exact, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(label_pairs())
def test_extended_qwk_equals_qwk_on_integer_predictions(case):
    k, yt, yp = case
    if yt.min() == yt.max():
        return
    assert extended_qwk(yt, yp.astype(float)) == pytest.approx(qwk(yt, yp, n_classes=k), abs=1e-12)


def test_extended_qwk_is_continuous_and_perfect_at_truth():
    y = np.array([0, 1, 2, 3, 1, 2], dtype=float)
    assert extended_qwk(y, y) == 1.0
    assert extended_qwk(y, y + 0.01) < 1.0
    assert extended_qwk(y, np.full_like(y, y.mean())) == pytest.approx(0.0, abs=1e-12)


def test_rmse():
    assert rmse([0, 0], [3, 4]) == pytest.approx(np.sqrt(12.5))


@pytest.mark.parametrize(
    "yt, yp, kw, match",
    [
        ([0, 1, np.nan], [0, 1, 1], {}, "y_true contains 1 NaN or inf"),
        ([0, 1, 2], [0, np.inf, 1], {}, "y_pred contains 1 NaN or inf"),
        ([0, -1, 2], [0, 1, 1], {}, "y_true .*negative"),
        ([0, 1.5, 2], [0, 1, 1], {}, "y_true must hold integer class labels"),
        ([0, 1, 2], [0, 1], {}, "different lengths: 3 != 2"),
        ([], [], {}, "y_true is empty"),
        ([2, 2, 2], [0, 1, 2], {}, "single class .*undefined"),
        ([0, 1, 5], [0, 1, 1], {"n_classes": 4}, "n_classes=4 is smaller than the largest label"),
    ],
)
def test_qwk_bad_input(yt, yp, kw, match):
    with pytest.raises(ValueError, match=match):
        qwk(yt, yp, **kw)


def test_extended_qwk_bad_input():
    with pytest.raises(ValueError, match="y_score contains"):
        extended_qwk([0, 1], [0, np.nan])
    with pytest.raises(ValueError, match="single class"):
        extended_qwk([1, 1], [0, 1])
    with pytest.raises(ValueError, match="different lengths"):
        extended_qwk([0, 1], [0, 1, 2])


def test_qwk_on_a_million_rows():
    # a million rows, ten classes: bincount path, no n x n structure
    rng = np.random.default_rng(0)
    yt = rng.integers(0, 10, 1_000_000)
    yp = np.clip(yt + rng.integers(-1, 2, yt.size), 0, 9)
    v = qwk(yt, yp)
    assert 0.9 < v < 1.0


def test_qwk_works_on_the_observed_labels_not_their_range():
    import tracemalloc

    rs = np.random.RandomState(0)
    yt = rs.randint(0, 4, 5000)
    yp = np.clip(yt + rs.randint(-1, 2, 5000), 0, 3)
    tracemalloc.start()
    far = qwk(yt + 100_000, yp + 100_000)      # used to allocate a 100,004 x 100,004 matrix (75 GiB)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert far == pytest.approx(qwk(yt, yp), abs=1e-15)
    assert peak < 10 * 2**20


def test_qwk_is_exact_for_huge_label_values():
    # weights are squared label differences: 0 vs 1e9 costs 1e18, beyond float64's integers
    yt = np.array([0, 10**9, 5, 5])
    yp = np.array([10**9, 0, 5, 5])
    n, t, p = 4, yt.astype(object), yp.astype(object)
    expected_n = n * (sum(t * t) + sum(p * p)) - 2 * sum(t) * sum(p)
    assert qwk(yt, yp) == pytest.approx(1 - n * sum((t - p) ** 2) / expected_n, rel=1e-15)
