r"""The folds of cross-validation: K-fold splits, stratified, grouped and repeated, and the checks on them.

Rows of one entity (``groups``: a user, a patient) stay in one fold, or the
fold models would be validated on copies of their own training rows. With
``repeats`` > 1 the whole K-fold runs again on other splits (:func:`make_repeated_folds`).
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.model_selection import GroupKFold, KFold, StratifiedGroupKFold, StratifiedKFold

from qwkboost.data.features import FeatureSchema
from qwkboost.validation import check_int, shown

__all__ = ["make_folds", "make_repeated_folds", "check_fold_labels", "fold_assignment", "check_groups",
           "duplicate_rows", "warn_duplicates", "DUPLICATE_SHARE"]


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


def make_folds(y: np.ndarray, n_splits: int, stratified: bool, shuffle: bool, seed: int, groups=None):
    """The (train_idx, valid_idx) pairs of K-fold CV, stratified by label if asked: the same for the same
    labels and seed, so that every method of a study sees the same folds.

    With ``groups`` (one entity per row), the rows of an entity stay in one
    fold: scikit-learn's ``StratifiedGroupKFold`` (classes balanced across
    folds as far as whole groups allow) or ``GroupKFold``.

    Raises
    ------
    ValueError
        If ``n_splits`` is above the smallest class count when stratified, above the number of rows,
        or above the number of groups; for bad ``groups`` (see :func:`check_groups`).
    """
    g = None if groups is None else check_groups(groups, len(y), "cv.group")
    if g is not None:
        n_groups = int(g.max()) + 1
        if n_splits > n_groups:
            raise ValueError(f"cv.n_splits={n_splits} exceeds the number of groups in cv.group ({n_groups}); "
                             "lower cv.n_splits")
    if stratified:
        _, counts = np.unique(y, return_counts=True)
        if counts.min() < n_splits:
            raise ValueError(f"cv.n_splits={n_splits} exceeds the smallest class count ({counts.min()}); "
                             "lower cv.n_splits or set cv.stratified=false")
        splitter = StratifiedKFold(n_splits, shuffle=shuffle, random_state=seed if shuffle else None) if g is None \
            else StratifiedGroupKFold(n_splits, shuffle=shuffle, random_state=seed if shuffle else None)
    else:
        if n_splits > len(y):
            raise ValueError(f"cv.n_splits={n_splits} exceeds the number of training rows ({len(y)})")
        splitter = KFold(n_splits, shuffle=shuffle, random_state=seed if shuffle else None) if g is None \
            else GroupKFold(n_splits, shuffle=shuffle, random_state=seed if shuffle else None)
    with warnings.catch_warnings():
        # StratifiedGroupKFold repeats the class-count warning make_folds has already turned into an error
        warnings.filterwarnings("ignore", message="The least populated class", category=UserWarning)
        return list(splitter.split(np.zeros((len(y), 1)), y, g))


def check_fold_labels(y: np.ndarray, plan, grouped: bool) -> None:
    """Every training part of ``plan`` (:func:`make_repeated_folds`) holds the lowest and the highest label.

    An ordinal objective takes its label range from its training rows, so a fold whose training rows lack an
    end of the range would train on fewer classes than it is scored on: refused before any training.
    Labels inside the range may be missing (they are empty classes).

    Raises
    ------
    ValueError
        Naming the label, the fold and the settings that decide it.
    """
    lo, hi = y.min(), y.max()
    for r, split in enumerate(plan):
        for k, (tr, _) in enumerate(split):
            ytr = y[tr]
            for end in (lo, hi):
                if not np.any(ytr == end):
                    where = f"fold {k + 1}" + (f" of repeat {r + 1}" if len(plan) > 1 else "")
                    cause = "in that fold's groups (cv.group)" if grouped else "in that fold"
                    raise ValueError(f"label {end:g}: every row with it is {cause}, so the models of {where} "
                                     "would train without it and take a narrower label range; lower cv.n_splits"
                                     + (", or group more coarsely" if grouped else ", or set cv.stratified=true"))


def make_repeated_folds(y: np.ndarray, n_splits: int, stratified: bool, shuffle: bool, seed: int,
                        repeats: int = 1, groups=None) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """``repeats`` K-fold splits, the r-th drawn with seed ``seed + r`` (:func:`make_folds`).

    Repeat 0 is the single split of ``make_folds(..., seed)``, so ``repeats=1``
    changes nothing.

    Raises
    ------
    ValueError
        For ``repeats`` < 1, or ``repeats`` > 1 without ``shuffle`` (every split would be the same).
    """
    repeats = check_int(repeats, "cv.repeats", 1)
    if repeats > 1 and not shuffle:
        raise ValueError(f"cv.repeats={repeats} with cv.shuffle=false repeats one split {repeats} times; set "
                         "cv.shuffle=true")
    return [make_folds(y, n_splits, stratified, shuffle, seed + r, groups) for r in range(repeats)]


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
