"""qwkboost: custom ordinal objectives, defined once, on XGBoost, LightGBM and a NumPy GBDT."""

from qwkboost import metrics, objectives
from qwkboost.engines import Model, load_model, train
from qwkboost.estimator import QWKClassifier
from qwkboost.features import FeatureSchema
from qwkboost.metrics import extended_qwk, qwk
from qwkboost.pipeline import FittedPipeline, load_run

__all__ = ["train", "load_model", "load_run", "Model", "FittedPipeline", "FeatureSchema", "QWKClassifier", "qwk",
           "extended_qwk",
           "metrics", "objectives"]
__version__ = "0.1.0"
