"""Tree growth: depth-wise and best-first shapes, leaf rows and weights, exactness on small data."""

import numpy as np
import pytest

from qwkboost.native.binning import BinMapper
from qwkboost.native.bundling import Layout
from qwkboost.native.grower import GrowerParams, NodeRows, TreeGrower, grow_tree
from qwkboost.native.histogram import HistogramBuilder
from qwkboost.native.splitting import FlatBins, SplitParams


def setup(X, g, h=None, **gp):
    bm = BinMapper().fit(X)
    codes = bm.transform(X)
    hb = HistogramBuilder(codes, n_jobs=1)
    hb.set_gradients(g, np.ones_like(g) if h is None else h)
    params = GrowerParams(**{"split": SplitParams(), **gp})
    return bm, codes, hb, params


@pytest.fixture(scope="module")
def problem():
    rs = np.random.RandomState(0)
    X = rs.normal(size=(2000, 4))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.5 * X[:, 2] * X[:, 3]
    return X, -(y - y.mean())


def test_depthwise_respects_max_depth(problem):
    X, g = problem
    for depth in (1, 3, 6):
        bm, codes, hb, p = setup(X, g, max_depth=depth)
        t = grow_tree(Layout(codes), hb, bm.n_bins_, bm.edges_, p).tree
        assert t.depth() == depth and t.n_leaves <= 2 ** depth


def test_lossguide_respects_max_leaves_and_grows_best_first(problem):
    X, g = problem
    for leaves in (2, 7, 31):
        bm, codes, hb, p = setup(X, g, grow_policy="lossguide", max_leaves=leaves, max_depth=0)
        t = grow_tree(Layout(codes), hb, bm.n_bins_, bm.edges_, p).tree
        assert t.n_leaves == leaves
    # two leaves: the best-first tree is the depth-1 tree
    bm, codes, hb, p1 = setup(X, g, max_depth=1)
    d1 = grow_tree(Layout(codes), hb, bm.n_bins_, bm.edges_, p1).tree
    bm, codes, hb, p2 = setup(X, g, grow_policy="lossguide", max_leaves=2, max_depth=0)
    lg = grow_tree(Layout(codes), hb, bm.n_bins_, bm.edges_, p2).tree
    np.testing.assert_array_equal(d1.feature, lg.feature)
    np.testing.assert_allclose(d1.value, lg.value)


def test_max_leaves_in_depthwise_keeps_the_best_splits(problem):
    X, g = problem
    bm, codes, hb, p = setup(X, g, max_depth=6, max_leaves=10)
    t = grow_tree(Layout(codes), hb, bm.n_bins_, bm.edges_, p).tree
    assert t.n_leaves == 10


@pytest.mark.parametrize("hess", ["varying", 1.0, 0.5])
def test_leaves_partition_rows_and_hold_newton_weights(problem, hess):
    # a constant power-of-two hessian takes the counts-based search, whose child counts
    # come from the histograms instead of the partitions: they must be the same
    X, g = problem
    h = np.random.RandomState(1).uniform(0.5, 2.0, size=g.size) if hess == "varying" else np.full(g.size, hess)
    bm, codes, hb, p = setup(X, g, h, max_depth=4)
    grown = grow_tree(Layout(codes), hb, bm.n_bins_, bm.edges_, p)
    t = grown.tree
    rows = np.concatenate(list(grown.leaf_rows().values()))
    np.testing.assert_array_equal(np.sort(rows), np.arange(g.size))
    leaf = t.apply(codes)
    for j, r in grown.leaf_rows().items():
        assert np.all(leaf[r] == j)
        assert t.value[j] == pytest.approx(-g[r].sum() / (h[r].sum() + 1.0), rel=1e-9)
        assert t.count[j] == r.size and t.hess[j] == pytest.approx(h[r].sum())


def brute_best_split(x, g, lam):
    """Exhaustive search over thresholds between distinct values of one feature (no missing)."""
    best = (-np.inf, None)
    G = g.sum()
    for v in np.unique(x)[1:]:
        L = x < v
        gl, gr = g[L].sum(), g[~L].sum()
        gain = gl ** 2 / (L.sum() + lam) + gr ** 2 / ((~L).sum() + lam) - G ** 2 / (x.size + lam)
        best = max(best, (gain, v))
    return best


def test_root_split_matches_exhaustive_search_when_every_value_has_a_bin():
    rs = np.random.RandomState(3)
    X = rs.randint(0, 40, size=(300, 3)).astype(float)
    g = rs.normal(size=300) + (X[:, 1] > 17) * 2.0
    bm, codes, hb, p = setup(X, g, max_depth=1)
    t = grow_tree(Layout(codes), hb, bm.n_bins_, bm.edges_, p).tree
    gains = [brute_best_split(X[:, f], g, 1.0) for f in range(3)]
    f = int(np.argmax([gg[0] for gg in gains]))
    assert t.feature[0] == f
    assert t.threshold[0] == gains[f][1]
    assert t.gain[0] == pytest.approx(gains[f][0], rel=1e-9)


def test_row_subset_and_feature_mask(problem):
    X, g = problem
    bm, codes, hb, p = setup(X, g, max_depth=3)
    rows = np.arange(0, 2000, 2)
    mask = np.array([False, True, True, False])
    grown = grow_tree(Layout(codes), hb, bm.n_bins_, bm.edges_, p, rows=rows, feature_mask=mask)
    t = grown.tree
    assert set(t.feature[t.feature >= 0]) <= {1, 2}
    assert t.count[0] == 1000
    np.testing.assert_array_equal(np.sort(np.concatenate(list(grown.leaf_rows().values()))), rows)


def test_nodes_that_cannot_split_stay_leaves():
    X = np.arange(6.0)[:, None]
    g = np.array([-5.0, -5.0, -5.0, 5.0, 5.0, 5.0])
    bm, codes, hb, p = setup(X, g, max_depth=5, split=SplitParams(min_child_weight=2.0))
    t = grow_tree(Layout(codes), hb, bm.n_bins_, bm.edges_, p).tree
    assert t.n_leaves == 2 and t.threshold[0] == 3.0
    # a single row: just a root
    bm, codes, hb, p = setup(np.zeros((1, 2)), np.array([1.0]))
    t = grow_tree(Layout(codes), hb, bm.n_bins_, bm.edges_, p).tree
    assert t.n_nodes == 1 and t.value[0] == pytest.approx(-0.5)


@pytest.mark.parametrize("gp", [{"max_depth": 5}, {"max_depth": 2}, {"max_depth": 1},
                                {"max_depth": 5, "split": SplitParams(gamma=0.5)},
                                {"max_depth": 2, "split": SplitParams(gamma=50.0)},
                                {"max_depth": 2, "split": SplitParams(gamma=1e6)},
                                {"max_depth": 0, "max_leaves": 12, "grow_policy": "lossguide"}])
def test_unbuilt_leaf_rows_give_the_same_scores_and_rows(gp):
    """Leaves kept as masks (big nodes of lopsided trees, and the deepest level) write the same
    training-score update as explicit row lists, and materialise to the same rows."""
    rs = np.random.RandomState(5)
    X = rs.normal(size=(3000, 3))
    g = -(np.where(X[:, 0] > 1.2, 3.0, 0.0) + 0.3 * X[:, 1] + rs.normal(scale=0.1, size=3000))
    bm, codes, hb, p = setup(X, g, **gp)
    grown = grow_tree(Layout(codes), hb, bm.n_bins_, bm.edges_, p)
    fast = grown.leaf_values(np.full(g.size, np.nan))
    leaf = grown.tree.apply(codes)
    np.testing.assert_array_equal(fast, grown.tree.value[leaf])
    kinds = {r.kind for r in grown.leaves.values()}
    if "split" not in gp and gp.get("grow_policy") != "lossguide":
        assert kinds & {"mask", "deferred"}           # the unbuilt forms are what is being tested
    rows = grown.leaf_rows()                         # builds the lists of every form
    for j, r in rows.items():
        r = np.arange(g.size) if r is None else r
        np.testing.assert_array_equal(np.sort(r), np.flatnonzero(leaf == j))


@pytest.mark.parametrize("min_samples_leaf", [1, 2])
def test_missing_rows_with_zero_hessian_keep_their_side(monkeypatch, min_samples_leaf):
    """Rows whose feature is missing and whose hessian is 0 still count as missing rows: the split
    keeps the side the search chose for them, so weights, counts and n_jobs all agree."""
    from qwkboost.native import grower as G

    rs = np.random.RandomState(0)
    n = 800
    X = rs.uniform(size=(n, 2))
    miss = rs.rand(n) < 0.3
    X[miss, 1] = np.nan
    g = np.where(X[:, 0] < 0.5, 3.0, -3.0) + np.where(X[:, 1] < 0.2, 1.0, -0.2)
    g[miss] += 5.0
    h = np.ones(n)
    h[miss] = 0.0
    h[0] = 0.5
    bm = BinMapper().fit(X)
    codes = bm.transform(X)
    monkeypatch.setattr(G, "PARALLEL_MIN_NODE_ROWS", 10)          # let n_jobs=2 use the pool
    trees = {}
    for n_jobs in (1, 2):
        hb = HistogramBuilder(codes, n_jobs=n_jobs)
        hb.set_gradients(g, h, need_counts=True)
        p = GrowerParams(split=SplitParams(min_samples_leaf=min_samples_leaf), max_depth=2)
        grown = grow_tree(Layout(codes), hb, bm.n_bins_, bm.edges_, p, has_missing=True)
        t = trees[n_jobs] = grown.tree
        leaf = t.apply(codes)
        for j in np.flatnonzero(t.feature < 0):
            r = np.flatnonzero(leaf == j)
            assert t.count[j] == r.size >= min_samples_leaf
            assert t.value[j] == pytest.approx(-g[r].sum() / (h[r].sum() + 1.0), rel=1e-9)
    for name in ("feature", "bin", "default_left", "count", "value"):
        np.testing.assert_array_equal(getattr(trees[1], name), getattr(trees[2], name))


@pytest.mark.parametrize("gp", [{"max_depth": 5}, {"max_depth": 6, "max_leaves": 12},
                                {"grow_policy": "lossguide", "max_depth": 0, "max_leaves": 12}])
def test_nodes_are_numbered_breadth_first(problem, gp):
    X, g = problem
    bm, codes, hb, p = setup(X, g, **gp)
    t = grow_tree(Layout(codes), hb, bm.n_bins_, bm.edges_, p).tree
    order, queue = [], [0]
    while queue:
        j = queue.pop(0)
        order.append(j)
        if t.feature[j] >= 0:
            queue += [int(t.left[j]), int(t.right[j])]
    assert order == list(range(t.n_nodes)) and t.n_nodes > 15


def _trees_equal(a, b):
    for key in ("feature", "bin", "threshold", "default_left", "left", "right", "value", "gain", "hess", "count"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)


@pytest.mark.parametrize("gp", [{"grow_policy": "lossguide", "max_leaves": 9, "max_depth": 0},
                                {"grow_policy": "lossguide", "max_leaves": 6, "max_depth": 3,
                                 "split": SplitParams(min_child_weight=40.0)},
                                {"max_depth": 3}, {"max_depth": 4, "max_leaves": 11}])
def test_a_tree_grown_one_step_at_a_time(problem, gp):
    """TreeGrower.split_next: one split (best-first) or one level (depth-wise) per step. After every
    step the leaves partition the rows, each holds its Newton weight, best-first splits the largest
    gain first, and the finished tree is the one grow_tree grows."""
    X, g = problem
    bm, codes, hb, p = setup(X, g, **gp)
    layout = Layout(codes)
    grower = TreeGrower(layout, hb, p, flat_bins=FlatBins(bm.n_bins_, layout), edges=bm.edges_)
    lossguide = p.grow_policy == "lossguide"
    steps = 0
    while grower.can_split_further():
        before = grower.n_leaves
        if lossguide:
            best = max((n for n in grower.leaves() if n.split is not None), key=lambda n: n.split.gain)
        made = grower.split_next()
        steps += 1
        if lossguide:
            assert len(made) == 2 and grower.n_leaves == before + 1
            assert best.left == made[0].id and best.right == made[1].id
        else:
            assert len(made) == 2 * (grower.n_leaves - before) and {n.depth for n in made} == {steps}
        leaves = grower.leaves()
        assert len(leaves) == grower.n_leaves
        rows = [n.rows.indices() for n in leaves]
        np.testing.assert_array_equal(np.sort(np.concatenate(rows)), np.arange(g.size))
        for n, r in zip(leaves, rows):
            assert n.n == r.size
            assert n.weight == pytest.approx(-g[r].sum() / (r.size + 1.0), rel=1e-9)
    with pytest.raises(RuntimeError, match="no node can split further"):
        grower.split_next()
    assert steps >= 3
    stepped = grower.finish()
    assert grower.finish() is stepped                       # finishing twice gives the same tree
    _trees_equal(stepped.tree, grow_tree(layout, hb, bm.n_bins_, bm.edges_, p).tree)


def test_node_rows_forms_give_their_indices():
    go = np.array([True, False, True, True, False])
    idx = np.array([1, 4, 6, 7, 9])
    mask = np.zeros(10, dtype=bool)
    mask[idx] = True
    assert NodeRows.every().kind == "every" and NodeRows.every().indices() is None
    np.testing.assert_array_equal(NodeRows.of_index(idx).indices(), idx)
    assert NodeRows.of_mask(mask).kind == "mask"
    np.testing.assert_array_equal(NodeRows.of_mask(mask).indices(), idx)
    left, right = NodeRows.deferred(idx, go, True), NodeRows.deferred(idx, go, False)
    assert left.kind == right.kind == "deferred"
    np.testing.assert_array_equal(left.indices(), [1, 6, 7])
    np.testing.assert_array_equal(right.indices(), [4, 9])
    np.testing.assert_array_equal(NodeRows.deferred(None, go, False).indices(), [1, 4])
