r"""Data sets: the DSB2019 article's quartile data, the chi-square data, and user CSV/Parquet files.

Every loader returns a :class:`Dataset` with a train split, a test split and
the label scale, so later stages never look back at where the data came from.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["Dataset", "quartiles", "chisq", "from_file", "class_range", "warn_empty_classes"]


@dataclass
class Dataset:
    """Train and test arrays plus the ordinal label set.

    Attributes
    ----------
    X_train, y_train, X_test, y_test : ndarray
    feature_names : list of str
    classes : ndarray or None
        Sorted distinct labels on their own scale (``None`` for regression).
    name : str
    """

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    feature_names: list[str] = field(default_factory=list)
    classes: np.ndarray | None = None
    name: str = "data"

    @property
    def is_ordinal(self) -> bool:
        return self.classes is not None


#: Ordinal labels may span at most this many whole numbers (every one is a class).
MAX_CLASSES = 1000


def class_range(labels: np.ndarray) -> np.ndarray:
    """The classes of ordinal labels: every whole number from the lowest label to the highest.

    Labels keep their own scale, and QWK weighs a disagreement by the squared
    difference of the label *values*: with labels {1, 2, 5}, predicting 2 for a
    5 costs 9, not 1. So the classes are the range, and labels inside it that
    never occur are empty classes (see :func:`warn_empty_classes`).
    """
    lo, hi = float(np.min(labels)), float(np.max(labels))
    return np.arange(lo, hi + 1)


def warn_empty_classes(labels: np.ndarray, where: str) -> list[float]:
    """Warn (and return them) when whole numbers between the lowest and highest label never occur."""
    present = set(np.unique(labels).tolist())
    empty = [c for c in class_range(labels).tolist() if c not in present]
    if empty:
        shown = ", ".join(f"{c:g}" for c in empty[:10]) + (", ..." if len(empty) > 10 else "")
        warnings.warn(f"labels of {where} range from {min(present):g} to {max(present):g}, but {len(empty)} "
                      f"value(s) in between never occur ({shown}); they are kept as empty classes, because QWK "
                      "weighs disagreements by the difference of label values", UserWarning, stacklevel=3)
    return empty


def _quartile_draw(n: int, seed: int, n_features: int, n_visible: int, n_classes: int):
    rs = np.random.RandomState(seed)
    X = rs.rand(n, n_features)
    m = X.mean(axis=1)
    y = np.floor(np.argsort(np.argsort(m)) / n * n_classes)
    return X[:, :n_visible], y


def quartiles(n_train: int = 100_000, n_test: int = 100_000, seed: int = 0, test_seed: int = 1,
              n_features: int = 10, n_visible: int = 5, n_classes: int = 4) -> Dataset:
    r"""The synthetic data of the DSB2019 article (rsakata 2020), behind its QWK table.

    ``n_features`` uniforms per row; the class is the rank-quantile of their
    mean, :math:`y = \lfloor \mathrm{rank}(\bar x)/n \cdot K \rfloor`; only the
    first ``n_visible`` columns are kept. The test set is drawn the same way
    with ``test_seed``.
    """
    if n_visible > n_features:
        raise ValueError(f"n_visible ({n_visible}) must be <= n_features ({n_features})")
    Xtr, ytr = _quartile_draw(n_train, seed, n_features, n_visible, n_classes)
    Xte, yte = _quartile_draw(n_test, test_seed, n_features, n_visible, n_classes)
    return Dataset(Xtr, ytr, Xte, yte, [f"x{i}" for i in range(n_visible)],
                   np.arange(n_classes, dtype=float), "quartiles")


def chisq(n: int = 2000, n_features: int = 10, test_size: float = 0.2, seed: int = 1) -> Dataset:
    r"""Chi-square data: :math:`Y = \sum_{i=1}^{10} X_i^2`, :math:`X_i \sim N(0, 1)`, split 80/20.

    The features of Hastie, Tibshirani and Friedman's example (The Elements of
    Statistical Learning, 2nd ed., eq. 10.2), with the sum itself as a regression target.
    """
    rs = np.random.RandomState(seed)
    X = rs.normal(0.0, 1.0, size=(n, n_features))
    y = (X ** 2).sum(axis=1)
    idx = rs.permutation(n)
    n_test = int(round(n * test_size))
    te, tr = idx[:n_test], idx[n_test:]
    return Dataset(X[tr], y[tr], X[te], y[te], [f"X{i + 1}" for i in range(n_features)], None, "chisq")


def from_file(path: str, target: str, test_path: str | None = None, test_size: float | None = 0.2,
              ordinal: bool = True, seed: int = 0) -> Dataset:
    """Load a CSV or Parquet file; the label column is ``target``.

    Ordinal labels keep their own scale (1..9, 3..8, ...). Non-numeric feature
    columns are rejected with their names.

    Raises
    ------
    ValueError
        For a missing file, a missing target column, non-numeric columns, or
        (when ``ordinal``) a target that is not whole numbers.
    """
    import pandas as pd

    def read(p: str, arg: str) -> "pd.DataFrame":
        if not p:
            raise ValueError(f"data.{arg} is not set; give the path of a CSV or Parquet file")
        fp = Path(p)
        if not fp.exists():
            raise ValueError(f"data.{arg}={str(p)!r} does not exist")
        if fp.is_dir():
            raise ValueError(f"data.{arg}={str(p)!r} is a directory; give a CSV or Parquet file")
        parquet = fp.suffix.lower() in (".parquet", ".pq")
        try:
            df = pd.read_parquet(fp) if parquet else pd.read_csv(fp)
        except pd.errors.EmptyDataError:
            raise ValueError(f"data.{arg}={str(p)!r} is empty") from None
        except (UnicodeDecodeError, pd.errors.ParserError, OSError, ValueError) as exc:
            kind = "a Parquet" if parquet else "a CSV"
            raise ValueError(f"data.{arg}={str(p)!r} cannot be read as {kind} file "
                             f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]})") from None
        if len(df) == 0:
            raise ValueError(f"data.{arg}={str(p)!r} has a header but no rows")
        return df

    df = read(path, "path")
    if target not in df.columns:
        raise ValueError(f"data.target={target!r} is not a column of {path}; columns: {list(df.columns)}")
    if not pd.api.types.is_numeric_dtype(df[target]) or pd.api.types.is_bool_dtype(df[target]):
        bad = df[target][pd.to_numeric(df[target], errors="coerce").isna() & df[target].notna()]
        example = f"; e.g. data row {bad.index[0]} is {bad.iloc[0]!r}" if len(bad) else ""
        raise ValueError(f"data.target={target!r} must hold numbers (ordinal labels or a numeric target), "
                         f"but its column in data.path is of type {df[target].dtype}{example}")
    if test_path:
        dft = read(test_path, "test_path")
        if target not in dft.columns:
            raise ValueError(f"data.target={target!r} is not a column of data.test_path={test_path}")
    else:
        if test_size is None or not 0 < test_size < 1:
            raise ValueError(f"data.test_size must be in (0, 1) when data.test_path is not set; got {test_size!r}")
        rs = np.random.RandomState(seed)
        idx = rs.permutation(len(df))
        n_test = int(round(len(df) * test_size))
        dft, df = df.iloc[idx[:n_test]], df.iloc[idx[n_test:]]
    features = [c for c in df.columns if c != target]
    bad = [c for c in features if not pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])]
    if bad:
        raise ValueError(f"feature columns must be numeric; encode these first: {bad}")
    missing = [c for c in features if c not in dft.columns]
    if missing:
        raise ValueError(f"test data lacks feature columns {missing}")
    y = df[target].to_numpy(dtype=float)
    yt = dft[target].to_numpy(dtype=float)
    for arr, arg in ((y, "path"), (yt, "test_path")):
        if not np.isfinite(arr).all():
            raise ValueError(f"data.target={target!r} has NaN or inf values in data.{arg}")
    classes = None
    if ordinal:
        for frame, arr, arg in ((df, y, "path"), (dft, yt, "test_path")):
            frac = arr != np.round(arr)
            if frac.any():
                i = int(np.flatnonzero(frac)[0])
                source = arg if test_path else "path"   # without a test file both parts come from data.path
                raise ValueError(
                    f"data.target={target!r} must be whole-numbered ordinal labels for a QWK experiment; "
                    f"data row {frame.index[i]} of data.{source} is {float(arr[i])!r}")
        classes = np.unique(np.concatenate([y, yt]))
        span = class_range(classes).size
        if span > MAX_CLASSES:
            raise ValueError(f"data.target={target!r} spans {span:,} whole numbers ({classes.min():g}.."
                             f"{classes.max():g}); qwkboost treats each as a class, since QWK weighs disagreements "
                             f"by label differences (at most {MAX_CLASSES:,}). Recode the labels (e.g. to ranks), "
                             "or set data.ordinal=false for a numeric target")
        warn_empty_classes(y, "data.path" if test_path else "the training rows")
    return Dataset(df[features].to_numpy(dtype=float), y, dft[features].to_numpy(dtype=float), yt,
                   features, classes, Path(path).stem)
