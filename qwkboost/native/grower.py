r"""Stage 4: grow one tree, depth-wise (XGBoost) or best-first (LightGBM).

:class:`TreeGrower` grows a tree one step at a time (:meth:`TreeGrower.split_next`);
:func:`grow_tree` runs it to the end. Each node keeps its rows as a
:class:`NodeRows`, usually the sorted row indices. Splitting a node partitions
them with one comparison on the split feature's codes (``np.compress``, no
sort), builds the histogram of the smaller child only and gets its sibling by
subtraction (:mod:`qwkboost.native.histogram`); the node records are in
:mod:`qwkboost.native.nodes`. Two shortcuts leave row lists
unbuilt: when the tree grows on every row, a child holding at least
:data:`MASK_MIN_SHARE` of them keeps a boolean mask over all rows instead (its
histogram comes by subtraction, and splitting it needs no gather); and when
neither child of a split can split again, both keep their parent's rows and
go-left mask ("deferred"), from which :meth:`GrownTree.leaf_values` writes the
training-score update. :meth:`NodeRows.indices` builds the list of any form.

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

import numpy as np

from qwkboost.native.bundling import Layout
from qwkboost.native.histogram import HistogramBuilder, pool, subtract
from qwkboost.native.nodes import (
    MASK_MIN_SHARE,
    GrowerParams,
    GrownTree,
    NodeRows,
    TreeNode,
    go_left,
    partition,
    split_rows,
)
from qwkboost.native.predictor import Tree
from qwkboost.native.splitting import (
    FlatBins,
    find_best_splits,
    leaf_weight_scalar,
)

# GrowerParams, NodeRows, GrownTree, partition, go_left and split_rows live in qwkboost.native.nodes
__all__ = ["GrowerParams", "TreeGrower", "TreeNode", "NodeRows", "grow_tree", "GrownTree", "partition", "go_left",
           "split_rows", "PARALLEL_MIN_NODE_ROWS", "MASK_MIN_SHARE"]

# a level is split on the thread pool only if its nodes average this many rows
# (below, task overhead and GIL hand-overs cost more than the second core gives)
PARALLEL_MIN_NODE_ROWS = 50_000
class TreeGrower:
    """Grows one tree on the gradients loaded in a :class:`HistogramBuilder`.

    The constructor makes the root, builds its histogram and searches its best
    split. Then :meth:`split_next` takes one step: the best leaf (``lossguide``)
    or the whole current level (``depthwise``: a level is searched and split
    together); :meth:`can_split_further` says whether another step would split
    anything, :meth:`grow` steps to the end and :meth:`finish` returns the tree.
    The grower asks the builder for histograms and sums and the split search for
    splits (:func:`~qwkboost.native.splitting.find_best_splits`); it owns the
    rows, the order of growth, the monotone bounds and pruning.

    Parameters
    ----------
    layout : Layout
        Columns (features, or EFB bundles) and their codes.
    hb : HistogramBuilder
        Holds this round's gradients.
    params : GrowerParams
    rows : ndarray of intp, optional
        The rows of this round (row sampling); default every row.
    feature_mask : ndarray of bool, optional
        Features this tree may split on.
    monotone : ndarray of int, optional
        Constraint per feature.
    has_missing : bool
        Whether the training data has missing values anywhere.
    flat_bins : FlatBins
        The flat bin layout of the features (:class:`~qwkboost.native.splitting.FlatBins`).
    edges : list of ndarray
        Bin edges per feature (for the tree's readable thresholds).

    Attributes
    ----------
    nodes : list of TreeNode
        Every node made so far, in the order made (parents before children).
    n_leaves : int
    """

    def __init__(self, layout: Layout, hb: HistogramBuilder, params: GrowerParams, *, flat_bins: FlatBins,
                 edges, rows=None, feature_mask=None, monotone=None, has_missing: bool = True):
        self.layout, self.hb, self.fb, self.p = layout, hb, flat_bins, params
        self.edges = edges
        self.sp = params.split
        self.feature_mask = feature_mask
        self.cols = layout.columns_for(feature_mask)
        self.monotone = monotone if monotone is not None and np.any(monotone != 0) else None
        self.has_missing = has_missing
        self.nodes: list[TreeNode] = []
        self.n_leaves = 1
        self._pruned = False
        self._tree = None
        sp = self.sp
        self._max_depth = params.max_depth if params.max_depth > 0 else math.inf
        self._min_h = 2 * sp.min_child_weight               # a node needs twice a child's minimum
        self._min_c = 2 * max(1, sp.min_samples_leaf)
        self._lossguide = params.grow_policy == "lossguide"
        self._frontier: list[TreeNode] = []                     # depth-wise: the searched level
        self._cands = None                                   # ... and its nodes that will split
        self._heap: list = []                                # best-first: (-gain, id) of split leaves
        self._start(rows)

    # -- helpers ---------------------------------------------------------------
    def _new(self, depth, totals, lower, upper, weight=None, extra_l2: float = 0.0) -> TreeNode:
        node = TreeNode(len(self.nodes), depth, None, totals, lower, upper)
        G, H, C = totals
        node.weight = leaf_weight_scalar(G, H, self.sp.reg_lambda + extra_l2, self.sp.reg_alpha, lower, upper) \
            if weight is None else weight
        node.n = int(C)
        node.can = depth < self._max_depth and H >= self._min_h and C >= self._min_c
        self.nodes.append(node)
        return node

    def _search(self, nodes: list[TreeNode]) -> None:
        """Best split of each node (one vectorised search for all of them)."""
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
        mask = self.feature_mask
        if not built.all():
            allowed = np.zeros(self.fb.n_bins.size, dtype=bool)
            allowed[self.fb.feat_of[built]] = True
            mask = allowed if mask is None else (mask & allowed)
        splits = find_best_splits(flat, totals, self.sp, self.fb, mask, lower, upper, self.monotone,
                                  self.has_missing, self.hb.exact_hess_scale())
        pre, gamma = self.p.prune == "pre", self.sp.gamma
        for n, s in zip(nodes, splits):
            n.split = None if s is None or (pre and s.gain < gamma) else s

    def _bounds(self, node: TreeNode, f: int, wl: float, wr: float):
        lo, hi = node.lower, node.upper
        if self.monotone is None or self.monotone[f] == 0:
            return (lo, hi), (lo, hi)
        mid = 0.5 * (wl + wr)
        if self.monotone[f] > 0:
            return (lo, min(hi, mid)), (max(lo, mid), hi)
        return (max(lo, mid), hi), (lo, min(hi, mid))

    def _split(self, node: TreeNode, parts=None):
        """Partition ``node`` (or use ``parts``, its partition done elsewhere); return its children."""
        s = node.split
        f, b, dl, L, R = s.feature, s.bin, s.default_left, s.left, s.right
        lam, alpha = self.sp.reg_lambda + s.child_l2, self.sp.reg_alpha     # cat_l2 after a category-set split
        wl = leaf_weight_scalar(L[0], L[1], lam, alpha, node.lower, node.upper)
        wr = leaf_weight_scalar(R[0], R[1], lam, alpha, node.lower, node.upper)
        if self.monotone is None:
            ll = rl = node.lower
            lu = ru = node.upper
        else:
            (ll, lu), (rl, ru) = self._bounds(node, f, wl, wr)
        # child row counts: exact from the split search when it counted rows, else from
        # the partition; L, R are this node's own lists (from the search), updated in place
        nr = node.rows
        lmask = go = None
        if parts is not None:
            lrows, rrows = parts
            L[2], R[2] = float(lrows.size), float(rrows.size)
        elif self.all_rows and nr.index is None:
            # the root, or a node kept as a mask: children as masks over every row
            t = go_left(self.layout, None, f, b, dl, self.has_missing, s.cat_left)
            if nr.mask is None:
                lmask, rmask = t, ~t
            else:
                lmask, rmask = nr.mask & t, np.greater(nr.mask, t)     # mask & ~t
            if not s.exact_counts:
                nl = int(np.count_nonzero(lmask))
                L[2], R[2] = float(nl), float(node.n - nl)
        else:
            go = go_left(self.layout, nr.index, f, b, dl, self.has_missing, s.cat_left)
            if not s.exact_counts:
                nl = int(np.count_nonzero(go))
                L[2], R[2] = float(nl), float(go.size - nl)
        # a child whose bounds did not move keeps the weight just computed
        pb = (node.lower, node.upper)
        left = self._new(node.depth + 1, L, ll, lu, wl if (ll, lu) == pb else None, s.child_l2)
        right = self._new(node.depth + 1, R, rl, ru, wr if (rl, ru) == pb else None, s.child_l2)
        if parts is not None:
            left.rows, right.rows = NodeRows(lrows), NodeRows(rrows)
        elif lmask is not None:
            if left.can or right.can:
                small = left if left.n <= right.n else right       # its histogram gets built
                keep = MASK_MIN_SHARE * self.hb.n_samples
                for c, m in ((left, lmask), (right, rmask)):
                    c.rows = NodeRows(m.nonzero()[0]) if (c is small or c.n < keep) \
                        else NodeRows(None, m)
            else:
                left.rows, right.rows = NodeRows(None, lmask), NodeRows(None, rmask)   # final leaves
        elif left.can or right.can:
            lrows, rrows = split_rows(nr.index, go)
            left.rows, right.rows = NodeRows(lrows), NodeRows(rrows)
        else:
            # both children are final leaves: keep the mask, build no row lists
            left.rows = NodeRows(nr.index, None, go, True)
            right.rows = NodeRows(nr.index, None, go, False)
        node.left, node.right = left.id, right.id
        node.rows = None
        self.n_leaves += 1
        return left, right

    def _child_hists(self, parent: TreeNode, left: TreeNode, right: TreeNode, built=None) -> list[TreeNode]:
        """Histograms of the children that may split: build the smaller, subtract for the other."""
        want = [c for c in (left, right) if c.can]
        if want:
            small, big = (left, right) if left.n <= right.n else (right, left)
            small.hist = built if built is not None else self.hb.build(small.rows.indices(), self.cols)
            if big in want:
                big.hist = subtract(parent.hist, small.hist)
        parent.hist = None
        return want

    def _threaded(self, nodes) -> bool:
        rows = sum(n.n for n in nodes)
        return self.hb.n_jobs > 1 and len(nodes) > 1 and rows >= PARALLEL_MIN_NODE_ROWS * len(nodes)

    def _split_level(self, cands: list[TreeNode]) -> list[TreeNode]:
        """Split every node of a level; return the children that may split, with their histograms.

        For large nodes the partitions and histogram builds run on the thread pool.
        """
        threaded = self._threaded(cands)
        if threaded:
            ex = pool(self.hb.n_jobs)
            for n in cands:
                if n.rows.mask is not None:                 # row lists for the pool's partitions
                    n.rows = NodeRows(n.rows.indices())
            parts = list(ex.map(lambda n: partition(self.layout, n.rows.index, n.split), cands))
            kids = [self._split(n, pr) for n, pr in zip(cands, parts)]
        else:
            kids = [self._split(n) for n in cands]
        need = []
        for n, (l, r) in zip(cands, kids):
            if l.can or r.can:
                need.append((n, l, r, l if l.n <= r.n else r))
            else:
                n.hist = None                               # its children are final leaves
        # the smaller child of each parent gets built (the builder counts the small ones together)
        if threaded:
            hists = list(ex.map(lambda t: self.hb.build(t[3].rows.indices(), self.cols, in_pool=True), need))
        else:
            hists = self.hb.build_level([t[3].rows.indices() for t in need], self.cols)
        nxt = []
        for (n, l, r, _), h in zip(need, hists):
            nxt.extend(self._child_hists(n, l, r, h))
        return nxt

    # -- growth ----------------------------------------------------------------
    def _start(self, rows) -> None:
        """The root: its rows, sums and histogram, and its best split."""
        n = self.hb.n_samples if rows is None else rows.size
        self.all_rows = rows is None
        hist = self.hb.build(rows, self.cols) if n >= 2 else None
        if hist is not None:
            # the totals from the histogram itself keep "parent - left" consistent with the bins
            v = int(self.layout.vcols[self.cols[0]])          # the first column's slots
            G, H = float(hist[0, :v].sum()), float(hist[1, :v].sum())
        else:
            G, H = self.hb.sums(rows)
        root = self._new(0, [G, H, float(n)], -np.inf, np.inf)
        root.rows = NodeRows(rows)
        if not root.can:
            return
        root.hist = hist
        self._search([root])
        if self._lossguide:
            if root.split is not None:
                heapq.heappush(self._heap, (-root.split.gain, root.id))
        else:
            self._frontier = [root]

    def _room(self) -> int:
        return np.iinfo(np.int64).max if self.p.max_leaves <= 0 else self.p.max_leaves - self.n_leaves

    def _level_candidates(self) -> list[TreeNode]:
        """The nodes of the searched level that will split (with ``max_leaves``: the best ones)."""
        cands = [n for n in self._frontier if n.split is not None]
        if self.p.max_leaves > 0:
            cands.sort(key=lambda n: -n.split.gain)
            cands = cands[: max(0, self._room())]
        return cands

    def can_split_further(self) -> bool:
        """Whether :meth:`split_next` would split a node."""
        if self._tree is not None:
            return False
        if self._lossguide:
            return bool(self._heap) and self._room() > 0
        if self._cands is None:
            self._cands = self._level_candidates()
        return bool(self._cands)

    def split_next(self) -> list[TreeNode]:
        """Take one step of growth and return the nodes it made.

        ``lossguide``: split the leaf with the largest gain into two children and
        search theirs. ``depthwise``: split every chosen node of the current level
        and search the next level together.
        """
        if not self.can_split_further():
            raise RuntimeError("split_next: no node can split further (see can_split_further)")
        first = len(self.nodes)
        if self._lossguide:
            _, nid = heapq.heappop(self._heap)
            node = self.nodes[nid]
            left, right = self._split(node)
            want = self._child_hists(node, left, right)
            if want:
                self._search(want)
                for c in want:
                    if c.split is not None:
                        heapq.heappush(self._heap, (-c.split.gain, c.id))
                    else:
                        c.hist = None
        else:
            cands, self._cands = self._cands, None
            for n in self._frontier:
                if n not in cands:
                    n.hist = None
            self._frontier = self._split_level(cands)
            if self._frontier:
                self._search(self._frontier)
        return self.nodes[first:]

    def grow(self) -> GrownTree:
        """Split until no node can split further, then :meth:`finish`."""
        while self.can_split_further():
            self.split_next()
        return self.finish()

    def leaves(self) -> list[TreeNode]:
        """The current leaves (nodes without children, pruned ones excluded)."""
        reach, queue = [], [0]
        while queue:
            j = queue.pop()
            n = self.nodes[j]
            if n.left >= 0:
                queue += [n.left, n.right]
            else:
                reach.append(n)
        return sorted(reach, key=lambda n: n.id)

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
                lr, rr = l.rows, r.rows
                if lr.go_left is not None and lr.go_left is rr.go_left:
                    node.rows = NodeRows(lr.index)          # the rows both shared
                elif lr.mask is not None and rr.mask is not None:
                    node.rows = NodeRows(None, lr.mask | rr.mask)
                else:
                    node.rows = NodeRows(np.concatenate([lr.indices(), rr.indices()]))
                node.left = node.right = -1
                l.id = r.id = -1  # detached
                self._pruned = True

    def finish(self) -> GrownTree:
        """Prune (``prune="post"``) and return the tree; the grower is then done."""
        if self._tree is not None:
            return self._tree
        self._post_prune()
        nodes = self.nodes
        if not self._lossguide and self.p.max_leaves <= 0 and not self._pruned:
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
        edges = self.edges
        # plain lists first (per-element writes into NumPy arrays cost ~10x more), same values
        feature, bins, thr, dl = [-1] * m, [0] * m, [math.inf] * m, [False] * m
        left, right, gain = [-1] * m, [-1] * m, [0.0] * m
        value = [n.weight for n in order]
        hess = [n.totals[1] for n in order]
        count = [n.totals[2] for n in order]
        lower = [n.lower for n in order]
        upper = [n.upper for n in order]
        leaves = {}
        cats = None
        for i, n in enumerate(order):
            if n.left >= 0:
                sp = n.split
                f, b = sp.feature, sp.bin
                feature[i], bins[i], dl[i], gain[i] = f, b, sp.default_left, sp.gain
                if sp.cat_left is not None:
                    cats = cats or [None] * m
                    cats[i] = sp.cat_left
                e = edges[f]
                thr[i] = e[b] if b < e.size else math.inf
                li, ri = (n.left, n.right) if new_id is None else (new_id[n.left], new_id[n.right])
                left[i], right[i] = li, ri
            else:
                leaves[i] = n.rows
        i64 = np.int64
        feature, bins, left, right = (np.array(v, dtype=i64) for v in (feature, bins, left, right))
        count = np.array(count, dtype=np.float64).astype(i64)
        thr, value, gain, hess = (np.array(v, dtype=np.float64) for v in (thr, value, gain, hess))
        dl = np.array(dl, dtype=bool)
        lower, upper = np.array(lower, dtype=np.float64), np.array(upper, dtype=np.float64)
        tree = Tree(feature, bins, thr, dl, left, right, value, gain, hess, count, cat_left=cats)
        self._tree = GrownTree(tree, leaves, lower, upper)
        return self._tree


def grow_tree(layout: Layout, hb: HistogramBuilder, n_bins: np.ndarray, edges, params: GrowerParams,
              rows=None, feature_mask=None, monotone=None, has_missing: bool = True,
              flat_bins: FlatBins | None = None) -> GrownTree:
    """Grow one tree on the gradients loaded in ``hb``: a :class:`TreeGrower` run to the end.

    The arguments are :class:`TreeGrower`'s, except ``n_bins`` (value bins per feature), from which
    ``flat_bins`` is built when not given (reuse one across rounds).

    Returns
    -------
    GrownTree
        Leaf values unshrunk (:math:`w^*`), with each leaf's rows.
    """
    fb = flat_bins if flat_bins is not None else FlatBins(n_bins, layout)
    g = TreeGrower(layout, hb, params, flat_bins=fb, edges=edges, rows=rows, feature_mask=feature_mask,
                   monotone=monotone, has_missing=has_missing)
    return g.grow()
