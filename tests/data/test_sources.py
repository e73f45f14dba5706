import numpy as np
import pytest

from qwkboost.data.sources import chisq, from_file, quartiles


def test_quartiles_follow_the_articles_recipe():
    ds = quartiles(n_train=1000, n_test=500)
    rs = np.random.RandomState(0)
    full = rs.rand(1000, 10)
    np.testing.assert_array_equal(ds.X_train, full[:, :5])
    rank = np.argsort(np.argsort(full.mean(axis=1)))
    np.testing.assert_array_equal(ds.y_train, np.floor(rank / 1000 * 4))
    assert np.bincount(ds.y_train.astype(int)).tolist() == [250] * 4
    assert ds.X_test.shape == (500, 5) and not np.allclose(ds.X_test[:5], ds.X_train[:5])
    assert list(ds.classes) == [0, 1, 2, 3]


def test_chisq_is_sum_of_squares():
    ds = chisq(n=200)
    np.testing.assert_allclose(ds.y_train, (ds.X_train ** 2).sum(axis=1))
    assert len(ds.y_test) == 40 and not ds.is_ordinal


def test_parquet_and_separate_test_file(tmp_path):
    import pandas as pd

    rs = np.random.RandomState(1)
    df = pd.DataFrame({"f": rs.rand(30), "g": rs.rand(30), "y": 1 + np.arange(30) % 9})
    df.to_parquet(tmp_path / "tr.parquet")
    df.iloc[:10].to_csv(tmp_path / "te.csv", index=False)
    ds = from_file(str(tmp_path / "tr.parquet"), "y", test_path=str(tmp_path / "te.csv"))
    assert ds.X_train.shape == (30, 2) and ds.X_test.shape == (10, 2)
    assert ds.classes.min() == 1 and ds.classes.max() == 9


def test_string_feature_is_categorical_and_text_in_a_numeric_test_column_is_named(tmp_path):
    import pandas as pd

    pd.DataFrame({"city": ["a", "b"] * 5, "n": range(10), "y": [0, 1] * 5}).to_csv(tmp_path / "d.csv", index=False)
    ds = from_file(str(tmp_path / "d.csv"), "y", test_size=0.3)
    assert ds.schema.categorical == [0] and ds.schema.categories[0] == ["a", "b"]
    assert set(np.unique(ds.X_train[:, 0])) == {0.0, 1.0}
    pd.DataFrame({"city": ["a", "c"], "n": [1, "x"], "y": [0, 1]}).to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(ValueError, match=r"feature 'n' was numeric in training, but data row 1 of data.test_path "
                                         r"holds 'x'"):
        from_file(str(tmp_path / "d.csv"), "y", test_path=str(tmp_path / "t.csv"))


def test_fractional_test_label_is_named_with_its_file_row(tmp_path):
    import pandas as pd

    pd.DataFrame({"f": range(20), "y": [0, 1, 2, 3] * 5}).to_csv(tmp_path / "tr.csv", index=False)
    pd.DataFrame({"f": range(4), "y": [0, 1, 2.5, 3]}).to_csv(tmp_path / "te.csv", index=False)
    with pytest.raises(ValueError, match=r"data row 2 of data.test_path is 2.5"):
        from_file(str(tmp_path / "tr.csv"), "y", test_path=str(tmp_path / "te.csv"))


@pytest.mark.parametrize("content, match", [
    (b"", "is empty"),
    (b"f,y\n", "has a header but no rows"),
    (bytes(range(256)) * 40, "cannot be read as a CSV file"),
])
def test_unreadable_files_get_clear_errors(tmp_path, content, match):
    p = tmp_path / "train.csv"
    p.write_bytes(content)
    with pytest.raises(ValueError, match=rf"data.path='{p}' {match}"):
        from_file(str(p), "y")


def test_corrupt_parquet_gets_a_clear_error(tmp_path):
    p = tmp_path / "train.parquet"
    p.write_bytes(b"PAR1 not really parquet")
    with pytest.raises(ValueError, match="cannot be read as a Parquet file"):
        from_file(str(p), "y")


def test_text_target_is_named(tmp_path):
    import pandas as pd

    pd.DataFrame({"f": range(10), "y": ["low", "high"] * 5}).to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(ValueError, match=r"data.target='y' holds labels that are words \('high', 'low'\); give "
                                         r"their order, lowest first, with data.classes="):
        from_file(str(tmp_path / "d.csv"), "y")


def test_labels_with_gaps_are_a_range_of_classes_with_a_warning(tmp_path):
    import pandas as pd

    from qwkboost.data.sources import class_range

    pd.DataFrame({"f": range(30), "y": [1, 2, 5] * 10}).to_csv(tmp_path / "d.csv", index=False)
    with pytest.warns(UserWarning, match=r"range from 1 to 5, but 2 value\(s\) in between never occur \(3, 4\)"):
        ds = from_file(str(tmp_path / "d.csv"), "y", test_size=0.3)
    assert class_range(ds.classes).tolist() == [1, 2, 3, 4, 5]


def test_labels_spanning_too_many_values_are_refused(tmp_path):
    import pandas as pd

    pd.DataFrame({"f": range(20), "y": [0, 5000] * 10}).to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(ValueError, match="spans 5,001 whole numbers"):
        from_file(str(tmp_path / "d.csv"), "y")


# --------------------------------------------------------------------------- the study's regimes

def test_latent_classes_keep_the_class_rule_and_proportions():
    from qwkboost.data.sources import _irwin_hall_mean_quantiles, latent_classes

    # the exact cut points are the quantiles of the mean of 10 uniforms (checked against a large sample)
    ref = np.random.RandomState(5).rand(400_000, 10).mean(axis=1)
    np.testing.assert_allclose(_irwin_hall_mean_quantiles(10, [0.1, 0.25, 0.5, 0.9]),
                               np.quantile(ref, [0.1, 0.25, 0.5, 0.9]), atol=1.5e-3)
    ds = latent_classes(n_train=40_000, n_test=10_000, proportions=[0.55, 0.25, 0.13, 0.07])
    np.testing.assert_allclose(np.bincount(ds.y_train.astype(int)) / 40_000, [0.55, 0.25, 0.13, 0.07], atol=0.01)
    assert ds.test_prior is None and list(ds.classes) == [0, 1, 2, 3]
    again = latent_classes(n_train=40_000, n_test=10_000, proportions=[0.55, 0.25, 0.13, 0.07])
    np.testing.assert_array_equal(ds.X_test, again.X_test)


def test_label_shift_changes_the_prior_not_the_class_conditionals():
    from qwkboost.data.sources import latent_classes

    ds = latent_classes(n_train=30_000, n_test=10_000, test_proportions=[0.1, 0.2, 0.3, 0.4])
    assert np.bincount(ds.y_test.astype(int)).tolist() == [1000, 2000, 3000, 4000]
    np.testing.assert_allclose(ds.test_prior, [0.1, 0.2, 0.3, 0.4])
    np.testing.assert_allclose(np.bincount(ds.y_train.astype(int)) / 30_000, 0.25, atol=0.01)
    for c in range(4):     # P(x | y) unchanged: within a class, the visible columns' mean agrees across splits
        a, b = ds.X_test[ds.y_test == c].mean(1), ds.X_train[ds.y_train == c].mean(1)
        assert abs(a.mean() - b.mean()) < 4 * np.hypot(a.std() / np.sqrt(a.size), b.std() / np.sqrt(b.size))


def test_label_noise_moves_that_share_to_a_neighbouring_class():
    from qwkboost.data.sources import latent_classes

    clean = latent_classes(n_train=20_000, n_test=100)
    noisy = latent_classes(n_train=20_000, n_test=100, label_noise=0.25)
    np.testing.assert_array_equal(clean.X_train, noisy.X_train)
    moved = noisy.y_train != clean.y_train
    assert 0.18 < moved.mean() < 0.25      # a quarter drawn; edge classes stay when pushed off the range
    assert np.abs(noisy.y_train - clean.y_train).max() == 1


@pytest.mark.parametrize("kw,match", [
    ({"proportions": [0.5, 0.5]}, "data.proportions must be 4 positive class proportions"),
    ({"test_proportions": [0.5, 0.6, -0.1, 0]}, "data.test_proportions must be 4 positive"),
    ({"label_noise": 1.0}, "data.label_noise"),
])
def test_latent_classes_bad_arguments_name_the_key(kw, match):
    from qwkboost.data.sources import latent_classes

    with pytest.raises(ValueError, match=match):
        latent_classes(n_train=100, n_test=10, **kw)


def test_shipped_ordinal_data_sets_load_with_a_stratified_split():
    from qwkboost.data.sources import dataset_path

    for name, k in (("era", 9), ("lev", 5), ("swd", 4), ("esl", 9)):
        ds = from_file(dataset_path(f"{name}.csv"), "out", test_size=0.25, stratify=True, seed=3)
        assert len(ds.classes) == k and ds.feature_names[0] == "in1"
        full = np.concatenate([ds.y_train, ds.y_test])
        share_test = np.array([(ds.y_test == c).mean() for c in ds.classes])
        share_all = np.array([(full == c).mean() for c in ds.classes])
        np.testing.assert_allclose(share_test, share_all, atol=0.02)     # stratified
        other = from_file(dataset_path(f"{name}.csv"), "out", test_size=0.25, stratify=True, seed=4)
        assert not np.array_equal(ds.y_test, other.y_test) or not np.array_equal(ds.X_test, other.X_test)
    with pytest.raises(ValueError, match="no shipped data set 'wine.csv'; qwkboost ships: era.csv, esl.csv"):
        dataset_path("wine.csv")


def test_extraction_script_converts_the_wheels_format():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "experiments" / "extract_ordinal_datasets.py"
    spec = importlib.util.spec_from_file_location("extract", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    raw = "3,2,1,2,3\n5,6,0\n7,8,2\n9,9,1\n"
    assert mod.convert(raw) == "in1,in2,out\n5,6,1\n7,8,3\n9,9,2\n"
    with pytest.raises(ValueError, match="expected 3 rows"):
        mod.convert("3,2,1,2\n5,6,0\n")
