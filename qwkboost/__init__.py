"""qwkboost: custom ordinal objectives, defined once, on XGBoost, LightGBM, CatBoost and a NumPy GBDT.

The public API, in one place. Everything here is imported when first used, so
``import qwkboost`` costs milliseconds; the stages live in subpackages, in the
order data flows through a run:

``data`` -> ``cv`` -> ``engines`` (+ ``objectives``, ``native``; ``explain`` beside them) ->
``evaluation.thresholds``
-> ``evaluation.metrics`` -> ``tracking``; ``runs`` drives them from a config, ``blending`` combines
finished runs and ``study`` compares methods over seeds; ``distributed`` scales training out.
"""

from qwkboost._lazy import attach

__version__ = "0.1.0"

__getattr__, __dir__, __all__ = attach(__name__, {
    # train and predict
    "train": "qwkboost.engines.engine",
    "load_model": "qwkboost.engines.model",
    "Model": "qwkboost.engines.model",
    "QWKClassifier": "qwkboost.estimator",
    "FeatureSchema": "qwkboost.data.features",
    # the best blend within a time budget
    "auto": "qwkboost.autoblend.api",
    "AutoResult": "qwkboost.autoblend.driver",
    # cross-validate, blend, reload a run
    "cross_validate": "qwkboost.cv.crossval",
    "blend": "qwkboost.blending.fit",
    "load_run": "qwkboost.tracking.loading",
    "FittedPipeline": "qwkboost.tracking.pipeline",
    # explain
    "explain": "qwkboost.explanations.explanation",
    "Explanation": "qwkboost.explanations.explanation",
    # metrics
    "qwk": "qwkboost.evaluation.metrics",
    "extended_qwk": "qwkboost.evaluation.metrics",
    # errors
    "ConfigError": "qwkboost.exceptions",
    # the stages
    "objectives": "", "metrics": "qwkboost.evaluation", "thresholds": "qwkboost.evaluation",
    "data": "", "engines": "", "native": "", "evaluation": "", "blending": "", "runs": "", "study": "",
    "tracking": "", "distributed": "",
    # the defaults every entry point shares (conf/, chosen on evidence)
    "defaults": "",
})
