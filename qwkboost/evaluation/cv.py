"""Cross-validation moved to :mod:`qwkboost.cv` (the stage above the engines: it trains models, and evaluation
trains none; :mod:`qwkboost.cv.crossval` and :mod:`qwkboost.cv.folds`). Importing this module says so."""

from qwkboost._lazy import moved_error

raise moved_error("qwkboost.evaluation.cv", "qwkboost.cv")
