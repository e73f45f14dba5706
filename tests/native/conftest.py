import numpy as np
import pytest


@pytest.fixture(scope="session")
def chisq_small():
    """The chi-square data, small: Y = sum X_i^2 over 6 N(0,1) features."""
    rs = np.random.RandomState(7)
    X = rs.normal(size=(1500, 6))
    y = (X ** 2).sum(axis=1)
    return X, y


@pytest.fixture(scope="session")
def with_missing():
    """y = 2 x0 + x1, where a missing x1 (20% of rows) counts as 3; x2 is missing in 5% of rows."""
    rs = np.random.RandomState(11)
    X = rs.normal(size=(1200, 4))
    X[rs.rand(1200) < 0.2, 1] = np.nan
    y = X[:, 0] * 2 + np.where(np.isnan(X[:, 1]), 3.0, np.nan_to_num(X[:, 1])) + rs.normal(scale=0.1, size=1200)
    X[rs.rand(1200) < 0.05, 2] = np.nan
    return X, y
