r"""Row and column sampling per tree: uniform subsampling and GOSS (Ke et al., "LightGBM: A Highly Efficient Gradient Boosting Decision Tree", NeurIPS 2017).

**Uniform** (Friedman's stochastic gradient boosting): each tree sees a
random ``subsample`` fraction of the rows, drawn without replacement.

**GOSS**, gradient-based one-side sampling (Ke et al. 2017, Algorithm 2). Rows with
large :math:`|g_i|` carry most of the information gain, so keep the top
:math:`a \cdot n` rows by :math:`|g_i|` (``top_rate`` :math:`a`), draw
:math:`b \cdot n` of the rest at random (``other_rate`` :math:`b`) and multiply
the drawn rows' :math:`g_i, h_i` by :math:`(1-a)/b`, so that their sums estimate
those of all the small-gradient rows (Ke et al. 2017, the estimate of Theorem 3.2):

.. math:: \tilde G = \sum_{i \in A} g_i + \frac{1-a}{b} \sum_{i \in B} g_i .

As LightGBM does, GOSS is off for the first :math:`\lfloor 1/\eta \rfloor` rounds
(:math:`\eta` the learning rate), while the gradients are still all large.

**Columns**: each tree may split on a random ``colsample_bytree`` fraction of
the features (at least one).
"""

from __future__ import annotations

import numpy as np

__all__ = ["row_subsample", "goss", "column_mask", "goss_active"]


def row_subsample(n: int, rate: float, rng: np.random.Generator) -> np.ndarray | None:
    """Sorted row indices of a uniform sample of ``round(rate * n)`` rows (>= 1); ``None`` if ``rate >= 1``."""
    if rate >= 1.0:
        return None
    m = max(1, int(round(rate * n)))
    return np.sort(rng.choice(n, m, replace=False))


def goss(g: np.ndarray, top_rate: float, other_rate: float, rng: np.random.Generator):
    """GOSS rows and the weight multiplier of each.

    Returns
    -------
    rows : ndarray of intp
        Sorted kept rows: the top ``top_rate * n`` by ``|g|`` (of equal ones, the lower row indices) plus
        ``other_rate * n`` random others.
    weight : ndarray of float
        Same length as ``rows``: 1 for the top rows, ``(1 - top_rate) / other_rate`` for the others.
    """
    n = g.size
    n_top = int(top_rate * n)
    n_other = int(other_rate * n)
    if n_top + n_other >= n:
        return np.arange(n), np.ones(n)
    # The n_top largest |g| in O(n), ties at the n_top-th value broken by the lower row index. Which tied rows
    # np.argpartition returns depends on the CPU's NumPy sort kernels (AVX-512 or not); the threshold value does not.
    a = np.abs(g)
    is_top = np.zeros(n, dtype=bool)
    if n_top > 0:
        t = np.partition(a, n - n_top)[n - n_top]
        is_top = a > t
        tied = np.flatnonzero(a == t)
        is_top[tied[: n_top - np.count_nonzero(is_top)]] = True
    top = np.flatnonzero(is_top)
    rest = np.flatnonzero(~is_top)
    other = rest[rng.choice(rest.size, n_other, replace=False)] if n_other > 0 else rest[:0]
    rows = np.concatenate([top, other])
    w = np.concatenate([np.ones(n_top), np.full(n_other, (1.0 - top_rate) / other_rate)])
    idx = np.argsort(rows, kind="stable")
    return rows[idx], w[idx]


def goss_active(iteration: int, learning_rate: float) -> bool:
    """GOSS starts after ``floor(1 / learning_rate)`` rounds (0-based ``iteration``)."""
    return iteration >= int(1.0 / learning_rate)


def column_mask(n_features: int, rate: float, rng: np.random.Generator) -> np.ndarray | None:
    """Boolean mask of ``max(1, round(rate * n_features))`` random features; ``None`` if ``rate >= 1``."""
    if rate >= 1.0:
        return None
    m = max(1, int(round(rate * n_features)))
    mask = np.zeros(n_features, dtype=bool)
    mask[rng.choice(n_features, m, replace=False)] = True
    return mask
