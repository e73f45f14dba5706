"""Feature columns: their names and types, and the encoding every engine trains on.

A :class:`FeatureSchema` is fitted once on the training features and then
encodes every table that is scored later, so that a column in another
position, a category in another order or a category never seen in training
all reach the engines as the same numbers.

- Numeric columns (numbers, booleans) pass through as floats; NaN is missing.
- **Categorical columns** (strings, pandas ``category``, or columns named in
  ``categorical``) become integer codes: position ``k`` of the column's
  category list. Categories are the training values, sorted (a pandas
  ``category`` column keeps its own order). A missing value, and a category
  that training never saw, become NaN: every engine then treats it as missing
  (the rule of scikit-learn's ``HistGradientBoosting``). The engines get the
  codes with the column marked categorical: XGBoost's ``feature_types="c"``,
  LightGBM's ``categorical_feature``, and the native engine's categorical
  splits.
- **A category keeps its identity** from training to prediction: a column given
  as strings, or as a pandas ``Categorical`` whose categories run in another
  order, maps to the training categories by value. Values of the other kind
  are converted only where that is exact, else refused naming the column:
  numbers for text categories match by their text (``3`` and ``3.0`` are
  ``"3"``), and a number that is none of the categories is refused, since
  integer codes (of which order, nobody can tell) would otherwise all be
  unseen categories; text for numeric categories is read as a number, and
  text that is none is refused.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np

from qwkboost.validation import check_features, feature_names, shown

__all__ = ["FeatureSchema", "EncodedFeatures", "MAX_CATEGORIES"]

#: Categories a column may have (LightGBM and XGBoost take codes up to 2**31; this keeps
#: models and their JSON small). Columns with more are usually ids: drop them (``data.drop``).
MAX_CATEGORIES = 10_000


def _is_categorical_dtype(dtype) -> bool:
    from pandas.api.types import is_bool_dtype, is_numeric_dtype  # slow to import: pandas

    return not (is_numeric_dtype(dtype) or is_bool_dtype(dtype))


def _plain(v):
    """A category as a JSON value: str, int or float."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        f = float(v)
        return int(f) if f.is_integer() else f
    return str(v)


def _number_text(values: np.ndarray) -> np.ndarray:
    """Numbers as the text their category would be (:func:`_plain`): whole numbers without a decimal point
    (``3.0`` is ``"3"``)."""
    try:
        v = values.astype(np.float64)
    except (TypeError, ValueError, OverflowError):
        v = None
    if v is None or not np.isfinite(v).all() or (np.abs(v) >= 2.0 ** 53).any():
        return np.array([str(_plain(x)) for x in values], dtype=object)
    whole = v == np.round(v)
    out = v.astype(str).astype(object)
    out[whole] = v[whole].astype(np.int64).astype(str)
    return out


def _preview(cats: list, n: int = 5) -> str:
    return ", ".join(repr(c) for c in cats[:n]) + (f", ... ({len(cats)} in all)" if len(cats) > n else "")


@dataclass
class FeatureSchema:
    """Names and types of the feature columns, and the categories of the categorical ones.

    Attributes
    ----------
    names : list of str or None
        Column names, or ``None`` when fitted on an array (columns are then matched by position).
    n_features : int
    categories : dict of int to list
        For each categorical column (by position): its categories; the code of a value is its position here.
    """

    names: list[str] | None
    n_features: int
    categories: dict[int, list] = field(default_factory=dict)

    # -- fitting ---------------------------------------------------------------
    @classmethod
    def fit(cls, X, categorical=None, name: str = "X") -> "FeatureSchema":
        """The schema of ``X``: categorical columns are the non-numeric ones plus ``categorical``.

        Parameters
        ----------
        X : DataFrame or array-like
        categorical : list of str or int, optional
            Further columns to treat as categorical, by name (DataFrames) or position.

        Raises
        ------
        ValueError
            For duplicate column names, an unknown column in ``categorical``, or a
            column with more than :data:`MAX_CATEGORIES` categories.
        """
        names = feature_names(X, name)
        if names is None:
            if X is None or hasattr(X, "tocsr") or (not categorical):
                n = check_features(X, name).shape[1]     # arrays of numbers: the usual checks and messages
            else:
                arr = np.asarray(X, dtype=object)
                if arr.ndim != 2:
                    check_features(X, name)
                n = arr.shape[1]
        else:
            n = len(names)
        if n == 0:
            raise ValueError(f"{name} has no columns")
        picks = set()
        for c in categorical or ():
            if isinstance(c, numbers.Integral) and not isinstance(c, bool):
                if not 0 <= c < n:
                    raise ValueError(f"categorical: column {c} is out of range for {name} with {n} columns")
                picks.add(int(c))
            elif names is not None and str(c) in names:
                picks.add(names.index(str(c)))
            else:
                raise ValueError(f"categorical: {c!r} is not a column of {name}"
                                 + (f"; columns: {names}" if names is not None else " (an array: give positions)"))
        cats: dict[int, list] = {}
        if names is not None:
            for j, (col, dtype) in enumerate(X.dtypes.items()):
                if j in picks or _is_categorical_dtype(dtype):
                    cats[j] = cls._categories_of(X.iloc[:, j], names[j], name)
        else:
            arr = np.asarray(X)
            for j in sorted(picks):
                cats[j] = cls._categories_of(arr[:, j], f"column {j}", name)
        return cls(names, n, cats)

    @classmethod
    def fit_encode(cls, X, categorical=None, name: str = "X") -> tuple["FeatureSchema", np.ndarray]:
        """:meth:`fit` and :meth:`encode` in one pass (an array of numbers is checked and converted once)."""
        if feature_names(X, name) is None and not categorical:
            arr = check_features(X, name)
            return cls(None, arr.shape[1], {}), arr
        schema = cls.fit(X, categorical, name)
        return schema, schema.encode(X, name)

    @staticmethod
    def _categories_of(values, col: str, name: str) -> list:
        import pandas as pd  # slow to import: pandas

        s = pd.Series(values)
        if isinstance(s.dtype, pd.CategoricalDtype):
            cats = [_plain(v) for v in s.cat.categories]
        else:
            vals = s.dropna().unique()
            kinds = {isinstance(v, str) for v in vals}
            if len(kinds) > 1:          # mixed strings and numbers: compare as text
                vals = np.array([str(v) for v in vals], dtype=object)
            cats = sorted({_plain(v) for v in vals}, key=lambda v: (isinstance(v, str), v))
        if len(cats) > MAX_CATEGORIES:
            raise ValueError(f"{name}: categorical column {col!r} has {len(cats):,} categories (at most "
                             f"{MAX_CATEGORIES:,}); an id-like column should be dropped (data.drop) or named "
                             "as data.id")
        return cats

    # -- encoding --------------------------------------------------------------
    @property
    def categorical(self) -> list[int]:
        """Positions of the categorical columns."""
        return sorted(self.categories)

    @property
    def types(self) -> list[str]:
        """``"c"`` (categorical) or ``"q"`` (numeric) per column, as XGBoost writes them."""
        return ["c" if j in self.categories else "q" for j in range(self.n_features)]

    def column_name(self, j: int) -> str:
        return self.names[j] if self.names is not None else f"column {j}"

    def encode(self, X, name: str = "X", reference: str = "the model was trained on") -> np.ndarray:
        """``X`` as the float array the engines score: columns in training order, categories as codes.

        A DataFrame is matched by column name (reordered columns are put back,
        extra ones are ignored); an array by position. Unseen categories and
        missing values become NaN.

        Raises
        ------
        ValueError
            Naming a missing column, a non-numeric value in a numeric column, or a width mismatch.
        """
        have = feature_names(X, name)
        if have is None:
            if not self.categories:
                arr = check_features(X, name)
                if arr.shape[1] != self.n_features:
                    raise ValueError(f"{name} has {arr.shape[1]} features but {reference} {self.n_features}")
                return arr
            if hasattr(X, "tocsr") or X is None:
                check_features(X, name)                 # the usual message
            raw = np.asarray(X, dtype=object)
            if raw.ndim != 2 or raw.shape[1] != self.n_features:
                raise ValueError(f"{name} must be 2-dimensional with {self.n_features} columns; got shape "
                                 f"{raw.shape}")
            cols = [raw[:, j] for j in range(self.n_features)]
        else:
            if self.names is not None:
                missing = [c for c in self.names if c not in have]
                if missing:
                    raise ValueError(f"{name} lacks the feature column(s) {missing}; {reference} {self.names}")
                pos = {c: i for i, c in enumerate(have)}
                idx = [pos[c] for c in self.names]
            else:
                if len(have) != self.n_features:
                    raise ValueError(f"{name} has {len(have)} features but {reference} {self.n_features}")
                idx = list(range(self.n_features))
            cols = [X.iloc[:, i] for i in idx]
        if len(cols[0]) == 0:
            raise ValueError(f"{name} has no rows")
        out = np.empty((len(cols[0]), self.n_features))
        for j, col in enumerate(cols):
            out[:, j] = self._codes(col, j, name) if j in self.categories else self._number_column(col, j, name)
        return out

    def _number_column(self, col, j: int, name: str) -> np.ndarray:
        import pandas as pd  # slow to import: pandas

        s = pd.Series(col)
        if _is_categorical_dtype(s.dtype):
            num = pd.to_numeric(s, errors="coerce")
            bad = num.isna() & s.notna()
            if bad.any():
                i = int(np.flatnonzero(bad.to_numpy())[0])
                raise ValueError(f"feature {self.column_name(j)!r} was numeric in training, but row {i} of {name} "
                                 f"holds {shown(s.iloc[i])}")
            s = num
        v = s.to_numpy(dtype=np.float64, na_value=np.nan)
        if np.isinf(v).any():
            i = int(np.flatnonzero(np.isinf(v))[0])
            raise ValueError(f"feature {self.column_name(j)!r} is infinite in row {i} of {name}; use an empty cell "
                             "(NaN) for a missing value")
        return v

    def _codes(self, col, j: int, name: str) -> np.ndarray:
        """Column ``j``'s values as positions in its training categories (the module's rule); NaN for a missing
        value or a category training never saw.

        Values of the other kind than the categories' are converted where that is exact, else refused: numbers
        for text categories match by their text (``3`` and ``3.0`` are ``"3"``), and a number that is no category
        is refused (integer codes would otherwise all be unseen categories, and a model would score every row as
        if the column were missing); text for numeric categories is read as a number, and text that is none is
        refused.
        """
        import pandas as pd  # slow to import: pandas
        from pandas.api.types import infer_dtype  # slow to import: pandas

        cats = self.categories[j]
        s = pd.Series(col)
        if isinstance(s.dtype, pd.CategoricalDtype):
            s = s.astype(object)            # a Categorical's values, whatever the order of its own categories
        kind = infer_dtype(s, skipna=True)
        values = s.astype(object)
        if cats and all(isinstance(c, str) for c in cats) and kind not in ("string", "empty"):
            if pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype):
                number = s.notna().to_numpy()
            else:
                number = values.map(lambda v: isinstance(v, numbers.Number) and not isinstance(v, (bool, np.bool_))
                                    and v == v).to_numpy(dtype=bool)
            if number.any():
                text = _number_text(values[number].to_numpy())
                values = values.copy()
                values[number] = text
                unknown = number & (pd.Index(cats, dtype=object).get_indexer(values) < 0)
                if unknown.any():
                    i = int(np.flatnonzero(unknown)[0])
                    raise ValueError(f"feature {self.column_name(j)!r} has text categories ({_preview(cats)}), but "
                                     f"row {i} of {name} holds the number {shown(s.iloc[i])}, which is none of them: "
                                     "integer codes are not read as categories (what order they number is not "
                                     "known); give the column's categories themselves (strings, or a pandas "
                                     "Categorical)")
        elif cats and all(isinstance(c, numbers.Number) and not isinstance(c, bool) for c in cats) \
                and kind not in ("integer", "floating", "mixed-integer-float", "decimal", "empty"):
            text = values.map(lambda v: isinstance(v, str)).to_numpy(dtype=bool)
            if text.any():
                parsed = pd.to_numeric(values[text], errors="coerce")
                bad = np.flatnonzero(text)[parsed.isna().to_numpy()]
                if bad.size:
                    i = int(bad[0])
                    raise ValueError(f"feature {self.column_name(j)!r} has numeric categories ({_preview(cats)}), "
                                     f"but row {i} of {name} holds {shown(s.iloc[i])}, which is not a number")
                values = values.copy()
                values[text] = [_plain(v) for v in parsed]
        codes = pd.Index(cats, dtype=object).get_indexer(values).astype(np.float64)
        codes[codes < 0] = np.nan               # missing, or a category training never saw
        return codes

    def decode(self, X: np.ndarray):
        """The table that encodes to ``X``: a DataFrame with the training column names and
        categories in place of codes (an input example for serving)."""
        import pandas as pd  # slow to import: pandas

        X = np.asarray(X, dtype=np.float64)
        names = self.names if self.names is not None else [f"f{j}" for j in range(self.n_features)]
        cols = {}
        for j, name in enumerate(names):
            if j in self.categories:
                cats = np.asarray(self.categories[j] + [None], dtype=object)
                codes = np.where(np.isnan(X[:, j]), len(self.categories[j]), X[:, j]).astype(np.int64)
                cols[name] = cats[codes]
            else:
                cols[name] = X[:, j]
        return pd.DataFrame(cols)

    # -- persistence -----------------------------------------------------------
    def to_dict(self) -> dict:
        return {"names": self.names, "n_features": self.n_features,
                "categories": {str(j): list(c) for j, c in self.categories.items()}}

    @classmethod
    def from_dict(cls, d: dict, where: str = "schema") -> "FeatureSchema":
        """Rebuild a schema written by :meth:`to_dict`, checking every field."""
        if not isinstance(d, dict):
            raise ValueError(f"{where} must be a mapping")
        n = d.get("n_features")
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"{where}: n_features must be an integer >= 1; got {n!r}")
        names = d.get("names")
        if names is not None and (not isinstance(names, list) or len(names) != n
                                  or not all(isinstance(c, str) for c in names)):
            raise ValueError(f"{where}: names must be a list of {n} strings")
        cats = {}
        for k, v in (d.get("categories") or {}).items():
            if not str(k).isdigit() or not 0 <= int(k) < n or not isinstance(v, list):
                raise ValueError(f"{where}: categories must map column positions (0..{n - 1}) to lists")
            cats[int(k)] = v
        return cls(names, int(n), cats)

    @classmethod
    def numeric(cls, n_features: int, names: list[str] | None = None) -> "FeatureSchema":
        """A schema of ``n_features`` numeric columns."""
        return cls(None if names is None else list(names), int(n_features), {})


@dataclass(frozen=True)
class EncodedFeatures:
    """Features already encoded by ``schema`` (:meth:`FeatureSchema.encode`): pass them to
    :func:`qwkboost.train` to skip encoding again (cross-validation encodes once for all folds)."""

    X: np.ndarray
    schema: FeatureSchema

    def __post_init__(self):
        X = np.asarray(self.X)
        if X.ndim != 2 or X.shape[1] != self.schema.n_features or X.dtype != np.float64:
            raise ValueError(f"EncodedFeatures.X must be a float array with {self.schema.n_features} columns; got "
                             f"{X.dtype} of shape {X.shape}")
        object.__setattr__(self, "X", X)

    def __len__(self) -> int:
        return self.X.shape[0]

    def take(self, rows) -> "EncodedFeatures":
        """The encoded rows ``rows``."""
        return EncodedFeatures(self.X[rows], self.schema)
