"""The evaluation stage: cut points, metrics, paired statistics and plots. It evaluates scores and trains nothing
(cross-validation, which trains, is the stage above the engines: :mod:`qwkboost.cv`).

Data flows ``thresholds`` (cut points on the out-of-fold scores) -> ``metrics`` (QWK, extended QWK, RMSE) ->
``stats`` (intervals, paired tests over seeds); ``plots`` draws a run's curves and histograms.
"""

from qwkboost._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
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
    "thresholds": "",
    "metrics": "",
    "stats": "",
    "plots": "",
}, moved={"cv": "qwkboost.cv", **{name: f"qwkboost.cv.{name}" for name in (
    "CVResult", "cross_validate", "make_folds", "make_repeated_folds", "fold_assignment", "check_groups",
    "duplicate_rows", "warn_duplicates", "progress_enabled", "DUPLICATE_SHARE")}})
