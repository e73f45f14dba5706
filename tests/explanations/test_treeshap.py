"""The native engine's TreeSHAP against two independent computations: exact Shapley values by enumeration of
every feature subset (the path-dependent value function, Lundberg et al. 2018, Algorithm 1) on random trees, and
XGBoost's own pred_contribs on XGBoost's trees read into the same TreeSHAP."""

import itertools
import json
import math

import numpy as np
import pytest

from qwkboost.native.treeshap import TreeParts, tree_shap


def random_tree(rs, depth: int, n_features: int, X: np.ndarray):
    """A random tree (features repeat along paths, a test may send missing values either way) and its covers."""
    feature, left, right, value, thr, nan_left = [], [], [], [], [], []

    def node(d):
        j = len(feature)
        for a in (feature, left, right, value, thr, nan_left):
            a.append(0)
        feature[j], left[j], right[j] = -1, -1, -1
        if d < depth and rs.rand() < 0.85:
            feature[j], thr[j], nan_left[j] = rs.randint(n_features), rs.rand(), rs.rand() < 0.5
            left[j] = node(d + 1)
            right[j] = node(d + 1)
        else:
            value[j] = rs.randn()
        return j

    node(0)
    tree = dict(feature=np.array(feature), left=np.array(left), right=np.array(right), value=np.array(value, float),
                thr=np.array(thr, float), nan_left=np.array(nan_left, bool))
    goes = go_left(tree, X)
    cover = np.zeros(len(feature))
    for i in range(X.shape[0]):
        j = 0
        cover[j] += 1
        while tree["feature"][j] >= 0:
            j = tree["left"][j] if goes[j, i] else tree["right"][j]
            cover[j] += 1
    tree["cover"] = np.maximum(cover, 1e-3)
    return tree


def go_left(tree, X):
    out = np.zeros((len(tree["feature"]), X.shape[0]), dtype=bool)
    for j, f in enumerate(tree["feature"]):
        if f >= 0:
            x = X[:, f]
            out[j] = np.where(np.isnan(x), tree["nan_left"][j], x < tree["thr"][j])
    return out


def exact(tree, x_goes, n_features):
    """Shapley values by enumerating every subset, with the path-dependent value of a subset."""
    def value(S, j=0):
        if tree["feature"][j] < 0:
            return tree["value"][j]
        if tree["feature"][j] in S:
            return value(S, tree["left"][j] if x_goes[j] else tree["right"][j])
        lc, rc = tree["left"][j], tree["right"][j]
        return (tree["cover"][lc] * value(S, lc) + tree["cover"][rc] * value(S, rc)) / tree["cover"][j]

    phi = np.zeros(n_features)
    for i in range(n_features):
        others = [f for f in range(n_features) if f != i]
        for r in range(n_features):
            for S in itertools.combinations(others, r):
                w = math.factorial(r) * math.factorial(n_features - r - 1) / math.factorial(n_features)
                phi[i] += w * (value(set(S) | {i}) - value(set(S)))
    return phi, value(set())


@pytest.mark.parametrize("seed", range(6))
def test_tree_shap_is_the_exact_shapley_value_of_the_path_dependent_game(seed):
    rs = np.random.RandomState(seed)
    F = 5
    X = rs.rand(300, F)
    X[rs.rand(300, F) < 0.1] = np.nan
    tree = random_tree(rs, depth=6, n_features=F, X=X)
    rows = X[:12]
    goes = go_left(tree, rows)
    parts = TreeParts(tree["feature"], tree["left"], tree["right"], tree["value"], tree["cover"])
    phi, expected = tree_shap(parts, goes, F)
    for i in range(rows.shape[0]):
        want, base = exact(tree, goes[:, i], F)
        np.testing.assert_allclose(phi[i], want, rtol=0, atol=1e-12)
        assert expected == pytest.approx(base, abs=1e-12)


def xgboost_parts(booster, X):
    """Each XGBoost tree of ``booster`` as TreeParts (covers: XGBoost's hessian sums), with the rows' directions
    (missing values to the tree's default)."""
    out = []
    for text in booster.get_dump(dump_format="json", with_stats=True):
        nodes = {}
        stack = [json.loads(text)]
        while stack:
            node = stack.pop()
            nodes[node["nodeid"]] = node
            stack += node.get("children", [])
        n = max(nodes) + 1
        feature, left, right = np.full(n, -1), np.full(n, -1), np.full(n, -1)
        value, cover = np.zeros(n), np.zeros(n)
        goes = np.zeros((n, X.shape[0]), dtype=bool)
        for j, node in nodes.items():
            cover[j] = node["cover"]
            if "leaf" in node:
                value[j] = node["leaf"]
                continue
            f = int(node["split"].lstrip("f"))
            feature[j], left[j], right[j] = f, node["yes"], node["no"]
            x = X[:, f]
            # XGBoost compares in float32: its feature values and its threshold
            goes[j] = np.where(np.isnan(x), node["missing"] == node["yes"],
                               x.astype(np.float32) < np.float32(node["split_condition"]))
        out.append((TreeParts(feature, left, right, value, cover), goes))
    return out


def test_tree_shap_on_xgboost_trees_is_xgboosts_pred_contribs():
    import xgboost as xgb

    rs = np.random.RandomState(0)
    X = rs.rand(3000, 6)
    X[rs.rand(3000, 6) < 0.05] = np.nan
    y = np.nansum(X[:, :3], axis=1) + 0.5 * np.nan_to_num(X[:, 3]) * np.nan_to_num(X[:, 4]) + 0.1 * rs.randn(3000)
    booster = xgb.train({"max_depth": 6, "eta": 0.3, "base_score": 0.0, "tree_method": "hist"},
                        xgb.DMatrix(X, label=y), num_boost_round=25)
    rows = X[:200]
    phi = np.zeros((200, 6))
    for parts, goes in xgboost_parts(booster, rows):
        phi += tree_shap(parts, goes, 6)[0]
    want = booster.predict(xgb.DMatrix(rows), pred_contribs=True)[:, :-1]
    np.testing.assert_allclose(phi, want, rtol=0, atol=2e-5)          # XGBoost computes in float32
