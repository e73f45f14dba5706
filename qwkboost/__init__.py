"""qwkboost: custom ordinal objectives, defined once, on XGBoost, LightGBM and a NumPy GBDT."""

from qwkboost import metrics, objectives
from qwkboost.engines import Model, load_model, train
from qwkboost.estimator import QWKClassifier
from qwkboost.features import FeatureSchema
from qwkboost.metrics import extended_qwk, qwk
from qwkboost.pipeline import FittedPipeline, load_run


def blend(runs, method: str = "weights", **kwargs):
    """Blend runs into one submission (:func:`qwkboost.blending.blend`; imported when first called)."""
    from qwkboost.blending import blend as _blend

    return _blend(runs, method, **kwargs)


def cross_validate(X, y, X_test=None, **kwargs):
    """K-fold CV of one configuration, grouped and repeated (:func:`qwkboost.cv.cross_validate`)."""
    from qwkboost.cv import cross_validate as _cv

    return _cv(X, y, X_test, **kwargs)


__all__ = ["train", "load_model", "load_run", "Model", "FittedPipeline", "FeatureSchema", "QWKClassifier", "qwk",
           "extended_qwk", "cross_validate", "blend",
           "metrics", "objectives"]
__version__ = "0.1.0"
