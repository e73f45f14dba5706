r"""Squared error :math:`L = \tfrac12 \sum_k (F_k - y_k)^2`."""

from __future__ import annotations

import numpy as np

from qwkboost.objectives.base import Objective

__all__ = ["SquaredError"]


class SquaredError(Objective):
    r"""Least squares: :math:`g_k = F_k - y_k`, :math:`h_k = 1`, :math:`F_0 = \bar y`.

    The same gradient, hessian and starting point as XGBoost's
    ``reg:squarederror`` and LightGBM's ``regression``; with sample weights
    :math:`w_k g_k`, :math:`w_k` and the weighted mean.
    """

    metric_name = "rmse"
    higher_is_better = False
    hessian_kind = "exact"          # the true curvature, which happens to be constant
    gradient_needs = "rows"         # a row's gradient is its own residual

    def __init__(self):
        pass

    def grad_hess(self, y, score, sample_weight=None):
        if sample_weight is None:
            return score - y, np.ones_like(score)
        return (score - y) * sample_weight, np.array(sample_weight, dtype=np.float64)

    def loss(self, y, score, sample_weight=None):
        r = score - y
        if sample_weight is None:
            return 0.5 * float(r @ r) / r.size
        return 0.5 * float(sample_weight @ (r * r)) / float(sample_weight.sum())
