r"""Statistics of a study over seeds: means with intervals, paired differences, and a multiple-test correction.

Every method in a study is scored on the same seeds (the same data draws, splits
and folds), so two methods are compared by their per-seed differences
:math:`d_s = q^{A}_s - q^{B}_s`, which removes the variation the seeds share.

* A mean over :math:`n` seeds gets Student's t interval,
  :math:`\bar d \pm t_{0.975,\,n-1}\, s_d / \sqrt n`.
* A paired difference is tested with the Wilcoxon signed-rank test
  (two-sided; :func:`scipy.stats.wilcoxon`), which does not assume the
  differences are normal, or with the paired t-test
  (:func:`scipy.stats.ttest_rel`, :math:`t = \bar d / (s_d/\sqrt n)`), which
  does, and which is the one that can reach 5 % with few seeds: with
  :math:`n` seeds the signed-rank test's smallest two-sided p-value is
  :math:`2/2^n` (0.0625 at five).
* Many comparisons at once are corrected with Holm's step-down method
  (Holm 1979, "A simple sequentially rejective multiple test procedure"),
  which controls the family-wise error rate like Bonferroni's but rejects more.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Interval", "PairedComparison", "TESTS", "mean_interval", "paired_comparison", "holm"]

#: The paired tests :func:`paired_comparison` knows, and their names in reports.
TESTS = {"wilcoxon": "Wilcoxon signed-rank", "t": "paired t"}


@dataclass(frozen=True)
class Interval:
    """A mean with its two-sided confidence interval over ``n`` values."""

    mean: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class PairedComparison:
    r"""Method A against method B over the same seeds.

    Attributes
    ----------
    diff : Interval
        Mean of :math:`q^A_s - q^B_s` with its t interval.
    p_value : float
        Two-sided p-value of the paired test (Wilcoxon signed-rank or paired t; 1.0 when every difference is
        zero, 0.0 for the t-test when every difference is the same non-zero value).
    wins, losses, ties : int
        Seeds where A scored higher, lower, the same.
    """

    diff: Interval
    p_value: float
    wins: int
    losses: int
    ties: int


def mean_interval(values, confidence: float = 0.95) -> Interval:
    r"""Mean and Student's t interval, :math:`\bar x \pm t_{(1+c)/2,\,n-1}\, s / \sqrt n`.

    With one value the interval is that value; NaNs are refused.
    """
    from scipy import stats  # slow to import: scipy.stats

    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("mean_interval needs a non-empty 1-d array of values")
    if not np.isfinite(x).all():
        raise ValueError("mean_interval got a NaN or infinite value")
    m = float(x.mean())
    if x.size == 1:
        return Interval(m, m, m, 1)
    half = float(stats.t.ppf((1 + confidence) / 2, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size))
    return Interval(m, m - half, m + half, int(x.size))


def paired_comparison(a, b, confidence: float = 0.95, test: str = "wilcoxon") -> PairedComparison:
    """Compare paired scores ``a`` and ``b`` (one per seed): mean difference, t interval, and the p-value of
    ``test`` (``"wilcoxon"`` or ``"t"``, :data:`TESTS`)."""
    from scipy import stats  # slow to import: scipy.stats

    if test not in TESTS:
        raise ValueError(f"test={test!r} is unknown; choose one of: {', '.join(TESTS)}")
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired scores must be two 1-d arrays of one length; got shapes {a.shape} and {b.shape}")
    d = a - b
    if np.all(d == 0):
        p = 1.0
    elif test == "t":
        # every difference the same: no spread to test against (scipy gives nan); the sign is certain
        if d.size < 2:
            p = 1.0
        else:
            p = 0.0 if np.all(d == d[0]) else float(stats.ttest_rel(a, b).pvalue)
    else:
        p = float(stats.wilcoxon(a, b, alternative="two-sided").pvalue)
    return PairedComparison(mean_interval(d, confidence), p, int((d > 0).sum()), int((d < 0).sum()),
                            int((d == 0).sum()))


def holm(p_values) -> np.ndarray:
    r"""Holm-adjusted p-values: sorted ascending, :math:`\tilde p_{(i)} = \max_{j \le i} \min(1, (m-j+1)\,p_{(j)})`.

    Reject hypothesis :math:`i` at level :math:`\alpha` when :math:`\tilde p_i \le \alpha`.
    """
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1:
        raise ValueError("holm needs a 1-d array of p-values")
    if p.size == 0:
        return p.copy()
    if np.any((p < 0) | (p > 1)) or not np.isfinite(p).all():
        raise ValueError("p-values must lie in [0, 1]")
    m = p.size
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adj = np.maximum.accumulate(adj)
    out = np.empty(m)
    out[order] = adj
    return out
