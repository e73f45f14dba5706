r"""The tree grower's records: its parameters, a node's rows, a node, the grown tree, and row partitions.

A node keeps its training rows as a :class:`NodeRows` (sorted indices, a mask
over every row, or its parent's rows with a go-left mask), so a split costs one
comparison on the split feature's codes (:func:`go_left`) and one
``np.compress`` (:func:`split_rows`). A :class:`TreeNode` is one node while the
tree grows (:class:`~qwkboost.native.grower.TreeGrower`), and a :class:`GrownTree`
is the finished tree with its leaves' rows, from which the training scores are
updated without predicting.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from qwkboost.native.binning import MISSING_BIN
from qwkboost.native.bundling import Layout
from qwkboost.native.predictor import Tree
from qwkboost.native.splitting import SplitInfo, SplitParams

__all__ = ["GrowerParams", "NodeRows", "TreeNode", "GrownTree", "go_left", "split_rows", "partition",
           "MASK_MIN_SHARE"]

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


class NodeRows:
    """The training rows of a node, in the cheapest form the grower knows them.

    Exactly one of four forms:

    * **every row**: ``index``, ``mask`` and ``go_left`` are all ``None``;
    * **index**: ``index`` holds the sorted row indices;
    * **mask**: ``mask`` is a boolean mask over every row. A large child of a tree
      grown on every row keeps this form: splitting it needs no gather, and its
      histogram comes by subtraction;
    * **deferred**: the rows of ``index`` (``None``: every row) where ``go_left``
      equals ``left``. The two children of a split that can neither split again
      share their parent's rows and go-left mask: building their lists would cost a
      compress of every row of the level, and the training-score update
      (:meth:`GrownTree.leaf_values`) is written from the mask directly.

    Immutable; :meth:`indices` builds the index list of any form.
    """

    __slots__ = ("index", "mask", "go_left", "left")

    def __init__(self, index=None, mask=None, go_left=None, left: bool = True):
        self.index, self.mask, self.go_left, self.left = index, mask, go_left, left

    @classmethod
    def every(cls) -> "NodeRows":
        return cls()

    @classmethod
    def of_index(cls, index: np.ndarray | None) -> "NodeRows":
        return cls(index=index)

    @classmethod
    def of_mask(cls, mask: np.ndarray) -> "NodeRows":
        return cls(mask=mask)

    @classmethod
    def deferred(cls, index: np.ndarray | None, go_left: np.ndarray, left: bool) -> "NodeRows":
        return cls(index=index, go_left=go_left, left=left)

    @property
    def kind(self) -> str:
        """``"every"``, ``"index"``, ``"mask"`` or ``"deferred"``."""
        if self.go_left is not None:
            return "deferred"
        if self.mask is not None:
            return "mask"
        return "every" if self.index is None else "index"

    def indices(self) -> np.ndarray | None:
        """Sorted row indices (``None``: every row), built from whichever form the rows are in."""
        if self.go_left is not None:
            m = self.go_left if self.left else ~self.go_left
            return np.flatnonzero(m) if self.index is None else np.compress(m, self.index)
        if self.mask is not None:
            return np.flatnonzero(self.mask)
        return self.index


class GrownTree:
    """A grown tree with unshrunk weights, and what leaf refits need.

    Attributes
    ----------
    tree : Tree
        Leaf ``value`` holds the unshrunk weight :math:`w^*`.
    leaves : dict of int to NodeRows
        Leaf id -> the training rows that reached it, in any :class:`NodeRows` form.
    lower, upper : ndarray
        Monotone bounds per node.
    """

    def __init__(self, tree: Tree, leaves: dict, lower: np.ndarray, upper: np.ndarray):
        self.tree, self.leaves, self.lower, self.upper = tree, leaves, lower, upper
        # the leaves by form, for leaf_values: masks, index lists, and deferred sibling pairs
        self._masks, self._lists, pairs = [], [], {}
        for j, r in leaves.items():
            if r.go_left is not None:
                pairs.setdefault(id(r.go_left), [r.index, r.go_left, None, None])[2 + (not r.left)] = j
            elif r.mask is not None:
                self._masks.append((r.mask, j))
            else:
                self._lists.append((r.index, j))
        self._pairs = []
        for rows, go, lid, rid in pairs.values():
            if lid is None or rid is None:              # one side only: its rows as a list
                j = rid if lid is None else lid
                self._lists.append((leaves[j].indices(), j))
            else:
                self._pairs.append((rows, go, lid, rid))

    def leaf_rows(self) -> dict:
        """Leaf id -> sorted row indices (``None``: every row); builds the lists, changes nothing."""
        return {j: r.indices() for j, r in self.leaves.items()}

    def leaf_values(self, out: np.ndarray) -> np.ndarray:
        """``out[i]`` = value of the leaf training row ``i`` reached (every row, no sampling)."""
        value = self.tree.value
        # the mask leaves are disjoint and written first: out = sum of mask * value, exact
        # (x * 1 = x, x + 0 = x) and branch-free (masked writes such as np.putmask branch on every row)
        tmp = None
        for i, (mask, j) in enumerate(self._masks):
            if i == 0:
                np.multiply(mask, value[j], out=out)
            else:
                tmp = np.multiply(mask, value[j], out=tmp)
                out += tmp
        for r, j in self._lists:
            if r is None:
                out[:] = value[j]
            else:
                out[r] = value[j]
        for rows, go, lid, rid in self._pairs:
            # a two-entry table indexed by the mask: branch-free, unlike np.where on a random mask
            v = np.array([value[rid], value[lid]]).take(go.view(np.uint8))
            if rows is None:
                out[:] = v
            else:
                out[rows] = v
        return out


class TreeNode:
    r"""A node while the tree grows.

    Attributes
    ----------
    id, depth : int
        Position in :attr:`TreeGrower.nodes` (the growth order) and depth (root 0).
    rows : NodeRows or None
        The node's training rows; ``None`` once it has split (they live in its children).
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
    """

    __slots__ = ("id", "depth", "rows", "totals", "hist", "lower", "upper", "split", "left", "right",
                 "weight", "can", "n")

    def __init__(self, nid, depth, rows, totals, lower, upper):
        self.id, self.depth, self.rows, self.totals = nid, depth, rows, totals
        self.lower, self.upper = lower, upper
        self.hist = None
        self.split = None
        self.left = self.right = -1
        self.weight = 0.0
        self.n = 0
        self.can = False


def go_left(layout: Layout, rows, f: int, b: int, default_left: bool, missing: bool = True,
            cat_left=None) -> np.ndarray:
    """Mask over ``rows`` (``None``: every row) of "bin(x_f) <= b, missing -> default".

    With ``cat_left`` (a categorical split): "bin(x_f) in cat_left, missing -> default"
    (the missing code is the feature's last, :attr:`Layout.n_codes`).
    ``missing=False`` promises that no row has a missing value (skips their test).
    """
    if layout.identity:
        c = layout.codes[f] if rows is None else layout.codes[f].take(rows)
    else:
        c = layout.feature_codes(f, rows)
    if cat_left is not None:
        table = np.zeros(int(layout.n_codes[f]), dtype=bool)
        table[cat_left] = True
        table[-1] = default_left
        return table.take(c)
    mask = c <= b
    if default_left and missing:
        mask |= c == MISSING_BIN
    return mask


def split_rows(rows, mask):
    """Rows where ``mask`` holds and where it does not; both stay sorted."""
    if rows is None:
        return np.flatnonzero(mask), np.flatnonzero(~mask)
    return np.compress(mask, rows), np.compress(~mask, rows)


def partition(layout: Layout, rows, split: SplitInfo):
    """Rows going left and right at ``split``; both stay sorted."""
    return split_rows(rows, go_left(layout, rows, split.feature, split.bin, split.default_left,
                                    cat_left=split.cat_left))
