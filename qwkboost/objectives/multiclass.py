r"""Softmax cross-entropy over the K ordered classes (``multiclass``).

Each row gets :math:`K` scores :math:`F_{k}`, class probabilities
:math:`p_k = e^{F_k} / \sum_j e^{F_j}`, and the loss is the (weighted) mean
log-loss :math:`-\frac1W\sum_i w_i \log p_{i, y_i}`. Per row and class,

.. math:: g_k = p_k - [y = k], \qquad h_k = 2\,p_k(1 - p_k),

XGBoost's ``multi:softprob`` gradient and hessian (twice the exact diagonal
:math:`p_k(1-p_k)`, a bound that keeps Newton steps short; ``hessian="diagonal"``
gives the diagonal itself). Boosting starts from the log class priors
:math:`F_{0,k} = \log \pi_k`. The decoded ordinal score is the expected class
:math:`\sum_k p_k c_k` on the labels' own scale, cut into classes by the
out-of-fold cut points like every other objective's score.
"""

from __future__ import annotations

import numpy as np

from qwkboost.objectives.base import Objective

__all__ = ["Multiclass", "MAX_CLASSES", "class_indices", "class_scale", "softmax"]

#: Class objectives refuse more classes than this (a score per class per row).
MAX_CLASSES = 100
#: Smallest prior, so that an empty class in the label range starts at a finite score.
MIN_PRIOR = 1e-12
HESSIANS = ("xgboost", "diagonal")


def _row_max(score: np.ndarray) -> np.ndarray:
    # column by column: NumPy reduces a short axis 1 row by row, several times slower for K of a few
    return np.maximum.reduce([score[:, k] for k in range(score.shape[1])])


def _row_sum(a: np.ndarray) -> np.ndarray:
    tot = a[:, 0].copy()
    for k in range(1, a.shape[1]):
        tot += a[:, k]
    return tot


def softmax(score: np.ndarray) -> np.ndarray:
    """Row-wise softmax of ``(n, K)`` scores."""
    e = np.exp(score - _row_max(score)[:, None])
    e /= _row_sum(e)[:, None]
    return e


def log_softmax_at(score: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``log softmax(score)[i, idx[i]]`` of every row."""
    m = _row_max(score)
    lse = np.log(_row_sum(np.exp(score - m[:, None])))
    return score[np.arange(idx.size), idx] - m - lse


def class_scale(y: np.ndarray, name: str) -> tuple[float, int]:
    """The lowest class and the number of classes of whole-numbered labels, checked for a class objective.

    Raises
    ------
    ValueError
        For fractional labels, a single class, or more than :data:`MAX_CLASSES` classes.
    """
    if np.any(y != np.round(y)):
        i = int(np.flatnonzero(y != np.round(y))[0])
        raise ValueError(f"objective {name!r} needs whole-numbered class labels; y[{i}] is {y[i]!r}")
    lo, hi = float(y.min()), float(y.max())
    if lo == hi:
        raise ValueError(f"y contains a single class ({lo:g}); a class objective needs at least 2")
    k = int(hi - lo) + 1
    if k > MAX_CLASSES:
        raise ValueError(f"y spans {k} classes ({lo:g}..{hi:g}); class objectives take at most {MAX_CLASSES} "
                         "(one score per class per row)")
    return lo, k


def class_indices(y: np.ndarray, lo: float, k: int, name: str = "y") -> np.ndarray:
    """Labels as class indices ``0..K-1`` (``lo`` the lowest class); labels outside the range are refused."""
    idx = np.asarray(y, dtype=np.float64) - lo
    if np.any(idx != np.round(idx)) or idx.min() < 0 or idx.max() > k - 1:
        raise ValueError(f"{name} holds labels outside the classes {lo:g}..{lo + k - 1:g} the objective was fitted on")
    return idx.astype(np.int64)


class Multiclass(Objective):
    """Softmax cross-entropy with K outputs (module docstring for the equations).

    Parameters
    ----------
    hessian : {"xgboost", "diagonal"}, default "xgboost"
        :math:`2p(1-p)` as XGBoost's ``multi:softprob``, or the diagonal :math:`p(1-p)`.
    """

    metric_name = "logloss"
    higher_is_better = False
    ordinal = True
    centre_labels = False
    state = ("init_score_", "lo_", "n_outputs_")

    def __init__(self, hessian: str = "xgboost"):
        if hessian not in HESSIANS:
            raise ValueError(f"hessian must be one of {HESSIANS}; got {hessian!r}")
        self.hessian = hessian

    @property
    def hessian_kind(self) -> str:
        return "exact" if self.hessian == "diagonal" else "approximate"

    def fit(self, y, sample_weight=None):
        y = np.asarray(y, dtype=np.float64)
        lo, k = class_scale(y, self.name)
        self.lo_ = lo
        self.n_outputs_ = k
        counts = np.bincount((y - lo).astype(np.int64), weights=sample_weight, minlength=k)
        self.init_score_ = np.log(np.maximum(counts / counts.sum(), MIN_PRIOR)).tolist()
        return self

    @property
    def classes(self) -> np.ndarray:
        return self.lo_ + np.arange(self.n_outputs_, dtype=np.float64)

    def init_score(self, y, sample_weight=None):
        return np.asarray(self.init_score_)

    def _onehot(self, y) -> np.ndarray:
        idx = class_indices(y, self.lo_, self.n_outputs_)
        out = np.zeros((idx.size, self.n_outputs_))
        out[np.arange(idx.size), idx] = 1.0
        return out

    def grad_hess(self, y, score, sample_weight=None):
        p = softmax(score)
        g = p - self._onehot(y)
        h = p * (1.0 - p) * (2.0 if self.hessian == "xgboost" else 1.0)
        np.maximum(h, 1e-16, out=h)
        if sample_weight is not None:
            g *= sample_weight[:, None]
            h *= sample_weight[:, None]
        return g, h

    def metric(self, y, score, sample_weight=None):
        """Mean log-loss of the true class (weighted)."""
        idx = class_indices(y, self.lo_, self.n_outputs_)
        return float(-np.average(log_softmax_at(score, idx), weights=sample_weight))

    def metric_sums(self, y, score, sample_weight=None):
        """:math:`(W, -\\sum_k w_k \\log p_{k, y_k})`: the log-loss is their ratio."""
        ll = log_softmax_at(score, class_indices(y, self.lo_, self.n_outputs_))
        if sample_weight is None:
            return np.array([float(ll.size), -float(ll.sum())])
        return np.array([float(sample_weight.sum()), -float(sample_weight @ ll)])

    def metric_from_sums(self, sums):
        return float(sums[1] / sums[0])

    def loss(self, y, score, sample_weight=None):
        return self.metric(y, score, sample_weight)

    def predict_proba(self, score):
        return softmax(np.asarray(score, dtype=np.float64))

    def decode(self, score):
        """The expected class :math:`\\sum_k p_k c_k`, on the labels' scale."""
        return self.predict_proba(score) @ self.classes
