r"""Stage 3a: the gain of a split and the weight of a leaf, XGBoost's second-order criterion.

Chen and Guestrin, "XGBoost: A Scalable Tree Boosting System", KDD 2016, eqs. 5-7. With
gradient and hessian sums :math:`G, H` of a node, :math:`\lambda` = ``reg_lambda`` and the
soft threshold :math:`T_\alpha(G) = \operatorname{sign}(G)\max(|G| - \alpha, 0)` for
:math:`\alpha` = ``reg_alpha``,

.. math:: \text{similarity}(G, H) = \frac{T_\alpha(G)^2}{H + \lambda}, \qquad
          w^* = -\frac{T_\alpha(G)}{H + \lambda}, \qquad
          \text{gain} = \text{similarity}(G_L, H_L) + \text{similarity}(G_R, H_R) - \text{similarity}(G, H).

A node forced to weight :math:`w` (a monotone bound) scores
:math:`-(2\,T_\alpha(G)\,w + (H + \lambda)\,w^2)`, which equals the similarity at :math:`w = w^*`.
The split searches (:mod:`qwkboost.native.splitting`, :mod:`qwkboost.native.categorical`) and the
grower share these functions and the records they fill: :class:`SplitInfo`, :class:`SplitParams`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["SplitInfo", "SplitParams", "similarity", "leaf_weight", "leaf_weight_scalar", "score_given_weight",
           "split_gain", "MIN_GAIN"]

# a split must improve the objective by more than this (XGBoost's kRtEps)
MIN_GAIN = 1e-6


@dataclass(slots=True)
class SplitInfo:
    """The best split of a node: what the grower keeps on the node and splits by.

    Attributes
    ----------
    gain : float
        XGBoost's gain of the split (:func:`split_gain`), before ``gamma``.
    feature : int
        The feature split on (a column of ``X``).
    bin : int
        Rows with ``bin(x) <= bin`` go left.
    default_left : bool
        Where rows with a missing value go.
    left, right : list of float
        The children's ``[G, H, C]``: gradient and hessian sums and row count.
    cat_left : ndarray of int or None
        For a split on a categorical feature: the value bins (categories) that go left,
        sorted; ``default_left`` then says whether the missing values (and the levels
        training never had) join them, and ``bin`` is the number of categories that go
        left, minus one.
    exact_counts : bool
        Whether ``C`` holds the children's exact row counts. The search counts rows
        only when it needs them (``min_samples_leaf`` > 1, or a constant hessian);
        otherwise ``C`` is 0 and the grower fills it in when it partitions the rows.
    child_l2 : float
        L2 penalty added to ``reg_lambda`` in the children's weights: ``cat_l2`` for a
        category-set split, as LightGBM computes its children's outputs; 0 otherwise.
    """

    gain: float
    feature: int
    bin: int
    default_left: bool
    left: list
    right: list
    exact_counts: bool = False
    cat_left: np.ndarray | None = None
    child_l2: float = 0.0


@dataclass(frozen=True)
class SplitParams:
    """Regularisation and child-size limits of the split search.

    The ``cat_*``, ``max_cat_*`` and ``min_data_per_group`` limits are LightGBM's, with its
    names, defaults and meanings (:mod:`qwkboost.native.categorical`).
    """

    reg_lambda: float = 1.0
    reg_alpha: float = 0.0
    gamma: float = 0.0
    min_child_weight: float = 1.0
    min_samples_leaf: int = 1
    cat_smooth: float = 10.0
    cat_l2: float = 10.0
    max_cat_threshold: int = 32
    max_cat_to_onehot: int = 4
    min_data_per_group: int = 100


def _soft(G, alpha):
    if alpha == 0.0:
        return G
    return np.sign(G) * np.maximum(np.abs(G) - alpha, 0.0)


def similarity(G, H, reg_lambda: float = 1.0, reg_alpha: float = 0.0, out=None):
    r"""Similarity score :math:`T_\alpha(G)^2 / (H + \lambda)` (Chen and Guestrin 2016, eq. 6).

    ``out`` receives the result (an array of the broadcast shape), as in NumPy's ufuncs.
    """
    t = _soft(np.asarray(G, dtype=np.float64), reg_alpha)
    out = np.multiply(t, t, out=out)
    out /= np.add(H, reg_lambda)
    return out


def leaf_weight(G, H, reg_lambda: float = 1.0, reg_alpha: float = 0.0, lower=-np.inf, upper=np.inf):
    r"""Optimal leaf weight :math:`w^* = -T_\alpha(G)/(H + \lambda)` (Chen and Guestrin 2016, eq. 5),
    clipped to ``[lower, upper]``; 0 where :math:`H + \lambda \le 0` (no curvature to step on)."""
    G = _soft(np.asarray(G, dtype=np.float64), reg_alpha)
    d = np.add(H, reg_lambda, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(d > 0, -G / d, 0.0)
    return np.clip(w, lower, upper)


def leaf_weight_scalar(G: float, H: float, reg_lambda: float, reg_alpha: float, lower: float,
                       upper: float) -> float:
    """:func:`leaf_weight` of one node in plain Python floats (the grower calls it per node, where a
    NumPy call would cost more than the arithmetic); the same IEEE operations, the same value."""
    if reg_alpha:
        G = math.copysign(max(abs(G) - reg_alpha, 0.0), G)
    w = -G / (H + reg_lambda) if H + reg_lambda > 0 else 0.0
    return min(max(w, lower), upper)


def score_given_weight(G, H, w, reg_lambda: float = 1.0, reg_alpha: float = 0.0):
    r""":math:`-(2\,T_\alpha(G)\,w + (H+\lambda)\,w^2)`, the similarity of a node forced to weight ``w``."""
    t = _soft(np.asarray(G, dtype=np.float64), reg_alpha)
    return -(2.0 * t * w + (H + reg_lambda) * w * w)


def split_gain(GL, HL, GR, HR, reg_lambda: float = 1.0, reg_alpha: float = 0.0, G=None, H=None):
    r"""Gain of splits: similarity(L) + similarity(R) - similarity(parent) (Chen and Guestrin 2016, eq. 7).

    The parent's sums ``G``, ``H`` default to ``GL + GR`` and ``HL + HR``. Every search
    path computes its gains with this function, or is tested to equal it bit for bit
    (the counts-based :func:`best_splits_exact_h`).
    """
    G = np.add(GL, GR) if G is None else G
    H = np.add(HL, HR) if H is None else H
    gain = similarity(GL, HL, reg_lambda, reg_alpha)
    gain += similarity(GR, HR, reg_lambda, reg_alpha)
    gain -= similarity(G, H, reg_lambda, reg_alpha)
    return gain
