"""The evaluation stage: cross-validation, cut points, metrics, paired statistics and plots.

Data flows ``cv`` (out-of-fold and test scores) -> ``thresholds`` (cut points on
the OOF scores) -> ``metrics`` (QWK, extended QWK, RMSE) -> ``stats`` (intervals,
paired tests over seeds); ``plots`` draws a run's curves and histograms.
"""

from qwkboost._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    # cv
    "CVResult": "cv",
    "cross_validate": "cv",
    "make_folds": "cv",
    "make_repeated_folds": "cv",
    "fold_assignment": "cv",
    "check_groups": "cv",
    "duplicate_rows": "cv",
    "warn_duplicates": "cv",
    "progress_enabled": "cv",
    "DUPLICATE_SHARE": "cv",
    # thresholds
    "METHODS": "thresholds",
    "apply_thresholds": "thresholds",
    "round_cuts": "thresholds",
    "fit_exact": "thresholds",
    "fit_nelder_mead": "thresholds",
    "fit_distribution": "thresholds",
    "fit_thresholds": "thresholds",
    "nested_classes": "thresholds",
    # metrics
    "qwk": "metrics",
    "extended_qwk": "metrics",
    "rmse": "metrics",
    "extended_qwk_ratio": "metrics",
    "rmse_fast": "metrics",
    "weighted_mean_var": "metrics",
    # stats
    "Interval": "stats",
    "PairedComparison": "stats",
    "mean_interval": "stats",
    "paired_comparison": "stats",
    "holm": "stats",
    # plots
    "learning_curves": "plots",
    "score_histograms": "plots",
    "confusion_matrix": "plots",
    "class_probabilities": "plots",
    "blend_members": "plots",
    "cv": "",
    "thresholds": "",
    "metrics": "",
    "stats": "",
    "plots": "",
})
