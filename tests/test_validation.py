import numpy as np
import pytest

from qwkboost.validation import check_features, check_labels


def test_labels_accept_whole_floats():
    assert check_labels([0.0, 2.0, 1.0], "y").tolist() == [0, 2, 1]


def test_features_keep_nan_reject_inf_and_1d():
    X = check_features([[1.0, np.nan], [2.0, 3.0]])
    assert np.isnan(X[0, 1])
    with pytest.raises(ValueError, match=r"X contains 1 inf value\(s\) \(first at row 1, column 0\)"):
        check_features([[1.0, 2.0], [np.inf, 3.0]])
    with pytest.raises(ValueError, match="X must be 2-dimensional"):
        check_features([1.0, 2.0])


def test_messages_show_plain_numbers():
    with pytest.raises(ValueError) as err:
        check_labels([0, 1.5, 2], "y_true")
    assert "index 1 is 1.5." in str(err.value) and "np." not in str(err.value)
