"""Input checks shared by every stage.

Each check raises :class:`ValueError` naming the offending argument, so a user
sees *which* input is wrong and *why* before any work starts.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "check_1d",
    "check_labels",
    "check_same_length",
    "check_features",
    "feature_names",
    "align_columns",
]


def check_1d(values, name: str, *, allow_nan: bool = False) -> np.ndarray:
    """Return ``values`` as a non-empty, finite, 1-d float array.

    Parameters
    ----------
    values : array-like
        The input.
    name : str
        Argument name used in error messages.
    allow_nan : bool, default False
        Accept NaN (never inf).

    Raises
    ------
    ValueError
        If the input is empty, not 1-d, not numeric or not finite.
    """
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric; got values that cannot be read as numbers ({exc})") from None
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-dimensional; got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty; at least one value is required")
    bad = np.isinf(arr) if allow_nan else ~np.isfinite(arr)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        what = "inf" if allow_nan else "NaN or inf"
        raise ValueError(
            f"{name} contains {int(bad.sum())} {what} value(s) (first at index {first}: {float(arr[first])!r})"
        )
    return arr


def check_labels(values, name: str) -> np.ndarray:
    """Return ``values`` as non-negative integer class labels (int64).

    Float arrays whose values are whole numbers are accepted (``2.0`` is class 2).

    Raises
    ------
    ValueError
        If a value is NaN, inf, negative or not a whole number.
    """
    arr = check_1d(values, name)
    frac = arr != np.round(arr)
    if frac.any():
        first = int(np.flatnonzero(frac)[0])
        raise ValueError(
            f"{name} must hold integer class labels; index {first} is {float(arr[first])!r}. "
            "Round or threshold continuous scores first (see qwkboost.thresholds)."
        )
    if (arr < 0).any():
        first = int(np.flatnonzero(arr < 0)[0])
        raise ValueError(
            f"{name} must hold class labels 0..K-1; index {first} is negative ({float(arr[first])!r}). "
            "Shift labels so the lowest class is 0."
        )
    return arr.astype(np.int64)


def check_same_length(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> None:
    """Raise if ``a`` and ``b`` differ in length."""
    if len(a) != len(b):
        raise ValueError(f"{name_a} and {name_b} have different lengths: {len(a)} != {len(b)}")


def check_features(X, name: str = "X") -> np.ndarray:
    """Return ``X`` as a 2-d float array; NaN (missing) is kept, inf and strings are rejected.

    Raises
    ------
    ValueError
        If ``X`` is empty, not 2-d, sparse, holds strings or holds inf.
    """
    if hasattr(X, "tocsr") and hasattr(X, "nnz"):
        raise ValueError(
            f"{name} is a scipy.sparse matrix; pass a dense array instead: {name}.toarray() if absent entries "
            "are zeros (scikit-learn's reading), or a dense array with NaN where values are missing "
            "(XGBoost's and LightGBM's reading of absent entries)")
    if hasattr(X, "columns") and hasattr(X, "dtypes"):
        from pandas.api.types import is_bool_dtype, is_numeric_dtype

        bad = [str(c) for c, t in X.dtypes.items() if not (is_numeric_dtype(t) or is_bool_dtype(t))]
        if bad:
            raise ValueError(f"{name} has non-numeric columns {bad}; encode them as numbers first")
        X = X.to_numpy(dtype=np.float64, na_value=np.nan)
    elif hasattr(X, "to_numpy"):
        X = X.to_numpy()
    try:
        arr = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric; it holds values that are not numbers ({exc})") from None
    if arr.ndim == 1:
        raise ValueError(f"{name} must be 2-dimensional (n_samples, n_features); got a 1-d array of length {arr.size}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-dimensional (n_samples, n_features); got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} has no rows")
    if arr.shape[1] == 0:
        raise ValueError(f"{name} has no columns")
    inf = np.isinf(arr)
    if inf.any():
        r, c = np.argwhere(inf)[0]
        raise ValueError(f"{name} contains {int(inf.sum())} inf value(s) (first at row {r}, column {c}); "
                         "use NaN for missing values")
    return arr


def feature_names(X) -> list[str] | None:
    """Column names of a DataFrame as strings; ``None`` for arrays."""
    cols = getattr(X, "columns", None)
    return None if cols is None else [str(c) for c in cols]


def align_columns(X, names: list[str] | None, n_features: int | None, name: str = "X",
                  reference: str = "the model was trained on"):
    """Select and order ``X``'s columns as in training.

    A DataFrame is matched by column name when the model knows its feature
    names: reordered columns are put back in order, extra columns are not used,
    and a missing column is an error. Arrays (or models trained on arrays) are
    checked by width only.

    Raises
    ------
    ValueError
        Naming the missing columns, or the width mismatch.
    """
    have = feature_names(X)
    if names is not None and have is not None:
        if len(set(have)) != len(have):
            dup = sorted({c for c in have if have.count(c) > 1})
            raise ValueError(f"{name} has duplicate column names {dup}")
        missing = [c for c in names if c not in have]
        if missing:
            raise ValueError(f"{name} lacks the feature column(s) {missing}; {reference} {names}")
        if have != names:
            X = X[[c for c in X.columns if str(c) in set(names)]]
            X.columns = [str(c) for c in X.columns]
            X = X[names]
    arr = check_features(X, name)
    if n_features is not None and arr.shape[1] != n_features:
        raise ValueError(f"{name} has {arr.shape[1]} features but {reference} {n_features}")
    return arr
