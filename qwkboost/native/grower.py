r"""Stage 4: grow one tree, depth-wise (XGBoost) or best-first (LightGBM).

Each node keeps the sorted indices of its rows. Splitting a node partitions
them with one comparison on the split feature's codes (``np.compress``, no
sort), builds the histogram of the smaller child only and gets its sibling by
subtraction (:mod:`qwkboost.native.histogram`). Two shortcuts leave row lists
unbuilt: when the tree grows on every row, a child holding at least
:data:`MASK_MIN_SHARE` of them keeps a boolean mask over all rows instead (its
histogram comes by subtraction, and splitting it needs no gather); and when
neither child of a split can split again, only the go-left mask is kept, from
which :meth:`GrownTree.leaf_values` writes the training-score update
(:attr:`GrownTree.leaf_rows` builds the lists on first access).

**Depth-wise** (``grow_policy="depthwise"``): all nodes of a level are
searched together (one vectorised split search for the level), then split;
``max_leaves`` > 0 lets only the best splits of a level through. With
``n_jobs`` > 1 and large nodes (:data:`PARALLEL_MIN_NODE_ROWS`), the level's
partitions and histogram builds run on a thread pool (``take``, comparisons
and ``np.bincount`` release the GIL); each gives the same numbers as on one
thread, so the tree does not depend on ``n_jobs``.

**Best-first** (``grow_policy="lossguide"``): the leaf with the largest gain is
split next, until ``max_leaves`` leaves (LightGBM's leaf-wise growth).

**Monotone constraints** (as XGBoost implements them; its "Monotonic Constraints" tutorial). Every node carries bounds :math:`[l, u]`
on its weight, the root :math:`(-\infty, \infty)`. When a node splits on a
feature with constraint :math:`+1` into children with (clipped) weights
:math:`w_L \le w_R`, the mid-point :math:`m = (w_L + w_R)/2` becomes the left
subtree's upper bound and the right subtree's lower bound (:math:`-1`:
the reverse); other splits pass the bounds on unchanged. Every leaf of the
left subtree then stays below every leaf of the right one, at any depth, so
the whole tree is monotone, not only each split. Shrinkage multiplies every
leaf by the same positive learning rate, which keeps that order.

**Pruning** (``gamma``, Chen and Guestrin 2016, eq. 7). With ``prune="post"`` (default) the tree is
grown first and then, bottom-up, a split whose children are both leaves and
whose gain is below :math:`\gamma` is removed, as in StatQuest's XGBoost regression worked example
(a weak split survives if a split below it is strong). ``prune="pre"`` refuses
splits with gain below :math:`\gamma` while growing, as XGBoost's ``hist``
updater does.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from qwkboost.native.binning import MISSING_BIN
from qwkboost.native.bundling import Layout
from qwkboost.native import histogram as _histogram
from qwkboost.native.histogram import HistogramBuilder, pool, subtract
from qwkboost.native.predictor import Tree
from qwkboost.native.splitting import (SEARCH_CHUNK_ELEMENTS_EXACT_H, FlatBins, SplitInfo, SplitParams,
                                       best_splits_exact_h, exact_h_applies, find_best_splits)

__all__ = ["GrowerParams", "grow_tree", "GrownTree", "partition", "go_left", "split_rows", "PARALLEL_MIN_NODE_ROWS"]

# a level is split on the thread pool only if its nodes average this many rows
# (below, task overhead and GIL hand-overs cost more than the second core gives)
PARALLEL_MIN_NODE_ROWS = 50_000
# when a tree grows on every row, the larger child of a split keeps its rows as a mask over
# all rows (no row list) while it holds at least this share of them: splitting it then needs
# no gather of codes and no np.compress (lopsided trees split a big node at every level)
MASK_MIN_SHARE = 0.5


@dataclass(frozen=True)
class GrowerParams:
    """Shape limits of one tree, plus the split criterion."""

    split: SplitParams = field(default_factory=SplitParams)
    max_depth: int = 6
    max_leaves: int = 0
    grow_policy: str = "depthwise"
    prune: str = "post"


class GrownTree:
    """A grown tree with unshrunk weights, and what leaf refits need.

    Attributes
    ----------
    tree : Tree
        Leaf ``value`` holds the unshrunk weight :math:`w^*`.
    leaf_rows : dict
        Leaf id -> row indices (training rows that reached it; ``None``: every row).
    lower, upper : ndarray
        Monotone bounds per node.
    pending : list
        ``(rows, go_left, left_id, right_id)`` of splits whose children are both
        leaves: their row lists are left unbuilt (``np.compress`` of every row of
        the deepest level) unless :attr:`leaf_rows` is read; :meth:`leaf_values`
        writes the leaves' values straight from the go-left mask.
    """

    def __init__(self, tree: Tree, leaf_rows: dict, lower: np.ndarray, upper: np.ndarray, pending=(),
                 mask_leaves=()):
        self.tree, self._leaf_rows, self.lower, self.upper = tree, leaf_rows, lower, upper
        self.pending = list(pending)
        self.mask_leaves = list(mask_leaves)      # (mask over every row, leaf id)

    @property
    def leaf_rows(self) -> dict:
        if self.pending:
            for rows, mask, lid, rid in self.pending:
                self._leaf_rows[lid], self._leaf_rows[rid] = split_rows(rows, mask)
            self.pending = []
        if self.mask_leaves:
            for mask, j in self.mask_leaves:
                self._leaf_rows[j] = mask.nonzero()[0]
            self.mask_leaves = []
        return self._leaf_rows

    def leaf_values(self, out: np.ndarray) -> np.ndarray:
        """``out[i]`` = value of the leaf training row ``i`` reached (every row, no sampling)."""
        value = self.tree.value
        if self.mask_leaves:
            # the mask leaves are disjoint: out = sum of mask * value, exact (x * 1 = x, x + 0 = x)
            # and branch-free (masked writes such as np.putmask branch on every row)
            tmp = None
            for i, (mask, j) in enumerate(self.mask_leaves):
                if i == 0:
                    np.multiply(mask, value[j], out=out)
                else:
                    tmp = np.multiply(mask, value[j], out=tmp)
                    out += tmp
        for j, r in self._leaf_rows.items():
            if r is None:
                out[:] = value[j]
            else:
                out[r] = value[j]
        for rows, mask, lid, rid in self.pending:
            # a two-entry table indexed by the mask: branch-free, unlike np.where on a random mask
            v = np.array([value[rid], value[lid]]).take(mask.view(np.uint8))
            if rows is None:
                out[:] = v
            else:
                out[rows] = v
        return out


def _weight(G: float, H: float, lam: float, alpha: float, lo: float, hi: float) -> float:
    """Scalar :func:`~qwkboost.native.splitting.leaf_weight` in plain floats (called per node)."""
    if alpha:
        G = math.copysign(max(abs(G) - alpha, 0.0), G)
    w = -G / (H + lam) if H + lam > 0 else 0.0
    return min(max(w, lo), hi)


class _Node:
    r"""A node while the tree grows.

    Attributes
    ----------
    id, depth : int
        Position in :attr:`_Grower.nodes` (the growth order) and depth (root 0).
    totals : list of float
        ``[G, H, C]``: gradient and hessian sums and row count of the node.
    n : int
        Row count (``int(totals[2])``).
    weight : float
        The node's leaf weight :math:`-G/(H+\lambda)` (L1- and bound-adjusted, unshrunk).
    lower, upper : float
        Monotone bounds on the weights of this subtree.
    can : bool
        Whether the node may split at all (depth, ``min_child_weight``, ``min_samples_leaf``).
    hist : ndarray or None
        Its gradient histogram, while it may still split.
    split : SplitInfo or None
        The best split found, once searched; ``None`` if there is none.
    left, right : int
        Children's ids (-1 while a leaf).
    counted : bool
        Whether ``split``'s child statistics carry exact row counts.
    rows, mask, lazy, lazy_leaf
        Where the node's rows are, in one of four forms: ``rows``, sorted row
        indices (``None`` with ``mask`` also ``None``: every row); ``mask``, a
        boolean mask over every row, kept for a large child instead of a list;
        ``lazy``, ``(rows, go-left mask)`` of a split whose children are both
        final leaves, whose lists are never built; ``lazy_leaf``, true for such a
        child, whose rows live in its parent's ``lazy``.
        :meth:`GrownTree.leaf_values` reads every form; :attr:`GrownTree.leaf_rows`
        builds the lists.
    """

    __slots__ = ("id", "depth", "rows", "totals", "hist", "lower", "upper", "split", "left", "right",
                 "weight", "lazy", "lazy_leaf", "can", "mask", "n", "counted")

    def __init__(self, nid, depth, rows, totals, lower, upper):
        self.id, self.depth, self.rows, self.totals = nid, depth, rows, totals
        self.lower, self.upper = lower, upper
        self.hist = None
        self.split = None
        self.left = self.right = -1
        self.weight = 0.0
        self.lazy = None          # (rows, go-left mask) when both children are final leaves
        self.lazy_leaf = False    # a child of such a node: its rows are not built
        self.mask = None          # rows not built: the node's rows as a mask over every row
        self.n = 0                # number of rows
        self.counted = False      # split's child sums carry exact row counts


def go_left(layout: Layout, rows, f: int, b: int, default_left: bool, missing: bool = True) -> np.ndarray:
    """Mask over ``rows`` (``None``: every row) of "bin(x_f) <= b, missing -> default".

    ``missing=False`` promises that no row has a missing value (skips their test).
    """
    if layout.identity:
        c = layout.codes[f] if rows is None else layout.codes[f].take(rows)
    else:
        c = layout.feature_codes(f, rows)
    mask = c <= b
    if default_left and missing:
        mask |= c == MISSING_BIN
    return mask


def split_rows(rows, mask):
    """Rows where ``mask`` holds and where it does not; both stay sorted."""
    if rows is None:
        return np.flatnonzero(mask), np.flatnonzero(~mask)
    return np.compress(mask, rows), np.compress(~mask, rows)


def partition(layout: Layout, rows, f: int, b: int, default_left: bool):
    """Rows going left and right at "bin(x_f) <= b, missing -> default"; both stay sorted."""
    return split_rows(rows, go_left(layout, rows, f, b, default_left))


class _Grower:
    def __init__(self, layout: Layout, hb: HistogramBuilder, fb: FlatBins, params: GrowerParams,
                 feature_mask, monotone, has_missing: bool):
        self.layout, self.hb, self.fb, self.p = layout, hb, fb, params
        self.sp = params.split
        self.feature_mask = feature_mask
        self.cols = layout.columns_for(feature_mask)
        self.monotone = monotone if monotone is not None and np.any(monotone != 0) else None
        self.has_missing = has_missing
        self.nodes: list[_Node] = []
        self.n_leaves = 1
        self._pruned = False
        sp = self.sp
        self._max_depth = params.max_depth if params.max_depth > 0 else math.inf
        self._min_h = 2 * sp.min_child_weight               # a node needs twice a child's minimum
        self._min_c = 2 * max(1, sp.min_samples_leaf)

    # -- helpers ---------------------------------------------------------------
    def _new(self, depth, rows, totals, lower, upper, weight=None) -> _Node:
        node = _Node(len(self.nodes), depth, rows, totals, lower, upper)
        G, H, C = totals
        node.weight = _weight(G, H, self.sp.reg_lambda, self.sp.reg_alpha, lower, upper) if weight is None \
            else weight
        node.n = int(C)
        node.can = depth < self._max_depth and H >= self._min_h and C >= self._min_c
        self.nodes.append(node)
        return node

    @staticmethod
    def _can_split(node: _Node) -> bool:
        return node.can

    def _search(self, nodes: list[_Node]) -> None:
        """Best split of each node (vectorised over the nodes)."""
        k = len(nodes)
        if k == 1:
            hist, totals = nodes[0].hist[None], np.array([nodes[0].totals])
        else:
            hist = np.empty((k,) + nodes[0].hist.shape)                      # (k, 3, ncols, 256)
            for i, n in enumerate(nodes):
                hist[i] = n.hist
            totals = np.array([n.totals for n in nodes])
        flat, built = self.fb.gather(hist, self.cols, totals)
        lower = upper = None
        if self.monotone is not None:
            lower = np.array([n.lower for n in nodes])
            upper = np.array([n.upper for n in nodes])
        if self.has_missing:
            # (k, F): does the node have rows with a missing value of the feature? Any of G, H,
            # C tells (a row may have zero hessian, and C is zero when counts are not needed)
            m = flat[:, :, self.fb.miss_pos]
            present = (m[:, 1] > 0) | (m[:, 0] != 0) | (m[:, 2] > 0)
            missing = bool(present.any())
        else:
            present, missing = None, False
        mask = self.feature_mask
        if not built.all():
            allowed = np.zeros(self.fb.n_bins.size, dtype=bool)
            allowed[self.fb.feat_of[built]] = True
            mask = allowed if mask is None else (mask & allowed)
        c = self.hb.const_hess
        scale = c if (c is not None and c > 0 and math.frexp(c)[0] == 0.5
                      and self.hb.n_samples < 2 ** 53) else None
        pre = self.p.prune == "pre"
        fast = None
        if exact_h_applies(self.sp, self.fb, scale, missing, self.monotone, lower) and \
                k * self.fb.size <= SEARCH_CHUNK_ELEMENTS_EXACT_H:
            fast = best_splits_exact_h(flat, totals, self.sp, self.fb, scale, mask)
        if fast is not None:
            # plain Python values already, counts exact, no missing values: heavier child default
            for n, (gain, f, b, L, R) in zip(nodes, fast):
                if not math.isfinite(gain) or (pre and gain < self.sp.gamma):
                    n.split = None
                    continue
                n.split = SplitInfo(gain, f, b, L[1] >= R[1], L, R)
                n.counted = True
            return
        res = find_best_splits(flat, totals, self.sp, self.fb, mask, lower, upper, self.monotone, missing,
                               scale)
        gains, feats, bins = res["gain"].tolist(), res["feature"].tolist(), res["bin"].tolist()
        dls = res["default_left"].tolist()
        Ls, Rs = res["left"].tolist(), res["right"].tolist()     # plain floats per node
        counted = bool(res["counts"])                            # L[2], R[2] are exact row counts
        mp = present.tolist() if present is not None else None
        for i, n in enumerate(nodes):
            gain = gains[i]
            if not math.isfinite(gain) or (pre and gain < self.sp.gamma):
                n.split = None
                continue
            f = feats[i]
            dl = dls[i]
            if mp is None or not mp[i][f]:
                # no missing rows here: unseen missing values follow the heavier child
                dl = bool(Ls[i][1] >= Rs[i][1])
            n.split = SplitInfo(gain, f, bins[i], dl, Ls[i], Rs[i])
            n.counted = counted

    def _bounds(self, node: _Node, f: int, wl: float, wr: float):
        lo, hi = node.lower, node.upper
        if self.monotone is None or self.monotone[f] == 0:
            return (lo, hi), (lo, hi)
        mid = 0.5 * (wl + wr)
        if self.monotone[f] > 0:
            return (lo, min(hi, mid)), (max(lo, mid), hi)
        return (max(lo, mid), hi), (lo, min(hi, mid))

    def _split(self, node: _Node, parts=None):
        """Partition ``node`` (or use ``parts``, its partition done elsewhere); return its children."""
        s = node.split
        f, b, dl, L, R = s.feature, s.bin, s.default_left, s.left, s.right
        lam, alpha = self.sp.reg_lambda, self.sp.reg_alpha
        wl = _weight(L[0], L[1], lam, alpha, node.lower, node.upper)
        wr = _weight(R[0], R[1], lam, alpha, node.lower, node.upper)
        if self.monotone is None:
            ll = rl = node.lower
            lu = ru = node.upper
        else:
            (ll, lu), (rl, ru) = self._bounds(node, f, wl, wr)
        # child row counts: exact from the split search when it had counts (node.counted),
        # else from the partition; L, R are this node's own lists (from _search), updated in place
        lmask = None
        if parts is not None:
            lrows, rrows = parts
            L[2], R[2] = float(lrows.size), float(rrows.size)
        elif node.rows is None and self.all_rows:
            # the root, or a node kept as a mask: children as masks over every row
            t = go_left(self.layout, None, f, b, dl, self.has_missing)
            if node.mask is None:
                lmask, rmask = t, ~t
            else:
                lmask, rmask = node.mask & t, np.greater(node.mask, t)     # mask & ~t
            if not node.counted:
                nl = int(np.count_nonzero(lmask))
                L[2], R[2] = float(nl), float(node.n - nl)
            lrows = rrows = None
        else:
            mask = go_left(self.layout, node.rows, f, b, dl, self.has_missing)
            if not node.counted:
                nl = int(np.count_nonzero(mask))
                L[2], R[2] = float(nl), float(mask.size - nl)
            lrows = rrows = None
        # a child whose bounds did not move keeps the weight just computed
        pb = (node.lower, node.upper)
        left = self._new(node.depth + 1, lrows, L, ll, lu, wl if (ll, lu) == pb else None)
        right = self._new(node.depth + 1, rrows, R, rl, ru, wr if (rl, ru) == pb else None)
        if lmask is not None:
            if left.can or right.can:
                small = left if left.n <= right.n else right       # its histogram gets built
                keep = MASK_MIN_SHARE * self.hb.n_samples
                for c, m in ((left, lmask), (right, rmask)):
                    if c is small or c.n < keep:
                        c.rows = m.nonzero()[0]
                    else:
                        c.mask = m
            else:
                left.mask, right.mask = lmask, rmask                 # final leaves
            node.mask = None
        elif parts is None:
            if self._can_split(left) or self._can_split(right):
                left.rows, right.rows = split_rows(node.rows, mask)
            else:
                # both children are final leaves: keep the mask, build no row lists
                node.lazy = (node.rows, mask)
                left.lazy_leaf = right.lazy_leaf = True
        node.left, node.right = left.id, right.id
        node.rows = None if node.id != 0 else node.rows
        self.n_leaves += 1
        return left, right

    def _child_hists(self, parent: _Node, left: _Node, right: _Node, built=None) -> list[_Node]:
        """Histograms of the children that may split: build the smaller, subtract for the other."""
        want = [c for c in (left, right) if self._can_split(c)]
        if want:
            small, big = (left, right) if left.n <= right.n else (right, left)
            small.hist = built if built is not None else self.hb.build(small.rows, self.cols)
            if big in want:
                big.hist = subtract(parent.hist, small.hist)
        parent.hist = None
        return want

    def _threaded(self, nodes) -> bool:
        rows = sum(n.n for n in nodes)
        return self.hb.n_jobs > 1 and len(nodes) > 1 and rows >= PARALLEL_MIN_NODE_ROWS * len(nodes)

    def _split_level(self, cands: list[_Node]) -> list[_Node]:
        """Split every node of a level; for large nodes, partitions and histograms run on the thread pool."""
        if not self._threaded(cands):
            kids = [self._split(n) for n in cands]
            # the smaller child of each parent whose children may split; the small ones
            # are counted together (one bincount per column and statistic for the level)
            small = [(l if l.n <= r.n else r) for l, r in kids
                     if self._can_split(l) or self._can_split(r)]
            few = [c for c in small if c.n < _histogram.PAIR_MIN_ROWS]     # (the builder's own limits)
            built = {}
            if len(few) > 1:
                if sum(c.n for c in few) <= _histogram.MANY_MAX_ROWS:
                    hists = self.hb.build_many([c.rows for c in few], self.cols)
                    built = {id(c): hists[i] for i, c in enumerate(few)}
            nxt = []
            for n, (l, r) in zip(cands, kids):
                if n.lazy is not None:
                    n.hist = None
                    continue
                s = l if l.n <= r.n else r
                nxt.extend(self._child_hists(n, l, r, built.get(id(s))))
            return nxt
        ex = pool(self.hb.n_jobs)
        for n in cands:
            if n.mask is not None:                     # row lists for the pool's partitions
                n.rows, n.mask = np.flatnonzero(n.mask), None
        parts = list(ex.map(lambda n: partition(self.layout, n.rows, n.split.feature, n.split.bin,
                                                n.split.default_left), cands))
        kids = [self._split(n, pr) for n, pr in zip(cands, parts)]
        # which child to build for each parent (the smaller one, if either child may split)
        jobs = []
        for n, (l, r) in zip(cands, kids):
            if self._can_split(l) or self._can_split(r):
                jobs.append(l if l.n <= r.n else r)
        built = dict(zip((id(c) for c in jobs),
                         ex.map(lambda c: self.hb.build(c.rows, self.cols, in_pool=True), jobs)))
        nxt = []
        for n, (l, r) in zip(cands, kids):
            small = l if l.n <= r.n else r
            nxt.extend(self._child_hists(n, l, r, built.get(id(small))))
        return nxt

    # -- policies --------------------------------------------------------------
    def grow(self, rows) -> None:
        n = self.hb.n_samples if rows is None else rows.size
        self.all_rows = rows is None
        hist = self.hb.build(rows, self.cols) if n >= 2 else None
        if hist is not None:
            # the totals from the histogram itself keep "parent - left" consistent with the bins
            G, H = float(hist[0, 0].sum()), float(hist[1, 0].sum())
        elif rows is None:
            G, H = float(self.hb.g.sum()), float(self.hb.h.sum())
        else:
            G, H = float(self.hb.g.take(rows).sum()), float(self.hb.h.take(rows).sum())
        root = self._new(0, rows, [G, H, float(n)], -np.inf, np.inf)
        if not self._can_split(root):
            return
        root.hist = hist
        if self.p.grow_policy == "lossguide":
            self._grow_lossguide(root)
        else:
            self._grow_depthwise(root)

    @staticmethod
    def _rows_of(node: _Node):
        return np.flatnonzero(node.mask) if node.mask is not None else node.rows

    def _room(self) -> int:
        return np.iinfo(np.int64).max if self.p.max_leaves <= 0 else self.p.max_leaves - self.n_leaves

    def _grow_depthwise(self, root: _Node) -> None:
        frontier = [root]
        while frontier:
            self._search(frontier)
            cands = [n for n in frontier if n.split is not None]
            if self.p.max_leaves > 0:
                cands.sort(key=lambda n: -n.split.gain)
                cands = cands[: max(0, self._room())]
            for n in frontier:
                if n not in cands:
                    n.hist = None
            frontier = self._split_level(cands)

    def _grow_lossguide(self, root: _Node) -> None:
        self._search([root])
        heap = []
        if root.split is not None:
            heapq.heappush(heap, (-root.split.gain, root.id))
        while heap and self._room() > 0:
            _, nid = heapq.heappop(heap)
            node = self.nodes[nid]
            left, right = self._split(node)
            want = self._child_hists(node, left, right)
            if want:
                self._search(want)
                for c in want:
                    if c.split is not None:
                        heapq.heappush(heap, (-c.split.gain, c.id))
                    c.hist = None if c.split is None else c.hist

    # -- output ----------------------------------------------------------------
    def _post_prune(self) -> None:
        gamma = self.sp.gamma
        if gamma <= 0 or self.p.prune != "post":
            return
        # children have larger ids than parents: one reverse sweep prunes bottom-up
        for node in reversed(self.nodes):
            if node.left < 0:
                continue
            l, r = self.nodes[node.left], self.nodes[node.right]
            if l.left < 0 and r.left < 0 and node.split.gain < gamma:
                if node.lazy is not None:
                    node.rows, node.lazy = node.lazy[0], None
                else:
                    if l.mask is not None and r.mask is not None:
                        node.mask = l.mask | r.mask
                    else:
                        node.rows = np.concatenate([self._rows_of(l), self._rows_of(r)])
                node.left = node.right = -1
                l.id = r.id = -1  # detached
                self._pruned = True

    def result(self, binmapper_edges) -> GrownTree:
        self._post_prune()
        nodes = self.nodes
        if self.p.grow_policy != "lossguide" and self.p.max_leaves <= 0 and not self._pruned:
            # depth-wise nodes are created level by level, in frontier order: already breadth-first
            # (with max_leaves a level is split in order of gain, so it is renumbered below)
            order = nodes
            new_id = None
        else:
            # renumber reachable nodes breadth-first
            ids, queue = [], [0]
            while queue:
                j = queue.pop(0)
                ids.append(j)
                if nodes[j].left >= 0:
                    queue.extend([nodes[j].left, nodes[j].right])
            new_id = {old: i for i, old in enumerate(ids)}
            order = [nodes[j] for j in ids]
        m = len(order)
        # plain lists first (per-element writes into NumPy arrays cost ~10x more), same values
        feature, bins, thr, dl = [-1] * m, [0] * m, [math.inf] * m, [False] * m
        left, right, gain = [-1] * m, [-1] * m, [0.0] * m
        value = [n.weight for n in order]
        hess = [n.totals[1] for n in order]
        count = [n.totals[2] for n in order]
        lower = [n.lower for n in order]
        upper = [n.upper for n in order]
        leaf_rows = {}
        pending = []
        mask_leaves = []
        for i, n in enumerate(order):
            if n.left >= 0:
                sp = n.split
                f, b = sp.feature, sp.bin
                feature[i], bins[i], dl[i], gain[i] = f, b, sp.default_left, sp.gain
                e = binmapper_edges[f]
                thr[i] = e[b] if b < e.size else math.inf
                li, ri = (n.left, n.right) if new_id is None else (new_id[n.left], new_id[n.right])
                left[i], right[i] = li, ri
                if n.lazy is not None:
                    pending.append((n.lazy[0], n.lazy[1], li, ri))
            elif n.mask is not None:
                mask_leaves.append((n.mask, i))
            elif not n.lazy_leaf:
                leaf_rows[i] = n.rows
        i64 = np.int64
        feature, bins, left, right = (np.array(v, dtype=i64) for v in (feature, bins, left, right))
        count = np.array(count, dtype=np.float64).astype(i64)
        thr, value, gain, hess = (np.array(v, dtype=np.float64) for v in (thr, value, gain, hess))
        dl = np.array(dl, dtype=bool)
        lower, upper = np.array(lower, dtype=np.float64), np.array(upper, dtype=np.float64)
        tree = Tree(feature, bins, thr, dl, left, right, value, gain, hess, count)
        return GrownTree(tree, leaf_rows, lower, upper, pending, mask_leaves)


def grow_tree(layout: Layout, hb: HistogramBuilder, n_bins: np.ndarray, edges, params: GrowerParams,
              rows=None, feature_mask=None, monotone=None, has_missing: bool = True,
              flat_bins: FlatBins | None = None) -> GrownTree:
    """Grow one tree on the gradients loaded in ``hb``.

    Parameters
    ----------
    layout : Layout
        Columns (features or EFB bundles) and their codes.
    hb : HistogramBuilder
        Holds this round's gradients.
    n_bins : ndarray of int
        Value bins per feature.
    edges : list of ndarray
        Bin edges per feature (for readable thresholds).
    params : GrowerParams
    rows : ndarray of intp, optional
        The rows of this round (row sampling); default all.
    feature_mask : ndarray of bool, optional
        Features this tree may split on.
    monotone : ndarray of int, optional
        Constraint per feature.
    has_missing : bool
        Whether the training data has missing values anywhere.
    flat_bins : FlatBins, optional
        The flat bin layout of ``n_bins`` and ``layout`` (built if not given; reuse it across rounds).

    Returns
    -------
    GrownTree
        Leaf values unshrunk (:math:`w^*`), with each leaf's rows.
    """
    fb = flat_bins if flat_bins is not None else FlatBins(n_bins, layout)
    g = _Grower(layout, hb, fb, params, feature_mask, monotone, has_missing)
    g.grow(rows)
    if len(g.nodes) == 1:
        g.nodes[0].rows = g.nodes[0].rows
    return g.result(edges)
