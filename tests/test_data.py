import numpy as np
import pytest

from qwkboost.data import chisq, from_file, quartiles


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
    with pytest.raises(ValueError, match=r"data.target='y' must hold numbers .* e.g. data row 0 is 'low'"):
        from_file(str(tmp_path / "d.csv"), "y")


def test_labels_with_gaps_are_a_range_of_classes_with_a_warning(tmp_path):
    import pandas as pd

    from qwkboost.data import class_range

    pd.DataFrame({"f": range(30), "y": [1, 2, 5] * 10}).to_csv(tmp_path / "d.csv", index=False)
    with pytest.warns(UserWarning, match=r"range from 1 to 5, but 2 value\(s\) in between never occur \(3, 4\)"):
        ds = from_file(str(tmp_path / "d.csv"), "y", test_size=0.3)
    assert class_range(ds.classes).tolist() == [1, 2, 3, 4, 5]


def test_labels_spanning_too_many_values_are_refused(tmp_path):
    import pandas as pd

    pd.DataFrame({"f": range(20), "y": [0, 5000] * 10}).to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(ValueError, match="spans 5,001 whole numbers"):
        from_file(str(tmp_path / "d.csv"), "y")
