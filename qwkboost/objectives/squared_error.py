r"""Squared error :math:`L = \tfrac12 \sum_k (F_k - y_k)^2`."""

from __future__ import annotations

import numpy as np

from qwkboost.objectives.base import Objective

__all__ = ["SquaredError"]


class SquaredError(Objective):
    r"""Least squares: :math:`g_k = F_k - y_k`, :math:`h_k = 1`, :math:`F_0 = \bar y`.

    The same gradient, hessian and starting point as XGBoost's
    ``reg:squarederror`` and LightGBM's ``regression``.
    """

    metric_name = "rmse"
    higher_is_better = False

    def __init__(self):
        pass

    def grad_hess(self, y, score):
        return score - y, np.ones_like(score)

    def loss(self, y, score):
        r = score - y
        return 0.5 * float(r @ r) / r.size
