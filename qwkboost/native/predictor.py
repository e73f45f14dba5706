r"""Stage 5: trees as flat arrays, and vectorised prediction over rows.

A :class:`Tree` stores its nodes in arrays (``feature``, ``bin``,
``default_left``, ``left``, ``right``, ``value``, ...). Row :math:`i` goes left at
node :math:`j` when

.. math:: b_{f_j}(x_i) \le t_j \quad\text{or}\quad (x_{i f_j} \text{ missing and } d_j),

where :math:`b_f` is the bin of :mod:`qwkboost.native.binning`, :math:`t_j` the
node's threshold bin and :math:`d_j` its learned default direction. The model
is :math:`F(x) = F_0 + \sum_t f_t(x)` with leaf values already shrunk.

:class:`EnsemblePredictor` evaluates many trees at once with bit masks
(the QuickScorer scheme). Number a tree's leaves left to right. When a row
goes right at node :math:`j`, every leaf of :math:`j`'s left subtree is ruled
out; the row's leaf is the leftmost leaf never ruled out. For each feature
:math:`f`, code :math:`c` and tree :math:`t` a table holds

.. math:: M_{f}[c, t] = \bigwedge_{j \in t:\ f_j = f,\ c \text{ goes right at } j} \lnot\,\text{left}(j),

so a row's surviving leaves are :math:`\bigwedge_f M_f[b_f(x), t]`, one gather and
one AND per feature for all trees together; the lowest set bit (found with a
de Bruijn multiply) indexes the leaf values. Trees with more than 64 leaves
fall back to :func:`predict_tree`, which pushes row indices down the tree.
"""

from __future__ import annotations

import functools

import numpy as np

from qwkboost.native.binning import MAX_WIDE_BINS, MISSING_BIN, N_CODES, n_codes_of

__all__ = ["Tree", "EnsemblePredictor", "predict_tree"]

# rows x trees per chunk of the bit-mask predictor (keeps its temporaries in cache)
CHUNK_ELEMENTS = 65_536


class Tree:
    """One regression tree in flat arrays; node 0 is the root; ``feature == -1`` marks a leaf.

    Attributes
    ----------
    feature, bin : ndarray of int
        Split feature and threshold bin (go left if ``bin(x) <= bin``).
    threshold : ndarray of float
        The threshold in feature units (go left if ``x < threshold``), for reading.
    default_left : ndarray of bool
        Direction of missing values.
    left, right : ndarray of int
        Children (-1 at leaves).
    value : ndarray of float
        Output of each leaf (shrunk); internal nodes hold their own shrunk weight.
    gain, hess : ndarray of float
        Split gain (0 at leaves) and hessian sum (cover) per node.
    count : ndarray of int
        Training rows per node.
    cat_left : list or None
        Per node, the bins (categories) that go left at a categorical split, else ``None``;
        ``None`` for a tree without categorical splits. Missing values (and levels training
        never had) follow ``default_left`` there too.
    """

    FIELDS = ("feature", "bin", "threshold", "default_left", "left", "right", "value", "gain", "hess", "count")

    def __init__(self, feature, bin, threshold, default_left, left, right, value, gain, hess, count,
                 cat_left=None):
        self.cat_left = None if cat_left is None else [None if c is None else np.asarray(c, dtype=np.int64)
                                                        for c in cat_left]
        self.feature = np.asarray(feature, dtype=np.int64)
        self.bin = np.asarray(bin, dtype=np.int64)
        self.threshold = np.asarray(threshold, dtype=np.float64)
        self.default_left = np.asarray(default_left, dtype=bool)
        self.left = np.asarray(left, dtype=np.int64)
        self.right = np.asarray(right, dtype=np.int64)
        self.value = np.asarray(value, dtype=np.float64)
        self.gain = np.asarray(gain, dtype=np.float64)
        self.hess = np.asarray(hess, dtype=np.float64)
        self.count = np.asarray(count, dtype=np.int64)

    @property
    def n_nodes(self) -> int:
        return self.feature.size

    @property
    def is_leaf(self) -> np.ndarray:
        return self.feature < 0

    @property
    def n_leaves(self) -> int:
        return int(self.is_leaf.sum())

    def depth(self) -> int:
        d = np.zeros(self.n_nodes, dtype=np.int64)
        for j in range(self.n_nodes):  # children always come after their parent
            if self.feature[j] >= 0:
                d[self.left[j]] = d[self.right[j]] = d[j] + 1
        return int(d.max())

    def leaves_in_order(self) -> np.ndarray:
        """Leaf ids left to right."""
        return np.array(_leaf_ranges(self)[0], dtype=np.int64)

    def scale(self, factor: float) -> None:
        self.value = self.value * factor

    def go_left_table(self, j: int, n_codes: int = N_CODES) -> np.ndarray:
        """``table[code]``: whether a row with bin ``code`` goes left at node ``j``.

        ``n_codes`` is the split feature's number of codes; its last is the missing code.
        """
        cats = None if self.cat_left is None else self.cat_left[j]
        if cats is None:
            table = np.arange(n_codes) <= self.bin[j]
        else:
            table = np.zeros(n_codes, dtype=bool)
            table[cats] = True
        table[n_codes - 1] = self.default_left[j]
        return table

    def to_dict(self) -> dict:
        d = {}
        for k in self.FIELDS:
            v = getattr(self, k)
            if k == "threshold":
                d[k] = [None if not np.isfinite(t) else float(t) for t in v]
            else:
                d[k] = v.tolist()
        if self.cat_left is not None:
            d["cat_left"] = [None if c is None else c.tolist() for c in self.cat_left]
        return d

    @classmethod
    def from_dict(cls, d: dict, n_features: int | None = None, n_codes=None) -> "Tree":
        """A tree from :meth:`to_dict`, checked: a malformed tree raises instead of looping or crashing.

        Raises
        ------
        ValueError
            For a missing field, arrays of different lengths, a feature index
            out of range, a child that does not come after its parent or is
            reached twice (a cycle), or a non-finite leaf value.
        """
        if not isinstance(d, dict):
            raise ValueError(f"a tree must be a mapping; got {type(d).__name__}")
        missing = [k for k in cls.FIELDS if k not in d]
        if missing:
            raise ValueError(f"a tree lacks the field(s) {missing}")
        d = dict(d)
        try:
            d["threshold"] = [np.inf if t is None else t for t in d["threshold"]]
            tree = cls(**{k: d[k] for k in cls.FIELDS}, cat_left=d.get("cat_left"))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"a tree has a field that is not an array of numbers ({exc})") from None
        tree.check(n_features, n_codes)
        return tree

    def check(self, n_features: int | None = None, n_codes=None) -> None:
        """Raise :class:`ValueError` unless the arrays form one finite binary tree rooted at node 0.

        ``n_codes`` (per feature, the missing code included) bounds the bins of categorical splits.
        """
        n = self.feature.size
        if n == 0:
            raise ValueError("a tree has no nodes")
        for k in self.FIELDS:
            a = getattr(self, k)
            if a.ndim != 1 or a.size != n:
                raise ValueError(f"tree field {k!r} has {a.size} entries; the tree has {n} nodes")
        internal = self.feature >= 0
        if np.any(self.feature < -1) or (n_features is not None and np.any(self.feature >= n_features)):
            raise ValueError(f"a tree splits on a feature index outside [0, {n_features})")
        cat = np.array([c is not None for c in self.cat_left], dtype=bool) \
            if self.cat_left is not None and len(self.cat_left) == n else np.zeros(n, dtype=bool)
        if np.any(internal & ~cat & ((self.bin < 0) | (self.bin >= MISSING_BIN))):
            raise ValueError(f"a tree has a split bin outside [0, {MISSING_BIN})")
        idx = np.arange(n)
        children = np.concatenate([self.left[internal], self.right[internal]])
        if np.any(self.left[internal] <= idx[internal]) or np.any(self.right[internal] <= idx[internal]) \
                or np.any(children >= n):
            raise ValueError("a tree has a child that does not come after its parent (a cycle or a bad index)")
        if children.size != n - 1 or np.unique(children).size != children.size:
            raise ValueError("a tree's nodes are not each reached exactly once from the root")
        if not np.all(np.isfinite(self.value[~internal])):
            raise ValueError("a tree has a leaf value that is not finite")
        if self.cat_left is not None:
            if len(self.cat_left) != n:
                raise ValueError(f"a tree's cat_left has {len(self.cat_left)} entries; the tree has {n} nodes")
            for j, c in enumerate(self.cat_left):
                if c is None:
                    continue
                top = MAX_WIDE_BINS if n_codes is None else int(n_codes[self.feature[j]]) - 1
                if not internal[j] or c.ndim != 1 or np.any(c < 0) or np.any(c >= top):
                    raise ValueError(f"a tree's categorical split at node {j} must list bins in [0, {top})")

    def apply(self, codes: np.ndarray) -> np.ndarray:
        """Leaf id of every row; ``codes`` has shape (n_features, n_samples)."""
        return predict_tree(self, codes, leaf=True)

    def predict(self, codes: np.ndarray) -> np.ndarray:
        return predict_tree(self, codes)


def predict_tree(tree: Tree, codes: np.ndarray, leaf: bool = False) -> np.ndarray:
    """One tree over all rows: push the row indices down, partitioning them at every split.

    Each row is compared once per level, and the row lists stay sorted, so
    this costs about as much as the partitions of training (no per-row
    gathers of node arrays).
    """
    n = codes.shape[1]
    out = np.empty(n, dtype=np.int64 if leaf else np.float64)
    stack = [(0, None)]
    while stack:
        j, rows = stack.pop()
        if tree.feature[j] < 0:
            v = j if leaf else tree.value[j]
            if rows is None:
                out[:] = v
            else:
                out[rows] = v
            continue
        f = tree.feature[j]
        c = codes[f]
        if rows is not None:
            c = c.take(rows)
        if tree.cat_left is not None and tree.cat_left[j] is not None:
            go_left = tree.go_left_table(j, n_codes_of(codes, f)).take(c)
        else:
            go_left = c <= tree.bin[j]
            if tree.default_left[j]:
                go_left |= c == MISSING_BIN
        if rows is None:
            lrows, rrows = np.flatnonzero(go_left), np.flatnonzero(~go_left)
        else:
            lrows, rrows = np.compress(go_left, rows), np.compress(~go_left, rows)
        stack.append((tree.right[j], rrows))
        stack.append((tree.left[j], lrows))
    return out


# de Bruijn sequences: (x & -x) * DB >> shift is a distinct index for every power of two
_DB32, _DB64 = np.uint32(0x077CB531), np.uint64(0x03F79D71B4CB0A89)


@functools.lru_cache(maxsize=2)
def _db_index(bits: int) -> np.ndarray:
    """Position k of the bit whose de Bruijn hash is h: ``table[h] = k`` (read-only, made once per width)."""
    table = np.zeros(bits, dtype=np.int64)
    for k in range(bits):
        if bits == 32:
            h = ((1 << k) * 0x077CB531 & 0xFFFFFFFF) >> 27
        else:
            h = ((1 << k) * 0x03F79D71B4CB0A89 & 0xFFFFFFFFFFFFFFFF) >> 58
        table[h] = k
    table.flags.writeable = False
    return table


def _leaf_ranges(tree: Tree) -> tuple[list, list, list]:
    """The leaves left to right, and for every node the ranks ``[first, last]`` of the leaves under it (one
    depth-first pass over plain lists)."""
    feat, left, right = tree.feature.tolist(), tree.left.tolist(), tree.right.tolist()
    first, last = [0] * len(feat), [0] * len(feat)
    order: list = []
    stack = [(0, False)]
    while stack:
        j, below = stack.pop()
        if feat[j] < 0:
            first[j] = last[j] = len(order)
            order.append(j)
        elif below:                                   # both subtrees done
            first[j], last[j] = first[left[j]], last[right[j]]
        else:
            stack += [(j, True), (right[j], False), (left[j], False)]
    return order, first, last


class EnsemblePredictor:
    """Vectorised prediction of many trees on binned rows (bit-mask scheme, module docstring).

    Parameters
    ----------
    trees : list of Tree
    n_features : int
    block : int, default 256
        Trees per table block (bounds the table memory).
    n_codes : ndarray of int, optional
        Codes per feature, the missing code included (default 256 each); a wide categorical
        feature's table has a row per code.
    """

    def __init__(self, trees: list[Tree], n_features: int, block: int = 256, n_codes=None):
        self.trees = trees
        self.n_features = n_features
        self.block = block
        self.n_codes = np.full(n_features, N_CODES, dtype=np.int64) if n_codes is None else \
            np.asarray(n_codes, dtype=np.int64)
        self._blocks: list = []
        self._built = 0

    def _build(self, upto: int) -> None:
        while self._built < upto:
            lo = self._built
            hi = min(lo + self.block, len(self.trees))
            self._blocks.append(self._make_block(lo, hi))
            self._built = hi

    def _make_block(self, lo: int, hi: int):
        trees = self.trees[lo:hi]
        T = len(trees)
        max_leaves = max(t.n_leaves for t in trees)
        if max_leaves > 64:
            return ("traverse", lo, hi, None)
        bits = 32 if max_leaves <= 32 else 64
        dt = np.uint32 if bits == 32 else np.uint64
        full = np.iinfo(dt).max
        # per internal node: tree, feature, bin, default_left, mask of its left subtree's leaves
        tt, ff, bb, dd, mm = [], [], [], [], []
        cat_nodes = []         # (tree, feature, codes going right, mask) of categorical splits
        hashed_values = np.zeros((T, bits))
        db_pos = _db_index(bits)
        for t, tree in enumerate(trees):
            order, first, last = _leaf_ranges(tree)
            feat, left, bins, dleft = (tree.feature.tolist(), tree.left.tolist(), tree.bin.tolist(),
                                       tree.default_left.tolist())
            for j, f in enumerate(feat):
                if f < 0:
                    continue
                a, b = first[left[j]], last[left[j]]
                mask = ((1 << (b + 1)) - 1) ^ ((1 << a) - 1)
                if tree.cat_left is not None and tree.cat_left[j] is not None:
                    right = np.flatnonzero(~tree.go_left_table(j, int(self.n_codes[f])))
                    cat_nodes.append((t, f, right, mask))
                    continue
                tt.append(t), ff.append(f), bb.append(bins[j])
                dd.append(dleft[j]), mm.append(mask)
            # leaf value addressed by the de Bruijn hash of its bit
            vals = np.zeros(bits)
            vals[:len(order)] = tree.value[order]
            hashed_values[t] = vals[db_pos]
        tt, ff, bb, dd = (np.asarray(a, dtype=np.int64) for a in (tt, ff, bb, dd))
        full_int = (1 << bits) - 1
        notm = np.array([full_int ^ m for m in mm], dtype=dt)
        feats = np.unique(np.concatenate([ff, np.array([c[1] for c in cat_nodes], dtype=np.int64)]))
        tables = []
        for f in feats:
            sel = ff == f
            # codes c > bin go right: AND ~mask into position bin+1, then AND-accumulate over codes
            # (numeric features have 256 codes; a wide categorical's table has a row per code)
            A = np.full((int(self.n_codes[f]), T), full, dtype=dt)
            np.bitwise_and.at(A, (bb[sel] + 1, tt[sel]), notm[sel])
            A[:MISSING_BIN] = np.bitwise_and.accumulate(A[:MISSING_BIN], axis=0)
            # the missing code goes right where default_left is False
            A[MISSING_BIN] = full
            selm = sel & ~dd.astype(bool)
            np.bitwise_and.at(A[MISSING_BIN], tt[selm], notm[selm])
            # categorical splits: every code going right rules out the left subtree
            for t, cf, right_codes, mask in cat_nodes:
                if cf == f:
                    A[right_codes, t] &= dt(full_int ^ mask)
            tables.append(A)
        # trees that are a single leaf: bit 0 survives everywhere (all-ones start)
        return ("masks", lo, hi, (feats, tables, hashed_values.ravel(), bits, dt))

    def predict_trees(self, codes: np.ndarray, n_iter: int | None = None) -> np.ndarray:
        """Per-tree outputs, shape (n_samples, n_iter)."""
        n_iter = len(self.trees) if n_iter is None else int(n_iter)
        self._build(n_iter)
        n = codes.shape[1]
        out = np.empty((n, n_iter))
        for kind, lo, hi, payload in self._blocks:
            if lo >= n_iter:
                break
            hi_use = min(hi, n_iter)
            if kind == "traverse":
                for t in range(lo, hi_use):
                    out[:, t] = predict_tree(self.trees[t], codes)
                continue
            feats, tables, hv, bits, dt = payload
            T = hi - lo
            shift = dt(27 if bits == 32 else 58)
            db = _DB32 if bits == 32 else _DB64
            offs = (np.arange(T, dtype=np.int64) * bits)[None, :]
            chunk = max(64, CHUNK_ELEMENTS // max(T, 1))
            for s in range(0, n, chunk):
                e = min(n, s + chunk)
                if feats.size:
                    acc = tables[0].take(codes[feats[0]][s:e], axis=0)
                    for f, tab in zip(feats[1:], tables[1:]):
                        np.bitwise_and(acc, tab.take(codes[f][s:e], axis=0), out=acc)
                else:
                    acc = np.full((e - s, T), np.iinfo(dt).max, dtype=dt)
                low = acc & (~acc + dt(1))                      # lowest set bit
                h = (low * db) >> shift
                vals = hv.take(h.astype(np.int64) + offs)
                out[s:e, lo:hi_use] = vals[:, : hi_use - lo]
        return out

    def predict(self, codes: np.ndarray, n_iter: int | None = None) -> np.ndarray:
        """Sum of the first ``n_iter`` trees (without the initial score)."""
        n_iter = len(self.trees) if n_iter is None else int(n_iter)
        if n_iter == 0:
            return np.zeros(codes.shape[1])
        return self.predict_trees(codes, n_iter).sum(axis=1)
