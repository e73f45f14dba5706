r"""Stage 2: gradient histograms per node, column and bin.

For a node with rows :math:`I`, column :math:`j` and bin :math:`b`

.. math:: G_{jb} = \sum_{i \in I,\; x_{ij} \in b} g_i, \qquad
          H_{jb} = \sum_{i \in I,\; x_{ij} \in b} h_i, \qquad
          C_{jb} = \#\{i \in I : x_{ij} \in b\}.

A histogram is a float64 array of shape ``(3, n_columns, 256)`` holding
:math:`(G, H, C)`. Each statistic of a column is one scatter-add over the
column's contiguous ``uint8`` codes (cast to ``intp``), with the gradients as
weights: ``np.add.at(out, codes, g)``. On NumPy 2 that is measured 1.4-1.6x
faster than ``np.bincount``, which first scans its input for the extremes;
the sums are the same, added in row order.

**Two statistics per pass.** The two statistics a node needs, :math:`(G, C)`
for a constant hessian or :math:`(G, H)` otherwise, are scattered together as
one complex number per row, :math:`g_i + \mathrm{i}\,h_i` (or
:math:`g_i + \mathrm{i}`): real and imaginary parts are summed independently
and exactly as two real passes would, at about 0.75 of their cost.

Histogram subtraction: the rows of a parent are the disjoint union of its two
children's, so :math:`G^{\text{sibling}} = G^{\text{parent}} - G^{\text{child}}`
(and the same for :math:`H`, :math:`C`): only the smaller child is built.

When every :math:`h_i` equals one constant :math:`c` (squared error, extended
QWK), :math:`H = c\,C` and no pass is spent on :math:`H`; when neither
:math:`H` is constant nor counts are needed (``min_samples_leaf`` <= 1),
:math:`C` is skipped and left at zero. Without row sampling the all-rows
counts are cached, so the root is one real pass per column.

**Pair histograms.** For a large node, two columns :math:`a, b` are read as
one 16-bit key :math:`256\,b_a + b_b`; one pass gives their joint 256 x 256
histogram, whose row and column sums (BLAS products) are the two
histograms. That halves the passes over the rows, and pays off above
:data:`PAIR_MIN_ROWS` rows (zeroing and summing the 65,536 bins has a fixed
cost).

**Large nodes** (:data:`LARGE_NODE_ROWS` rows or more) are counted in fixed
row blocks, one real pass per statistic and block, and the blocks' partial
histograms are added in block order. ``np.add.at`` holds the GIL, but
``np.bincount`` releases it while counting (not while it scans its input), so
with ``n_jobs`` > 1 the blocks run as ``bincount`` on a thread pool, and with
one thread as ``np.add.at``: both add the same numbers in the same order, so
the histograms, and the trees, never depend on ``n_jobs``.

**Wide columns** (categorical features with ``uint16`` codes, see
:mod:`qwkboost.native.bundling`) come after the ``uint8`` ones. A wide column
with :math:`W` codes fills :math:`\lceil W/256 \rceil` consecutive 256-bin slots of
the histogram, so every histogram keeps the shape ``(3, slots, 256)`` and is
subtracted, stacked and gathered as before; it is counted with ``np.bincount``
on its codes, one real pass per statistic (the same sums in the same row order
as a scatter-add), on any path.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from qwkboost.native.binning import N_CODES

__all__ = ["HistogramBuilder", "accumulate", "subtract", "pool", "PAIR_MIN_ROWS", "MANY_MAX_ROWS",
           "LARGE_NODE_ROWS", "BLOCK_ROWS"]

# nodes with at least this many rows use joint histograms of column pairs
PAIR_MIN_ROWS = 30_000
# build_many takes at most this many rows in all (its keys are one intp array per column)
MANY_MAX_ROWS = 262_144
# nodes with at least this many rows are counted in fixed row blocks of BLOCK_ROWS, one real
# pass per statistic, on the thread pool when n_jobs > 1 (np.bincount releases the GIL while
# it counts; np.add.at does not)
LARGE_NODE_ROWS = 200_000
BLOCK_ROWS = 131_072
# temporaries of at least this size are kept for reuse (see _Scratch)
SCRATCH_MIN_BYTES = 2 * 1024 * 1024

_POOLS: dict[int, ThreadPoolExecutor] = {}
_ONES = np.ones(N_CODES)
_ONES_C = np.ones(N_CODES, dtype=np.complex128)


def pool(n_jobs: int) -> ThreadPoolExecutor:
    """The process-wide thread pool with ``n_jobs`` workers (created once)."""
    if n_jobs not in _POOLS:
        _POOLS[n_jobs] = ThreadPoolExecutor(max_workers=n_jobs, thread_name_prefix="qwkboost-native")
    return _POOLS[n_jobs]


def resolve_n_jobs(n_jobs: int | None) -> int:
    """``None``/``-1``/``0`` mean every CPU this process may run on (its affinity: ``taskset -c 0`` gives one);
    otherwise at least 1."""
    if n_jobs is None or n_jobs <= 0:
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:          # no affinity to read (macOS, Windows)
            return max(1, os.cpu_count() or 1)
    return int(n_jobs)


def accumulate(out: np.ndarray, key: np.ndarray, weights) -> np.ndarray:
    r"""``out[key[i]] += weights[i]`` for every ``i`` in row order (``weights=None``: ``+= 1``).

    The sums equal ``np.bincount(key, weights)`` bit for bit (same order of additions).
    ``out`` may be complex, with complex weights: two statistics in one pass.
    """
    np.add.at(out, key, 1.0 if weights is None else weights)
    return out


def subtract(parent: np.ndarray, child: np.ndarray) -> np.ndarray:
    r"""Sibling histogram :math:`(G, H, C)^{\text{parent}} - (G, H, C)^{\text{child}}`."""
    return parent - child


class _Scratch:
    """Buffers for large temporaries, reused across calls, one per name, grown as needed.

    Fresh multi-megabyte arrays are costly: the allocator maps new pages and
    each first touch faults (measured 14 % of a round at 1M rows). Below
    :data:`SCRATCH_MIN_BYTES` a fresh array is cheaper (measured 1.5-2 % of a
    round at 80k rows), so those are not kept. Used from the calling thread only.
    """

    def __init__(self):
        self._bufs: dict = {}

    def get(self, name: str, shape, dtype) -> np.ndarray:
        """An uninitialised array; ``name`` always comes with the same ``dtype``."""
        size = shape if type(shape) is int else shape[0] * shape[1]
        if size * np.dtype(dtype).itemsize < SCRATCH_MIN_BYTES:
            return np.empty(shape, dtype=dtype)
        buf = self._bufs.get(name)
        if buf is None or buf.size < size:
            buf = self._bufs[name] = np.empty(size, dtype=dtype)
        return buf[:size] if type(shape) is int else buf[:size].reshape(shape)

    def zeros(self, name: str, shape, dtype=np.float64) -> np.ndarray:
        """A zeroed array (see :meth:`get`)."""
        size = shape if type(shape) is int else shape[0] * shape[1]
        if size * np.dtype(dtype).itemsize < SCRATCH_MIN_BYTES:
            return np.zeros(shape, dtype=dtype)
        out = self.get(name, shape, dtype)
        out.fill(0)
        return out


class HistogramBuilder:
    """Build :math:`(G, H, C)` histograms on feature-major ``uint8`` codes.

    Parameters
    ----------
    codes : ndarray of uint8, shape (n_narrow, n_samples)
        Binned columns (features, or EFB bundles), C-contiguous.
    n_jobs : int, default 1
        Threads: large nodes are counted in row blocks on a pool, and the grower
        runs the partitions and builds of levels with large nodes on it (see
        :mod:`qwkboost.native.grower`). The histograms are the same for any value.
    wide : sequence of (ndarray of uint16, int), optional
        Wide columns after the ``uint8`` ones: each one's codes and its number of codes.

    Attributes
    ----------
    vcols : ndarray of int, shape (n_columns,)
        The 256-bin slots of each column's histogram (1 for a ``uint8`` column).
    """

    def __init__(self, codes: np.ndarray, n_jobs: int = 1, wide=()):
        self.codes = np.ascontiguousarray(codes, dtype=np.uint8)
        self.n_narrow, self.n_samples = self.codes.shape
        wide = list(wide)
        self.wide = [np.ascontiguousarray(c, dtype=np.uint16) for c, _ in wide]
        self.n_columns = self.n_narrow + len(self.wide)
        self.vcols = np.concatenate([np.ones(self.n_narrow, dtype=np.int64),
                                     np.array([-(-int(w) // N_CODES) for _, w in wide], dtype=np.int64)])
        self.vstart = np.concatenate([[0], np.cumsum(self.vcols)[:-1]]).astype(np.int64)
        self.n_jobs = resolve_n_jobs(n_jobs)
        self._root_counts: np.ndarray | None = None
        self._root_keys: dict = {}
        self._scratch = _Scratch()
        # every row's codes side by side, padded to whole 8-byte words: one gather
        # (``take`` of uint64) fetches a node's codes of all columns at once
        width = -(-self.n_narrow // 8) * 8
        packed = np.zeros((self.n_samples, width), dtype=np.uint8)
        packed[:, :self.n_narrow] = self.codes.T
        self.words = packed.view(np.uint64)                     # (n_samples, width / 8)
        # 16-bit keys of consecutive column pairs (a, a + 1): code_a + 256 code_{a+1},
        # which is also the uint16 at byte a of a row's packed codes
        self.pairs = []
        if self.n_samples >= PAIR_MIN_ROWS:
            self.pairs = [(a, a + 1) for a in range(0, self.n_narrow - 1, 2)]

    # -- per round -------------------------------------------------------------
    def set_gradients(self, g: np.ndarray, h: np.ndarray, need_counts: bool = True) -> None:
        """Gradients of this round; detects a constant hessian."""
        self.g = np.ascontiguousarray(g, dtype=np.float64)
        self.h = np.ascontiguousarray(h, dtype=np.float64)
        lo, hi = (float(self.h.min()), float(self.h.max())) if self.h.size else (1.0, 1.0)
        self.const_hess = lo if lo == hi else None
        # min and max propagate NaN, and a sum is finite only if every term is
        self.finite = bool(np.isfinite(lo) and np.isfinite(hi) and np.isfinite(self.g.sum()))
        # counts are needed for min_samples_leaf, or to recover H = c * C
        self.need_counts = need_counts or self.const_hess is not None
        self._packed = None

    def exact_hess_scale(self) -> float | None:
        """``c`` when every H bin is exactly ``c`` times its count bin, else ``None``.

        That holds when every row's hessian is the same power of two ``c > 0`` (scaling
        by a power of two is exact) and there are fewer than :math:`2^{53}` rows (counts
        are exact integers): the precondition of the counts-based split search
        (:func:`qwkboost.native.splitting.best_splits_exact_h`).
        """
        c = self.const_hess
        if c is not None and c > 0 and math.frexp(c)[0] == 0.5 and self.n_samples < 2 ** 53:
            return c
        return None

    def sums(self, rows: np.ndarray | None) -> tuple[float, float]:
        """Gradient and hessian sums :math:`(G, H)` of ``rows`` (``None``: every row)."""
        if rows is None:
            return float(self.g.sum()), float(self.h.sum())
        return float(self.g.take(rows).sum()), float(self.h.take(rows).sum())

    def _stat_groups(self, cached: bool) -> list:
        """Statistics counted together: ``[(0,)]``, ``[(0, 1)]``, ``[(0, 2)]`` or ``[(0, 1), (2,)]``."""
        stats = [0] + ([1] if self.const_hess is None else []) + ([2] if self.need_counts and not cached else [])
        return [tuple(stats)] if len(stats) < 3 else [(0, 1), (2,)]

    def _stats(self, cached: bool) -> list:
        """The statistics to count, as passes: ``[(stats, weights over every row), ...]``.

        A pass with two statistics has complex weights (real: the first, imaginary:
        the second); ``None`` weights count rows.
        """
        groups = self._stat_groups(cached)
        if len(groups[0]) == 1:
            return [((0,), self.g)]
        stats = [j for st in groups for j in st]
        if self._packed is None:
            packed = self._scratch.get("packed", self.n_samples, np.complex128)
            parts = packed.view(np.float64).reshape(-1, 2)
            parts[:, 0] = self.g
            parts[:, 1] = self.h if stats[1] == 1 else 1.0
            self._packed = packed
        passes = [((0, stats[1]), self._packed)]
        if len(stats) == 3:
            passes.append(((2,), None))
        return passes

    # -- building --------------------------------------------------------------
    def _keys(self, rows, cols: list, scratch: "_Scratch | None" = None):
        """``(kind, columns, intp codes)`` to count: column pairs for large nodes, else single columns.

        A generator: with ``scratch``, each key is written into the same buffer, valid
        until the next one is drawn.
        """
        m = self.n_samples if rows is None else rows.size
        kinds = []
        left = set(cols)
        if m >= PAIR_MIN_ROWS:
            for a, b in self.pairs:
                if a in left and b in left:
                    kinds.append(("pair", (a, b)))
                    left -= {a, b}
        kinds += [("col", (j,)) for j in cols if j in left]
        if rows is None:
            # every row: the codes as intp, cast once and kept for the next rounds
            cache = self._root_keys
            for kind, js in kinds:
                if js not in cache:
                    c = self.codes[js[0]]
                    cache[js] = (c | (self.codes[js[1]].astype(np.uint16) << 8) if kind == "pair" else c
                                 ).astype(np.intp)
                yield kind, js, cache[js]
            return
        S = scratch
        few = 2 * len(cols) < self.n_narrow
        if not few:
            # all columns in one gather of the rows' packed codes
            words = self.words.take(rows, axis=0, mode="clip",
                                    out=None if S is None else S.get("words", (m, self.words.shape[1]), np.uint64))
            b8 = words.view(np.uint8).reshape(m, -1)
            b16 = words.view(np.uint16).reshape(m, -1)
        for kind, js in kinds:
            if few:
                # a few columns: gather each one alone
                c = self.codes[js[0]].take(rows)
                if kind == "pair":
                    c = c | (self.codes[js[1]].take(rows).astype(np.uint16) << 8)
            else:
                c = b8[:, js[0]] if kind == "col" else b16[:, js[0] // 2]
            if S is None:
                yield kind, js, c.astype(np.intp)
            else:
                key = S.get("key", m, np.intp)
                np.copyto(key, c)
                yield kind, js, key

    def slots(self, cols) -> tuple[list, dict, int]:
        """``(uint8 columns, slot of each column, slots in all)`` of a histogram of ``cols``.

        Columns follow ``cols``' order, each taking :attr:`vcols` consecutive 256-bin slots.
        """
        pos, at = {}, 0
        for c in cols:
            pos[c] = at
            at += int(self.vcols[c])
        return [c for c in cols if c < self.n_narrow], pos, at

    def build(self, rows: np.ndarray | None, cols=None, in_pool: bool = False) -> np.ndarray:
        """Histogram ``(3, slots, 256)`` of ``rows`` (``None``: every row).

        Parameters
        ----------
        rows : ndarray of intp or None
            Row indices of the node, sorted ascending for cache locality.
        cols : sequence of int, optional
            Columns to build (default all); the output follows this order, a wide column
            taking several slots (:meth:`slots`; one per column without wide columns).
        in_pool : bool, default False
            Called from a thread-pool task: count with ``np.bincount``, which releases
            the GIL, and use no pool. The result is the same, bit for bit.
        """
        cols = list(range(self.n_columns)) if cols is None else [int(c) for c in cols]
        cached = rows is None and self._root_counts is not None
        m = self.n_samples if rows is None else rows.size
        if m >= LARGE_NODE_ROWS:
            return self._build_blocked(rows, cols, cached, in_pool)
        narrow, pos, n_slots = self.slots(cols)
        out = np.zeros((3, n_slots, N_CODES))
        self._count_wide(out, pos, rows, cols, cached)
        if in_pool:
            for kind, js, k in self._keys(rows, narrow):
                self._count_gil_free(out, pos, kind, js, k, rows, cached)
            return self._finish(out, cols, cached)
        S = self._scratch
        passes = [(st, w if (rows is None or w is None) else
                   w.take(rows, mode="clip", out=S.get(f"w{st[0]}{w.dtype.char}", rows.size, w.dtype)))
                  for st, w in self._stats(cached)]
        for kind, js, k in self._keys(rows, narrow, S):
            for stats, w in passes:
                if kind == "col":
                    j = pos[js[0]]
                    if len(stats) == 1:
                        accumulate(out[stats[0], j], k, w)
                    else:
                        acc = accumulate(np.zeros(N_CODES, dtype=np.complex128), k, w)
                        out[stats[0], j] = acc.real
                        out[stats[1], j] = acc.imag
                    continue
                dtype = np.float64 if len(stats) == 1 else np.complex128
                joint = accumulate(self._scratch.zeros(f"joint{len(stats)}", N_CODES * N_CODES, dtype), k, w)
                self._pair_marginals(out, stats, pos[js[0]], pos[js[1]], joint)
        return self._finish(out, cols, cached)

    def _count_gil_free(self, out, pos, kind, js, k, rows, cached) -> None:
        """One key's columns of ``out`` by ``np.bincount`` (releases the GIL while counting).

        Each statistic is summed in row order, as the scatter-adds do; two statistics
        of a pair key are joined into the same complex joint histogram first, so that
        the marginals are computed exactly as in :meth:`build`.
        """
        real = {0: self.g, 1: self.h}
        nb = N_CODES if kind == "col" else N_CODES * N_CODES
        for stats in self._stat_groups(cached):
            parts = [np.bincount(k, None if j == 2 else (real[j] if rows is None else real[j].take(rows)),
                                 minlength=nb) for j in stats]
            if kind == "col":
                for st, part in zip(stats, parts):
                    out[st, pos[js[0]]] = part
                continue
            if len(stats) == 1:
                joint = parts[0]
            else:
                joint = np.empty(nb, dtype=np.complex128)
                joint.real, joint.imag = parts
            self._pair_marginals(out, stats, pos[js[0]], pos[js[1]], joint)

    @staticmethod
    def _pair_marginals(out, stats, a: int, b: int, joint: np.ndarray) -> None:
        """Columns ``a`` and ``b`` of ``out`` from a joint histogram over ``code_a + 256 code_b``.

        ``joint[code_b, code_a]``: its column sums are a's histogram, its row sums b's
        (BLAS products; a complex joint carries two statistics).
        """
        joint = joint.reshape(N_CODES, N_CODES)
        if len(stats) == 1:
            out[stats[0], a] = _ONES @ joint
            out[stats[0], b] = joint @ _ONES
            return
        ma, mb = _ONES_C @ joint, joint @ _ONES_C
        out[stats[0], a], out[stats[1], a] = ma.real, ma.imag
        out[stats[0], b], out[stats[1], b] = mb.real, mb.imag

    def _count_wide(self, out, pos, rows, cols, cached: bool, slot_of=None, k: int = 1) -> None:
        """The wide columns among ``cols`` into ``out``, one ``np.bincount`` per statistic.

        With ``slot_of`` (each row's node, for :meth:`build_many`), ``out`` is ``(k, 3, slots, 256)``
        and the key is ``node * width + code``.
        """
        wide = [c for c in cols if c >= self.n_narrow]
        if not wide:
            return
        stats = [j for st in self._stat_groups(cached) for j in st]
        real = {0: self.g, 1: self.h}
        weights = {j: (real[j] if rows is None else real[j].take(rows)) for j in stats if j < 2}
        for c in wide:
            v = int(self.vcols[c])
            width = v * N_CODES
            if rows is None:
                key = self._root_keys.get(("wide", c))
                if key is None:
                    key = self._root_keys[("wide", c)] = self.wide[c - self.n_narrow].astype(np.intp)
            else:
                key = self.wide[c - self.n_narrow].take(rows).astype(np.intp)
                if slot_of is not None:
                    key += slot_of * width
            a = pos[c]
            for j in stats:
                part = np.bincount(key, weights.get(j), minlength=k * width)
                if slot_of is None:
                    out[j, a:a + v] = part.reshape(v, N_CODES)
                else:
                    out[:, j, a:a + v] = part.reshape(k, v, N_CODES)

    def _build_blocked(self, rows, cols: list, cached: bool, in_pool: bool = False) -> np.ndarray:
        """:meth:`build` of a large node: row blocks, real passes, threads if ``n_jobs`` > 1."""
        m = self.n_samples if rows is None else rows.size
        weights = [(0, self.g if rows is None else self.g.take(rows))]
        if self.const_hess is None:
            weights.append((1, self.h if rows is None else self.h.take(rows)))
        if self.need_counts and not cached:
            weights.append((2, None))
        narrow, pos, n_slots = self.slots(cols)
        kinds = []
        left = set(narrow)
        for a, b in self.pairs:
            if a in left and b in left:
                kinds.append(("pair", (a, b), self._pair_key(a, b)))
                left -= {a, b}
        kinds += [("col", (j,), self.codes[j]) for j in narrow if j in left]
        nblk = max(1, -(-m // BLOCK_ROWS))
        bounds = [m * i // nblk for i in range(nblk + 1)]
        gil_free = self.n_jobs > 1 or in_pool
        threaded = self.n_jobs > 1 and not in_pool

        def count(task):
            i, blk = task
            key = kinds[i][2]
            lo, hi = bounds[blk], bounds[blk + 1]
            k = (key[lo:hi] if rows is None else key.take(rows[lo:hi])).astype(np.intp)
            nb = N_CODES * N_CODES if kinds[i][0] == "pair" else N_CODES
            if gil_free:
                return [np.bincount(k, None if w is None else w[lo:hi], minlength=nb) for _, w in weights]
            return [accumulate(np.zeros(nb), k, None if w is None else w[lo:hi]) for _, w in weights]

        tasks = [(i, blk) for i in range(len(kinds)) for blk in range(nblk)]
        parts = list(pool(self.n_jobs).map(count, tasks)) if threaded else [count(t) for t in tasks]
        out = np.zeros((3, n_slots, N_CODES))
        self._count_wide(out, pos, rows, cols, cached)
        for i, (kind, js, _) in enumerate(kinds):
            for s_i, (stat, _) in enumerate(weights):
                acc = parts[i * nblk][s_i]
                for blk in range(1, nblk):
                    acc = acc + parts[i * nblk + blk][s_i]
                if kind == "col":
                    out[stat, pos[js[0]]] = acc
                else:
                    joint = acc.reshape(N_CODES, N_CODES)        # joint[code_b, code_a]
                    out[stat, pos[js[0]]] = _ONES @ joint
                    out[stat, pos[js[1]]] = joint @ _ONES
        return self._finish(out, cols, cached)

    def _pair_key(self, a: int, b: int) -> np.ndarray:
        """``code_a + 256 code_b`` over every row (uint16, kept)."""
        cache = self.__dict__.setdefault("_pair_keys", {})
        if (a, b) not in cache:
            cache[(a, b)] = self.codes[a] | (self.codes[b].astype(np.uint16) << 8)
        return cache[(a, b)]

    def build_many(self, rows_list: list, cols=None) -> np.ndarray:
        """Histograms ``(k, 3, slots, 256)`` of several small nodes in one pass per column.

        The nodes' rows are concatenated and counted on the key ``256 * slot + code``,
        one pass per column and statistic for all ``k`` nodes (instead of one per
        node): each bin receives the same rows in the same order as in :meth:`build`,
        so the sums are identical. Meant for nodes below :data:`PAIR_MIN_ROWS` rows
        and :data:`MANY_MAX_ROWS` rows in total.
        """
        cols = list(range(self.n_columns)) if cols is None else [int(c) for c in cols]
        all_cols, (cols, pos, n_slots) = cols, self.slots(cols)
        S = self._scratch
        k = len(rows_list)
        M = sum(r.size for r in rows_list)
        allrows = np.concatenate(rows_list, out=S.get("allrows", M, np.intp)) if k > 1 else rows_list[0]
        slot = S.get("slot", M, np.intp)
        lo = 0
        for i, r in enumerate(rows_list):
            slot[lo:lo + r.size] = i * N_CODES
            lo += r.size
        if 2 * len(cols) < self.n_narrow:
            node = self.codes[cols].take(allrows, axis=1)
            column = lambda i: node[i]
        else:
            words = self.words.take(allrows, axis=0, mode="clip", out=S.get("words", (M, self.words.shape[1]),
                                                                            np.uint64))
            node = words.view(np.uint8).reshape(M, -1)
            column = lambda i: node[:, cols[i]]
        passes = [(st, w if w is None else w.take(allrows, mode="clip", out=S.get(f"w{st[0]}{w.dtype.char}", M, w.dtype)))
                  for st, w in self._stats(False)]
        nb = k * N_CODES
        acc = np.zeros((3, len(cols), nb))
        key = S.get("key", M, np.intp)
        for i in range(len(cols)):
            np.add(column(i), slot, out=key)                   # 256 * slot + code
            for stats, w in passes:
                if len(stats) == 1:
                    accumulate(acc[stats[0], i], key, w)
                else:
                    both = accumulate(S.zeros("many", nb, np.complex128), key, w)
                    acc[stats[0], i] = both.real
                    acc[stats[1], i] = both.imag
        narrow = acc.reshape(3, len(cols), k, N_CODES).transpose(2, 0, 1, 3)
        if n_slots == len(cols):
            out = np.ascontiguousarray(narrow)
        else:
            out = np.zeros((k, 3, n_slots, N_CODES))
            out[:, :, [pos[c] for c in cols]] = narrow
            self._count_wide(out, pos, allrows, all_cols, False, slot // N_CODES, k)
        if self.const_hess is not None:
            np.multiply(out[:, 2], self.const_hess, out=out[:, 1])
        return out

    def build_level(self, rows_list: list, cols=None) -> list:
        """Histograms of several nodes (row index arrays), counting the small ones together.

        Nodes below :data:`PAIR_MIN_ROWS` rows are counted in one :meth:`build_many`
        pass when there are several of them and they hold at most
        :data:`MANY_MAX_ROWS` rows together; the others one by one with
        :meth:`build`. Either way each histogram is the one :meth:`build` gives.
        """
        out = [None] * len(rows_list)
        few = [i for i, r in enumerate(rows_list) if r.size < PAIR_MIN_ROWS]
        if len(few) > 1 and sum(rows_list[i].size for i in few) <= MANY_MAX_ROWS:
            hists = self.build_many([rows_list[i] for i in few], cols)
            for j, i in enumerate(few):
                out[i] = hists[j]
        for i, r in enumerate(rows_list):
            if out[i] is None:
                out[i] = self.build(r, cols)
        return out

    def _finish(self, out, cols, cached):
        if cached and self.need_counts:
            out[2] = self._root_counts[self._slot_index(cols)]
        if self.const_hess is not None:
            np.multiply(out[2], self.const_hess, out=out[1])
        return out

    def _slot_index(self, cols) -> list:
        """The slots of ``cols`` among every column's (``cols`` itself without wide columns)."""
        if len(self.vcols) == self.n_narrow:
            return cols
        return [int(self.vstart[c]) + i for c in cols for i in range(int(self.vcols[c]))]

    def cache_root_counts(self) -> None:
        """Remember the all-rows counts: they do not change between rounds without row sampling."""
        out = np.zeros((int(self.vcols.sum()), N_CODES))
        for j in range(self.n_narrow):
            out[j] = np.bincount(self.codes[j], minlength=N_CODES)
        for i, c in enumerate(self.wide):
            a, v = int(self.vstart[self.n_narrow + i]), int(self.vcols[self.n_narrow + i])
            out[a:a + v] = np.bincount(c, minlength=v * N_CODES).reshape(v, N_CODES)
        self._root_counts = out
