"""User files: a CSV or Parquet file (and a test file) into a :class:`~qwkboost.data.dataset.Dataset`.

``data=csv`` in a config; every error names the config key (``data.path``, ``data.target``, ...) and, for a bad
value, the file's data row.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from qwkboost.data.dataset import MAX_CLASSES, Dataset, class_range, warn_empty_classes
from qwkboost.data.features import FeatureSchema
from qwkboost.data.labels import ClassLabels, warn_given_order
from qwkboost.validation import check_bool, check_real, check_seed, shown

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["from_file", "read_table"]


def from_file(path: str, target: str, test_path: str | None = None, test_size: float | None = 0.2,
              ordinal: bool = True, seed: int = 0, id: str | None = None, drop=(), categorical=(),
              weight: str | None = None, stratify: bool = False, classes=None, group: str | None = None) -> Dataset:
    """Load a CSV or Parquet file; the label column is ``target``.

    Ordinal labels keep their own scale (1..9, 3..8, ...); their classes are
    the whole numbers from the lowest to the highest (:func:`class_range`).
    Labels that are words (``low``, ``medium``, ``high``) take their order from
    ``classes`` (``data.classes=[low,medium,high]``), or from the file itself when
    its target is an ordered categorical (a Parquet file written from pandas); ``classes``
    also gives numeric labels an order of their own. Such labels become class
    indices :math:`0..K-1` (:class:`~qwkboost.data.labels.ClassLabels`), and the
    outputs give them back as written; a label outside ``classes`` is refused,
    naming it and its data row.
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
    if group is not None and group in (target, weight):
        raise ValueError(f"cv.group={group!r} is also data.{'target' if group == target else 'weight'}; name the "
                         "entity column")
    if group is not None:       # the entity is never a feature (it may also be the id, or be dropped)
        named = [*named, group]
    features = [c for c in df.columns if c not in named and c not in drop]
    if not features:
        raise ValueError(f"data.path={path!r} has no feature columns besides data.target={target!r}"
                         + (f", data.id={id!r}" if id else "") + (f" and data.drop={drop}" if drop else ""))
    not_features = [c for c in categorical if c not in features]
    if not_features:
        raise ValueError(f"data.categorical: {not_features} are not feature columns (the target, the id or dropped)")
    order = _class_labels(df[target], target, classes, ordinal)
    if order is None:
        _check_target_column(df, target, "data.path")
    if id:      # the whole file, before a test share is held out of it: a repeated id would land on both sides
        _check_unique_ids(df, id, "data.path")
    if test_path:
        dft = read_table(test_path, "data.test_path")
        labelled = target in dft.columns
        if labelled and order is None:
            _check_target_column(dft, target, "data.test_path")
        elif labelled:
            _check_same_order(dft[target], target, order, classes)
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
            from sklearn.model_selection import GroupShuffleSplit  # slow to import: sklearn

            codes = _group_codes(df[group], group, "data.path")
            tr_idx, te_idx = next(GroupShuffleSplit(1, test_size=test_size, random_state=seed).split(
                np.zeros(len(df)), groups=codes))
            dft, df = df.iloc[np.sort(te_idx)], df.iloc[np.sort(tr_idx)]
        elif check_bool(stratify, "data.stratify"):
            from sklearn.model_selection import train_test_split  # slow to import: sklearn

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
    if id and test_path:
        _check_unique_ids(dft, id, "data.test_path")
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
    if order is not None:
        y = order.encode(df[target], f"data.target={target!r} in {src_train}", df.index)
        yt = order.encode(dft[target], f"data.target={target!r} in {src_test}", dft.index) if labelled else None
    else:
        y = df[target].to_numpy(dtype=float)
        yt = dft[target].to_numpy(dtype=float) if labelled else None
    classes = None
    if order is not None:
        if np.unique(y).size < 2:
            raise ValueError(f"data.target={target!r} has a single class ({shown(order.values[int(y[0])])}) in the "
                             "training rows; QWK needs labels that vary")
        classes = np.arange(order.n_classes, dtype=np.float64)
        unseen = [v for k, v in enumerate(order.values) if k not in set(y.astype(int).tolist())]
        if unseen:
            warnings.warn(f"class(es) {unseen} of data.classes never occur in the training rows; they are kept as "
                          "empty classes of the scale", UserWarning, stacklevel=2)
    elif ordinal:
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
                   group_name=group, weight_name=weight, labels=order)


def _class_labels(column, target: str, classes, ordinal: bool) -> ClassLabels | None:
    """The order of the target's labels: ``data.classes``, an ordered categorical's own, or ``None`` for numbers.

    Raises
    ------
    ValueError
        For labels that are words with no order given, or ``data.classes`` with a regression target.
    """
    import pandas as pd  # slow to import: pandas

    if classes is not None:
        if not ordinal:
            raise ValueError("data.classes orders ordinal labels; it cannot be set with data.ordinal=false")
        given = ClassLabels.of(classes, "data.classes")
        warn_given_order(given, column, "data.classes", f"data.target={target!r} in data.path")
        return given
    dtype = column.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        if dtype.ordered and ordinal:
            return ClassLabels(tuple(dtype.categories))
        if pd.api.types.is_numeric_dtype(dtype.categories.dtype):
            return None
    elif pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
        return None
    words = column.dropna().astype(str).unique()
    if ordinal and len(words) and pd.to_numeric(pd.Series(words), errors="coerce").isna().any():
        shown = sorted(words)[:8]
        raise ValueError(f"data.target={target!r} holds labels that are words ({', '.join(map(repr, shown))}"
                         f"{', ...' if len(words) > 8 else ''}); give their order, lowest first, with data.classes="
                         f"[...] (e.g. data.classes=[{','.join(shown)}] if that is how your scale runs)")
    return None


def _check_same_order(column, target: str, labels: ClassLabels, classes) -> None:
    """A test file's ordered categorical target must list the training file's classes in the same order."""
    import pandas as pd  # slow to import: pandas

    dtype = column.dtype
    if classes is None and isinstance(dtype, pd.CategoricalDtype) and dtype.ordered \
            and tuple(dtype.categories) != labels.values:
        raise ValueError(f"data.target={target!r} is ordered {list(labels.values)} in data.path but "
                         f"{list(dtype.categories)} in data.test_path; give the order with data.classes=[...]")


def _check_unique_ids(frame, id: str, src: str) -> None:
    """Every id once in ``frame``; the first repeated one is named with its two data rows."""
    repeated = frame[id].duplicated(keep=False).to_numpy()
    if repeated.any():
        first = int(np.flatnonzero(repeated)[0])
        value = frame[id].iloc[first]
        rows = frame.index[repeated & (frame[id] == value).to_numpy()][:2].tolist()
        raise ValueError(f"data.id={id!r} repeats the value {shown(value)} in {src} (data rows {rows[0]} and "
                         f"{rows[1]}); ids must be unique")


def _group_codes(column, name: str, src: str) -> np.ndarray:
    """The entity column as integer codes; a missing entity is refused, naming its data row."""
    import pandas as pd  # slow to import: pandas

    missing = column.isna().to_numpy()
    if missing.any():
        i = int(np.flatnonzero(missing)[0])
        raise ValueError(f"cv.group={name!r} is missing in {int(missing.sum())} row(s) of {src} (first: data row "
                         f"{column.index[i]}); every row needs its entity")
    codes, uniques = pd.factorize(column, sort=True)
    if len(uniques) < 2:
        raise ValueError(f"cv.group={name!r} holds a single value ({shown(uniques[0])}) in {src}; one entity leaves "
                         "nothing to split into folds")
    return codes


def _weights(frame, column: str, src: str) -> np.ndarray:
    """The weight column, checked: numbers >= 0, finite, not all zero (errors name the data row)."""
    import pandas as pd  # slow to import: pandas

    v = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(v) | (v < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"data.weight={column!r} must hold finite numbers >= 0; data row {frame.index[i]} of {src} "
                         f"is {shown(frame[column].iloc[i])}")
    if not v.sum() > 0:
        raise ValueError(f"data.weight={column!r} is 0 in every row of {src}")
    return v


def read_table(p: str, arg: str = "data.path") -> pd.DataFrame:
    """A CSV or Parquet file as a DataFrame; errors name the config key ``arg``."""
    import pandas as pd  # slow to import: pandas

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

        m = re.search(r"\brow (\d+) of ", msg)
        if m:
            r = int(m.group(1))
            msg = msg.replace(m.group(0), f"data row {frame.index[r]} of ", 1)
        raise ValueError(msg) from None


def _check_target_column(df, target: str, src: str) -> None:
    """The target must be numbers, with no missing value (named by its data row)."""
    import pandas as pd  # slow to import: pandas

    col = df[target]
    if not pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col):
        bad = col[pd.to_numeric(col, errors="coerce").isna() & col.notna()]
        example = f"; e.g. data row {bad.index[0]} is {shown(bad.iloc[0])}" if len(bad) else ""
        raise ValueError(f"data.target={target!r} must hold numbers (ordinal labels or a numeric target), "
                         f"but its column in {src} is of type {col.dtype}{example}")
    vals = col.to_numpy(dtype=float, na_value=np.nan)
    bad = ~np.isfinite(vals)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"data.target={target!r} is missing or infinite in {int(bad.sum())} row(s) of {src} "
                         f"(first: data row {col.index[i]}); drop or fill them")
