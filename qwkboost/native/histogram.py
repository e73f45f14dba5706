r"""Stage 2: gradient histograms per node, column and bin.

For a node with rows :math:`I`, column :math:`j` and bin :math:`b`

.. math:: G_{jb} = \sum_{i \in I,\; x_{ij} \in b} g_i, \qquad
          H_{jb} = \sum_{i \in I,\; x_{ij} \in b} h_i, \qquad
          C_{jb} = \#\{i \in I : x_{ij} \in b\}.

Each is one ``np.bincount`` over the column's contiguous ``uint8`` codes, with
the gradients as weights. A histogram is a float64 array of shape
``(3, n_columns, 256)`` holding :math:`(G, H, C)`.

Histogram subtraction: the rows of a parent are the disjoint union of its two
children's, so :math:`G^{\text{sibling}} = G^{\text{parent}} - G^{\text{child}}`
(and the same for :math:`H`, :math:`C`): only the smaller child is built.

When every :math:`h_i` equals one constant :math:`c` (squared error, extended
QWK), :math:`H = c\,C` and the weighted pass for :math:`H` is skipped; when
neither :math:`H` is constant nor counts are needed (``min_samples_leaf`` <= 1),
:math:`C` is skipped and left at zero.

**Pair histograms.** For a large node, two columns :math:`a, b` are read as
one 16-bit key :math:`256\,b_a + b_b`; one ``bincount`` gives their joint
256 x 256 histogram, whose row and column sums (two BLAS matrix-vector
products) are the two histograms. That halves the passes over the rows, and
pays off above :data:`PAIR_MIN_ROWS` rows (zeroing and summing the 65,536
bins costs a fixed ~30 us).

With ``n_jobs`` > 1, the bincounts of a large node (one task per column or
pair and row block) run on a small thread pool: NumPy releases the GIL
inside the counting loops of ``bincount`` and in ``take`` (not while it scans
and casts the input, so two threads give 1.2-1.35x, not 2x). Blocks depend
only on the node's size and are added in a fixed order, so the result does not
depend on the number of threads.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from qwkboost.native.binning import N_CODES

__all__ = ["HistogramBuilder", "subtract", "pool", "PARALLEL_MIN_ELEMENTS", "PAIR_MIN_ROWS", "BLOCK_ROWS"]

# below this many (rows x bincount passes) a node is built on the calling thread
PARALLEL_MIN_ELEMENTS = 1_000_000
# nodes with at least this many rows use joint histograms of column pairs
PAIR_MIN_ROWS = 30_000
# larger nodes are counted in row blocks of about this size (summed in a fixed order)
BLOCK_ROWS = 262_144

_POOLS: dict[int, ThreadPoolExecutor] = {}
_ONES = np.ones(N_CODES)


def pool(n_jobs: int) -> ThreadPoolExecutor:
    """The process-wide thread pool with ``n_jobs`` workers (created once)."""
    if n_jobs not in _POOLS:
        _POOLS[n_jobs] = ThreadPoolExecutor(max_workers=n_jobs, thread_name_prefix="qwkboost-native")
    return _POOLS[n_jobs]


def resolve_n_jobs(n_jobs: int | None) -> int:
    """``None``/``-1``/``0`` mean every CPU; otherwise at least 1."""
    if n_jobs is None or n_jobs <= 0:
        return max(1, os.cpu_count() or 1)
    return int(n_jobs)


def subtract(parent: np.ndarray, child: np.ndarray) -> np.ndarray:
    r"""Sibling histogram :math:`(G, H, C)^{\text{parent}} - (G, H, C)^{\text{child}}`."""
    return parent - child


class HistogramBuilder:
    """Build :math:`(G, H, C)` histograms on feature-major ``uint8`` codes.

    Parameters
    ----------
    codes : ndarray of uint8, shape (n_columns, n_samples)
        Binned columns (features, or EFB bundles), C-contiguous.
    n_jobs : int, default 1
        Threads for large nodes.
    """

    def __init__(self, codes: np.ndarray, n_jobs: int = 1):
        self.codes = np.ascontiguousarray(codes, dtype=np.uint8)
        self.n_columns, self.n_samples = self.codes.shape
        self.n_jobs = resolve_n_jobs(n_jobs)
        self._root_counts: np.ndarray | None = None
        # 16-bit keys of consecutive column pairs, for large nodes
        self.pairs = []
        if self.n_samples >= PAIR_MIN_ROWS:
            for a in range(0, self.n_columns - 1, 2):
                key = (self.codes[a].astype(np.uint16) << 8) | self.codes[a + 1]
                self.pairs.append((a, a + 1, key))

    # -- per round -------------------------------------------------------------
    def set_gradients(self, g: np.ndarray, h: np.ndarray, need_counts: bool = True) -> None:
        """Gradients of this round; detects a constant hessian."""
        self.g = np.ascontiguousarray(g, dtype=np.float64)
        self.h = np.ascontiguousarray(h, dtype=np.float64)
        h0 = float(self.h[0]) if self.h.size else 1.0
        self.const_hess = h0 if (self.h.size and self.h.min() == self.h.max()) else None
        # counts are needed for min_samples_leaf, or to recover H = c * C
        self.need_counts = need_counts or self.const_hess is not None

    # -- building --------------------------------------------------------------
    def _keys(self, m: int, cols: list) -> list:
        """``(kind, columns, codes)`` to count: column pairs for large nodes, else single columns."""
        keys = []
        left = set(cols)
        if m >= PAIR_MIN_ROWS:
            for a, b, key in self.pairs:
                if a in left and b in left:
                    keys.append(("pair", (a, b), key))
                    left -= {a, b}
        keys += [("col", (j,), self.codes[j]) for j in cols if j in left]
        return keys

    def _partial(self, key, rows, lo: int, hi: int, weights: list) -> list:
        """Bincounts of one key over rows[lo:hi], one per weight (take and cast once)."""
        if rows is None:
            k = key[lo:hi]
        else:
            k = key.take(rows[lo:hi])
        if len(weights) > 1:
            k = k.astype(np.intp)              # cast once, not inside every bincount
        nb = N_CODES * N_CODES if key.dtype == np.uint16 else N_CODES
        return [np.bincount(k, None if w is None else w[lo:hi], minlength=nb) for _, w in weights]

    def build(self, rows: np.ndarray | None, cols=None, parallel: bool = True) -> np.ndarray:
        """Histogram ``(3, len(cols), 256)`` of ``rows`` (``None``: every row).

        Nodes above :data:`BLOCK_ROWS` rows are counted in fixed row blocks whose
        partial histograms are added in block order, so that threads can share
        the work and the result is the same for any ``n_jobs``.

        Parameters
        ----------
        rows : ndarray of intp or None
            Row indices of the node, sorted ascending for cache locality.
        cols : sequence of int, optional
            Columns to build (default all); the output follows this order.
        parallel : bool, default True
            May use the thread pool (``False`` inside a pool task).
        """
        cols = list(range(self.n_columns)) if cols is None else [int(c) for c in cols]
        m = self.n_samples if rows is None else rows.size
        cached = rows is None and self._root_counts is not None
        weights = [(0, self.g if rows is None else self.g.take(rows))]
        if self.const_hess is None:
            weights.append((1, self.h if rows is None else self.h.take(rows)))
        if self.need_counts and not cached:
            weights.append((2, None))
        keys = self._keys(m, cols)
        out = np.zeros((3, len(cols), N_CODES))
        pos = {j: i for i, j in enumerate(cols)}
        nblk = max(1, -(-m // BLOCK_ROWS))
        threaded = parallel and self.n_jobs > 1 and m * len(keys) * len(weights) >= PARALLEL_MIN_ELEMENTS
        if nblk == 1 and not threaded:
            # the common small-node case, without the block bookkeeping
            if rows is None:
                keys = self._root_keys(keys)
            for kind, js, key in keys:
                k = key if rows is None else key.take(rows)
                if len(weights) > 1:
                    k = k.astype(np.intp)              # cast once, not inside every bincount
                for stat, w in weights:
                    if kind == "col":
                        out[stat, pos[js[0]]] = np.bincount(k, w, minlength=N_CODES)
                    else:
                        joint = np.bincount(k, w, minlength=N_CODES * N_CODES).reshape(N_CODES, N_CODES)
                        out[stat, pos[js[0]]] = joint @ _ONES
                        out[stat, pos[js[1]]] = _ONES @ joint
            return self._finish(out, cols, cached)
        bounds = [m * b // nblk for b in range(nblk + 1)]
        tasks = [(i, b) for i in range(len(keys)) for b in range(nblk)]
        run = lambda t: self._partial(keys[t[0]][2], rows, bounds[t[1]], bounds[t[1] + 1], weights)
        if threaded and len(tasks) > 1:
            parts = list(pool(self.n_jobs).map(run, tasks))
        else:
            parts = [run(t) for t in tasks]
        for i, (kind, js, _) in enumerate(keys):
            for s_i, (stat, _) in enumerate(weights):
                acc = parts[i * nblk][s_i]
                for b in range(1, nblk):
                    acc = acc + parts[i * nblk + b][s_i]
                if kind == "col":
                    out[stat, pos[js[0]]] = acc
                else:
                    # the two marginals of the joint histogram (BLAS matrix-vector products)
                    joint = acc.reshape(N_CODES, N_CODES)
                    out[stat, pos[js[0]]] = joint @ _ONES
                    out[stat, pos[js[1]]] = _ONES @ joint
        return self._finish(out, cols, cached)

    def _root_keys(self, keys: list) -> list:
        """The keys of an all-rows node cast to intp once (bincount would cast them every round)."""
        cache = self.__dict__.setdefault("_intp_keys", {})
        out = []
        for kind, js, key in keys:
            if js not in cache:
                cache[js] = key.astype(np.intp)
            out.append((kind, js, cache[js]))
        return out

    def build_many(self, rows_list: list, cols=None) -> np.ndarray:
        """Histograms ``(k, 3, len(cols), 256)`` of several small nodes in one pass per column.

        The nodes' rows are concatenated and counted on the key ``256 * slot + code``,
        one ``bincount`` per column and statistic for all ``k`` nodes (instead of one per
        node): each bin receives the same rows in the same order as in :meth:`build`,
        so the sums are identical. Meant for nodes below :data:`PAIR_MIN_ROWS` rows
        and :data:`BLOCK_ROWS` rows in total.
        """
        cols = list(range(self.n_columns)) if cols is None else [int(c) for c in cols]
        k = len(rows_list)
        allrows = np.concatenate(rows_list) if k > 1 else rows_list[0]
        slot = np.repeat(np.arange(0, k * N_CODES, N_CODES, dtype=np.intp), [r.size for r in rows_list])
        key = self.codes.take(allrows, axis=1) if len(cols) == self.n_columns else \
            self.codes[cols].take(allrows, axis=1)
        key = np.add(key, slot, dtype=np.intp)                  # (len(cols), M): 256 * slot + code
        weights = [(0, self.g.take(allrows))]
        if self.const_hess is None:
            weights.append((1, self.h.take(allrows)))
        if self.need_counts:
            weights.append((2, None))
        out = np.zeros((k, 3, len(cols), N_CODES))
        nb = k * N_CODES
        for i in range(len(cols)):
            for stat, w in weights:
                out[:, stat, i] = np.bincount(key[i], w, minlength=nb).reshape(k, N_CODES)
        if self.const_hess is not None:
            np.multiply(out[:, 2], self.const_hess, out=out[:, 1])
        return out

    def _finish(self, out, cols, cached):
        if cached and self.need_counts:
            out[2] = self._root_counts[cols]
        if self.const_hess is not None:
            np.multiply(out[2], self.const_hess, out=out[1])
        return out

    def cache_root_counts(self) -> None:
        """Remember the all-rows counts: they do not change between rounds without row sampling."""
        out = np.zeros((self.n_columns, N_CODES))
        for j in range(self.n_columns):
            out[j] = np.bincount(self.codes[j], minlength=N_CODES)
        self._root_counts = out
