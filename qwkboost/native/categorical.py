r"""Stage 3b: the best split of every node on its categorical features, as LightGBM searches it.

A categorical feature's bins are its categories (levels; see :mod:`qwkboost.native.binning`),
and the slot of its missing values is one more: rows with a missing value, or with a level
training never had, go wherever that slot goes. A split sends a *set* of categories left.
The search follows LightGBM's (``FeatureHistogram::FindBestThresholdCategoricalInner``; the
ordering is Fisher's, "On grouping for maximum homogeneity", JASA 1958), with its parameters:

**One against the rest**, for a feature with at most ``max_cat_to_onehot`` categories: each
category alone goes left.

**Many against many** otherwise. The node's categories with at least ``cat_smooth`` rows are
ordered by

.. math:: \frac{G_c}{H_c + s}, \qquad s = \texttt{cat\_smooth},

and the left set grows along that order from either end, at most
``min(max_cat_threshold, (used + 1) // 2)`` categories; the categories with fewer rows stay
right. A candidate is scored only once the categories added since the last scored one hold
``min_data_per_group`` rows, and a direction stops where the right side would keep fewer
than ``min_data_per_group`` rows. The children's similarities get the extra L2 penalty
``cat_l2``:

.. math:: \text{gain} = \frac{T_\alpha(G_L)^2}{H_L + \lambda + \lambda_c}
          + \frac{T_\alpha(G_R)^2}{H_R + \lambda + \lambda_c} - \frac{T_\alpha(G)^2}{H + \lambda},
          \qquad \lambda_c = \texttt{cat\_l2}

(the parent's term keeps :math:`\lambda`, as LightGBM's gain shift does). These limits keep
an id-like column with thousands of levels and a few rows each from splitting on noise. Both
children must keep ``min_samples_leaf`` rows and ``min_child_weight`` hessian, as on numeric
features. The children's weights take :math:`\lambda + \lambda_c` too, as LightGBM's outputs of such a
split do (:attr:`SplitInfo.child_l2 <qwkboost.native.gain.SplitInfo>`); one against the rest keeps
:math:`\lambda`.
"""

from __future__ import annotations

import math

import numpy as np

from qwkboost.native.gain import MIN_GAIN, SplitInfo, SplitParams, leaf_weight, score_given_weight, similarity

__all__ = ["best_categorical_splits"]


def _one_vs_rest(seg: np.ndarray, totals: np.ndarray, p: SplitParams):
    """Candidates of one category each: left sums ``(k, 3, 1, m)`` and which may be scored ``(k, 1, m)``."""
    sums = seg[:, :, None, :]
    CL, HL = sums[:, 2], sums[:, 1]
    ok = (CL >= p.min_samples_leaf) & (HL >= p.min_child_weight)
    ok &= (totals[:, 2, None, None] - CL >= p.min_samples_leaf) & (totals[:, 1, None, None] - HL >= p.min_child_weight)
    return sums, ok


def _many_vs_many(seg: np.ndarray, totals: np.ndarray, p: SplitParams):
    """Candidates along the ``G/(H + cat_smooth)`` order from both ends (module docstring).

    Returns left sums ``(k, 3, 2, S)``, whether each candidate may be scored ``(k, 2, S)``,
    and the order ``(k, 2, S)``: candidate ``(d, i)`` sends ``order[:, d, :i + 1]`` left
    (``None`` when no node has a category with enough rows).
    """
    k, _, m = seg.shape
    G, H, C = seg[:, 0], seg[:, 1], seg[:, 2]
    used = (C >= p.cat_smooth) & (C > 0)
    n_used = used.sum(axis=1)
    n_cat = np.minimum(p.max_cat_threshold, (n_used + 1) // 2)
    S = int(n_cat.max(initial=0))
    if S == 0:
        return None
    with np.errstate(invalid="ignore", divide="ignore"):
        key = G / (H + p.cat_smooth)
    # the S first used categories of the ascending order (ties by bin), and of the descending one (ties by
    # bin, reversed: LightGBM reads its ascending order from the far end)
    order = np.stack([_first(np.where(used, key, np.inf), S, False), _first(np.where(used, -key, np.inf), S, True)],
                     axis=1)
    steps = np.arange(S)
    stepped = np.take_along_axis(seg[:, :, None, :], order[:, None], axis=3)       # (k, 3, 2, S)
    sums = np.cumsum(stepped, axis=3)
    CL, HL = sums[:, 2], sums[:, 1]
    CR = totals[:, 2, None, None] - CL
    HR = totals[:, 1, None, None] - HL
    # the right side only shrinks along a direction: LightGBM's "break" is this mask
    ok = (steps[None, None, :] < n_cat[:, None, None]) & (CR >= p.min_data_per_group)
    ok &= (CL >= p.min_samples_leaf) & (HL >= p.min_child_weight) & (CR >= p.min_samples_leaf)
    ok &= HR >= p.min_child_weight
    # score a candidate once the categories added since the last scored one hold min_data_per_group rows
    # (a running count that restarts at each scored candidate: plain Python floats, k x 2 x S <= 32 steps)
    counts, okl, mdpg = stepped[:, 2].tolist(), ok.tolist(), p.min_data_per_group
    scored = []
    for node_c, node_ok in zip(counts, okl):
        for c, o in zip(node_c, node_ok):
            group, row = 0.0, [False] * S
            for i in range(S):
                group += c[i]
                if o[i] and group >= mdpg:
                    row[i] = True
                    group = 0.0
            scored.append(row)
    return sums, np.array(scored, dtype=bool).reshape(k, 2, S), order


def _first(key: np.ndarray, S: int, reverse_ties: bool) -> np.ndarray:
    """Per row the indices of the ``S`` smallest keys in order, ties by index (descending if ``reverse_ties``)."""
    k, m = key.shape
    key = np.where(np.isnan(key), np.inf, key)
    if S < m:
        # the keys below each row's S-th smallest value, then its ties by index; np.argpartition's choice among
        # tied keys depends on the CPU's NumPy kernels
        t = np.partition(key, S - 1, axis=1)[:, S - 1 : S]
        below, tied = key < t, key == t
        rank = np.cumsum(tied[:, ::-1], axis=1)[:, ::-1] if reverse_ties else np.cumsum(tied, axis=1)
        take = below | (tied & (rank <= S - below.sum(axis=1, keepdims=True)))
        part = np.nonzero(take)[1].reshape(k, S)
    else:
        part = np.broadcast_to(np.arange(m), key.shape)
    k_part = np.take_along_axis(key, part, axis=1)
    tie = -part if reverse_ties else part
    return np.take_along_axis(part, np.lexsort((tie, k_part), axis=1), axis=1)


def best_categorical_splits(flat: np.ndarray, totals: np.ndarray, params: SplitParams, fb, feature_mask=None,
                            lower=None, upper=None) -> list:
    """Best split of each node on its categorical features (module docstring).

    Parameters
    ----------
    flat : ndarray, shape (k, 3, T)
        :math:`(G, H, C)` of ``k`` nodes on the flat bins of ``fb``; ``C`` must hold row counts.
    totals : ndarray, shape (k, 3)
        The nodes' own sums.
    params : SplitParams
    fb : FlatBins
        Its ``categorical`` features are searched; a feature's segment is its value bins, then
        the missing slot.
    feature_mask : ndarray of bool, optional
        Features allowed to split.
    lower, upper : ndarray, shape (k,), optional
        Bounds on the nodes' weights (monotone constraints on other features): children's
        weights are clipped into them and scored at the clipped values.

    Returns
    -------
    list of SplitInfo or None
        Per node its best categorical split (exact counts), or ``None``. Among equal gains
        the lower feature, then the first candidate, wins.
    """
    k = flat.shape[0]
    out: list = [None] * k
    gains = [-math.inf] * k
    lam, alpha = params.reg_lambda, params.reg_alpha
    Gt, Ht = totals[:, 0, None, None], totals[:, 1, None, None]
    lo = None if lower is None else np.asarray(lower, dtype=np.float64).reshape(k, 1, 1)
    hi = None if upper is None else np.asarray(upper, dtype=np.float64).reshape(k, 1, 1)
    for f in fb.categorical:
        if feature_mask is not None and not feature_mask[f]:
            continue
        a, nb = int(fb.start[f]), int(fb.n_bins[f])
        seg = flat[:, :, a:a + nb + 1]
        if fb.n_categories.get(f, nb) <= params.max_cat_to_onehot:
            (sums, scored), order, extra = _one_vs_rest(seg, totals, params), None, 0.0
        else:
            found = _many_vs_many(seg, totals, params)
            if found is None:
                continue
            (sums, scored, order), extra = found, params.cat_l2
        lam_c = lam + extra                                 # the children's L2, as LightGBM's cat_l2 is
        GL, HL = sums[:, 0], sums[:, 1]
        GR, HR = Gt - GL, Ht - HL
        with np.errstate(invalid="ignore", divide="ignore"):
            if lo is None and hi is None:
                gain = similarity(GL, HL, lam_c, alpha) + similarity(GR, HR, lam_c, alpha) \
                    - similarity(Gt, Ht, lam, alpha)
            else:
                lo3 = np.full((k, 1, 1), -np.inf) if lo is None else lo
                hi3 = np.full((k, 1, 1), np.inf) if hi is None else hi
                wL = leaf_weight(GL, HL, lam_c, alpha, lo3, hi3)
                wR = leaf_weight(GR, HR, lam_c, alpha, lo3, hi3)
                wP = leaf_weight(Gt, Ht, lam, alpha, lo3, hi3)
                gain = (score_given_weight(GL, HL, wL, lam_c, alpha) + score_given_weight(GR, HR, wR, lam_c, alpha)
                        - score_given_weight(Gt, Ht, wP, lam, alpha))
        S = gain.shape[2]
        gain = np.where(scored, gain, -np.inf).reshape(k, -1)
        best = gain.argmax(axis=1)
        for i in range(k):
            g = float(gain[i, best[i]])
            if not (MIN_GAIN < g < math.inf) or g <= gains[i]:
                continue
            d, s = divmod(int(best[i]), S)
            # one category, or the first s + 1 of the order in direction d
            chosen = np.array([s]) if order is None else np.sort(order[i, d, : s + 1])
            dl = bool(chosen[-1] == nb)                             # the missing slot went left
            L = [float(GL[i, d, s]), float(HL[i, d, s]), float(sums[i, 2, d, s])]
            R = [float(totals[i, 0]) - L[0], float(totals[i, 1]) - L[1], float(totals[i, 2]) - L[2]]
            gains[i] = g
            out[i] = SplitInfo(g, int(f), int(chosen.size - 1), dl, L, R, True,
                               chosen[:-1] if dl else chosen, extra)
    return out
