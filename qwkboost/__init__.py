"""qwkboost: custom ordinal objectives, defined once, on XGBoost, LightGBM and a NumPy GBDT."""

from qwkboost import metrics, objectives
from qwkboost.engines import Model, load_model, train
from qwkboost.metrics import extended_qwk, qwk

__all__ = ["train", "load_model", "Model", "qwk", "extended_qwk", "metrics", "objectives"]
__version__ = "0.1.0"
