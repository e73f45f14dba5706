r"""Evaluation metrics: exact QWK, extended QWK and RMSE.

Quadratic weighted kappa with weights :math:`w_{ij} = (i-j)^2` is

.. math:: \kappa = 1 - \frac{\sum_{ij} w_{ij} O_{ij}}{\sum_{ij} w_{ij} E_{ij}},
   \qquad E_{ij} = \frac{h_i\, p_j}{n},

where :math:`O` is the confusion matrix and :math:`h, p` are the class
histograms of the labels and the predictions. The numerator is the residual
sum of squares :math:`\sum_k (\hat y_k - y_k)^2`; the denominator expands to
:math:`\sum_k \left((\hat y_k - a)^2 + b\right)` with :math:`a, b` the mean and
population variance of the labels. That identity is why the *extended* QWK

.. math:: \tilde\kappa = 1 - \frac{\sum_k (\hat y_k - y_k)^2}{\sum_k \left((\hat y_k - a)^2 + b\right)}

equals QWK exactly on integer predictions (rsakata, "[Kaggle] DSB2019: QWKをGBDTで直接最適化する", 2020).

**Sample weights** :math:`w_k` weigh every row in every sum: the confusion
matrix and the histograms of QWK, the two sums of :math:`\tilde\kappa` (with
:math:`a, b` the weighted mean and variance) and RMSE. With integer weights
each equals the metric of the data with every row repeated :math:`w_k` times.
"""

from __future__ import annotations

import numpy as np

from qwkboost.validation import (
    check_1d,
    check_labels,
    check_real,
    check_same_length,
    check_weight,
)

__all__ = ["qwk", "extended_qwk", "rmse", "extended_qwk_ratio", "rmse_fast", "weighted_mean_var"]


def _single_class_error(name: str, value) -> ValueError:
    return ValueError(
        f"{name} contains a single class ({value!r}); QWK is undefined when the labels do not vary "
        "(its expected-disagreement denominator is zero)"
    )


def qwk(y_true, y_pred, n_classes: int | None = None, sample_weight=None) -> float:
    r"""Exact quadratic weighted kappa of integer labels.

    Implements :math:`\kappa = 1 - \sum w O / \sum w E` (module docstring) in
    :math:`O(n)` with no :math:`K \times K` matrix: the numerator is the
    residual sum of squares, and with :math:`h, p` the class histograms

    .. math:: \sum_{ij} (i-j)^2 \frac{h_i p_j}{n} = \sum_k t_k^2 + \sum_k p_k^2 - \frac{2}{n}\sum_k t_k \sum_k p_k,

    summed over rows (:math:`t_k, p_k` the true and predicted labels), in exact
    integer arithmetic after subtracting the lowest label, so labels
    100,000..100,003 cost what 0..3 do.

    Parameters
    ----------
    y_true, y_pred : array-like of int
        Class labels (non-negative integers); whole-valued floats are accepted.
    n_classes : int, optional
        Number of classes K, checked against the labels; the value never
        depends on it. Equals scikit-learn's ``cohen_kappa_score(...,
        weights="quadratic", labels=range(K))``.
    sample_weight : array-like, optional
        Weight of each row (floating point then, not exact integers).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        On NaN/inf, negative or fractional labels, length mismatch, empty input,
        ``n_classes`` too small, or a single class in ``y_true``.
    """
    yt = check_labels(y_true, "y_true")
    yp = check_labels(y_pred, "y_pred")
    check_same_length(yt, yp, "y_true", "y_pred")
    top = int(max(yt.max(), yp.max()))
    if n_classes is not None:
        if isinstance(n_classes, str) or isinstance(n_classes, bool) or not _whole(n_classes) or n_classes < 2:
            raise ValueError(f"n_classes must be an integer >= 2; got {n_classes!r}")
        if int(n_classes) <= top:
            raise ValueError(f"n_classes={int(n_classes)} is smaller than the largest label + 1 ({top + 1})")
    if yt.min() == yt.max():
        raise _single_class_error("y_true", int(yt[0]))
    w = check_weight(sample_weight, yt.size)
    base = min(int(yt.min()), int(yp.min()))
    if w is not None:
        # the same expansion with weighted sums: sum w(t-p)^2 over sum w t^2 + sum w p^2 - 2 (sum w t)(sum w p)/W
        t, p = (yt - base).astype(np.float64), (yp - base).astype(np.float64)
        W, d = float(w.sum()), t - p
        st, sp = float(w @ t), float(w @ p)
        expected = float(w @ (t * t)) + float(w @ (p * p)) - 2.0 * st * sp / W
        return 1.0 - float(w @ (d * d)) / expected
    t, p = yt - base, yp - base
    n, r = t.size, int(max(t.max(), p.max()))
    if n * r * r >= 2 ** 62:            # sums of squares could overflow int64: Python integers
        t, p = t.astype(object), p.astype(object)
    d = t - p
    st, sp = int(t.sum()), int(p.sum())
    stt, spp, observed = int(t @ t), int(p @ p), int(d @ d)
    expected_n = n * (stt + spp) - 2 * st * sp          # n times the expected disagreement, an exact integer
    return 1.0 - (n * observed) / expected_n


def _whole(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and bool(np.isfinite(v)) and float(v) == int(v)


def extended_qwk(y_true, y_score, a: float | None = None, b: float | None = None, sample_weight=None) -> float:
    r"""Extended QWK :math:`\tilde\kappa` of continuous scores.

    .. math:: \tilde\kappa = 1 - \frac{\sum_k (\hat y_k - y_k)^2}{\sum_k ((\hat y_k - a)^2 + b)}

    Parameters
    ----------
    y_true : array-like
        Labels (ordinal, numeric).
    y_score : array-like
        Continuous predictions on the label scale.
    a, b : float, optional
        Mean and population variance of the target label distribution.
        Default: those of ``y_true``, which makes :math:`\tilde\kappa` equal
        :func:`qwk` on integer predictions.
    sample_weight : array-like, optional
        Weight of each row (also in the default ``a``, ``b``).

    Returns
    -------
    float
    """
    yt = check_1d(y_true, "y_true")
    ys = check_1d(y_score, "y_score")
    check_same_length(yt, ys, "y_true", "y_score")
    a = check_real(a, "a", allow_none=True)
    b = check_real(b, "b (a variance)", 0.0, lo_open=True, allow_none=True)
    w = check_weight(sample_weight, yt.size)
    if a is None or b is None:
        if yt.min() == yt.max():
            raise _single_class_error("y_true", float(yt[0]))
        ma, vb = weighted_mean_var(yt, w)
        a = ma if a is None else a
        b = vb if b is None else b
    return 1.0 - extended_qwk_ratio(yt, ys, a, b, w)


def weighted_mean_var(y: np.ndarray, weight: np.ndarray | None = None) -> tuple[float, float]:
    """Mean and population variance of ``y``, weighted by ``weight`` if given."""
    if weight is None:
        return float(y.mean()), float(y.var())
    W = float(weight.sum())
    m = float(weight @ y) / W
    d = y - m
    return m, float(weight @ (d * d)) / W


def extended_qwk_ratio(y: np.ndarray, score: np.ndarray, a: float, b: float, weight: np.ndarray | None = None) -> float:
    r""":math:`\sum_k (\hat y_k - y_k)^2 / \sum_k ((\hat y_k - a)^2 + b)`, so that :math:`\tilde\kappa` is one minus it.

    The one definition of the formula: :func:`extended_qwk`, the extended-QWK
    objective's metric and loss, and the Nelder--Mead thresholds all call it.
    No input checks (it runs every boosting round): ``y`` and ``score`` are
    float arrays of one length.
    """
    r = score - y
    s = score - a
    if weight is not None:
        return float(weight @ (r * r)) / float(weight @ (s * s) + b * weight.sum())
    return float(r @ r) / float(s @ s + b * y.size)


def rmse(y_true, y_score, sample_weight=None) -> float:
    r"""Root mean squared error :math:`\sqrt{\sum_k w_k (\hat y_k - y_k)^2 / \sum_k w_k}` (unit weights by default)."""
    yt = check_1d(y_true, "y_true")
    ys = check_1d(y_score, "y_score")
    check_same_length(yt, ys, "y_true", "y_score")
    return rmse_fast(yt, ys, check_weight(sample_weight, yt.size))


def rmse_fast(y: np.ndarray, score: np.ndarray, weight: np.ndarray | None = None) -> float:
    """:func:`rmse` without input checks, for every boosting round."""
    r = score - y
    if weight is not None:
        return float(np.sqrt(weight @ (r * r) / weight.sum()))
    return float(np.sqrt(r @ r / r.size))
