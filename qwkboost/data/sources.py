r"""Data sets: the DSB2019 article's quartile data, the chi-square data, and user CSV/Parquet files.

Every loader returns a :class:`Dataset` with a train split, a test split and
the label scale, so later stages never look back at where the data came from.
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from qwkboost.data.features import FeatureSchema
from qwkboost.validation import check_bool, check_int, check_real, check_seed

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Dataset", "quartiles", "latent_classes", "check_latent_classes_args", "chisq", "from_file", "class_range",
           "warn_empty_classes", "check_quartiles_args",
           "check_chisq_args", "read_table", "SOURCES", "SOURCE_KEYS", "SOURCE_CHECKS", "dataset_path"]




@dataclass
class Dataset:
    """Train and test features and labels, the feature schema and the ordinal label set.

    Attributes
    ----------
    X_train, X_test : ndarray
        Features encoded by ``schema`` (category columns hold codes).
    y_train : ndarray
    y_test : ndarray or None
        ``None`` for a test file without labels (a competition's test set).
    feature_names : list of str
    classes : ndarray or None
        Sorted distinct labels on their own scale (``None`` for regression).
    name : str
    schema : FeatureSchema
        Names and types of the feature columns; encodes new tables the same way.
    ids_train, ids_test : ndarray or None
        The id column's values (``id_name``), carried to the predictions.
    w_train, w_test : ndarray or None
        Row weights (``data.weight``); ``w_test`` only if the test file has the column.
    target : str or None
        The label column's name (for the submission file).
    test_prior : ndarray or None
        The test split's class proportions when they are known to differ from
        the training split's (label shift), one per class of ``classes``.
    groups_train : ndarray or None
        The entity of every training row (``cv.group``): rows of one entity stay in one CV fold.
    group_name : str or None
        The column ``groups_train`` came from.
    """

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray | None
    feature_names: list[str] = field(default_factory=list)
    classes: np.ndarray | None = None
    name: str = "data"
    schema: FeatureSchema | None = None
    ids_train: np.ndarray | None = None
    ids_test: np.ndarray | None = None
    id_name: str | None = None
    target: str | None = None
    w_train: np.ndarray | None = None
    w_test: np.ndarray | None = None
    test_prior: np.ndarray | None = None
    groups_train: np.ndarray | None = None
    group_name: str | None = None

    def __post_init__(self):
        if self.schema is None:
            self.schema = FeatureSchema.numeric(self.X_train.shape[1], self.feature_names or None)

    @property
    def is_ordinal(self) -> bool:
        return self.classes is not None

    @property
    def has_test_labels(self) -> bool:
        return self.y_test is not None


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


def check_quartiles_args(n_train=100_000, n_test=100_000, seed=0, test_seed=1, n_features=10, n_visible=5,
                         n_classes=4) -> dict:
    """The arguments of :func:`quartiles`, checked (messages name the ``data.*`` config keys)."""
    out = {"n_train": check_int(n_train, "data.n_train", 2), "n_test": check_int(n_test, "data.n_test", 1),
           "seed": check_seed(seed, "data.seed"), "test_seed": check_seed(test_seed, "data.test_seed"),
           "n_features": check_int(n_features, "data.n_features", 1),
           "n_visible": check_int(n_visible, "data.n_visible", 1),
           "n_classes": check_int(n_classes, "data.n_classes", 2, MAX_CLASSES)}
    if out["n_visible"] > out["n_features"]:
        raise ValueError(f"data.n_visible ({n_visible}) must be <= data.n_features ({n_features})")
    if out["n_classes"] > out["n_train"]:
        raise ValueError(f"data.n_classes ({n_classes}) must be <= data.n_train ({n_train})")
    return out


def check_chisq_args(n=2000, n_features=10, test_size=0.2, seed=1) -> dict:
    """The arguments of :func:`chisq`, checked (messages name the ``data.*`` config keys)."""
    out = {"n": check_int(n, "data.n", 4), "n_features": check_int(n_features, "data.n_features", 1),
           "test_size": check_real(test_size, "data.test_size", 0.0, 1.0, lo_open=True, hi_open=True),
           "seed": check_seed(seed, "data.seed")}
    n_test = int(round(out["n"] * out["test_size"]))
    if not 0 < n_test < out["n"]:
        raise ValueError(f"data.test_size={test_size!r} of data.n={n} rows leaves {n_test} test rows and "
                         f"{out['n'] - n_test} training rows; both need at least one")
    return out


def quartiles(n_train: int = 100_000, n_test: int = 100_000, seed: int = 0, test_seed: int = 1,
              n_features: int = 10, n_visible: int = 5, n_classes: int = 4) -> Dataset:
    r"""The synthetic data of the DSB2019 article (rsakata 2020), behind its QWK table.

    ``n_features`` uniforms per row; the class is the rank-quantile of their
    mean, :math:`y = \lfloor \mathrm{rank}(\bar x)/n \cdot K \rfloor`; only the
    first ``n_visible`` columns are kept. The test set is drawn the same way
    with ``test_seed``.
    """
    n_train, n_test, seed, test_seed, n_features, n_visible, n_classes = check_quartiles_args(
        n_train, n_test, seed, test_seed, n_features, n_visible, n_classes).values()
    Xtr, ytr = _quartile_draw(n_train, seed, n_features, n_visible, n_classes)
    Xte, yte = _quartile_draw(n_test, test_seed, n_features, n_visible, n_classes)
    return Dataset(Xtr, ytr, Xte, yte, [f"x{i}" for i in range(n_visible)],
                   np.arange(n_classes, dtype=float), "quartiles")


def _irwin_hall_mean_quantiles(n_features: int, probs: np.ndarray) -> np.ndarray:
    r"""Quantiles of the mean of ``n_features`` uniforms (the Irwin-Hall distribution scaled by :math:`1/n`).

    :math:`F(s) = \frac{1}{n!}\sum_{k=0}^{\lfloor s \rfloor} (-1)^k \binom{n}{k} (s-k)^n` for the sum
    :math:`s = n\bar x` (Irwin 1927, Hall 1927), inverted by bisection to float precision.
    """
    from math import comb, factorial

    from scipy.optimize import brentq

    n = n_features

    def cdf(s):
        return sum((-1) ** k * comb(n, k) * (s - k) ** n for k in range(int(np.floor(s)) + 1)) / factorial(n)

    return np.array([brentq(lambda s: cdf(s) - p, 0.0, float(n), xtol=1e-12) / n for p in probs])


def _proportions(value, n_classes: int, key: str) -> np.ndarray | None:
    if value is None:
        return None
    p = np.asarray(list(value), dtype=float)
    if p.shape != (n_classes,) or not np.all(np.isfinite(p)) or np.any(p <= 0):
        raise ValueError(f"{key} must be {n_classes} positive class proportions (one per class); got {list(value)!r}")
    return p / p.sum()


def check_latent_classes_args(n_train=20_000, n_test=20_000, seed=0, test_seed=1, n_features=10, n_visible=5,
                              n_classes=4, proportions=None, test_proportions=None, label_noise=0.0) -> dict:
    """The arguments of :func:`latent_classes`, checked (messages name the ``data.*`` config keys)."""
    out = check_quartiles_args(n_train, n_test, seed, test_seed, n_features, n_visible, n_classes)
    k = out["n_classes"]
    out["proportions"] = _proportions(proportions, k, "data.proportions")
    out["test_proportions"] = _proportions(test_proportions, k, "data.test_proportions")
    out["label_noise"] = check_real(label_noise, "data.label_noise", 0.0, 1.0, hi_open=True)
    if out["n_features"] > 60:
        raise ValueError(f"data.n_features={n_features} is too many for the exact class cut points (at most 60)")
    return out


def _latent_draw(rs: np.random.RandomState, n: int, n_features: int, n_visible: int, cuts: np.ndarray):
    X = rs.rand(n, n_features)
    return X[:, :n_visible], np.searchsorted(cuts, X.mean(axis=1)).astype(float)


def _add_label_noise(rs: np.random.RandomState, y: np.ndarray, share: float, n_classes: int) -> np.ndarray:
    moved = rs.rand(y.size) < share
    step = np.where(rs.rand(y.size) < 0.5, -1.0, 1.0)
    return np.where(moved, np.clip(y + step, 0, n_classes - 1), y)


def latent_classes(n_train: int = 20_000, n_test: int = 20_000, seed: int = 0, test_seed: int = 1,
                   n_features: int = 10, n_visible: int = 5, n_classes: int = 4, proportions=None,
                   test_proportions=None, label_noise: float = 0.0) -> Dataset:
    r"""The quartile data generalised: class proportions, label shift and label noise.

    As in :func:`quartiles`, each row has ``n_features`` uniforms of which the
    first ``n_visible`` are kept, and its class is set by the mean
    :math:`\bar x` of all of them, here at fixed cut points: the quantiles of
    :math:`\bar x`'s distribution at the cumulative ``proportions`` (equal
    classes by default). So :math:`P(y \mid x)` is one rule for both splits.

    ``test_proportions`` gives the test split other class proportions while
    :math:`P(x \mid y)` stays the same (label shift, as between the DSB2019
    training and test sets): each class keeps that share of the test rows,
    drawn from as many rows as it takes. The Dataset's ``test_prior`` then
    holds them, for methods that are given the target distribution.
    ``label_noise`` moves that share of the labels, in both splits, one class
    up or down at random (within the range), as raters who disagree do.
    """
    args = check_latent_classes_args(n_train, n_test, seed, test_seed, n_features, n_visible, n_classes,
                                     proportions, test_proportions, label_noise)
    k, nf, nv = args["n_classes"], args["n_features"], args["n_visible"]
    p = args["proportions"] if args["proportions"] is not None else np.full(k, 1.0 / k)
    cuts = _irwin_hall_mean_quantiles(nf, np.cumsum(p)[:-1])
    rs = np.random.RandomState(args["seed"])
    Xtr, ytr = _latent_draw(rs, args["n_train"], nf, nv, cuts)
    rt = np.random.RandomState(args["test_seed"])
    q = args["test_proportions"]
    if q is None:
        Xte, yte = _latent_draw(rt, args["n_test"], nf, nv, cuts)
    else:
        want = np.floor(q * args["n_test"]).astype(int)
        want[np.argmax(q)] += args["n_test"] - want.sum()
        parts_X, parts_y, have = [], [], np.zeros(k, dtype=int)
        while (have < want).any():
            Xb, yb = _latent_draw(rt, max(args["n_test"], 10_000), nf, nv, cuts)
            for c in range(k):
                take = np.flatnonzero(yb == c)[: want[c] - have[c]]
                parts_X.append(Xb[take])
                parts_y.append(yb[take])
                have[c] += take.size
        order = rt.permutation(args["n_test"])
        Xte, yte = np.concatenate(parts_X)[order], np.concatenate(parts_y)[order]
    if args["label_noise"] > 0:
        ytr = _add_label_noise(rs, ytr, args["label_noise"], k)
        yte = _add_label_noise(rt, yte, args["label_noise"], k)
    return Dataset(Xtr, ytr, Xte, yte, [f"x{i}" for i in range(nv)], np.arange(k, dtype=float), "latent_classes",
                   test_prior=None if q is None else q)


def chisq(n: int = 2000, n_features: int = 10, test_size: float = 0.2, seed: int = 1) -> Dataset:
    r"""Chi-square data: :math:`Y = \sum_{i=1}^{10} X_i^2`, :math:`X_i \sim N(0, 1)`, split 80/20.

    The features of Hastie, Tibshirani and Friedman's example (The Elements of
    Statistical Learning, 2nd ed., eq. 10.2), with the sum itself as a regression target.
    """
    n, n_features, test_size, seed = check_chisq_args(n, n_features, test_size, seed).values()
    n_test = int(round(n * test_size))
    rs = np.random.RandomState(seed)
    X = rs.normal(0.0, 1.0, size=(n, n_features))
    y = (X ** 2).sum(axis=1)
    idx = rs.permutation(n)
    te, tr = idx[:n_test], idx[n_test:]
    return Dataset(X[tr], y[tr], X[te], y[te], [f"X{i + 1}" for i in range(n_features)], None, "chisq")


def from_file(path: str, target: str, test_path: str | None = None, test_size: float | None = 0.2,
              ordinal: bool = True, seed: int = 0, id: str | None = None, drop=(), categorical=(),
              weight: str | None = None, stratify: bool = False, group: str | None = None) -> Dataset:
    """Load a CSV or Parquet file; the label column is ``target``.

    Ordinal labels keep their own scale (1..9, 3..8, ...); their classes are
    the whole numbers from the lowest to the highest (:func:`class_range`).
    Without ``test_path``, ``test_size`` of the rows are held out as the test
    set, drawn with ``seed`` and, if ``stratify``, in each class's proportion
    (scikit-learn's ``train_test_split``). A test file without the ``target`` column is a competition's test set:
    it is predicted, not scored. ``id`` names a column carried to the
    predictions and never used as a feature; ``drop`` lists columns to ignore;
    ``weight`` names a column of row weights (in training, thresholds and
    metrics; never a feature). ``group`` (``cv.group``) names the entity
    column: never a feature, it keeps an entity's rows in one CV fold and,
    when the test set is held out of this file, on one side of the split
    (scikit-learn's ``GroupShuffleSplit``).
    String and pandas ``category`` columns are categorical features, and so are
    the columns listed in ``categorical`` (:class:`~qwkboost.data.features.FeatureSchema`).
    Errors name the config key (``data.path``, ``data.target``, ...) and, for a
    bad value, the file's data row.

    Raises
    ------
    ValueError
        For a missing, empty or unreadable file; duplicate column names; a
        missing or non-numeric target, or one with NaN, a single class or (when
        ``ordinal``) fractional values; an unknown ``id``, ``drop`` or
        ``categorical`` column, or duplicate ids; no feature columns, a numeric
        column with text in the test file, infinite features, features that are
        all constant; a test share that leaves no rows; a ``group`` column with
        missing values or a single value.
    """
    if not isinstance(target, str) or not target:
        raise ValueError(f"data.target must be a column name; got {target!r}")
    ordinal = check_bool(ordinal, "data.ordinal")
    seed = check_seed(seed, "seed")
    for key, v in (("data.id", id), ("data.weight", weight), ("cv.group", group)):
        if v is not None and (not isinstance(v, str) or not v):
            raise ValueError(f"{key} must be a column name or null; got {v!r}")
    drop, categorical = _names(drop, "data.drop"), _names(categorical, "data.categorical")

    df = read_table(path, "data.path")
    if target not in df.columns:
        raise ValueError(f"data.target={target!r} is not a column of {path}; columns: {list(df.columns)}")
    for key, cols in (("data.id", [id] if id else []), ("data.weight", [weight] if weight else []),
                      ("cv.group", [group] if group else []), ("data.drop", drop),
                      ("data.categorical", categorical)):
        unknown = [c for c in cols if c not in df.columns]
        if unknown:
            raise ValueError(f"{key}: {unknown} not a column of data.path={path!r}; columns: {list(df.columns)}")
    named = [c for c in (target, id, weight) if c]
    if len(set(named)) < len(named) or set(named) & set(drop):
        raise ValueError(f"data.target={target!r}, data.id={id!r}, data.weight={weight!r} and data.drop={drop} must "
                         "name different columns")
    if group is not None and group in (target, weight, *drop):
        raise ValueError(f"cv.group={group!r} is also data.target, data.weight or in data.drop; name the entity "
                         "column")
    if group is not None:       # the entity is never a feature (it may also be the id)
        named = [*named, group]
    features = [c for c in df.columns if c not in named and c not in drop]
    if not features:
        raise ValueError(f"data.path={path!r} has no feature columns besides data.target={target!r}"
                         + (f", data.id={id!r}" if id else "") + (f" and data.drop={drop}" if drop else ""))
    not_features = [c for c in categorical if c not in features]
    if not_features:
        raise ValueError(f"data.categorical: {not_features} are not feature columns (the target, the id or dropped)")
    _check_target_column(df, target, "data.path")
    if test_path:
        dft = read_table(test_path, "data.test_path")
        labelled = target in dft.columns
        if labelled:
            _check_target_column(dft, target, "data.test_path")
        if id and id not in dft.columns:
            raise ValueError(f"data.id={id!r} is not a column of data.test_path={test_path}")
        src_train, src_test = "data.path", "data.test_path"
    else:
        test_size = check_real(test_size, "data.test_size", 0.0, 1.0, lo_open=True, hi_open=True)
        n_test = int(round(len(df) * test_size))
        if not 0 < n_test < len(df):
            raise ValueError(f"data.test_size={test_size!r} of {len(df)} rows leaves {n_test} test rows and "
                             f"{len(df) - n_test} training rows; both need at least one (or give data.test_path)")
        if group is not None:
            if check_bool(stratify, "data.stratify"):
                raise ValueError(f"data.stratify=true with cv.group={group!r}: a test split of whole groups cannot "
                                 "keep every class's share; set data.stratify=false or give data.test_path")
            from sklearn.model_selection import GroupShuffleSplit

            codes = _group_codes(df[group], group, "data.path")
            tr_idx, te_idx = next(GroupShuffleSplit(1, test_size=test_size, random_state=seed).split(
                np.zeros(len(df)), groups=codes))
            dft, df = df.iloc[np.sort(te_idx)], df.iloc[np.sort(tr_idx)]
        elif check_bool(stratify, "data.stratify"):
            from sklearn.model_selection import train_test_split

            labels = df[target].to_numpy()
            _, counts = np.unique(labels, return_counts=True)
            if counts.min() < 2:
                raise ValueError(f"data.stratify=true needs two rows of every class of data.target={target!r}; "
                                 f"the smallest class has {counts.min()}")
            tr_idx, te_idx = train_test_split(np.arange(len(df)), test_size=n_test, stratify=labels,
                                              random_state=seed)
            dft, df = df.iloc[np.sort(te_idx)], df.iloc[np.sort(tr_idx)]
        else:
            rs = np.random.RandomState(seed)
            idx = rs.permutation(len(df))
            dft, df = df.iloc[idx[:n_test]], df.iloc[idx[n_test:]]
        src_train = src_test = "data.path"
        labelled = True
    if id:
        for frame, src in ((df, src_train), (dft, src_test)):
            dup = frame[id][frame[id].duplicated()]
            if len(dup):
                raise ValueError(f"data.id={id!r} repeats the value {dup.iloc[0]!r} in {src}; ids must be unique")
    missing = [c for c in features if c not in dft.columns]
    if missing:
        raise ValueError(f"data.test_path lacks feature columns {missing}")
    schema = FeatureSchema.fit(df[features], categorical, "data.path")
    X = _encode(schema, df[features], src_train)
    Xt = _encode(schema, dft[features], src_test)
    nan = np.isnan(X)
    spread = np.fmax.reduce(X, axis=0) > np.fmin.reduce(X, axis=0)
    if not (spread | (nan.any(axis=0) & ~nan.all(axis=0))).any():
        raise ValueError(f"every feature column of data.path={path!r} is constant (or empty); there is nothing to "
                         "learn from")
    y = df[target].to_numpy(dtype=float)
    yt = dft[target].to_numpy(dtype=float) if labelled else None
    classes = None
    if ordinal:
        for frame, arr, src in ((df, y, src_train), (dft, yt, src_test)):
            if arr is None:
                continue
            frac = arr != np.round(arr)
            if frac.any():
                i = int(np.flatnonzero(frac)[0])
                raise ValueError(
                    f"data.target={target!r} must be whole-numbered ordinal labels for a QWK experiment; "
                    f"data row {frame.index[i]} of {src} is {float(arr[i])!r} (or set data.ordinal=false)")
        if np.unique(y).size < 2:
            raise ValueError(f"data.target={target!r} has a single class ({y[0]:g}) in the training rows; QWK "
                             "needs labels that vary")
        classes = np.unique(y if yt is None else np.concatenate([y, yt]))
        span = class_range(classes).size
        if span > MAX_CLASSES:
            raise ValueError(f"data.target={target!r} spans {span:,} whole numbers ({classes.min():g}.."
                             f"{classes.max():g}); qwkboost treats each as a class, since QWK weighs disagreements "
                             f"by label differences (at most {MAX_CLASSES:,}). Recode the labels (e.g. to ranks), "
                             "or set data.ordinal=false for a numeric target")
        warn_empty_classes(y, "data.path" if test_path else "the training rows")
    ids = (df[id].to_numpy(), dft[id].to_numpy()) if id else (None, None)
    w = wt = None
    if weight:
        w = _weights(df, weight, src_train)
        wt = _weights(dft, weight, src_test) if weight in dft.columns else None
    groups = None
    if group is not None:
        groups = df[group].to_numpy()
        _group_codes(df[group], group, src_train)
    return Dataset(X, y, Xt, yt, list(features), classes, Path(path).stem, schema=schema, ids_train=ids[0],
                   ids_test=ids[1], id_name=id, target=target, w_train=w, w_test=wt, groups_train=groups,
                   group_name=group)


def _group_codes(column, name: str, src: str) -> np.ndarray:
    """The entity column as integer codes; a missing entity is refused, naming its data row."""
    import pandas as pd

    missing = column.isna().to_numpy()
    if missing.any():
        i = int(np.flatnonzero(missing)[0])
        raise ValueError(f"cv.group={name!r} is missing in {int(missing.sum())} row(s) of {src} (first: data row "
                         f"{column.index[i]}); every row needs its entity")
    codes, uniques = pd.factorize(column, sort=True)
    if len(uniques) < 2:
        raise ValueError(f"cv.group={name!r} holds a single value ({uniques[0]!r}) in {src}; one entity leaves "
                         "nothing to split into folds")
    return codes


def _weights(frame, column: str, src: str) -> np.ndarray:
    """The weight column, checked: numbers >= 0, finite, not all zero (errors name the data row)."""
    import pandas as pd

    v = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(v) | (v < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"data.weight={column!r} must hold finite numbers >= 0; data row {frame.index[i]} of {src} "
                         f"is {frame[column].iloc[i]!r}")
    if not v.sum() > 0:
        raise ValueError(f"data.weight={column!r} is 0 in every row of {src}")
    return v


def read_table(p: str, arg: str = "data.path") -> pd.DataFrame:
    """A CSV or Parquet file as a DataFrame; errors name the config key ``arg``."""
    import pandas as pd

    if not p:
        raise ValueError(f"{arg} is not set; give the path of a CSV or Parquet file")
    fp = Path(p)
    if not fp.exists():
        raise ValueError(f"{arg}={str(p)!r} does not exist")
    if fp.is_dir():
        raise ValueError(f"{arg}={str(p)!r} is a directory; give a CSV or Parquet file")
    parquet = fp.suffix.lower() in (".parquet", ".pq")
    try:
        if parquet:
            df = pd.read_parquet(fp)
            header = [str(c) for c in df.columns]
        else:
            header = [str(c) for c in pd.read_csv(fp, nrows=1, header=None).iloc[0]] \
                if fp.stat().st_size else []
            df = pd.read_csv(fp)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{arg}={str(p)!r} is empty") from None
    except (UnicodeDecodeError, pd.errors.ParserError, OSError, ValueError, IndexError) as exc:
        kind = "a Parquet" if parquet else "a CSV"
        raise ValueError(f"{arg}={str(p)!r} cannot be read as {kind} file "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]})") from None
    dup = sorted({c for c in header if header.count(c) > 1})
    if dup:
        raise ValueError(f"{arg}={str(p)!r} has duplicate column names {dup}; a repeated target would "
                         "leak into the features")
    if len(df) == 0:
        raise ValueError(f"{arg}={str(p)!r} has a header but no rows")
    df.columns = [str(c) for c in df.columns]
    return df



def _names(value, key: str) -> list[str]:
    """A list of column names from a config value (null, one name, or a list)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    try:
        out = [str(v) for v in value]
    except TypeError:
        raise ValueError(f"{key} must be a column name or a list of them; got {value!r}") from None
    return out


def _encode(schema: FeatureSchema, frame, src: str) -> np.ndarray:
    """``frame``'s features encoded by ``schema``; errors name the file and its data row."""
    try:
        return schema.encode(frame, src)
    except ValueError as exc:
        msg = str(exc)
        # the schema names positions in the frame; the file's data rows are its index
        import re

        m = re.search(r"\brow (\d+) of ", msg)
        if m:
            r = int(m.group(1))
            msg = msg.replace(m.group(0), f"data row {frame.index[r]} of ", 1)
        raise ValueError(msg) from None


def _check_target_column(df, target: str, src: str) -> None:
    """The target must be numbers, with no missing value (named by its data row)."""
    import pandas as pd

    col = df[target]
    if not pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col):
        bad = col[pd.to_numeric(col, errors="coerce").isna() & col.notna()]
        example = f"; e.g. data row {bad.index[0]} is {bad.iloc[0]!r}" if len(bad) else ""
        raise ValueError(f"data.target={target!r} must hold numbers (ordinal labels or a numeric target), "
                         f"but its column in {src} is of type {col.dtype}{example}")
    vals = col.to_numpy(dtype=float, na_value=np.nan)
    bad = ~np.isfinite(vals)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"data.target={target!r} is missing or infinite in {int(bad.sum())} row(s) of {src} "
                         f"(first: data row {col.index[i]}); drop or fill them")


#: The data sources a config can name (``data.name``), each a loader above.
SOURCES = {"quartiles": quartiles, "latent_classes": latent_classes, "chisq": chisq, "csv": from_file}
#: The settings of each data source (``data.*`` in a config): its loader's arguments; any other key is refused.
#: (``group`` comes from ``cv.group``, not from the data group.)
SOURCE_KEYS = {name: ("_target_", "name", *(p for p in inspect.signature(fn).parameters if p != "group"))
               for name, fn in SOURCES.items()}
#: The argument checks of the generated sources, run on a config before anything is drawn.
SOURCE_CHECKS = {"quartiles": check_quartiles_args, "latent_classes": check_latent_classes_args,
                 "chisq": check_chisq_args}

#: The real ordinal data sets shipped with qwkboost (``qwkboost/data/datasets/README.md``).
DATASETS_DIR = Path(__file__).resolve().parent / "datasets"


def dataset_path(name: str) -> str:
    """The path of a data set shipped with qwkboost (the ``${dataset:era.csv}`` resolver of the data configs)."""
    path = DATASETS_DIR / name
    if not path.is_file():
        shipped = sorted(p.name for p in DATASETS_DIR.glob("*.csv"))
        raise ValueError(f"no shipped data set {name!r}; qwkboost ships: {', '.join(shipped)}")
    return str(path)
