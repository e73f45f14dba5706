"""qwkboost's own histogram GBDT, in NumPy: one stage per module.

=====================  =========================================================
:mod:`.binning`        quantile bins, ``uint8`` codes, a bin for missing values
:mod:`.bundling`       exclusive feature bundling (EFB) and the column layout
:mod:`.histogram`      gradient histograms (``np.add.at``), subtraction trick  
:mod:`.splitting`      XGBoost gain, leaf weights, missing-value directions
:mod:`.grower`         depth-wise / best-first growth, monotone bounds, pruning
:mod:`.predictor`      flat trees and vectorised (bit-mask) prediction
:mod:`.sampling`       row / column subsampling and GOSS
:mod:`.treeshap`       path-dependent TreeSHAP of the trees (explanations)
:mod:`.boosting`       the boosting loop, refits, early stopping, the booster
:mod:`.sklearn`        a scikit-learn estimator
=====================  =========================================================

Use it through ``qwkboost.train(..., engine="native")``, or directly::

    from qwkboost.native import train_booster
"""

from qwkboost.native.boosting import NativeBooster, train_booster
from qwkboost.native.params import DEFAULTS as PARAMS
from qwkboost.native.params import resolve_params

__all__ = ["NativeBooster", "train_booster", "PARAMS", "resolve_params", "NativeGBDTRegressor"]


def __getattr__(name):
    # the estimator imports scikit-learn; load it only when asked for
    if name == "NativeGBDTRegressor":
        from qwkboost.native.sklearn import NativeGBDTRegressor  # scikit-learn: loaded only when asked for
        return NativeGBDTRegressor
    raise AttributeError(name)
