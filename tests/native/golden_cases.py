"""The data and settings of ``data/reference_trees.json``: trees the native engine grew before categorical
columns could be wide (16-bit codes), kept to show that data without such columns grows the same trees.
``goss_colsample`` was grown again when GOSS came to break ties in |g| by row index: which tied rows the
previous selection kept depended on the CPU's NumPy kernels, so its trees differed between machines."""

import numpy as np

from qwkboost.data.sources import quartiles


def CASES():
    ds = quartiles(n_train=3000, n_test=10, seed=4)
    X, y = ds.X_train, ds.y_train
    rs = np.random.RandomState(0)
    Xm = X.copy()
    Xm[rs.rand(*X.shape) < 0.1] = np.nan
    onehot = np.zeros((X.shape[0], 8))
    onehot[np.arange(X.shape[0]), rs.randint(0, 8, X.shape[0])] = 1
    # an integer-coded column, here a number like any other
    cat = np.column_stack([X[:, :3], rs.randint(0, 12, X.shape[0])])
    return {
        "depthwise": (X, y, "squared_error", {"max_depth": 4, "learning_rate": 0.3}, 6),
        "missing_lossguide": (Xm, y, "extended_qwk", {"grow_policy": "lossguide", "max_leaves": 12, "max_depth": 0}, 6),
        "goss_colsample": (X, y, "squared_error", {"sampling_method": "goss", "colsample_bytree": 0.7,
                                                   "learning_rate": 0.5}, 6),
        "efb": (np.hstack([X[:, :3], onehot]), y, "squared_error", {"max_depth": 3}, 6),
        "multiclass": (X, y, "multiclass", {"max_depth": 3}, 3),
        "numeric_codes": (cat, y, "squared_error", {"max_depth": 3}, 6),
    }
