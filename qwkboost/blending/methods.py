r"""Blending the out-of-fold predictions of several runs into one submission, with an honest estimate.

Every member (:mod:`qwkboost.blending.members`) gives one score per training row (out of
fold) and per test row, on the labels' scale. A blend turns them into classes:

``mean``
    :math:`s = \frac1M \sum_m s_m`, then cut points.
``rank_mean``
    :math:`s = \frac1M \sum_m R_m(s_m)`, with :math:`R_m` the empirical
    distribution function of member :math:`m`'s out-of-fold scores (on 1,001
    quantiles), so members on different scales count alike; then cut points.
``weights`` (the default)
    :math:`s = \sum_m w_m s_m` with :math:`w_m \ge 0`, :math:`\sum_m w_m = 1`,
    chosen to maximise the out-of-fold QWK after the cut points
    (:func:`fit_weights`); then cut points.
``greedy``
    Ensemble selection (Caruana, Niculescu-Mizil, Crew and Ksikes, "Ensemble selection from libraries of
    models", ICML 2004): greedy forward selection with replacement, :math:`s = \frac1T \sum_t s_{m_t}`, each
    step adding the member that most raises QWK after cut points, the best point of the path kept
    (:func:`fit_greedy`). Its weights are counts over steps; the cost grows with the members linearly, not with
    their pairs, so it suits many members (``experiment=auto``).
``vote``
    Each member's own cut points turn its scores into classes
    :math:`c_m`; the blend is their median.

The cut points come from :func:`qwkboost.evaluation.thresholds.fit_thresholds` (exact by
default) on the blended out-of-fold scores. Fitting weights and cut points on
the same rows they are scored on flatters the score (the AES 2.0 Kaggle
competition's leaderboard shake-up in 2024 showed by how much), so every blend
is also *nested*: for each CV fold the weights and cut points are fitted on the
other folds' rows and applied to it. ``nested_oof_qwk`` is the QWK of those
held-out classes; ``oof_qwk - nested_oof_qwk`` is what the fit flatters.
"""

from __future__ import annotations

from itertools import permutations

import numpy as np
from scipy.optimize import nnls

from qwkboost.evaluation.metrics import qwk
from qwkboost.evaluation.thresholds import apply_thresholds, fit_thresholds
from qwkboost.tracking.blend import BLEND_METHODS, WEIGHTED_SUMS, BlendFit, apply_rank, vote

__all__ = ["BLEND_METHODS", "WEIGHTED_SUMS", "BlendFit", "fit_blend", "fit_nested", "fit_weights", "fit_greedy",
           "rank_transform", "apply_rank", "vote"]

#: Steps of the greedy forward selection (AutoGluon's default ensemble also takes 25).
GREEDY_STEPS = 25
#: Above this many rows, the greedy search scores a blend by cut points fitted on its scores binned into
#: this many equal-width bins (the final cut points are fitted on every row).
GREEDY_BINS = 1024
#: Quantiles of a member's out-of-fold scores kept for its rank transform.
N_QUANTILES = 1001
#: Steps of the weight search, in units of weight moved from one member to another.
_STEPS = (0.2, 0.1, 0.05, 0.02, 0.01)


# --------------------------------------------------------------------------- the methods

def rank_transform(reference: np.ndarray, n_quantiles: int = N_QUANTILES) -> np.ndarray:
    """The quantiles of ``reference`` that :func:`apply_rank` interpolates (the empirical CDF)."""
    return np.quantile(np.asarray(reference, dtype=float), np.linspace(0.0, 1.0, n_quantiles))


def _qwk_after_cuts(s: np.ndarray, y_idx: np.ndarray, k: int, w, method: str) -> float:
    cuts = fit_thresholds(method, s, y_idx, n_classes=k, sample_weight=w)
    return qwk(y_idx, apply_thresholds(s, cuts), n_classes=k, sample_weight=w)


def fit_weights(S: np.ndarray, y_idx: np.ndarray, n_classes: int, sample_weight=None,
                thresholds: str = "exact") -> np.ndarray:
    r"""Non-negative weights summing to one that maximise QWK after cut points, :math:`\max_w \kappa(c(Sw))`.

    QWK after fitted cut points is a step function of the weights, so the
    search has two stages. The start is the best of the equal weights, each
    single member, and the least-squares weights :math:`\min_{w \ge 0}
    \lVert (S - \bar S) w - (y - \bar y) \rVert^2` normalised to sum one
    (scipy's NNLS), which maximise the correlation with the labels. Then a
    pattern search moves weight between pairs of members in steps of 0.2, 0.1,
    0.05, 0.02 and 0.01, keeping a move only when QWK rises. It is
    deterministic: the same predictions give the same weights.

    Parameters
    ----------
    S : ndarray of shape (n, M)
        The members' out-of-fold scores.
    y_idx : ndarray of shape (n,)
        Class indices 0..K-1.

    Returns
    -------
    ndarray of shape (M,)
    """

    n, m = S.shape
    w_rows = None if sample_weight is None else np.asarray(sample_weight, dtype=float)

    def score(w):
        return _qwk_after_cuts(S @ w, y_idx, n_classes, w_rows, thresholds)

    starts = [np.full(m, 1.0 / m), *np.eye(m)]
    Sc = S - S.mean(axis=0)
    yc = y_idx - y_idx.mean()
    if w_rows is not None:
        r = np.sqrt(w_rows)
        Sc, yc = Sc * r[:, None], yc * r
    ls, _ = nnls(Sc, yc)
    if ls.sum() > 0:
        starts.append(ls / ls.sum())
    scored = [(score(w), -i, w) for i, w in enumerate(starts)]
    best_q, _, best = max(scored, key=lambda t: (t[0], t[1]))
    best = best.copy()
    for step in _STEPS:
        improved = True
        while improved:
            improved = False
            for i, j in permutations(range(m), 2):
                move = min(step, best[i])
                if move <= 1e-12:
                    continue
                w = best.copy()
                w[i] -= move
                w[j] += move
                q = score(w)
                if q > best_q + 1e-12:
                    best_q, best, improved = q, w, True
    best[best < 1e-12] = 0.0
    return best / best.sum()


def _binned_qwk(s: np.ndarray, y_idx: np.ndarray, k: int, w, method: str, bins: int) -> float:
    r"""QWK after cut points of the scores binned into ``bins`` equal-width bins: each bin's rows of one class
    become one point at the bin's mean score, weighing their number (or weight), and QWK is that of the points.
    The exact fit then costs :math:`O(\text{bins}\,K)` instead of :math:`O(nK)` per blend scored; rows of one
    bin share a class."""
    n = s.size
    if n <= 2 * bins or method != "exact":
        return _qwk_after_cuts(s, y_idx, k, w, method)
    lo, hi = float(s.min()), float(s.max())
    b = np.minimum(((s - lo) * (bins / max(hi - lo, 1e-300))).astype(np.int64), bins - 1)
    rw = np.ones(n) if w is None else w
    mass = np.bincount(b * k + y_idx, weights=rw, minlength=bins * k)
    keep = np.flatnonzero(mass > 0)
    centre = np.bincount(b, weights=rw * s, minlength=bins) / np.maximum(np.bincount(b, weights=rw, minlength=bins),
                                                                         1e-300)
    return _qwk_after_cuts(centre[keep // k], keep % k, k, mass[keep], method)


def fit_greedy(S: np.ndarray, y_idx: np.ndarray, n_classes: int, sample_weight=None, thresholds: str = "exact",
               steps: int = GREEDY_STEPS, bins: int = GREEDY_BINS) -> np.ndarray:
    r"""Weights of ensemble selection: greedy forward selection of members with replacement.

    Starting from the member with the best QWK after cut points, each of ``steps`` steps adds one member
    (possibly again) to the running mean :math:`s_t = \frac1t \sum_{u \le t} S_{m_u}`, the one whose addition
    gives the highest QWK after cut points; the weights are the members' counts at the best step of the path,
    divided by that step (Caruana et al. 2004, with their "best point" rule). Ties go to the earlier member, so
    the same predictions give the same weights. On more than ``2 * bins`` rows a blend is scored with cut
    points fitted on its binned scores (:func:`_binned_qwk`), which ranks blends as the exact fit does up to
    bins' width.

    Parameters
    ----------
    S : ndarray of shape (n, M)
        The members' out-of-fold scores.
    y_idx : ndarray of shape (n,)
        Class indices 0..K-1.

    Returns
    -------
    ndarray of shape (M,)
        Non-negative weights that sum to one.
    """
    n, m = S.shape
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=float)

    def score(s):
        return _binned_qwk(s, y_idx, n_classes, w, thresholds, bins)

    singles = [score(S[:, j]) for j in range(m)]
    first = int(np.argmax(singles))
    counts = np.zeros(m)
    counts[first] = 1
    total = S[:, first].copy()
    best_q, best_counts = singles[first], counts.copy()
    for t in range(2, steps + 1):
        scored = [score((total + S[:, j]) / t) for j in range(m)]
        j = int(np.argmax(scored))
        counts[j] += 1
        total += S[:, j]
        if scored[j] > best_q + 1e-12:
            best_q, best_counts = scored[j], counts.copy()
    return best_counts / best_counts.sum()


def fit_blend(method: str, S: np.ndarray, y_idx: np.ndarray, k: int, w, thresholds: str) -> "BlendFit":
    """Fit ``method`` on the members' scores ``S`` (index scale) and the class indices ``y_idx``."""
    m = S.shape[1]
    equal = np.full(m, 1.0 / m)
    if method == "vote":
        cuts = np.array([fit_thresholds(thresholds, S[:, j], y_idx, n_classes=k, sample_weight=w) for j in range(m)])
        return BlendFit(method, equal, None, cuts, None)
    quantiles = None
    if method == "rank_mean":
        quantiles = np.array([rank_transform(S[:, j]) for j in range(m)])
    if method == "weights":
        weights = fit_weights(S, y_idx, k, w, thresholds)
    elif method == "greedy":
        weights = fit_greedy(S, y_idx, k, w, thresholds)
    else:
        weights = equal
    fit = BlendFit(method, weights, None, None, quantiles)
    fit.cuts = fit_thresholds(thresholds, fit.score(S), y_idx, n_classes=k, sample_weight=w)
    return fit


def fit_nested(method: str, S: np.ndarray, y_idx: np.ndarray, n_classes: int, sample_weight, fold: np.ndarray,
               thresholds: str = "exact") -> tuple["BlendFit", np.ndarray]:
    """``method`` fitted on every row, and the nested classes: for each fold of ``fold`` (one fold per
    row), the classes of its rows under a blend fitted on the other folds' rows (index scale)."""
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=float)
    fit = fit_blend(method, S, y_idx, n_classes, w, thresholds)
    nested = np.empty(len(y_idx), dtype=np.int64)
    for f in np.unique(fold):
        held = fold == f
        inner = fit_blend(method, S[~held], y_idx[~held], n_classes, None if w is None else w[~held], thresholds)
        nested[held] = inner.classes(S[held])
    return fit, nested
