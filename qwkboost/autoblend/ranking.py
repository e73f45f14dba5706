r"""Every rule of the order of a budget's candidates: the default order (:data:`ORDER`, :func:`plan`), the moves for
the data's shape (:func:`rank`), the order after screening (:func:`order`) and the blend's pool
(:func:`diverse_pool`).

The default order is the expected gain per second, from the study at competition size (``docs/study.md``): squared
error with exact cut points is the strongest single objective and LightGBM the fastest engine, so LightGBM's squared
error runs first; then the other engines on squared error (their blends with it gain the most), then extended QWK
and the ordinal logit (other errors, so they blend well), the class objectives, and the slowest pairs last. It comes
from the study's cells at 20,000 rows. The path by hand on every row of the six packaged sets
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
  classes :math:`K` (:func:`~qwkboost.autoblend.costs.objective_cost`: :math:`K/2` times squared error's for ``multiclass``, at least 1).

LightGBM's squared error stays first on every shape (when it is a candidate): it is the cheapest candidate and within 0.005 of the best
single one on every set, so a budget always ends with something good to blend. What the rules leave uncertain is
settled on the data itself by screening (:mod:`qwkboost.autoblend.screening`): a screen within :data:`PROMISING`
of the best keeps its candidate's ranked place (:func:`order`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from qwkboost.autoblend.candidates import Candidate, available_engines
from qwkboost.autoblend.costs import ENGINE_COST, prior_cost
from qwkboost.data.dataset import class_range

if TYPE_CHECKING:
    from qwkboost.autoblend.state import CandidateRecord

__all__ = ["ORDER", "plan", "DataShape", "ID_LEVELS", "MOVES", "shape_of", "rank", "PROMISING", "order",
           "diverse_pool"]

#: The default order of the candidates (expected gain per second, highest first).
ORDER = (
    ("lightgbm", "squared_error"),
    ("xgboost", "squared_error"),
    ("catboost", "squared_error"),
    ("lightgbm", "extended_qwk"),
    ("lightgbm", "ordinal_logit"),
    ("xgboost", "extended_qwk"),
    ("xgboost", "ordinal_logit"),
    ("lightgbm", "multiclass"),
    ("native", "squared_error"),
    ("catboost", "extended_qwk"),
    ("xgboost", "multiclass"),
    ("catboost", "ordinal_logit"),
    ("native", "extended_qwk"),
)

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


def plan(engines=None, objectives=None) -> list[Candidate]:
    """The candidates: :data:`ORDER` when neither list is given; else every pair of ``engines`` (default: all)
    and ``objectives`` (default: the objectives of :data:`ORDER`), those of :data:`ORDER` first in its order, the
    others after them, cheapest first.

    Without ``engines``, an engine whose library cannot be imported is left out with a log line
    (:func:`available_engines`); one named in ``engines`` is kept, and refused when it is checked.

    Raises
    ------
    ValueError
        For an empty list; names are checked by :class:`~qwkboost.autoblend.settings.AutoSettings`.
    EngineUnavailable
        Without ``engines``, when no engine's library can be imported.
    """
    if engines is None and objectives is None:
        usable = set(available_engines(dict.fromkeys(e for e, _ in ORDER)))
        return [Candidate(e, o) for e, o in ORDER if e in usable]
    engines = available_engines(ENGINE_COST) if engines is None else list(engines)
    objectives = list(dict.fromkeys(o for _, o in ORDER)) if objectives is None else list(objectives)
    if not engines or not objectives:
        raise ValueError("auto.engines and auto.objectives must each name at least one")
    ordered = [Candidate(e, o) for e, o in ORDER if e in engines and o in objectives]
    rest = [Candidate(e, o) for e in engines for o in objectives if (e, o) not in ORDER]
    return ordered + sorted(rest, key=lambda c: prior_cost(c.pair))


#: A screened candidate within this QWK of the best screen is promising.
PROMISING = 0.01


def order(pairs, screens: dict, why: dict) -> list[tuple[tuple[str, str], str]]:
    """``pairs`` (the ranked order) after screening: the promising ones (a screen's QWK within :data:`PROMISING` of
    the best screen's), in the ranked order; then those screening could not judge (not screened, or stopped at its
    time cap below that), in the ranked order; then the others, best screen first; each with the reason for its
    place.

    A screen sorts out what is not worth running; among the promising, a screen's QWK on a sample does not overrule
    the ranked order, which rests on every row of the packaged sets (the by-hand evidence, module docstring). On
    MovieLens split at other seeds, one core, 300 s, the promising screens in their QWK order put CatBoost's extended
    QWK (0.5254) ahead of its squared error (0.5236), which the path by hand weighs most and which then no longer
    fit; in the ranked order the budget blended LightGBM with CatBoost's squared error: test QWK 0.5744 and 0.5858
    against 0.5722 and 0.5848 (``benchmarks/auto_budget.py``, split seeds 1 and 2). It has a cost where the best
    screen is far down the ranked order: on diamonds at 300 s XGBoost's multiclass (the best screen, 0.004 above
    CatBoost's squared error) did not run, and the blend scored 0.0016 below the code before, which ran it second.

    A screen stopped at its time cap before early stopping understates its candidate, so it is promising when even
    its QWK is within :data:`PROMISING` of the best screen that ended by itself."""
    if not screens:
        return [(p, why.get(p, "default order")) for p in pairs]
    # a capped screen screened again at a raised learning rate ran to early stopping: its QWK is judged
    judged = {p: s for p, s in screens.items() if not s.get("capped") or s.get("rounds_upper")}
    best = max((s["qwk"] for s in judged.values()), default=max(s["qwk"] for s in screens.values()))
    # a capped screen's QWK is a lower bound: within PROMISING of the best, its candidate is promising too
    hopeful = {p: s for p, s in screens.items() if p in judged or s["qwk"] >= best - PROMISING}
    scored = [p for p in pairs if p in hopeful]

    def note(p):
        capped = " (stopped at its time cap, which understates it)" if p not in judged else ""
        return f"screened {hopeful[p]['qwk']:.4f}{capped}: within {PROMISING} of the best screen ({best:.4f})"
    promising = [(p, note(p)) for p in scored if hopeful[p]["qwk"] >= best - PROMISING]
    unjudged = [(p, (f"screen stopped at its time cap ({screens[p]['qwk']:.4f}): " if p in screens else
                     "not screened (its share of the time was spent): ") + why.get(p, "default order"))
                for p in pairs if p not in hopeful]
    rest = [(p, f"screened {judged[p]['qwk']:.4f}: {best - judged[p]['qwk']:.4f} below the best screen")
            for p in sorted(scored, key=lambda p: -hopeful[p]["qwk"]) if hopeful[p]["qwk"] < best - PROMISING]
    return promising + unjudged + rest


def diverse_pool(done: list[tuple[str, CandidateRecord]], size: int) -> list[tuple[str, CandidateRecord]]:
    """At most ``size`` finished candidates for the blend to choose from, taken in rounds: each (engine,
    objective) pair's best nested out-of-fold QWK first (pairs in the order of that QWK), then each pair's second
    best, and so on.

    Ensemble selection gains from members that err differently (Caruana et al., ICML 2004); the best ``size``
    by score alone were, at 900 s on InstEval, 13 tuning trials of LightGBM's squared error whose blend scored
    0.4074 nested out-of-fold QWK, below the 0.4166 that 300 s reached with six engines and objectives."""
    groups: dict[tuple, list[tuple[str, CandidateRecord]]] = {}
    for n, r in sorted(done, key=lambda nr: nr[1].nested, reverse=True):
        groups.setdefault(r.pair, []).append((n, r))
    pool: list[tuple[str, CandidateRecord]] = []
    for i in range(max((len(g) for g in groups.values()), default=0)):
        pool += [g[i] for g in groups.values() if i < len(g)]   # groups keep their best-first order
    return pool[:size]
