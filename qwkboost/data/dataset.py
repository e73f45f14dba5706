"""The :class:`Dataset` every data source returns, and the ordinal label scale (:func:`class_range`).

A Dataset holds a train split, a test split and the label scale, so later stages never look back at where the
data came from.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from qwkboost.data.features import FeatureSchema
from qwkboost.data.labels import ClassLabels

__all__ = ["Dataset", "class_range", "warn_empty_classes", "MAX_CLASSES"]


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
    weight_name : str or None
        The column ``w_train`` came from (``data.weight``).
    labels : ClassLabels or None
        The user's class labels in order (``data.classes``, or an ordered categorical target) when the labels
        are not whole numbers on their own scale: ``y_train`` and ``y_test`` then hold class indices
        :math:`0..K-1`, and the outputs give the labels back.
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
    weight_name: str | None = None
    labels: ClassLabels | None = None

    def __post_init__(self):
        if self.schema is None:
            self.schema = FeatureSchema.numeric(self.X_train.shape[1], self.feature_names or None)

    @property
    def is_ordinal(self) -> bool:
        return self.classes is not None

    @property
    def has_test_labels(self) -> bool:
        return self.y_test is not None

    def label_of(self, value: float):
        """The user's label of a value of ``y_train`` (a class index when :attr:`labels` is set)."""
        return self.labels.values[int(value)] if self.labels is not None else float(value)

    def decode(self, values: np.ndarray) -> np.ndarray:
        """Class values as the user's labels (whole numbers as integers, words as words)."""
        if self.labels is not None:
            return self.labels.decode(values)
        v = np.asarray(values, dtype=np.float64)
        return v.astype(np.int64) if np.all(v == np.round(v)) and np.all(np.abs(v) < 2 ** 53) else v


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
