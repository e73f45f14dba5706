"""Feature schema: names, categorical columns and their codes, unseen categories, persistence."""

import numpy as np
import pandas as pd
import pytest

from qwkboost.data.features import MAX_CATEGORIES, EncodedFeatures, FeatureSchema


@pytest.fixture
def frame():
    return pd.DataFrame({"a": [1.0, 2.0, np.nan, 4.0], "city": ["Lyon", "Paris", None, "Lyon"],
                         "size": pd.Categorical(["L", "S", "M", "S"], categories=["S", "M", "L"]),
                         "flag": [True, False, True, False]})


def test_string_and_category_columns_are_categorical_with_training_categories(frame):
    s = FeatureSchema.fit(frame)
    assert s.names == ["a", "city", "size", "flag"] and s.types == ["q", "c", "c", "q"]
    assert s.categories == {1: ["Lyon", "Paris"], 2: ["S", "M", "L"]}      # sorted; a category keeps its order
    X = s.encode(frame)
    np.testing.assert_array_equal(X[:, 1], [0, 1, np.nan, 0])
    np.testing.assert_array_equal(X[:, 2], [2, 0, 1, 0])
    np.testing.assert_array_equal(X[:, 3], [1, 0, 1, 0])


def test_reordered_columns_extra_columns_and_unseen_categories(frame):
    s = FeatureSchema.fit(frame)
    new = frame[["flag", "size", "city", "a"]].assign(extra=7, city=["Nice", "Paris", "Lyon", None])
    X = s.encode(new)
    np.testing.assert_array_equal(X[:, 0], frame["a"].to_numpy())
    np.testing.assert_array_equal(X[:, 1], [np.nan, 1, 0, np.nan])        # unseen 'Nice' is missing
    with pytest.raises(ValueError, match=r"X lacks the feature column\(s\) \['city'\]"):
        s.encode(frame.drop(columns="city"))
    with pytest.raises(ValueError, match=r"feature 'a' was numeric in training, but row 1 of X holds 'two'"):
        s.encode(frame.assign(a=[1, "two", 3, 4]))


def test_numbers_named_categorical_and_arrays_by_position():
    df = pd.DataFrame({"breed": [307, 266, 307, 12], "x": [0.1, 0.2, 0.3, 0.4]})
    s = FeatureSchema.fit(df, categorical=["breed"])
    assert s.categories == {0: [12, 266, 307]}
    np.testing.assert_array_equal(s.encode(df.assign(breed=[266.0, 5, 12, 307]))[:, 0], [1, np.nan, 0, 2])
    a = FeatureSchema.fit(df.to_numpy(), categorical=[0])
    assert a.names is None and a.categorical == [0]
    with pytest.raises(ValueError, match=r"categorical: 'breed' is not a column of X \(an array: give positions\)"):
        FeatureSchema.fit(df.to_numpy(), categorical=["breed"])
    with pytest.raises(ValueError, match=r"categorical: 'nope' is not a column of X; columns: \['breed', 'x'\]"):
        FeatureSchema.fit(df, categorical=["nope"])


def test_too_many_categories_is_refused_with_advice():
    df = pd.DataFrame({"id": [f"r{i}" for i in range(MAX_CATEGORIES + 1)], "x": 1.0})
    with pytest.raises(ValueError, match=r"'id' has 10,001 categories .* dropped \(data.drop\) or named as data.id"):
        FeatureSchema.fit(df)


def test_round_trip_and_decode(frame):
    s = FeatureSchema.fit(frame)
    back = FeatureSchema.from_dict(s.to_dict())
    assert back == s
    X = s.encode(frame)
    np.testing.assert_array_equal(back.encode(s.decode(X)), X)            # decode gives a table that encodes back
    with pytest.raises(ValueError, match="names must be a list of 4 strings"):
        FeatureSchema.from_dict({**s.to_dict(), "names": ["a"]})


def test_encoded_features_check_their_width(frame):
    s = FeatureSchema.fit(frame)
    with pytest.raises(ValueError, match="EncodedFeatures.X must be a float array with 4 columns"):
        EncodedFeatures(np.zeros((3, 2)), s)
