r"""Soft QWK: one minus kappa of the expected confusion matrix of the class probabilities (``soft_qwk``).

De la Torre, Puig and Valls, "Weighted kappa loss function for multi-class
classification of ordinal data in deep learning", Pattern Recognition Letters
105 (2018); as a GBDT objective it is the CrowdFlower winners' ``softkappaObj``.
Each row gets :math:`K` scores, :math:`P = \operatorname{softmax}(F)`, and with
:math:`W_{ij} = (i-j)^2` the soft confusion matrix :math:`O = \sum_n e_{y_n} P_n^\top`
and its expectation :math:`E = h\,S^\top / N` (:math:`h` the true-class
histogram, :math:`S = \sum_n P_n`) give

.. math:: L = 1 - \kappa = \frac{\sum W \circ O}{\sum W \circ E}
            = \frac{\sum_n a_n \cdot P_n}{\sum_n c \cdot P_n},
          \qquad a_n = W_{y_n,\cdot}, \quad c_j = \tfrac1N \sum_i W_{ij} h_i .

Both sums are linear in :math:`P`, so :math:`q_{nj} = \partial L/\partial P_{nj}
= (a_{nj} - L c_j)/D` and through the softmax

.. math:: g_{nk} = N\,P_{nk}\,(q_{nk} - \bar q_n), \qquad \bar q_n = \textstyle\sum_j q_{nj} P_{nj},

scaled by :math:`N` as extended QWK is. The loss couples every row through
:math:`L` and :math:`D`, and its row-local curvature
:math:`N(q_{nk} - \bar q_n) P_{nk}(1 - 2P_{nk})` changes sign, so there is no
usable exact hessian. Two stand-ins:

``"constant"``
    :math:`h = 1`: plain gradient boosting, the learning rate sets the step.
``"local"``
    :math:`h = \max(|N(q_{nk} - \bar q_n) P_{nk}(1 - 2P_{nk})|,\ N P_{nk}(1-P_{nk}) \bar c / D)`:
    the size of the row-local curvature, floored by the softmax curvature at the
    loss's own scale (:math:`\bar c` the mean of :math:`c`), so that confident rows
    do not get huge steps.

Boosting starts from the log class priors, as ``multiclass``; the metric is the
QWK of the decoded score (the expected class) rounded to the nearest class,
what this objective is after; the decoded score is the expected class.
"""

from __future__ import annotations

import numpy as np

from qwkboost.objectives.multiclass import Multiclass, class_indices, softmax

__all__ = ["SoftQWK"]

HESSIANS = ("constant", "local")


class SoftQWK(Multiclass):
    """Soft QWK with K outputs (module docstring for the equations).

    Parameters
    ----------
    hessian : {"constant", "local"}, default "local"
    """

    metric_name = "kappa"
    gradient_needs = "sums"      # the expected confusion matrix over every row
    higher_is_better = True

    def __init__(self, hessian: str = "local"):
        if hessian not in HESSIANS:
            raise ValueError(f"hessian must be one of {HESSIANS}; got {hessian!r}")
        self.hessian = hessian

    @property
    def hessian_kind(self) -> str:
        return "constant" if self.hessian == "constant" else "approximate"

    def _parts(self, y, score, sample_weight):
        idx = class_indices(y, self.lo_, self.n_outputs_)
        k = self.n_outputs_
        w = np.ones(idx.size) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        N = float(w.sum())
        j = np.arange(k, dtype=np.float64)
        W = (j[:, None] - j[None, :]) ** 2
        h = np.bincount(idx, weights=w, minlength=k)
        c = W.T @ h / N                                    # c_j = sum_i W_ij h_i / N
        P = softmax(score)
        A = W[idx]                                         # a_n = W[y_n, :]
        num = float(np.sum(w * np.einsum("nj,nj->n", A, P)))
        den = float(np.sum(w * (P @ c)))
        return idx, w, N, c, P, A, num, den

    def grad_hess(self, y, score, sample_weight=None):
        idx, w, N, c, P, A, num, den = self._parts(y, score, sample_weight)
        L = num / den
        q = (A - L * c[None, :]) / den                     # dL/dP
        qbar = np.einsum("nj,nj->n", q, P)[:, None]
        d = q - qbar
        grad = N * P * d * w[:, None]
        if self.hessian == "constant":
            hess = np.repeat(w[:, None], self.n_outputs_, axis=1).astype(np.float64)
        else:
            local = np.abs(N * d * P * (1.0 - 2.0 * P))
            floor = N * P * (1.0 - P) * float(c.mean()) / den
            hess = np.maximum(np.maximum(local, floor), 1e-16) * w[:, None]
        return grad, hess

    def loss(self, y, score, sample_weight=None):
        """:math:`1 - \\kappa` of the soft confusion matrix."""
        _, _, _, _, _, _, num, den = self._parts(y, score, sample_weight)
        return num / den

    def metric(self, y, score, sample_weight=None):
        """QWK of the decoded score (expected class) rounded to the nearest class."""
        from qwkboost.evaluation.metrics import qwk

        idx = class_indices(y, self.lo_, self.n_outputs_)
        e = self.predict_proba(score) @ np.arange(self.n_outputs_)
        pred = np.clip(np.rint(e), 0, self.n_outputs_ - 1).astype(np.int64)
        if idx.min() == idx.max():
            return 0.0
        return qwk(idx, pred, sample_weight=sample_weight)
