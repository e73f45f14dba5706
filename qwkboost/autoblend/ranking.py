r"""The order of a budget's candidates for the data in front of it: a few rules on the data's shape.

The default order (:data:`~qwkboost.autoblend.candidates.ORDER`) is the study's expected gain per second on data
whose categorical columns have few levels. Two facts of the shape change it:

- **Id-like columns** (a categorical column of at least :data:`ID_LEVELS` levels: students, schools, films,
  users). CatBoost encodes a category by ordered target statistics computed on the rows before each row in a
  random order (Prokhorenkova et al., *CatBoost: unbiased boosting with categorical features*, NeurIPS 2018),
  which learns an effect per level without the target leakage of a plain mean; LightGBM's and XGBoost's
  partition splits over thousands of levels overfit or are capped. On the sets with such columns
  (``chem97``, ``insteval``, ``movielens``) CatBoost's squared error was the best single candidate of the path by
  hand (``benchmarks/auto_budget.py``, RESULTS.md), so CatBoost's pairs move up: its squared error right after
  the first candidate, its extended QWK before the other engines' second objectives.
- **Classes**: the class objectives fit one score per class and round, so their cost grows with the number of
  classes :math:`K` (:func:`objective_cost`: :math:`K/2` times squared error's for ``multiclass``, at least 1).

LightGBM's squared error stays first on every shape: it is the cheapest candidate and, with exact cut points,
the strongest single objective of the study, so a budget always ends with something good to blend. What the
rules leave uncertain is settled on the data itself by screening (:mod:`qwkboost.autoblend.screening`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qwkboost.data.dataset import class_range

__all__ = ["DataShape", "ID_LEVELS", "shape_of", "rank", "objective_cost"]

#: A categorical column with at least this many levels is id-like (an entity's identifier).
ID_LEVELS = 100


@dataclass(frozen=True)
class DataShape:
    """What the ranking rules read of a data set.

    Attributes
    ----------
    rows, columns : int
        Training rows and feature columns.
    levels : tuple of int
        The number of levels of every categorical column, in column order.
    classes : int
        Label classes (the span of the ordinal scale).
    """

    rows: int
    columns: int
    levels: tuple[int, ...] = ()
    classes: int = 2

    @property
    def id_like(self) -> int:
        """The number of id-like columns (:data:`ID_LEVELS` levels or more)."""
        return sum(n >= ID_LEVELS for n in self.levels)

    def describe(self) -> str:
        """One line: ``75,003 rows x 5 columns, 3 categorical (2 id-like: 9,066, 901 levels), 10 classes``."""
        ids = sorted((n for n in self.levels if n >= ID_LEVELS), reverse=True)
        cat = f", {len(self.levels)} categorical" if self.levels else ""
        if ids:
            cat += f" ({len(ids)} id-like: {', '.join(f'{n:,}' for n in ids)} levels)"
        return f"{self.rows:,} rows x {self.columns} columns{cat}, {self.classes} classes"


def shape_of(ds) -> DataShape:
    """The :class:`DataShape` of a :class:`~qwkboost.data.dataset.Dataset`'s training rows."""
    categories = getattr(ds.schema, "categories", {}) or {}
    return DataShape(int(np.asarray(ds.y_train).size), int(ds.X_train.shape[1]),
                     tuple(len(categories[j]) for j in sorted(categories)), int(class_range(ds.classes).size))


def objective_cost(objective: str, shape: DataShape | None, prior: float) -> float:
    """An objective's cost relative to squared error on the same engine: ``prior``, except for ``multiclass``,
    whose one tree per class and round costs :math:`\\max(1, K/2)` with :math:`K` classes when the shape is known."""
    if objective == "multiclass" and shape is not None:
        return max(1.0, shape.classes / 2)
    return prior


def rank(pairs, shape: DataShape | None) -> list[tuple[tuple[str, str], str]]:
    """``pairs`` (``(engine, objective)``, in the default order) in the order to run them on data of ``shape``,
    each with the reason for its place (the leaderboard's ``why``).

    With id-like columns, CatBoost's squared error comes second (after the first pair) and CatBoost's extended
    QWK right after the first other pair that follows it; otherwise the order is kept.
    """
    pairs = list(pairs)
    if shape is None or not shape.id_like or len(pairs) < 2:
        return [(p, "default order") for p in pairs]
    moved = {("catboost", "squared_error"): 1, ("catboost", "extended_qwk"): 3}
    why = f"moved up: {shape.id_like} id-like column(s) (CatBoost's ordered target statistics)"
    rest = [p for p in pairs if p not in moved]
    out = [(p, "default order") for p in rest]
    for pair, at in sorted(moved.items(), key=lambda kv: kv[1]):
        if pair in pairs:
            out.insert(min(at, len(out)), (pair, why))
    return out
