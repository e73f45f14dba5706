r"""The order of a budget's candidates for the data in front of it: a few rules on the data's shape, learned from
the path by hand on six real sets.

The default order (:data:`~qwkboost.autoblend.candidates.ORDER`) comes from the study's cells at 20,000 rows:
LightGBM's squared error, then XGBoost's and CatBoost's. The path by hand on every row of the six packaged sets
(``benchmarks/auto_budget.py``: LightGBM, XGBoost and CatBoost x squared error and extended QWK, blended) moves
one pair, checked leave-one-set-out (``benchmarks/ranking_loso.py``, RESULTS.md):

- **CatBoost's squared error comes second, on every shape.** It was the best or second-best single candidate on
  five of the six sets (best on ``movielens`` and ``diamonds``) and carried 0.32 to 0.79 of the by-hand blend's
  weight on all six. The alternative was to move it up only on data with **id-like columns** (a categorical column
  of at least :data:`ID_LEVELS` levels: students, schools, films, users), where CatBoost's ordered target
  statistics (Prokhorenkova et al., *CatBoost: unbiased boosting with categorical features*, NeurIPS 2018) were
  expected to matter most. Chosen on five sets and scored on the sixth, moving it up everywhere won for all six
  by the blend's weight left outside the first two candidates (0.68 on average in the default order, 0.25 with
  the move) and for five of six by the best single candidate among the first two. Id-like columns are counted
  and named in the reason.
- **Classes**: the class objectives fit one score per class and round, so their cost grows with the number of
  classes :math:`K` (:func:`objective_cost`: :math:`K/2` times squared error's for ``multiclass``, at least 1).

LightGBM's squared error stays first on every shape (when it is a candidate): it is the cheapest candidate and within 0.005 of the best
single one on every set, so a budget always ends with something good to blend. What the rules leave uncertain is
settled on the data itself by screening (:mod:`qwkboost.autoblend.screening`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qwkboost.data.dataset import class_range

__all__ = ["DataShape", "ID_LEVELS", "MOVES", "shape_of", "rank", "objective_cost"]

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


#: The rules: a pair, the place it moves to (0-based) and whether only on data with id-like columns.
MOVES = ((("catboost", "squared_error"), 1, False),)


def rank(pairs, shape: DataShape | None, moves=MOVES) -> list[tuple[tuple[str, str], str]]:
    """``pairs`` (``(engine, objective)``, in the default order) in the order to run them on data of ``shape``,
    each with the reason for its place (the leaderboard's ``why``): the pairs of ``moves`` (:data:`MOVES`) at their
    places, the others in their order."""
    pairs = list(pairs)
    moved = {pair: at for pair, at, ids_only in moves
             if pair in pairs and (not ids_only or (shape is not None and shape.id_like))}
    if len(pairs) < 2 or not moved:
        return [(p, "default order") for p in pairs]
    ids = f"; {shape.id_like} id-like column(s)" if shape is not None and shape.id_like else ""
    why = f"moved up: the best or second-best single candidate on 5 of 6 real sets{ids}"
    moved = {pair: at for pair, at in moved.items() if at < pairs.index(pair)}     # never down
    if not moved:
        return [(p, "default order") for p in pairs]
    out = [(p, "default order") for p in pairs if p not in moved]
    for pair, at in sorted(moved.items(), key=lambda kv: kv[1]):
        out.insert(min(at, len(out)), (pair, why))
    return out
