"""Binning: quantile cut points, uint8 codes, a bin of its own for missing values."""

import numpy as np
import pytest

from qwkboost.native.binning import MAX_BINS, MISSING_BIN, BinMapper


def test_few_distinct_values_get_one_bin_each():
    x = np.array([[3.0], [1.0], [2.0], [3.0], [1.0]])
    bm = BinMapper().fit(x)
    np.testing.assert_array_equal(bm.edges_[0], [2.0, 3.0])
    codes = bm.transform(x)
    assert codes.dtype == np.uint8 and codes.shape == (1, 5)
    np.testing.assert_array_equal(codes[0], [2, 0, 1, 2, 0])
    # between and beyond the training values: bin b holds edges[b-1] <= x < edges[b]
    np.testing.assert_array_equal(bm.transform(np.array([[1.5], [-9.0], [2.0], [99.0]]))[0], [0, 0, 1, 2])


def test_split_on_bin_is_threshold_rule():
    rs = np.random.RandomState(0)
    x = rs.normal(size=(2000, 1))
    bm = BinMapper(max_bin=32).fit(x)
    codes = bm.transform(x)[0]
    for b in (0, 5, 30):
        thr = bm.bin_upper_value(0, b)
        np.testing.assert_array_equal(codes <= b, x[:, 0] < thr)


def test_quantile_bins_are_equal_frequency_uint8():
    rs = np.random.RandomState(1)
    x = rs.exponential(size=(50_000, 2))
    bm = BinMapper().fit(x)
    assert np.all(bm.n_bins_ <= MAX_BINS) and np.all(bm.n_bins_ >= 250)
    codes = bm.transform(x)
    assert codes.max() < MISSING_BIN
    counts = np.bincount(codes[0], minlength=256)[: bm.n_bins_[0]]
    assert counts.min() > 0.5 * len(x) / bm.n_bins_[0]
    assert counts.max() < 1.5 * len(x) / bm.n_bins_[0]


@pytest.mark.parametrize("max_bin", [2, 7, 63, 255])
def test_max_bin_is_respected(max_bin):
    x = np.random.RandomState(2).normal(size=(5000, 1))
    bm = BinMapper(max_bin=max_bin).fit(x)
    assert bm.n_bins_[0] <= max_bin
    assert bm.transform(x).max() < bm.n_bins_[0]


@pytest.mark.parametrize("bad", [1, 256, 3.5, True])
def test_bad_max_bin(bad):
    with pytest.raises(ValueError, match="max_bin"):
        BinMapper(max_bin=bad)


def test_missing_values_have_their_own_bin():
    x = np.array([[1.0, np.nan], [np.nan, np.nan], [2.0, np.nan], [3.0, np.nan]])
    bm = BinMapper().fit(x)
    codes = bm.transform(x)
    assert codes[0, 1] == MISSING_BIN
    assert np.all(codes[1] == MISSING_BIN)          # an all-missing feature
    assert bm.n_bins_[1] == 1 and bm.edges_[1].size == 0
    assert codes[0, [0, 2, 3]].tolist() == [0, 1, 2]


def test_constant_feature_has_one_bin():
    bm = BinMapper().fit(np.full((10, 1), 4.2))
    assert bm.n_bins_[0] == 1
    assert np.all(bm.transform(np.array([[-1.0], [4.2], [10.0]])) == 0)


def test_fitted_on_a_subsample_when_large():
    x = np.random.RandomState(3).normal(size=(20_000, 1))
    full = BinMapper(max_bin=63, subsample=10**9).fit(x)
    sub = BinMapper(max_bin=63, subsample=2000, seed=0).fit(x)
    sub_again = BinMapper(max_bin=63, subsample=2000, seed=0).fit(x)
    other = BinMapper(max_bin=63, subsample=2000, seed=1).fit(x)
    assert not np.array_equal(full.edges_[0], sub.edges_[0])
    np.testing.assert_array_equal(sub.edges_[0], sub_again.edges_[0])     # same seed, same bins
    assert not np.array_equal(sub.edges_[0], other.edges_[0])
    # cut points are sample values, and close to the full-data quantiles
    assert np.all(np.isin(sub.edges_[0], x[:, 0]))
    np.testing.assert_allclose(np.quantile(x, [0.25, 0.5, 0.75]),
                               np.quantile(sub.edges_[0], [0.25, 0.5, 0.75]), atol=0.1)


def test_dict_round_trip():
    x = np.random.RandomState(4).normal(size=(500, 3))
    bm = BinMapper(max_bin=20).fit(x)
    again = BinMapper.from_dict(bm.to_dict())
    np.testing.assert_array_equal(bm.transform(x), again.transform(x))


def test_transform_checks_width():
    bm = BinMapper().fit(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="shape"):
        bm.transform(np.zeros((3, 3)))


def test_cut_points_are_evenly_spaced_order_statistics():
    x = np.arange(1000.0)[:, None]                  # value = rank
    bm = BinMapper(max_bin=10).fit(x)
    # ranks floor(1 + i * 998 / 10): the quantiles between the two end values
    np.testing.assert_array_equal(bm.edges_[0], np.floor(1 + np.arange(1, 10) * 99.8))
    # heavy ties: a run of equal values never straddles a cut
    x = np.r_[np.zeros(500), np.arange(1.0, 501.0)][:, None]
    bm = BinMapper(max_bin=10).fit(x)
    codes = bm.transform(x)[0]
    assert np.all(codes[:500] == 0) and bm.edges_[0][0] > 0
    # the cuts share out the rows above the minimum's run
    np.testing.assert_array_equal(bm.edges_[0], x[np.floor(500 + np.arange(1, 10) * 49.9).astype(int), 0])
