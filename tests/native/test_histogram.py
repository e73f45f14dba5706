"""Histograms: scatter-adds against a brute-force sum, subtraction, pairs, cached counts."""

import numpy as np
import pytest

from qwkboost.native import histogram
from qwkboost.native.binning import N_CODES
from qwkboost.native.histogram import HistogramBuilder


def brute(codes, g, h, rows):
    F = codes.shape[0]
    out = np.zeros((3, F, N_CODES))
    for f in range(F):
        np.add.at(out[0, f], codes[f, rows], g[rows])
        np.add.at(out[1, f], codes[f, rows], h[rows])
        np.add.at(out[2, f], codes[f, rows], 1.0)
    return out


@pytest.fixture
def data():
    rs = np.random.RandomState(0)
    n, F = 3000, 5
    codes = rs.randint(0, 256, size=(F, n)).astype(np.uint8)
    g = rs.normal(size=n)
    h = rs.uniform(0.5, 2.0, size=n)
    return codes, g, h


def test_build_matches_brute_force(data):
    codes, g, h = data
    hb = HistogramBuilder(codes, n_jobs=1)
    hb.set_gradients(g, h)
    rows = np.sort(np.random.RandomState(1).choice(3000, 700, replace=False))
    np.testing.assert_allclose(hb.build(rows), brute(codes, g, h, rows), atol=1e-9)
    np.testing.assert_allclose(hb.build(None), brute(codes, g, h, np.arange(3000)), atol=1e-9)


def test_constant_hessian_skips_the_pass_and_uses_counts(data):
    codes, g, _ = data
    hb = HistogramBuilder(codes, n_jobs=1)
    hb.set_gradients(g, np.full(3000, 2.0))
    assert hb.const_hess == 2.0
    rows = np.arange(0, 3000, 3)
    out = hb.build(rows)
    np.testing.assert_allclose(out[1], 2.0 * out[2])
    np.testing.assert_allclose(out, brute(codes, g, np.full(3000, 2.0), rows), atol=1e-9)


def test_counts_skipped_when_not_needed(data):
    codes, g, h = data
    hb = HistogramBuilder(codes, n_jobs=1)
    hb.set_gradients(g, h, need_counts=False)
    out = hb.build(np.arange(100))
    assert not out[2].any()
    np.testing.assert_allclose(out[:2], brute(codes, g, h, np.arange(100))[:2], atol=1e-9)


def test_subtraction_trick(data):
    codes, g, h = data
    hb = HistogramBuilder(codes, n_jobs=1)
    hb.set_gradients(g, h)
    parent = np.arange(3000)
    left = parent[codes[2] < 100]
    right = parent[codes[2] >= 100]
    np.testing.assert_allclose(histogram.subtract(hb.build(parent), hb.build(left)), hb.build(right), atol=1e-9)


def test_column_subset_follows_the_order_given(data):
    codes, g, h = data
    hb = HistogramBuilder(codes, n_jobs=1)
    hb.set_gradients(g, h)
    full = hb.build(None)
    np.testing.assert_allclose(hb.build(None, [4, 1]), full[:, [4, 1]])


@pytest.mark.parametrize("hess", ["varying", "constant"])
@pytest.mark.parametrize("need_counts", [True, False])
def test_pairs_give_the_same_histograms(data, monkeypatch, hess, need_counts):
    # joint 16-bit keys (one complex pass for two statistics) against the brute force
    codes, g, h = data
    if hess == "constant":
        h = np.full(h.size, 0.5)
    rows = np.arange(0, 3000, 2)
    ref = brute(codes, g, h, rows)
    monkeypatch.setattr(histogram, "PAIR_MIN_ROWS", 10)
    hb = HistogramBuilder(codes, n_jobs=2)
    assert len(hb.pairs) == 2
    hb.set_gradients(g, h, need_counts=need_counts)
    got = hb.build(rows)
    if not hb.need_counts:
        assert not got[2].any()
        got[2] = ref[2]
    np.testing.assert_allclose(got, ref, atol=1e-9)
    np.testing.assert_allclose(hb.build(rows, [0, 3, 1])[:2], ref[:2, [0, 3, 1]], atol=1e-9)
    np.testing.assert_allclose(hb.build(None)[:2], brute(codes, g, h, np.arange(3000))[:2], atol=1e-9)


def test_two_statistics_in_one_complex_pass_are_exact(data):
    # real and imaginary parts are summed as two real passes would: same bits
    codes, g, h = data
    hb = HistogramBuilder(codes, n_jobs=1)
    hb.set_gradients(g, h, need_counts=False)
    rows = np.sort(np.random.RandomState(2).choice(3000, 900, replace=False))
    out = hb.build(rows)
    for f in range(codes.shape[0]):
        assert np.array_equal(out[0, f], np.bincount(codes[f, rows], g[rows], minlength=N_CODES))
        assert np.array_equal(out[1, f], np.bincount(codes[f, rows], h[rows], minlength=N_CODES))


def test_cached_root_counts(data):
    codes, g, _ = data
    hb = HistogramBuilder(codes, n_jobs=1)
    hb.cache_root_counts()
    hb.set_gradients(g, np.ones(3000))
    out = hb.build(None)
    np.testing.assert_allclose(out, brute(codes, g, np.ones(3000), np.arange(3000)), atol=1e-9)
    np.testing.assert_allclose(hb.build(None, [3])[2], out[2, [3]])


def test_build_many_equals_per_node_builds():
    """A level's small nodes counted together give the per-node histograms bit for bit."""
    import numpy as np
    from qwkboost.native.histogram import HistogramBuilder
    rng = np.random.default_rng(3)
    n = 5_000
    codes = rng.integers(0, 256, size=(4, n)).astype(np.uint8)
    for h in (np.ones(n), rng.random(n) + 0.5):
        hb = HistogramBuilder(codes)
        hb.set_gradients(rng.normal(size=n), h, need_counts=True)
        rows = [np.sort(rng.choice(n, m, replace=False)) for m in (1, 40, 700, 2_000)]
        for cols in (None, [0, 2, 3]):
            many = hb.build_many(rows, cols)
            assert many.shape[0] == len(rows)
            for i, r in enumerate(rows):
                assert np.array_equal(many[i], hb.build(r, cols))


@pytest.mark.parametrize("hess", ["varying", "constant"])
def test_large_nodes_in_blocks_do_not_depend_on_threads(data, monkeypatch, hess):
    # blocks counted by bincount on two threads or by add.at on one: the same bits
    codes, g, h = data
    if hess == "constant":
        h = np.ones(h.size)
    monkeypatch.setattr(histogram, "PAIR_MIN_ROWS", 10)
    monkeypatch.setattr(histogram, "LARGE_NODE_ROWS", 1000)
    monkeypatch.setattr(histogram, "BLOCK_ROWS", 300)
    rows = np.arange(0, 3000, 2)
    built = {}
    for n_jobs in (1, 2):
        hb = HistogramBuilder(codes, n_jobs=n_jobs)
        hb.set_gradients(g, h)
        built[n_jobs] = (hb.build(rows), hb.build(None), hb.build(rows[:900]))
    for a, b in zip(built[1], built[2]):
        assert np.array_equal(a, b)
    np.testing.assert_allclose(built[1][0], brute(codes, g, h, rows), atol=1e-9)
    np.testing.assert_allclose(built[1][1], brute(codes, g, h, np.arange(3000)), atol=1e-9)
    np.testing.assert_allclose(built[1][2], brute(codes, g, h, rows[:900]), atol=1e-9)


@pytest.mark.parametrize("hess", ["varying", "constant"])
@pytest.mark.parametrize("need_counts", [True, False])
def test_pool_builds_by_bincount_give_the_same_bits(data, monkeypatch, hess, need_counts):
    codes, g, h = data
    if hess == "constant":
        h = np.full(h.size, 2.0)
    monkeypatch.setattr(histogram, "PAIR_MIN_ROWS", 10)
    monkeypatch.setattr(histogram, "LARGE_NODE_ROWS", 1000)
    monkeypatch.setattr(histogram, "BLOCK_ROWS", 300)
    hb = HistogramBuilder(codes, n_jobs=2)
    hb.set_gradients(g, h, need_counts=need_counts)
    for rows in (np.arange(0, 3000, 4), np.arange(0, 3000, 2), np.arange(5)):
        for cols in (None, [4, 0, 1]):
            assert np.array_equal(hb.build(rows, cols), hb.build(rows, cols, in_pool=True))


def test_every_cpu_means_those_this_process_may_run_on(monkeypatch):
    """Under ``taskset -c 0`` (a slower or busier machine's share) the native engine's default threads are one,
    not the machine's count."""
    import os

    from qwkboost.native.histogram import resolve_n_jobs

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert resolve_n_jobs(None) == resolve_n_jobs(-1) == 1 and resolve_n_jobs(3) == 3
    monkeypatch.delattr(os, "sched_getaffinity")
    assert resolve_n_jobs(None) == 8
