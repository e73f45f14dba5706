r"""Where each fold's early stopping looks (``cv.early_stopping_on``), and the inner slice it looks at.

Early stopping on the fold a model is scored on lets that fold's labels choose the model's number of rounds:
the out-of-fold score then flatters the model, most where there is little to learn
(``benchmarks/noise_estimate.py`` measures by how much). With
``inner`` each fold stops on a slice of its own training rows (:func:`inner_split`) instead; with
``other_folds`` each fold still stops on the fold it scores (its model and test predictions are ``valid``'s), but
its out-of-fold scores are read at the rounds the other folds chose (:func:`other_rounds`).
Light (NumPy only), so that :mod:`qwkboost.config` checks the setting without importing the engines' CV.
"""

from __future__ import annotations

import numpy as np

from qwkboost import defaults

__all__ = ["EARLY_STOPPING_ON", "INNER_SHARE", "inner_split", "other_rounds", "default_early_stopping_on"]

#: Where each fold's early stopping looks (``cv.early_stopping_on``): ``valid``, the fold it scores; ``inner``, a
#: slice of its own training rows (:func:`inner_split`), so that the scored fold's labels never touch its model;
#: ``other_folds``, the fold it scores, but its out-of-fold scores are read at the rounds the other folds kept
#: (:func:`other_rounds`).
EARLY_STOPPING_ON = ("valid", "inner", "other_folds")
#: The share of a fold's training rows held out to stop on with ``early_stopping_on="inner"``.
INNER_SHARE = 0.1


def default_early_stopping_on() -> str:
    """The runs' setting, ``cv.early_stopping_on`` of ``conf/cv/kfold.yaml`` (read through
    :mod:`qwkboost.defaults`' reader of ``conf/``): what a run, ``experiment=auto`` and ``qwkboost.auto`` use when
    their config does not say."""
    return str(defaults._read("cv", "kfold.yaml").get("early_stopping_on", "valid"))


def inner_split(y: np.ndarray, seed: int, stratified: bool = True, groups=None,
                share: float = INNER_SHARE) -> tuple[np.ndarray, np.ndarray]:
    r"""Split a fold's training rows into the rows its model trains on and the rows its early stopping looks at.

    The stopping slice holds :math:`\lfloor s\,n_c \rfloor` rows of every class :math:`c` when ``stratified``
    (:math:`\lfloor s\,n \rfloor` rows otherwise; whole entities when ``groups`` is given), drawn with
    ``seed``; :math:`s` is ``share``. The lowest and highest label stay among the training rows (an entity
    holding one is put back), so an ordinal objective takes the same label range as without the slice. It
    depends only on these rows' labels, never on the rows the fold scores.

    Parameters
    ----------
    y : ndarray of shape (n,)
        The labels of the fold's training rows.
    seed : int
    stratified : bool, default True
    groups : ndarray of shape (n,), optional
        The entity of every row (codes or labels): an entity's rows fall on one side.
    share : float, default :data:`INNER_SHARE`

    Returns
    -------
    fit, stop : ndarray of int
        Positions into ``y`` (sorted).

    Raises
    ------
    ValueError
        When the slice would be empty (too few rows).
    """
    rng = np.random.default_rng(seed)
    n = len(y)
    stop = np.zeros(n, dtype=bool)
    if groups is not None:
        codes = np.unique(np.asarray(groups), return_inverse=True)[1].ravel()
        sizes = np.bincount(codes)
        order = rng.permutation(sizes.size)
        taken = order[: int(np.searchsorted(np.cumsum(sizes[order]), share * n, side="right"))]
        stop[np.isin(codes, taken)] = True
        for end in (y.min(), y.max()):           # an entity holding an end of the label range goes back
            if not np.any((y == end) & ~stop):
                stop[np.isin(codes, codes[(y == end) & stop])] = False
    elif stratified:
        for c in np.unique(y):
            rows = np.flatnonzero(y == c)
            stop[rng.permutation(rows)[: int(share * rows.size)]] = True
    else:
        stop[rng.permutation(n)[: int(share * n)]] = True
        for end in (y.min(), y.max()):
            if not np.any((y == end) & ~stop):
                stop[np.flatnonzero(y == end)[0]] = False
    if not stop.any():
        raise ValueError(f"cv.early_stopping_on=inner: a fold's {n} training rows leave no rows to stop on "
                         f"({share:.0%} of them, by class); use cv.early_stopping_on=valid, or more rows")
    return np.flatnonzero(~stop), np.flatnonzero(stop)


def other_rounds(best: np.ndarray, k: int, trained: int) -> int:
    r"""The rounds at which fold ``k``'s out-of-fold scores are read with ``early_stopping_on="other_folds"``.

    The median of the rounds the other folds of its repeat kept, :math:`r_k = \operatorname{round}(
    \operatorname{median}_{j \ne k} b_j)`, between 1 and the rounds fold ``k`` trained (``trained``): fold ``k``'s
    own validation labels do not choose them (they reach them only through the other folds' models, which train
    on fold ``k``'s rows, and through the cap).

    Parameters
    ----------
    best : ndarray of int
        Every fold's kept rounds (``best_iteration``) in one repeat.
    k : int
        The fold.
    trained : int
        The rounds fold ``k``'s model holds (``num_rounds``).
    """
    others = np.delete(np.asarray(best, dtype=float), k)
    return int(min(max(round(float(np.median(others))), 1), trained))
