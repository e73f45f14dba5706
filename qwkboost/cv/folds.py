r"""The folds of cross-validation: K-fold splits, stratified, grouped and repeated, and the checks on them.

Rows of one entity (``groups``: a user, a patient) stay in one fold, or the
fold models would be validated on copies of their own training rows. With
``repeats`` > 1 the whole K-fold runs again on other splits (:func:`make_repeated_folds`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np

from qwkboost.data.features import FeatureSchema
from qwkboost.exceptions import ConfigError
from qwkboost.validation import check_int, shown

__all__ = ["make_folds", "make_repeated_folds", "check_fold_labels", "check_folds", "fold_assignment",
           "check_groups", "duplicate_rows", "warn_duplicates", "DUPLICATE_SHARE"]


#: Training rows that repeat another row's features exactly, above this share, draw a warning (without groups).
DUPLICATE_SHARE = 0.01


def check_groups(groups, n: int, name: str = "groups") -> np.ndarray:
    """``groups`` as an array of one entity per training row, checked.

    Raises
    ------
    ValueError
        For a length other than ``n``, a missing value, or a single group (nothing to split).
    """
    import pandas as pd  # slow to import: pandas

    if groups is None:
        raise ValueError(f"{name} is None")
    g = pd.Series(np.asarray(groups, dtype=object) if not hasattr(groups, "dtype") else np.asarray(groups))
    if g.ndim != 1 or len(g) != n:
        raise ValueError(f"{name} must hold one value per training row ({n}); got {len(g)}")
    missing = g.isna().to_numpy()
    if missing.any():
        raise ValueError(f"{name} is missing in {int(missing.sum())} training row(s) (first: row "
                         f"{int(np.flatnonzero(missing)[0])}); every row needs its entity, or rows of unknown entities "
                         "could share a fold with their copies")
    codes, uniques = pd.factorize(g, sort=True)
    if len(uniques) < 2:
        raise ValueError(f"{name} has a single value ({shown(uniques[0])}) in every training row: one entity leaves "
                         "nothing to split into folds")
    return codes.astype(np.int64)


def _split(y: np.ndarray, n_splits: int, stratified: bool, shuffle: bool, seed: int, g) -> list | None:
    """The folds of one K-fold split, or ``None`` where it cannot be made: more folds than rows, than groups, or
    (stratified) than the rows of the rarest class."""
    # slow to import: sklearn (only a split needs it)
    from sklearn.model_selection import GroupKFold, KFold, StratifiedGroupKFold, StratifiedKFold

    if n_splits > (len(y) if g is None else int(g.max()) + 1):
        return None
    state = seed if shuffle else None
    if stratified:
        if np.unique(y, return_counts=True)[1].min() < n_splits:
            return None
        splitter = StratifiedKFold(n_splits, shuffle=shuffle, random_state=state) if g is None \
            else StratifiedGroupKFold(n_splits, shuffle=shuffle, random_state=state)
    else:
        splitter = KFold(n_splits, shuffle=shuffle, random_state=state) if g is None \
            else GroupKFold(n_splits, shuffle=shuffle, random_state=state)
    with warnings.catch_warnings():
        # StratifiedGroupKFold repeats the class-count warning make_folds turns into an error
        warnings.filterwarnings("ignore", message="The least populated class", category=UserWarning)
        return list(splitter.split(np.zeros((len(y), 1)), y, g))


def _missing_end(y: np.ndarray, plan) -> tuple | None:
    """``(label, fold, repeat)`` of the first training part of ``plan`` without the lowest or the highest label."""
    lo, hi = y.min(), y.max()
    for r, split in enumerate(plan):
        for k, (tr, _) in enumerate(split):
            ytr = y[tr]
            for end in (lo, hi):
                if not np.any(ytr == end):
                    return end, k, r
    return None


def _works(y, n_splits, stratified, shuffle, seed, repeats, g, ordinal) -> bool:
    plan = [_split(y, n_splits, stratified, shuffle, seed + r, g) for r in range(repeats)]
    return all(p is not None for p in plan) and not (ordinal and _missing_end(y, plan) is not None)


def _label(value, label_of=None) -> str:
    """A label as messages show it: the user's (``label_of``, e.g. a word) or the number."""
    value = value if label_of is None else label_of(value)
    number = isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
    return f"{value:g}" if number else shown(value)


def _instead(y, n_splits, stratified, shuffle, seed, repeats, g, ordinal, label_of=None) -> str:
    """What to set instead: the nearest settings that were tried here and work (the same stratification with
    fewer folds; the other stratification with as many folds as works), or, when none does, the label to merge.
    Advice is never a setting that then fails, so following it cannot lead back here."""
    options = []
    for strat in (stratified, not stratified):
        for k in range(n_splits, 1, -1):
            if (strat, k) != (stratified, n_splits) and _works(y, k, strat, shuffle, seed, repeats, g, ordinal):
                options.append(" and ".join(([f"cv.stratified={str(strat).lower()}"] if strat != stratified else [])
                                            + ([f"cv.n_splits={k}"] if k != n_splits else [])))
                break
    if options:
        return "use " + ", or ".join(options)
    labels, counts = np.unique(y, return_counts=True)
    i = int(np.argmin(counts))
    ends = [j for j in (0, len(labels) - 1) if counts[j] < 2]
    if ordinal and ends:        # an end of the label range, which every training part needs
        i = ends[0]
    near = labels[1] if i == 0 else labels[i - 1]
    rows = f"{counts[i]} training row{'s' if counts[i] != 1 else ''}"
    return (f"no number of folds works: label {_label(labels[i], label_of)} has {rows}; merge it with label "
            f"{_label(near, label_of)} (or drop its rows)"
            + (", or group more coarsely (cv.group)" if g is not None else ""))


def make_folds(y: np.ndarray, n_splits: int, stratified: bool, shuffle: bool, seed: int, groups=None,
               ordinal: bool = True, label_of=None):
    """The (train_idx, valid_idx) pairs of K-fold CV, stratified by label if asked: the same for the same
    labels and seed, so that every method of a study sees the same folds.

    With ``groups`` (one entity per row), the rows of an entity stay in one
    fold: scikit-learn's ``StratifiedGroupKFold`` (classes balanced across
    folds as far as whole groups allow) or ``GroupKFold``.

    ``ordinal``: whether the folds are for an objective whose models need both ends of the label range; it
    decides only which settings a refusal advises (those tried here and found to work). ``label_of``: the
    user's label of a value of ``y``, for messages (:meth:`~qwkboost.data.dataset.Dataset.label_of`).

    Raises
    ------
    ValueError
        If ``n_splits`` is above the smallest class count when stratified (a ``ConfigError``), above the number
        of rows, or above the number of groups; for bad ``groups`` (see :func:`check_groups`).
    """
    g = None if groups is None else check_groups(groups, len(y), "cv.group")
    if g is not None:
        n_groups = int(g.max()) + 1
        if n_splits > n_groups:
            raise ValueError(f"cv.n_splits={n_splits} exceeds the number of groups in cv.group ({n_groups}); "
                             "lower cv.n_splits")
    if not stratified and n_splits > len(y):
        raise ValueError(f"cv.n_splits={n_splits} exceeds the number of training rows ({len(y)})")
    folds = _split(y, n_splits, stratified, shuffle, seed, g)
    if folds is None:
        labels, counts = np.unique(y, return_counts=True)
        raise ConfigError(f"cv.n_splits={n_splits} exceeds the smallest class count ({counts.min()}) of label "
                          f"{_label(labels[counts.argmin()], label_of)}; "
                          + _instead(y, n_splits, stratified, shuffle, seed, 1, g, ordinal, label_of))
    return folds


def check_fold_labels(y: np.ndarray, plan, grouped: bool, settings: Mapping | None = None,
                      label_of=None) -> None:
    """Every training part of ``plan`` (:func:`make_repeated_folds`) holds the lowest and the highest label.

    An ordinal objective takes its label range from its training rows, so a fold whose training rows lack an
    end of the range would train on fewer classes than it is scored on: refused before any training.
    Labels inside the range may be missing (they are empty classes).

    Parameters
    ----------
    y : ndarray
    plan : list of list of (train_idx, valid_idx)
    grouped : bool
        Whether ``plan`` keeps groups whole (``cv.group``).
    settings : mapping, optional
        ``n_splits``, ``stratified``, ``shuffle``, ``seed``, ``repeats`` and ``groups`` that made ``plan``:
        the message then advises settings tried and found to work (:func:`check_folds` passes them).
    label_of : callable, optional
        The user's label of a value of ``y``, for the message.

    Raises
    ------
    ConfigError
        Naming the label, the fold and what to set instead (never a setting that fails too).
    """
    missing = _missing_end(y, plan)
    if missing is None:
        return
    end, k, r = missing
    where = f"fold {k + 1}" + (f" of repeat {r + 1}" if len(plan) > 1 else "")
    cause = "in that fold's groups (cv.group)" if grouped else "in that fold"
    if settings is not None:
        s = settings
        g = None if s.get("groups") is None else check_groups(s["groups"], len(y), "cv.group")
        instead = _instead(y, s["n_splits"], s["stratified"], s["shuffle"], s["seed"], s.get("repeats", 1), g,
                           True, label_of)
    else:
        # without the settings: stratified K-fold on every class with at least this many rows holds every label
        # in every training part (each class spread over all folds); other settings depend on the seed
        labels, counts = np.unique(y, return_counts=True)
        near = labels[1] if end == labels[0] else labels[-2]
        instead = (f"use cv.stratified=true and cv.n_splits={min(int(counts.min()), len(plan[0]))}"
                   if counts.min() >= 2 and not grouped
                   else f"merge label {_label(end, label_of)} with label {_label(near, label_of)} (or drop its rows)")
    raise ConfigError(f"label {_label(end, label_of)}: every row with it is {cause}, so the models of {where} "
                      f"would train without it and take a narrower label range; {instead}")


def check_folds(y: np.ndarray, n_splits: int, stratified: bool, shuffle: bool, seed: int, repeats: int = 1,
                groups=None, ordinal: bool = True, label_of=None) -> None:
    """The cross-validation plan checked before any training, as :func:`~qwkboost.cv.crossval.cross_validate`
    will make it: the folds can be made (:func:`make_repeated_folds`), and, for an ordinal objective, every
    training part holds both ends of the label range (:func:`check_fold_labels`).

    A refusal's advice names settings that were tried on these labels and work, so following it never leads
    to another refusal (``cv.stratified=false`` for a class too rare to stratify, when the unstratified folds
    keep the label range; else fewer folds; else the label to merge).

    Parameters
    ----------
    y : ndarray
        The training labels.
    n_splits, stratified, shuffle, seed, repeats, groups
        ``cv.n_splits``, ``cv.stratified``, ``cv.shuffle``, ``seed``, ``cv.repeats`` and the rows' entities.
    ordinal : bool
        Whether the objective needs ordinal labels (its models then need both ends of the range).
    label_of : callable, optional
        The user's label of a value of ``y``, for messages (:meth:`~qwkboost.data.dataset.Dataset.label_of`).

    Raises
    ------
    ConfigError
    """
    y = np.asarray(y)
    plan = make_repeated_folds(y, n_splits, stratified, shuffle, seed, repeats, groups, ordinal, label_of)
    if ordinal:
        check_fold_labels(y, plan, groups is not None, dict(n_splits=n_splits, stratified=stratified,
                                                            shuffle=shuffle, seed=seed, repeats=repeats,
                                                            groups=groups), label_of)


def make_repeated_folds(y: np.ndarray, n_splits: int, stratified: bool, shuffle: bool, seed: int,
                        repeats: int = 1, groups=None,
                        ordinal: bool = True, label_of=None) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """``repeats`` K-fold splits, the r-th drawn with seed ``seed + r`` (:func:`make_folds`).

    Repeat 0 is the single split of ``make_folds(..., seed)``, so ``repeats=1``
    changes nothing.
    ``ordinal`` and ``label_of`` are for a refusal's message, as in :func:`make_folds`.

    Raises
    ------
    ValueError
        For ``repeats`` < 1, or ``repeats`` > 1 without ``shuffle`` (every split would be the same).
    """
    repeats = check_int(repeats, "cv.repeats", 1)
    if repeats > 1 and not shuffle:
        raise ValueError(f"cv.repeats={repeats} with cv.shuffle=false repeats one split {repeats} times; set "
                         "cv.shuffle=true")
    return [make_folds(y, n_splits, stratified, shuffle, seed + r, groups, ordinal, label_of) for r in range(repeats)]


def fold_assignment(folds: list[tuple[np.ndarray, np.ndarray]], n: int, repeats: int = 1) -> np.ndarray:
    """The validation fold of every row in every repeat, shape ``(repeats, n)``, from flat (train, valid) pairs."""
    k = len(folds) // repeats
    out = np.full((repeats, n), -1, dtype=np.int16)
    for i, (_, va) in enumerate(folds):
        out[i // k, va] = i % k
    return out


def duplicate_rows(X: np.ndarray) -> int:
    """How many rows of ``X`` have features identical to another row's (NaN equal to NaN)."""
    import pandas as pd  # slow to import: pandas

    if len(X) < 2:
        return 0
    return int(pd.DataFrame(X).duplicated(keep=False).sum())


def _continuous_columns(X: np.ndarray, schema: FeatureSchema | None) -> list[int]:
    """Numeric columns with many distinct values, where identical rows do not happen by chance."""
    n = len(X)
    cat = set(schema.categorical) if schema is not None else set()
    out = []
    for j in range(X.shape[1]):
        if j in cat:
            continue
        distinct = np.unique(X[:, j][~np.isnan(X[:, j])]).size
        if distinct > max(20, n // 10):
            out.append(j)
    return out


def warn_duplicates(X: np.ndarray, schema: FeatureSchema | None = None) -> int:
    r"""Warn when many training rows repeat another row's features exactly; return how many do.

    Rows of one entity (a user, a patient, a device) that land in both the
    training and the validation folds make out-of-fold scores and early
    stopping look better than the test set will. Identical rows are only
    telling when at least one numeric column has many distinct values (more
    than :math:`\max(20, n/10)`); on coarse survey-style columns they happen by
    chance and no warning is given. The threshold is :data:`DUPLICATE_SHARE`.
    """
    n_dup = duplicate_rows(X)
    if n_dup > DUPLICATE_SHARE * len(X) and _continuous_columns(X, schema):
        warnings.warn(f"{n_dup:,} of {len(X):,} training rows ({n_dup / len(X):.0%}) have features identical to "
                      "another training row's. If they are rows of one entity (a user, a patient, a device), K-fold "
                      "CV puts copies in both training and validation folds, and out-of-fold scores and early "
                      "stopping are flattered: name the entity column with cv.group=<column> (groups= in Python)",
                      UserWarning, stacklevel=3)
    return n_dup
