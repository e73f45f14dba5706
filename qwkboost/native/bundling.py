r"""Exclusive feature bundling (EFB; Ke et al., "LightGBM", NeurIPS 2017) and the column layout the grower reads.

Sparse, one-hot-like features are rarely non-default on the same row. EFB
merges such *mutually exclusive* features into one ``uint8`` column, so a
histogram pass reads one column instead of many.

**Which features** (Ke et al. 2017, Algorithm 3, greedy bundling). Each feature's
*default* bin is its most frequent bin (usually the one holding 0). Features
are visited by decreasing number of non-default rows; each joins the first
bundle where the rows it shares with the bundle's features (its conflicts)
keep the bundle's total within ``max_conflict_rate * n_rows`` and whose codes
still fit in a byte; otherwise it starts a new bundle.

**How** (Algorithm 4, merge exclusive features). In a bundle, code 0 means
"every feature at its default bin"; feature :math:`f` owns the codes
:math:`o_f + 1 \dots o_f + k_f`, one per non-default bin, where :math:`o_f` is the
number of codes taken by the features before it.

**Back to features.** A bundle's histogram gives each feature's non-default
bins directly; its default bin is what the node's total leaves over:

.. math:: G_{f,\text{default}} = G_{\text{node}} - \sum_{b \ne \text{default}} G_{f,b}.

With ``max_conflict_rate = 0`` (the default) this is exact: bundled and
unbundled training grow the same trees. With conflicts, a row that is
non-default on two features of a bundle keeps only the last one's bin.

**Wide columns.** A categorical feature with ``uint16`` codes (see
:mod:`qwkboost.native.binning`) is never bundled: it is a column of its own,
after the ``uint8`` ones, and its histogram spans ``ceil(n_codes / 256)``
consecutive 256-bin slots (:attr:`Layout.vcols`), so that every histogram keeps
the shape ``(3, slots, 256)``.
"""

from __future__ import annotations

import numpy as np

from qwkboost.native.binning import N_CODES, CodeMatrix

__all__ = ["Layout", "find_bundles", "make_layout"]


class Layout:
    """The columns histograms are built on, and the way back to features.

    The identity layout (one column per feature) is the plain case; EFB
    layouts are made by :func:`make_layout`.

    Parameters
    ----------
    feature_codes : ndarray of uint8 or CodeMatrix, shape (n_features, n_samples)
    bundles : list of list of int, optional
        Features of each ``uint8`` column (default: one column per ``uint8`` feature).
    defaults : ndarray of int, optional
        Each feature's default bin (EFB).

    Attributes
    ----------
    codes : ndarray of uint8, shape (n_columns - len(wide_codes), n_samples)
        The ``uint8`` columns.
    wide_codes : list of ndarray of uint16
        The wide columns, one per wide feature, after the ``uint8`` ones.
    n_features : int
    column_of : ndarray of int, shape (n_features,)
        The column holding each feature.
    bundles : list of list of int
        Features of each ``uint8`` column.
    n_codes : ndarray of int, shape (n_features,)
        Codes per feature, the missing code (the last) included.
    vcols : ndarray of int, shape (n_columns,)
        256-bin slots each column's histogram spans (1 for a ``uint8`` column).
    """

    def __init__(self, feature_codes, bundles: list[list[int]] | None = None,
                 defaults: np.ndarray | None = None):
        F, n = feature_codes.shape
        self.n_features = F
        wide = sorted(feature_codes.wide) if isinstance(feature_codes, CodeMatrix) else []
        self.n_codes = feature_codes.n_codes.copy() if wide else np.full(F, N_CODES, dtype=np.int64)
        if bundles is None:
            bundles = [[f] for f in range(F) if f not in set(wide)]
        self.bundles = bundles
        self.identity = not wide and all(len(b) == 1 for b in bundles) and [b[0] for b in bundles] == list(range(F))
        self.column_of = np.empty(F, dtype=np.int64)
        # src_bin[f, c]: the column bin holding feature f's code c, or -1 (its default bin)
        self.src_bin = np.tile(np.arange(N_CODES, dtype=np.int64), (F, 1))
        self.default_bin = np.full(F, -1, dtype=np.int64)  # -1: not bundled, nothing to recover
        self.decode = {}
        self.wide_codes = [feature_codes.wide[f] for f in wide]
        self._wide_index = {f: i for i, f in enumerate(wide)}
        self.column_of[wide] = len(bundles) + np.arange(len(wide))
        self.vcols = np.concatenate([np.ones(len(bundles), dtype=np.int64),
                                     -(-self.n_codes[wide] // N_CODES)]).astype(np.int64)
        if self.identity:
            self.codes = np.ascontiguousarray(feature_codes)
            self.column_of[:] = np.arange(F)
            return
        self.codes = np.empty((len(bundles), n), dtype=np.uint8)
        for j, feats in enumerate(bundles):
            self.column_of[feats] = j
            if len(feats) == 1:
                self.codes[j] = feature_codes[feats[0]]
                continue
            col = np.zeros(n, dtype=np.uint8)
            offset = 0
            for f in feats:
                d = int(defaults[f])
                present = np.unique(feature_codes[f])
                nd = present[present != d]
                table = np.zeros(N_CODES, dtype=np.uint8)       # feature code -> column code
                table[nd] = offset + 1 + np.arange(nd.size)
                dec = np.full(N_CODES, d, dtype=np.uint8)        # column code -> feature code
                dec[offset + 1 + np.arange(nd.size)] = nd
                self.decode[f] = dec
                self.src_bin[f] = -1
                self.src_bin[f, nd] = offset + 1 + np.arange(nd.size)
                self.default_bin[f] = d
                rows = np.flatnonzero(feature_codes[f] != d)
                col[rows] = table[feature_codes[f][rows]]
                offset += nd.size
            self.codes[j] = col

    @property
    def n_columns(self) -> int:
        return self.codes.shape[0] + len(self.wide_codes)

    def is_wide(self, f: int) -> bool:
        """Whether feature ``f`` has a ``uint16`` column of its own."""
        return f in self._wide_index

    def columns_for(self, feature_mask: np.ndarray | None) -> np.ndarray:
        """Columns holding at least one allowed feature."""
        if feature_mask is None:
            return np.arange(self.n_columns)
        return np.unique(self.column_of[np.asarray(feature_mask, dtype=bool)])

    def feature_codes(self, f: int, rows: np.ndarray | None) -> np.ndarray:
        """Feature ``f``'s codes at ``rows`` (``None``: all rows): ``uint8``, or ``uint16`` if wide."""
        i = self._wide_index.get(f)
        col = self.codes[self.column_of[f]] if i is None else self.wide_codes[i]
        c = col if rows is None else col.take(rows)
        dec = self.decode.get(f)
        return c if dec is None else dec.take(c)


def find_bundles(codes: np.ndarray, max_conflict_rate: float = 0.0, sample: int = 20_000,
                 max_dense_rate: float = 0.5, seed: int = 0):
    """Greedy exclusive bundles (Ke et al. 2017, Algorithm 3).

    Parameters
    ----------
    codes : ndarray of uint8, shape (n_features, n_samples)
    max_conflict_rate : float, default 0
        Allowed fraction of rows, per bundle, where two of its features are non-default.
    sample : int, default 20_000
        Rows used to count conflicts.
    max_dense_rate : float, default 0.5
        Features non-default on more than this fraction of rows stay alone.

    Returns
    -------
    bundles : list of list of int
        Bundles in column order (features never bundled are singletons).
    defaults : ndarray of int, shape (n_features,)
        Each feature's default (most frequent) code.
    """
    F, n = codes.shape
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(n, sample, replace=False)) if n > sample else np.arange(n)
    sub = codes[:, idx]
    m = idx.size
    defaults = np.array([np.bincount(codes[f], minlength=N_CODES).argmax() for f in range(F)], dtype=np.int64)
    nondefault = sub != defaults[:, None].astype(np.uint8)       # (F, m)
    counts = nondefault.sum(axis=1)
    # codes a feature needs in a bundle: its non-default codes that occur
    n_codes = np.array([np.unique(codes[f]).size - 1 for f in range(F)], dtype=np.int64)
    budget = int(max_conflict_rate * m)
    order = np.argsort(-counts, kind="stable")
    bits = np.packbits(nondefault, axis=1)                      # (F, ceil(m/8))
    bundles: list[list[int]] = []
    bundle_bits: list[np.ndarray] = []
    conflicts: list[int] = []
    used: list[int] = []
    singles = []
    for f in order:
        if counts[f] > max_dense_rate * m or n_codes[f] == 0 or n_codes[f] >= N_CODES - 1:
            singles.append(int(f))
            continue
        placed = False
        for j in range(len(bundles)):
            if used[j] + n_codes[f] > N_CODES - 1:
                continue
            c = int(np.bitwise_count(bundle_bits[j] & bits[f]).sum())
            if conflicts[j] + c <= budget:
                bundles[j].append(int(f))
                bundle_bits[j] |= bits[f]
                conflicts[j] += c
                used[j] += int(n_codes[f])
                placed = True
                break
        if not placed:
            bundles.append([int(f)])
            bundle_bits.append(bits[f].copy())
            conflicts.append(0)
            used.append(int(n_codes[f]))
    cols = [sorted(b) for b in bundles] + [[f] for f in singles]
    cols.sort(key=lambda b: b[0])
    return cols, defaults


def make_layout(codes, enable_bundle: bool = True, max_conflict_rate: float = 0.0,
                seed: int = 0) -> Layout:
    """The identity layout, or an EFB layout if bundling merges any features.

    ``codes`` is a ``uint8`` array or a :class:`~qwkboost.native.binning.CodeMatrix`, whose
    wide features get columns of their own and are never bundled.
    """
    if isinstance(codes, CodeMatrix):
        narrow = [f for f in range(codes.shape[0]) if f not in codes.wide]
        sub = codes.narrow[narrow]
    else:
        narrow, sub = list(range(codes.shape[0])), codes
    if not enable_bundle or sub.shape[0] < 2:
        return Layout(codes)
    # quick exit for dense data: a feature is bundling material only if mostly at one bin
    F, n = sub.shape
    probe = sub[:, :: max(1, n // 2000)]
    top = np.array([np.bincount(probe[f], minlength=N_CODES).max() for f in range(F)]) / probe.shape[1]
    if (top >= 0.5).sum() < 2:
        return Layout(codes)
    bundles, defaults = find_bundles(sub, max_conflict_rate, seed=seed)
    if all(len(b) == 1 for b in bundles):
        return Layout(codes)
    full = np.zeros(codes.shape[0], dtype=np.int64)
    full[narrow] = defaults
    return Layout(codes, [[narrow[f] for f in b] for b in bundles], full)
