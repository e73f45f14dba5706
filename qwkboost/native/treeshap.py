r"""Path-dependent TreeSHAP in NumPy, for any tree whose rows' directions at each node are known.

Lundberg, Erion and Lee, "Consistent individualized feature attribution for tree ensembles" (2018) define a
tree's value of a feature set :math:`S` for a row :math:`x` by following :math:`x` at the splits on features in
:math:`S` and averaging the children by their training cover elsewhere. For one leaf :math:`l` with value
:math:`v_l`, whose path from the root tests the distinct features :math:`u_1, \dots, u_k` (a feature tested twice
counts once: its fractions multiply and the row must pass both tests), that value is a product

.. math:: E_l(S) = v_l \prod_{j \in S} o_j \prod_{j \notin S} z_j ,

with :math:`o_j \in \{0, 1\}` whether the row passes the path's tests of :math:`u_j`, and :math:`z_j` the share of
the training cover that passes them. The Shapley value of :math:`u_i` in this product game is

.. math:: \phi_i = v_l\,(o_i - z_i) \sum_{s=0}^{k-1} \frac{s!\,(k-1-s)!}{k!}\,[t^s] \prod_{j \ne i} (o_j\,t + z_j),
   :label: treeshap-leaf

and a tree's SHAP values are the sums over its leaves; their sum plus the expected value
:math:`\sum_l v_l\,c_l / c_{\text{root}}` is the tree's output for the row (local accuracy). The row enters
:eq:`treeshap-leaf` only through its pattern :math:`(o_1, \dots, o_k)`, so each leaf's values are computed once
per pattern that occurs (at most :math:`2^k`), for all features of the path at once, and gathered to the rows:
the work per tree does not grow with the rows beyond one gather and one add per leaf.

:func:`tree_shap` takes a tree as :class:`TreeParts` and the rows' directions at its internal nodes; the engines
that have no TreeSHAP of their own (the native engine) build both, and the tests build them from XGBoost's trees
to compare with its ``pred_contribs``.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import factorial

import numpy as np

__all__ = ["TreeParts", "tree_shap", "leaf_paths", "tree_parts", "native_go_left", "booster_shap"]

#: Paths testing at most this many distinct features get a table of every pattern (2^k rows); longer ones only
#: of the patterns their rows have.
ALL_PATTERNS = 10


@dataclass(frozen=True)
class TreeParts:
    """A tree as TreeSHAP reads it.

    Attributes
    ----------
    feature : ndarray of int
        Split feature of each node; -1 at a leaf.
    left, right : ndarray of int
        Children (-1 at a leaf).
    value : ndarray of float
        Leaf outputs (internal nodes' entries are not read).
    cover : ndarray of float
        Training cover of each node (rows, or hessian sums), > 0 where rows reach.
    """

    feature: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    cover: np.ndarray


def leaf_paths(tree: TreeParts) -> list[tuple[int, list[tuple[int, bool]]]]:
    """Every leaf and its path from the root: ``(leaf, [(node, went_left), ...])``, depth first."""
    out: list = []
    stack: list = [(0, [])]
    while stack:
        j, path = stack.pop()
        if tree.feature[j] < 0:
            out.append((j, path))
            continue
        stack.append((int(tree.right[j]), path + [(j, False)]))
        stack.append((int(tree.left[j]), path + [(j, True)]))
    return out


def _weights(k: int) -> np.ndarray:
    """:math:`s!(k-1-s)!/k!` for :math:`s = 0..k-1`."""
    return np.array([factorial(s) * factorial(k - 1 - s) / factorial(k) for s in range(k)])


def _pattern_values(o: np.ndarray, z: np.ndarray, v: np.ndarray) -> np.ndarray:
    r""":eq:`treeshap-leaf` for ``L`` leaves of ``k`` path features each, every pattern (rows of ``o``, shape
    ``(P, k)``) and every path feature at once: shape ``(L, P, k)`` (``z`` of shape ``(L, k)``, ``v`` ``(L,)``)."""
    P, k = o.shape
    L = z.shape[0]
    # coef[l, p, i, s]: [t^s] of prod_{j != i} (o_j t + z_j), one factor j at a time (the factor is 1 where j == i)
    coef = np.zeros((L, P, k, k))
    coef[..., 0] = 1.0
    eye = np.eye(k, dtype=bool)
    shifted = np.zeros_like(coef)
    for j in range(k):
        shifted[..., 1:] = coef[..., :-1]
        new = z[:, j, None, None, None] * coef + o[None, :, j, None, None] * shifted
        coef = np.where(eye[j][None, None, :, None], coef, new)
    total = coef @ _weights(k)                                          # (L, P, k)
    return v[:, None, None] * (o[None, :, :] - z[:, None, :]) * total


def _merged_path(tree: TreeParts, path, cover) -> tuple[list[int], list[float], list[tuple[int, int, bool]]]:
    """A leaf's distinct path features, their cover fractions, and each test as (position, node, went left)."""
    feats: list[int] = []
    zs: list[float] = []
    tests: list[tuple[int, int, bool]] = []
    for j, went_left in path:
        child = tree.left[j] if went_left else tree.right[j]
        z = cover[child] / cover[j] if cover[j] > 0 else 0.0
        f = int(tree.feature[j])
        if f in feats:          # a feature tested again on the path: one player, both tests
            p = feats.index(f)
            zs[p] *= z
        else:
            p = len(feats)
            feats.append(f)
            zs.append(z)
        tests.append((p, int(j), bool(went_left)))
    return feats, zs, tests


def tree_shap(tree: TreeParts, go_left: np.ndarray, n_features: int, paths=None) -> tuple[np.ndarray, float]:
    """SHAP values of one tree for every row, and its expected value.

    Leaves whose paths test the same number :math:`k` of distinct features are done together: their rows'
    patterns, every pattern's values (:eq:`treeshap-leaf`) and the gather to the rows, each in one array
    operation; a path of more than :data:`ALL_PATTERNS` features gets the values of its rows' patterns only.

    Parameters
    ----------
    tree : TreeParts
    go_left : ndarray of bool, shape (n_nodes, n_rows)
        Whether each row goes left at each internal node (rows for leaves are not read).
    n_features : int
    paths : list, optional
        :func:`leaf_paths` of the tree, when the caller keeps them.

    Returns
    -------
    values : ndarray of shape (n_rows, n_features)
    expected : float
        :math:`\\sum_l v_l c_l / c_{root}`; ``values.sum(axis=1) + expected`` is the tree's output.
    """
    n = go_left.shape[1]
    phi = np.zeros((n, n_features))
    cover = np.asarray(tree.cover, dtype=np.float64)
    expected = 0.0
    groups: dict[int, list] = {}
    for leaf, path in (paths if paths is not None else leaf_paths(tree)):
        v = float(tree.value[leaf])
        feats, zs, tests = _merged_path(tree, path, cover)
        expected += v * float(np.prod(zs))
        if feats:
            groups.setdefault(len(feats), []).append((v, feats, zs, tests))
    for k, leaves in groups.items():
        L = len(leaves)
        V = np.array([x[0] for x in leaves])
        F = np.array([x[1] for x in leaves], dtype=np.int64)                 # (L, k)
        Z = np.array([x[2] for x in leaves])                                 # (L, k)
        ll, pp, nodes, lefts = (np.array(c) for c in zip(*[(l, p, j, d) for l, x in enumerate(leaves)
                                                            for p, j, d in x[3]]))
        cond = go_left[nodes] == lefts[:, None]                              # (tests, n): the row passes
        passes = np.ones((L, k, n), dtype=bool)
        key = ll * k + pp
        _, first = np.unique(key, return_index=True)
        passes[ll[first], pp[first]] = cond[first]
        for t in np.setdiff1d(np.arange(key.size), first):                  # a feature's second test: both
            passes[ll[t], pp[t]] &= cond[t]
        code = (passes.astype(np.int64) << np.arange(k, dtype=np.int64)[None, :, None]).sum(axis=1)   # (L, n)
        if k <= ALL_PATTERNS:
            o = ((np.arange(1 << k)[:, None] >> np.arange(k)[None, :]) & 1).astype(np.float64)
            table = _pattern_values(o, Z, V)                                  # (L, 2^k, k)
            vals = table[np.arange(L)[:, None], code]                         # (L, n, k)
        else:
            vals = np.empty((L, n, k))
            for l in range(L):
                patterns, rows_pattern = np.unique(code[l], return_inverse=True)
                o = ((patterns[:, None] >> np.arange(k)[None, :]) & 1).astype(np.float64)
                vals[l] = _pattern_values(o, Z[l:l + 1], V[l:l + 1])[0][rows_pattern]
        onehot = np.zeros((L * k, n_features))
        onehot[np.arange(L * k), F.ravel()] = 1.0
        phi += vals.transpose(1, 0, 2).reshape(n, L * k) @ onehot
    return phi, expected


def tree_parts(tree) -> TreeParts:
    """A native :class:`~qwkboost.native.predictor.Tree` for TreeSHAP: its leaf values (learning rate included)
    and, as cover, its training rows per node (LightGBM's choice; hessian sums can be 0 or vary in sign under
    some objectives)."""
    return TreeParts(tree.feature, tree.left, tree.right, tree.value, tree.count.astype(np.float64))


def native_go_left(tree, codes: np.ndarray, n_codes) -> np.ndarray:
    """Each row's direction at each internal node of a native tree, from the rows' bin codes (feature-major):
    thresholds, category sets and the learned direction of missing values, exactly as the predictor goes."""
    go = np.zeros((tree.n_nodes, codes.shape[1]), dtype=bool)
    for j in np.flatnonzero(tree.feature >= 0):
        f = int(tree.feature[j])
        go[j] = tree.go_left_table(j, int(n_codes[f]))[codes[f]]
    return go


def booster_shap(booster, X: np.ndarray, n_iter: int) -> tuple[np.ndarray, np.ndarray]:
    """SHAP values of a :class:`~qwkboost.native.boosting.NativeBooster`'s first ``n_iter`` rounds.

    Returns
    -------
    values : ndarray of shape (n, n_features), or (n, n_features, n_outputs)
    expected : ndarray of shape (n_outputs,)
        The trees' expected values per output (without the booster's initial score).
    """
    codes = booster._codes(X)
    n_codes = booster.bin_mapper.n_codes_
    K = booster.n_outputs
    n = codes.shape[1]
    values = np.zeros((n, booster.n_features, K))
    expected = np.zeros(K)
    for t, tree in enumerate(booster.trees[:n_iter * K]):
        phi, e = tree_shap(tree_parts(tree), native_go_left(tree, codes, n_codes), booster.n_features)
        values[:, :, t % K] += phi
        expected[t % K] += e
    return (values[:, :, 0] if K == 1 else values), expected
