"""Ordinal labels given as words (or in an order of the user's): their order, and the index scale underneath.

``low / medium / high`` or ``Fair / Good / Very Good / Premium / Ideal`` are ordinal labels that are not
numbers. The user gives their order (``data.classes=[low,medium,high]``, as scikit-learn's
``OrdinalEncoder(categories=...)`` takes it), or a Parquet file carries it as an ordered pandas
``Categorical``. Class :math:`k` of the order is the whole number :math:`k` on the scale every stage works on
(:math:`0, \\dots, K-1`, one step apart, so QWK weighs a disagreement by the squared difference of positions);
the outputs give the user's labels back (:meth:`ClassLabels.decode`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

__all__ = ["ClassLabels", "plain", "warn_given_order"]


def plain(value: Any) -> Any:
    """A label as a plain Python value (NumPy scalars unwrapped), as JSON and configs hold it."""
    return value.item() if isinstance(value, np.generic) else value


@dataclass(frozen=True)
class ClassLabels:
    """The classes in their order: position :math:`k` is class :math:`k` of the index scale.

    Attributes
    ----------
    values : tuple
        The labels, lowest class first (strings, or numbers).
    """

    values: tuple

    def __post_init__(self):
        values = tuple(plain(v) for v in self.values)
        object.__setattr__(self, "values", values)
        if len(values) < 2:
            raise ValueError(f"an ordinal scale needs at least 2 classes; got {list(values)}")
        if len(set(values)) < len(values):
            dup = next(v for v in values if values.count(v) > 1)
            raise ValueError(f"the classes repeat {dup!r}; each label must appear once in the order")

    @classmethod
    def of(cls, values: Sequence, key: str = "classes") -> "ClassLabels":
        """Labels from a config or argument ``key`` (a list of strings or numbers), checked."""
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise ValueError(f"{key} must list the classes in order, e.g. {key}=[low,medium,high]; got {values!r}")
        out = [plain(v) for v in values]
        bad = [v for v in out if isinstance(v, bool) or not isinstance(v, (str, int, float))
               or (isinstance(v, float) and not np.isfinite(v))]
        if bad:
            raise ValueError(f"{key} must hold labels (words or numbers); {bad[0]!r} is not one")
        try:
            return cls(tuple(out))
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None

    @property
    def n_classes(self) -> int:
        return len(self.values)

    @property
    def numeric(self) -> bool:
        return all(isinstance(v, (int, float)) for v in self.values)

    def _key(self, value):
        # a number read from a file (3.0) matches the label 3; words match as they are written
        if self.numeric:
            try:
                return float(value)
            except (TypeError, ValueError):
                return value
        return value if isinstance(value, str) else str(value)

    def encode(self, labels, where: str, rows: Sequence | None = None) -> np.ndarray:
        """Each label's class index (float), or a :class:`ValueError` naming the first unknown label and its row.

        Parameters
        ----------
        labels : array-like
            The labels, as the file holds them.
        where : str
            What holds them, for the message (``"data.target='grade' in data.path"``).
        rows : sequence, optional
            The rows' names in the file (its data rows); default: their positions.
        """
        index = {self._key(v): k for k, v in enumerate(self.values)}
        raw = list(labels.to_numpy() if hasattr(labels, "to_numpy") else np.asarray(labels, dtype=object))
        out = np.empty(len(raw), dtype=np.float64)
        for i, v in enumerate(raw):
            k = index.get(self._key(v)) if v is not None and v == v else None
            if k is None:
                row = rows[i] if rows is not None else i
                what = "missing" if v is None or v != v else f"{plain(v)!r}, which is not one of the classes"
                raise ValueError(f"{where}: data row {row} is {what} {list(self.values)}")
            out[i] = k
        return out

    def decode(self, index) -> np.ndarray:
        """The labels of class indices :math:`0..K-1` (an array of the labels' own type)."""
        idx = np.asarray(index)
        if idx.dtype.kind == "f":
            idx = np.rint(idx).astype(np.int64)
        values = np.asarray(self.values, dtype=object if not self.numeric else None)
        return values[idx]

    def to_list(self) -> list:
        return list(self.values)


def warn_given_order(given: ClassLabels, column, key: str, where: str) -> None:
    """Warn, saying what is used, where an order the user gave (``key``) disagrees with what the labels say of
    themselves: numbers listed other than ascending (their own scale ranks them by value), or an ordered pandas
    ``Categorical`` whose own order differs. Either may be meant (codes whose numbers are not their rank, a file
    whose order is wrong), so the order given is used, never silently.

    Parameters
    ----------
    given : ClassLabels
        The order given (``data.classes``, ``classes=``).
    column : array-like
        The labels as the file or the caller holds them.
    key, where : str
        The setting that gave the order (``"data.classes"``) and what holds the labels
        (``"data.target='grade' in data.path"``), for the message.
    """
    import pandas as pd  # slow to import: pandas

    values = list(given.values)
    dtype = getattr(column, "dtype", None)
    if isinstance(dtype, pd.CategoricalDtype) and dtype.ordered:
        own = [plain(v) for v in dtype.categories]
        if own != values:
            warnings.warn(f"{key}={values} orders the labels of {where} otherwise than its ordered categories "
                          f"{own}; {key} is used (leave {key} unset to use the file's order)", UserWarning,
                          stacklevel=3)
    elif given.numeric and values != sorted(values):
        warnings.warn(f"{key}={values} ranks numeric labels otherwise than by their value: {values[0]!r} is taken as "
                      f"the lowest class and {values[-1]!r} as the highest, one step apart; if the numbers are the "
                      f"scale itself, list them ascending ({key}={sorted(values)}) or leave {key} unset",
                      UserWarning, stacklevel=3)
