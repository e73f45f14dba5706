r"""Stage 3: the best split of every node, vectorised over nodes, features and bins.

XGBoost's second-order criterion (Chen and Guestrin, "XGBoost: A Scalable Tree Boosting System", KDD 2016, eqs. 5-7). With gradient and hessian sums
:math:`G, H` of a node, :math:`\lambda` = ``reg_lambda`` and the soft threshold
:math:`T_\alpha(G) = \operatorname{sign}(G)\max(|G| - \alpha, 0)` for
:math:`\alpha` = ``reg_alpha``,

.. math:: \text{similarity}(G, H) = \frac{T_\alpha(G)^2}{H + \lambda}, \qquad
          w^* = -\frac{T_\alpha(G)}{H + \lambda},

.. math:: \text{gain} = \frac{G_L^2}{H_L + \lambda} + \frac{G_R^2}{H_R + \lambda}
          - \frac{G^2}{H + \lambda}.

A split is kept only if both children have hessian sum >= ``min_child_weight``
and at least ``min_samples_leaf`` rows. ``gamma`` is not applied here but by
the grower (:mod:`qwkboost.native.grower`): after growth, by pruning
(``prune="post"``, the default; the XGBoost paper's and its ``prune``
updater's way), or while growing (``prune="pre"``, as XGBoost's ``hist`` does).

Missing values (the last bin) are tried on both sides, and the better side
becomes the split's default direction (XGBoost's sparsity-aware split finding).

Categorical features are searched by :mod:`qwkboost.native.categorical`
(LightGBM's category-set splits) and compete with the numeric ones by gain.

Monotone constraints (as in XGBoost): a node carries bounds :math:`[l, u]` on its
weight. Child weights are clipped into them, and the gain is evaluated at
the clipped weights through

.. math:: \text{score}(G, H \mid w) = -\left(2\,T_\alpha(G)\,w + (H + \lambda)\,w^2\right),

which equals the similarity at :math:`w = w^*`. A split on a feature with
constraint :math:`+1` is rejected if :math:`w_L > w_R`, with :math:`-1` if
:math:`w_L < w_R`.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from qwkboost.native.binning import MAX_BINS, MISSING_BIN, N_CODES
from qwkboost.native.categorical import best_categorical_splits
from qwkboost.native.gain import (
    MIN_GAIN,
    SplitInfo,
    SplitParams,
    leaf_weight,
    leaf_weight_scalar,
    score_given_weight,
    similarity,
    split_gain,
)

__all__ = ["SplitInfo", "SplitParams", "FlatBins", "similarity", "leaf_weight", "leaf_weight_scalar",
           "score_given_weight", "split_gain",
           "gain_table", "find_best_splits", "best_splits_exact_h", "exact_h_applies", "best_splits_gh",
           "gh_applies", "missing_present",
           "MIN_GAIN"]

# nodes x flat bins searched at once (keeps the search's temporaries in L2 cache)
SEARCH_CHUNK_ELEMENTS = 12_000
SEARCH_CHUNK_ELEMENTS_EXACT_H = 24_000


class FlatBins:
    r"""Every feature's bins side by side, so that one vectorised search covers all features.

    Feature :math:`f` owns the segment of positions ``start[f] .. start[f] + n_bins[f]``:
    its value bins, then one slot for its missing values. Features with few
    bins (one-hot columns have 2) take few positions, and the search costs
    :math:`\sum_f (n_f + 1)` per node instead of :math:`256 F`.

    The bins are read from column histograms (features, or EFB bundles); a
    bundled feature's default bin is what the node total leaves over (see
    :mod:`qwkboost.native.bundling`).

    Parameters
    ----------
    n_bins : ndarray of int, shape (n_features,)
        Value bins per feature.
    layout : Layout, optional
        Column layout; default one column per feature.
    categorical : sequence of int, optional
        Categorical features: their bins are categories, searched in gradient order.
    n_categories : mapping of int to int, optional
        Categories seen in training per categorical feature (default: its value bins). A
        feature whose codes skip numbers has more value bins than categories, and
        ``max_cat_to_onehot`` counts categories.
    """

    def __init__(self, n_bins, layout=None, categorical=(), n_categories=None):
        n_bins = np.asarray(n_bins, dtype=np.int64)
        F = n_bins.size
        self.categorical = sorted(int(j) for j in categorical)
        self.n_categories = {j: int((n_categories or {}).get(j, n_bins[j])) for j in self.categorical}
        seg = n_bins + 1
        self.n_bins = n_bins
        self.uniform = bool(F > 0 and np.all(n_bins == n_bins[0]))
        self.start = np.concatenate([[0], np.cumsum(seg)[:-1]]).astype(np.int64)
        self.size = int(seg.sum())
        self.feat_of = np.repeat(np.arange(F), seg)
        self.bin_of = np.arange(self.size) - self.start[self.feat_of]
        self.miss_pos = self.start + n_bins                      # (F,) missing slot of each feature
        self.is_miss = np.zeros(self.size, dtype=bool)
        self.is_miss[self.miss_pos] = True
        # a feature's missing code: 255, or the code after its value bins for a wide one
        wide = (n_bins > MAX_BINS)[self.feat_of]
        code = np.where(self.is_miss & ~wide, MISSING_BIN, self.bin_of)
        if layout is None:
            self.col_of = self.feat_of
            self.src = code
            self.recover = np.zeros(self.size, dtype=bool)
            self.vcols = np.where(n_bins > MAX_BINS, -(-(n_bins + 1) // N_CODES), 1)
        else:
            self.col_of = layout.column_of[self.feat_of]
            self.vcols = layout.vcols
            # -1: not in the bundle's column; a wide feature's codes are its column's
            self.src = np.where(wide, code, layout.src_bin[self.feat_of, np.minimum(code, MISSING_BIN)])
            # a bundled feature's default bin is recovered from the node total; its other
            # absent codes (values never seen in training) stay empty
            self.recover = (self.src < 0) & (code == layout.default_bin[self.feat_of])
        self.any_recover = bool(self.recover.any())
        # thresholds: "bin <= t" with values on both sides; or t = last value bin, missing right
        last = self.bin_of == (n_bins[self.feat_of] - 1)
        inner = (self.bin_of < n_bins[self.feat_of] - 1)
        self.valid = np.stack([inner | (last & ~self.is_miss), inner], axis=0)   # (2, T)
        self._pos_cache: dict = {}
        self._numeric = None

    def numeric_part(self):
        """``(FlatBins of the numeric features, their positions here, their feature indices)``, kept."""
        if self._numeric is None:
            feats = np.array([f for f in range(self.n_bins.size) if f not in set(self.categorical)], dtype=np.int64)
            pos = np.concatenate([np.arange(self.start[f], self.start[f] + self.n_bins[f] + 1) for f in feats]) \
                if feats.size else np.zeros(0, dtype=np.int64)
            self._numeric = (FlatBins(self.n_bins[feats]), pos, feats)
        return self._numeric

    def gather(self, hist: np.ndarray, cols, totals: np.ndarray):
        """Flat histograms ``(k, 3, T)`` from column histograms ``(k, 3, slots, 256)`` of ``cols``.

        Returns the flat array and a mask ``(T,)`` of positions whose column was built.
        """
        key = tuple(int(c) for c in cols)
        cached = self._pos_cache.get(key)
        if cached is None:
            # each built column's first 256-bin slot (a wide column spans several)
            ca = np.asarray(cols, dtype=np.int64)
            pos = np.full(int(self.col_of.max()) + 1 if self.col_of.size else 1, -1, dtype=np.int64)
            pos[ca] = np.concatenate([[0], np.cumsum(self.vcols[ca])[:-1]]) if ca.size else ca
            fpos = pos[self.col_of]
            built = fpos >= 0
            take = np.where(built & (self.src >= 0), fpos * N_CODES + np.maximum(self.src, 0), -1)
            if len(self._pos_cache) > 8:
                self._pos_cache.clear()
            ident = bool(take.size == len(cols) * N_CODES and np.array_equal(take, np.arange(take.size)))
            cached = self._pos_cache[key] = (take, built, bool(np.all(take >= 0)), ident)
        take, built, dense, ident = cached
        k = hist.shape[0]
        flat_in = hist.reshape(k, 3, -1)
        if ident and not self.any_recover:
            # 255 value bins + the missing slot per column: the flat layout is the histogram itself
            return flat_in, built
        if dense:
            out = flat_in.take(take, axis=2)
        else:
            out = flat_in.take(np.maximum(take, 0), axis=2)
            out[:, :, take < 0] = 0.0
        if self.any_recover:
            seg = np.add.reduceat(out, self.start, axis=2)                  # (k, 3, F)
            rest = totals[:, :, None] - seg
            r = self.recover & built
            out[:, :, r] = rest[:, :, self.feat_of[r]]
        return out, built


def gain_table(flat: np.ndarray, totals: np.ndarray, params: SplitParams, fb: FlatBins,
               lower=None, upper=None, monotone=None, missing: bool = True, hess_scale=None):
    r"""Gain of every candidate split of every node.

    Parameters
    ----------
    flat : ndarray, shape (k, 3, T)
        :math:`(G, H, C)` of ``k`` nodes on the flat bins of ``fb`` (:meth:`FlatBins.gather`).
    totals : ndarray, shape (k, 3)
        The nodes' own :math:`(G, H, C)` sums.
    params : SplitParams
    fb : FlatBins
    lower, upper : ndarray, shape (k,), optional
        Bounds on the nodes' weights (monotone constraints).
    monotone : ndarray of int, shape (n_features,), optional
        Constraint per feature in {-1, 0, +1}.
    missing : bool, default True
        Also try sending the missing values left; ``False`` when no node has any.
    hess_scale : float, optional
        Set when every :math:`H` bin equals ``hess_scale`` times the count bin exactly
        (a constant hessian that is a power of two, counts below :math:`2^{53}`); the
        hessian cumsums are then taken on integer counts (same values, faster).

    Returns
    -------
    gain : ndarray, shape (k, d, T)
        ``-inf`` where a split is not allowed. Position ``p`` is the split
        "bin <= ``fb.bin_of[p]``" of feature ``fb.feat_of[p]``; axis 1 is the
        default direction of missing values: 0 right, 1 left (``d = 2`` only if ``missing``).
    GL, HL : ndarray, shape (k, d, T)
        Left child sums (the right child is the node's total minus these).
    CL : ndarray or None
        Left child counts, computed only when ``min_samples_leaf > 1``.
    """
    k = flat.shape[0]
    T = fb.size
    want_c = params.min_samples_leaf > 1
    constrained = monotone is not None and np.any(monotone != 0)
    # cumulative sums within each feature's segment: one cumsum over all positions, minus
    # the sum of the segments before (missing slots sit at segment ends and are never thresholds)
    ns = 3 if want_c else 2
    v = flat[:, :ns]
    if hess_scale is not None and not want_c and fb.uniform:
        # H = c * C exactly (c a power of two): the H cumsum is c times an integer cumsum
        # of the counts, bit for bit, and integer cumsums are several times faster
        nb1 = int(fb.n_bins[0]) + 1
        cum = np.empty((k, 2, T))
        c4 = cum.reshape(k, 2, -1, nb1)
        np.cumsum(flat[:, 0].reshape(k, -1, nb1), axis=2, out=c4[:, 0])
        np.multiply(np.cumsum(flat[:, 2].reshape(k, -1, nb1).astype(np.int64), axis=2), hess_scale,
                    out=c4[:, 1])
        v4 = v.reshape(k, ns, -1, nb1)
        miss = lambda: np.broadcast_to(v4[..., -1:], v4.shape).reshape(k, ns, T)
    elif fb.uniform:
        # every feature has the same number of bins: a plain cumsum per feature
        nb1 = int(fb.n_bins[0]) + 1
        v4 = v.reshape(k, ns, -1, nb1)
        cum = np.cumsum(v4, axis=3).reshape(k, ns, T)
        miss = lambda: np.broadcast_to(v4[..., -1:], v4.shape).reshape(k, ns, T)
    else:
        cs = np.cumsum(v, axis=2)
        base = cs[:, :, fb.start] - v[:, :, fb.start]               # (k, ns, F)
        cum = cs
        cum -= np.repeat(base, fb.n_bins + 1, axis=2)
        miss = lambda: np.repeat(v[:, :, fb.miss_pos], fb.n_bins + 1, axis=2)
    if missing:
        both = np.empty((k, ns, 2, T))
        both[:, :, 0] = cum
        np.add(cum, miss(), out=both[:, :, 1])
    else:
        both = cum[:, :, None]
    GL, HL = both[:, 0], both[:, 1]
    CL = both[:, 2] if want_c else None
    Gt = totals[:, 0].reshape(k, 1, 1)
    Ht = totals[:, 1].reshape(k, 1, 1)
    GR = Gt - GL
    HR = Ht - HL
    lam, alpha = params.reg_lambda, params.reg_alpha
    m = max(params.min_child_weight, 1e-300)
    ok = HL >= m
    ok &= HR >= m
    if want_c:
        CR = totals[:, 2].reshape(k, 1, 1) - CL
        ok &= CL >= params.min_samples_leaf
        ok &= CR >= params.min_samples_leaf
    ok &= fb.valid[None] if missing else fb.valid[None, :1]
    with np.errstate(invalid="ignore", divide="ignore"):
        if not constrained and lower is None:
            gain = split_gain(GL, HL, GR, HR, lam, alpha, G=Gt, H=Ht)
        else:
            lo = np.full(k, -np.inf) if lower is None else np.asarray(lower, dtype=np.float64)
            hi = np.full(k, np.inf) if upper is None else np.asarray(upper, dtype=np.float64)
            lo3, hi3 = lo.reshape(k, 1, 1), hi.reshape(k, 1, 1)
            wL = leaf_weight(GL, HL, lam, alpha, lo3, hi3)
            wR = leaf_weight(GR, HR, lam, alpha, lo3, hi3)
            wP = leaf_weight(Gt, Ht, lam, alpha, lo3, hi3)
            gain = (score_given_weight(GL, HL, wL, lam, alpha) + score_given_weight(GR, HR, wR, lam, alpha)
                    - score_given_weight(Gt, Ht, wP, lam, alpha))
            if constrained:
                mono = np.asarray(monotone)[fb.feat_of][None, None, :]
                ok &= ~(((mono > 0) & (wL > wR)) | ((mono < 0) & (wL < wR)))
    np.putmask(gain, ~ok, -np.inf)
    return gain, GL, HL, CL


def exact_h_applies(params: SplitParams, fb: FlatBins, hess_scale, missing: bool, monotone=None,
                    lower=None) -> bool:
    """Whether :func:`best_splits_exact_h` may serve a search (see its preconditions)."""
    return (hess_scale is not None and params.min_samples_leaf <= 1 and fb.uniform and not missing
            and (monotone is None or not np.any(monotone != 0)) and lower is None and params.reg_alpha == 0.0)


def best_splits_exact_h(flat, totals, params: SplitParams, fb: FlatBins, c: float, feature_mask=None):
    r"""Best split per node when :math:`H = cC` exactly (``c`` a power of two), as plain Python values.

    With :math:`\lambda' = \lambda / c` the gain is

    .. math:: \text{gain} = \frac{1}{c}\left(\frac{G_L^2}{C_L + \lambda'}
              + \frac{G_R^2}{C_R + \lambda'}\right) - \frac{G^2}{H + \lambda},

    and the hessian limits :math:`H_L, H_R \ge` ``min_child_weight`` become
    :math:`c_{\min} \le C_L \le C - c_{\min}` (with no missing values this also
    rules out the missing slots, where :math:`C_R = 0`). Scaling by a power of two
    is exact in floating point, so every gain equals :func:`gain_table`'s bit for
    bit, in fewer passes: :math:`G` and :math:`C` are summed up as one complex
    number per bin, the argmax runs before the scaling and the parent's term, and
    the limits are checked only at each node's argmax (a node whose argmax breaks
    them is searched again with them applied: the first maximal valid position
    either way). Per-node values are then worked out in Python floats (the same
    IEEE operations as NumPy's), which for a few nodes costs less than NumPy calls.
    One difference is possible: when two candidates' sums differ by less than the
    rounding of the parent's term (a relative 1e-16, only for gains larger than
    that term), the general search sees equal gains and keeps the first, this one
    keeps the larger.

    Preconditions (see :func:`find_best_splits`): uniform bins, no missing values
    tried left, no bounds, ``reg_alpha`` 0, ``min_samples_leaf`` <= 1.

    Returns
    -------
    list of SplitInfo or None, or None
        Per node its best split (children's counts exact; missing values, none
        here, follow the heavier child), or ``None`` without a valid split.
        ``None`` instead of the list if a node's :math:`H/c` is not an integer.
    """
    k = flat.shape[0]
    T = fb.size
    nb1 = int(fb.n_bins[0]) + 1
    Gt, Ht = totals[:, 0], totals[:, 1]
    Ctf = Ht / c
    tot = totals.tolist()
    cts = Ctf.tolist()
    if not all(x.is_integer() for x in cts):
        return None
    lam = params.reg_lambda
    lam_c = lam / c
    cmin = float(min(math.ceil(max(params.min_child_weight, 1e-300) / c), 2 ** 62))
    # G and C as one complex number per bin: one cumsum gives both prefix sums (two
    # independent additions per element, each exact as in a real cumsum; counts < 2**53)
    Z = np.empty((k, T), dtype=np.complex128)
    Z.real = flat[:, 0]
    Z.imag = flat[:, 2]
    np.cumsum(Z.reshape(k, -1, nb1), axis=2, out=Z.reshape(k, -1, nb1))
    GL, CLf = Z.real, Z.imag
    with np.errstate(invalid="ignore", divide="ignore") if lam_c <= 0 else contextlib.nullcontext():
        # (with lambda > 0 no denominator is 0)
        S = np.multiply(GL, GL)
        D = np.add(CLf, lam_c)
        S /= D
        GR = np.subtract(Gt[:, None], GL)
        GR *= GR
        if float(lam_c).is_integer() and max(cts) + 2 * lam_c < 2 ** 52:
            # C_R + lambda' = (C + 2 lambda') - (C_L + lambda'): integers below 2**52, exact either way
            np.subtract((Ctf + 2 * lam_c)[:, None], D, out=D)
        else:
            np.subtract(Ctf[:, None], CLf, out=D)
            D += lam_c
        GR /= D
        S += GR
    if feature_mask is not None:
        S[:, ~np.asarray(feature_mask, dtype=bool)[fb.feat_of]] = -np.inf
    best = S.argmax(axis=1)
    rows = np.arange(k)
    bl = best.tolist()
    cl = CLf[rows, best].tolist()
    for i in range(k):
        ct = cts[i]
        if ct - 2 * cmin < 0:
            bl[i] = 0                              # no split: as the general search reports it
        elif lam_c <= 0 or not cmin <= cl[i] <= ct - cmin:
            # the argmax breaks the child limits (or 0/0 may sit anywhere): apply them
            row = S[i]
            np.putmask(row, (CLf[i] < cmin) | (CLf[i] > ct - cmin), -np.inf)
            bl[i] = int(row.argmax())
    feat, bins, sv, gl, cl = _at(bl, fb, S, GL, CLf)
    out = []
    for i in range(k):
        G, H, _ = tot[i]
        ct = cts[i]
        gain = sv[i] / c - (G * G) / (H + lam)
        if ct - 2 * cmin < 0 or not MIN_GAIN < gain < math.inf:
            out.append(None)
            continue
        lc = cl[i]
        L, R = [gl[i], lc * c, lc], [G - gl[i], H - lc * c, ct - lc]
        out.append(SplitInfo(gain, feat[i], bins[i], L[1] >= R[1], L, R, True))
    return out


def missing_present(flat: np.ndarray, fb: FlatBins) -> np.ndarray:
    """``(k, n_features)``: whether each node has rows with a missing value of each feature.

    Any of :math:`G, H, C` in the missing slot tells: a row may have zero hessian,
    and :math:`C` is 0 when counts were not needed.
    """
    m = flat[:, :, fb.miss_pos]
    return (m[:, 1] > 0) | (m[:, 0] != 0) | (m[:, 2] > 0)


def _at(best: list, fb: FlatBins, *arrays) -> tuple:
    """Each node's chosen position ``best[i]`` (row ``i``): its feature, its bin and the values of ``arrays``
    (each ``(k, T)``) there, as lists of Python values."""
    rows = np.arange(len(best))
    return (fb.feat_of[best].tolist(), fb.bin_of[best].tolist()) + tuple(a[rows, best].tolist() for a in arrays)


def gh_applies(params: SplitParams, fb: FlatBins, missing: bool, monotone=None, lower=None) -> bool:
    """Whether :func:`best_splits_gh` may serve a search (see its preconditions)."""
    return (params.reg_lambda > 0 and params.min_samples_leaf <= 1 and fb.uniform and not missing
            and (monotone is None or not np.any(monotone != 0)) and lower is None and params.reg_alpha == 0.0)


def best_splits_gh(flat, totals, params: SplitParams, fb: FlatBins, feature_mask=None):
    r"""Best split per node for any hessian, in fewer passes than :func:`gain_table`, as plain Python values.

    The gain :func:`split_gain` (Chen and Guestrin 2016, eq. 7) is

    .. math:: \text{gain} = \underbrace{\frac{G_L^2}{H_L + \lambda} + \frac{G_R^2}{H_R + \lambda}}_{S}
              - \frac{G^2}{H + \lambda}:

    the argmax of :math:`S` runs before the parent's term is subtracted, :math:`G` and :math:`H` are summed
    up as one complex number per bin (one cumsum gives both prefix sums, each addition as in a real
    cumsum), and the hessian limits :math:`H_L, H_R \ge` ``min_child_weight`` are checked only at each
    node's argmax (a node whose argmax breaks them is searched again with them applied: the first maximal
    valid position either way). Every quantity is computed by the same IEEE operations as in
    :func:`gain_table`, so the gains equal its gains bit for bit. As in :func:`best_splits_exact_h`, one
    difference is possible: two candidates whose :math:`S` differ by less than the rounding of the
    parent's term are equal for the general search (which keeps the first) and not here.

    Preconditions (see :func:`find_best_splits`): uniform bins, no missing values tried left, no bounds,
    ``reg_alpha`` 0, ``reg_lambda`` > 0 (no 0/0), ``min_samples_leaf`` <= 1.

    Returns
    -------
    list of SplitInfo or None
        Per node its best split (counts not computed; missing values, none here, follow the heavier
        child), or ``None`` without a valid split.
    """
    k = flat.shape[0]
    T = fb.size
    nb1 = int(fb.n_bins[0]) + 1
    tot = totals.tolist()
    lam = params.reg_lambda
    m = max(params.min_child_weight, 1e-300)
    Z = np.empty((k, T), dtype=np.complex128)
    Z.real = flat[:, 0]
    Z.imag = flat[:, 1]
    np.cumsum(Z.reshape(k, -1, nb1), axis=2, out=Z.reshape(k, -1, nb1))
    GL, HL = Z.real, Z.imag
    Ht = totals[:, 1:2]
    with np.errstate(invalid="ignore", divide="ignore"):        # (only a negative hessian gives 0 here)
        S = np.multiply(GL, GL)
        D = np.add(HL, lam)
        S /= D
        GR = np.subtract(totals[:, 0:1], GL)
        GR *= GR
        np.subtract(Ht, HL, out=D)                                  # H_R, then H_R + lambda
        D += lam
        GR /= D
        S += GR
    bad = ~fb.valid[0]                              # missing slots: never thresholds
    if feature_mask is not None:
        bad = bad | ~np.asarray(feature_mask, dtype=bool)[fb.feat_of]
    S[:, bad] = -np.inf
    bl = S.argmax(axis=1).tolist()
    for i in range(k):
        hl = float(HL[i, bl[i]])
        if not (hl >= m and tot[i][1] - hl >= m):
            # the argmax breaks the hessian limits: apply them
            row = S[i]
            np.putmask(row, (HL[i] < m) | (Ht[i] - HL[i] < m), -np.inf)
            bl[i] = int(row.argmax())
    feat, bins, sv, gl, hl = _at(bl, fb, S, GL, HL)
    out = []
    for i in range(k):
        G, H, C = tot[i]
        gain = sv[i] - (G * G) / (H + lam)
        if not MIN_GAIN < gain < math.inf:
            out.append(None)
            continue
        L, R = [gl[i], hl[i], 0.0], [G - gl[i], H - hl[i], C - 0.0]
        out.append(SplitInfo(gain, feat[i], bins[i], L[1] >= R[1], L, R, False))
    return out


def find_best_splits(flat: np.ndarray, totals: np.ndarray, params: SplitParams, fb: FlatBins,
                     feature_mask=None, lower=None, upper=None, monotone=None, missing: bool = True,
                     hess_scale=None) -> list:
    """Best split of each node: the one entry point of the split search.

    Numeric features are searched here, categorical ones by
    :func:`qwkboost.native.categorical.best_categorical_splits` (which needs row counts in ``flat``);
    a categorical split wins only with a larger gain.

    Parameters
    ----------
    flat, totals, params, fb, lower, upper, monotone, hess_scale
        As in :func:`gain_table`.
    feature_mask : ndarray of bool, shape (n_features,), optional
        Features allowed to split (column subsampling).
    missing : bool, default True
        Whether the data may have missing values. The search looks at which nodes
        actually have missing rows of which feature, tries them on both sides only
        if some node has, and sends the missing values of a feature a node never
        saw missing to its heavier child (by hessian).

    Returns
    -------
    list of SplitInfo or None
        One per node; ``None`` where no split has a finite gain above :data:`MIN_GAIN`.
        Among equal gains the first position wins (missing values right before left).
        With a constant power-of-two hessian (``hess_scale``) and no missing values,
        the counts-based :func:`best_splits_exact_h` serves the search; with any other hessian and no
        missing values, :func:`best_splits_gh`.
    """
    if not fb.categorical:
        return _best_numeric_splits(flat, totals, params, fb, feature_mask, lower, upper, monotone, missing,
                                    hess_scale)
    # numeric features on their own flat bins, then the categorical ones; the larger gain wins
    fbn, pos, feats = fb.numeric_part()
    out = [None] * flat.shape[0]
    if feats.size:
        sub = lambda a: None if a is None else np.asarray(a)[feats]
        out = _best_numeric_splits(flat.take(pos, axis=2), totals, params, fbn, sub(feature_mask), lower, upper,
                                   sub(monotone), missing, hess_scale)
        for sp in out:
            if sp is not None:
                sp.feature = int(feats[sp.feature])
    for n, c in enumerate(best_categorical_splits(flat, totals, params, fb, feature_mask, lower, upper)):
        if c is not None and (out[n] is None or c.gain > out[n].gain):
            out[n] = c
    return out


def _best_numeric_splits(flat, totals, params: SplitParams, fb: FlatBins, feature_mask, lower, upper, monotone,
                         missing: bool, hess_scale) -> list:
    """:func:`find_best_splits` on features that are all numeric."""
    present = missing_present(flat, fb) if missing else None
    missing = bool(present.any()) if missing else False
    exact_h = exact_h_applies(params, fb, hess_scale, missing, monotone, lower)
    gh = not exact_h and gh_applies(params, fb, missing, monotone, lower)
    chunk = max(1, (SEARCH_CHUNK_ELEMENTS_EXACT_H if exact_h or gh else SEARCH_CHUNK_ELEMENTS) // fb.size)
    out = []
    # a few nodes at a time: the temporaries stay in cache (several times faster at k = 16)
    for i in range(0, flat.shape[0], chunk):
        j = i + chunk
        res = None
        if exact_h:
            res = best_splits_exact_h(flat[i:j], totals[i:j], params, fb, hess_scale, feature_mask)
        elif gh:
            res = best_splits_gh(flat[i:j], totals[i:j], params, fb, feature_mask)
        if res is None:
            res = _best_splits_general(flat[i:j], totals[i:j], params, fb, feature_mask,
                                       None if lower is None else lower[i:j],
                                       None if upper is None else upper[i:j], monotone, missing, hess_scale,
                                       None if present is None else present[i:j])
        out.extend(res)
    return out


def _best_splits_general(flat, totals, params: SplitParams, fb: FlatBins, feature_mask, lower, upper, monotone,
                         missing: bool, hess_scale, present) -> list:
    """:func:`find_best_splits` on one chunk of nodes, by the argmax of :func:`gain_table`."""
    gain, GL, HL, CL = gain_table(flat, totals, params, fb, lower, upper, monotone, missing, hess_scale)
    k, d, T = gain.shape
    if feature_mask is not None:
        gain[:, :, ~np.asarray(feature_mask, dtype=bool)[fb.feat_of]] = -np.inf
    flatg = gain.reshape(k, -1)
    best = flatg.argmax(axis=1)
    rows = np.arange(k)
    L = np.zeros((k, 3))
    L[:, 0] = GL.reshape(k, -1)[rows, best]
    L[:, 1] = HL.reshape(k, -1)[rows, best]
    counted = CL is not None
    if counted:
        L[:, 2] = CL.reshape(k, -1)[rows, best]
    R = totals - L
    direction, p = np.divmod(best, T)
    # plain Python values per node
    gains = flatg[rows, best].tolist()
    feats, bins = fb.feat_of[p].tolist(), fb.bin_of[p].tolist()
    dls = direction.astype(bool).tolist()
    Ls, Rs = L.tolist(), R.tolist()
    mp = present.tolist() if present is not None else None
    out = []
    for i in range(k):
        gain = gains[i]
        if not MIN_GAIN < gain < math.inf:
            out.append(None)
            continue
        f = feats[i]
        dl = dls[i]
        if mp is None or not mp[i][f]:
            # no missing rows here: unseen missing values follow the heavier child
            dl = Ls[i][1] >= Rs[i][1]
        out.append(SplitInfo(gain, f, bins[i], dl, Ls[i], Rs[i], counted))
    return out
