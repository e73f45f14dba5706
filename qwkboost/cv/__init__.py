"""Cross-validation: the stage above the engines. It splits the training rows into folds
(:mod:`~qwkboost.cv.folds`: stratified, grouped, repeated K-fold) and trains an engine on each, early-stopping on
its validation part (:mod:`~qwkboost.cv.crossval`: out-of-fold and test scores, :class:`CVResult`); the cut points
and metrics that follow are :mod:`qwkboost.evaluation`'s.
"""

from qwkboost._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    # crossval
    "CVResult": "crossval",
    "cross_validate": "crossval",
    "progress_enabled": "crossval",
    # inner
    "EARLY_STOPPING_ON": "inner",
    "INNER_SHARE": "inner",
    "inner_split": "inner",
    "other_rounds": "inner",
    "default_early_stopping_on": "inner",
    # folds
    "make_folds": "folds",
    "make_repeated_folds": "folds",
    "check_fold_labels": "folds",
    "fold_assignment": "folds",
    "check_groups": "folds",
    "duplicate_rows": "folds",
    "warn_duplicates": "folds",
    "DUPLICATE_SHARE": "folds",
    "crossval": "",
    "folds": "",
    "inner": "",
})
