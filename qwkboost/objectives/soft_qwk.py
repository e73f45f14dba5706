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

**In two moments per row.** :math:`W_{ij} = (i-j)^2` makes every sum above a
quadratic in the class index, so only the first two moments of each row's
probabilities, :math:`\mu_n = \sum_j j P_{nj}` and :math:`\nu_n = \sum_j j^2 P_{nj}`,
and the labels' mean :math:`\bar a` and variance :math:`\bar b` (histogram :math:`h`) enter:

.. math:: c_j = (j - \bar a)^2 + \bar b, \qquad
          \sum_n w_n\, a_n \cdot P_n = \sum_n w_n (y_n^2 - 2 y_n \mu_n + \nu_n), \qquad
          \sum_n w_n\, c \cdot P_n = \sum_n w_n (\nu_n - 2 \bar a \mu_n + \bar a^2 + \bar b),
   :label: sq-moments

and :math:`q_{nj} = \alpha_n + \beta_n j + \gamma j^2` with
:math:`\beta_n = 2(L \bar a - y_n)/D`, :math:`\gamma = (1 - L)/D`, so

.. math:: q_{nk} - \bar q_n = \beta_n (k - \mu_n) + \gamma (k^2 - \nu_n).
   :label: sq-grad

The metric after a round computes the probabilities and both moments at the
scores the next gradients start from; they are kept for them
(:class:`qwkboost.objectives.rows.Memo`), and the gradient and hessian are a
dozen arithmetic passes over ``(n, K)`` arrays.
"""

from __future__ import annotations

import numpy as np

from qwkboost.objectives.multiclass import Exps, Multiclass, by_column, memory_order, outputs

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
    allreduce_ready = True       # through global_sums (:meth:`_parts`)
    higher_is_better = True

    def __init__(self, hessian: str = "local"):
        if hessian not in HESSIANS:
            raise ValueError(f"hessian must be one of {HESSIANS}; got {hessian!r}")
        self.hessian = hessian

    @property
    def hessian_kind(self) -> str:
        return "constant" if self.hessian == "constant" else "approximate"

    def _moments(self, ex: Exps) -> tuple[np.ndarray, np.ndarray]:
        r""":math:`\mu_n` and :math:`\nu_n` of :eq:`sq-moments` (computed once per softmax; into the scratch
        buffers of the layout the softmax was computed into, if any)."""
        if ex.moments is None:
            P = ex.proba()
            j = np.arange(self.n_outputs_, dtype=np.float64)
            n = P.shape[0]
            ex.moments = (np.matmul(P, j, out=ex.buffer("sq_mu", n)), np.matmul(P, j * j, out=ex.buffer("sq_nu", n)))
        return ex.moments

    def _parts(self, lay, ex: Exps, sample_weight):
        r"""The sums of :eq:`sq-moments`: ``(w, N, abar, bbar, num, den)`` for the labels of ``lay``.

        Six sums over the rows, :math:`(N, \sum w y, \sum w y^2, \sum w y \mu, \sum w \nu, \sum w \mu)`, make
        all of them; on a cluster they are all-reduced over the workers (:meth:`global_sums`), so every row's
        gradient is the one-process gradient."""
        mu, nu = self._moments(ex)
        t, st, stt = lay.class_float()
        if sample_weight is None:
            w = None
            sums = (float(t.size), st, stt, float(t @ mu), float(nu.sum()), float(mu.sum()))
        else:
            w = np.asarray(sample_weight, dtype=np.float64)
            wt = w * t
            sums = (float(w.sum()), float(wt.sum()), float(wt @ t), float(wt @ mu), float(w @ nu), float(w @ mu))
        N, st, stt, tmu, snu, smu = self.global_sums(*sums)
        abar = st / N
        bbar = stt / N - abar * abar
        num = float(stt - 2.0 * tmu + snu)
        den = float(snu - 2.0 * abar * smu) + (abar * abar + bbar) * N
        return w, N, abar, bbar, num, den

    def grad_hess(self, y, score, sample_weight=None, out=None):
        r""":math:`g_{nk} = N w_n P_{nk} (q_{nk} - \bar q_n)` by :eq:`sq-grad`, and the hessian stand-in;
        ``out``: a (gradient, hessian) pair of float64 arrays to write them into (as a training loop passes)."""
        score = np.asarray(score, dtype=np.float64)
        lay = self._layout(y, sample_weight)
        ex = self._exps(lay, score)
        w, N, abar, bbar, num, den = self._parts(lay, ex, sample_weight)
        P = ex.proba()
        mu, nu = self._moments(ex)
        d, hess = outputs(out, score)
        L = num / den
        n = P.shape[0]
        beta = np.multiply(lay.class_float()[0], -2.0 / den, out=ex.buffer("sq_beta", n))
        beta += L * abar * 2.0 / den                                 # 2 (L abar - y) / D
        gamma = (1.0 - L) / den
        j = np.arange(self.n_outputs_, dtype=np.float64)
        shift = np.multiply(beta, mu, out=ex.buffer("sq_shift", n))
        shift += gamma * nu
        for k in range(j.size):                                      # beta (k - mu) + gamma (k^2 - nu)
            dk = np.multiply(beta, float(k), out=d[:, k])
            dk += gamma * k * k
            dk -= shift
        if self.hessian == "constant":
            if w is None:
                hess[...] = 1.0
            else:
                for k in range(j.size):
                    hess[:, k] = w
        else:
            # N P max(|d (1 - 2P)|, (1 - P) cbar / D): the local curvature's size, floored (module docstring)
            cbar = float(((j - abar) ** 2).mean()) + bbar
            np.multiply(P, -2.0, out=hess)
            hess += 1.0
            hess *= d
            np.abs(hess, out=hess)
            floor = np.subtract(1.0, P, out=ex.buffer("sq_floor", P.shape, memory_order(P)))
            floor *= cbar / den
            np.maximum(hess, floor, out=hess)
            hess *= P
            if w is None:
                hess *= N
                np.maximum(hess, 1e-16, out=hess)
            else:
                by_column(np.multiply, hess, N * w, hess)
                by_column(np.maximum, hess, 1e-16 * w, hess)
        d *= P
        if w is None:
            d *= N
        else:
            by_column(np.multiply, d, N * w, d)
        return d, hess

    def loss(self, y, score, sample_weight=None):
        r""":math:`1 - \kappa` of the soft confusion matrix."""
        score = np.asarray(score, dtype=np.float64)
        _, _, _, _, num, den = self._parts(self._layout(y, sample_weight), Exps(score), sample_weight)
        return num / den

    def metric(self, y, score, sample_weight=None):
        """QWK of the decoded score (expected class) rounded to the nearest class."""
        score = np.asarray(score, dtype=np.float64)
        lay = self._layout(y, sample_weight)
        ex = Exps(score, lay)
        self._memo().put(lay, score, (), ex)
        mu, _ = self._moments(ex)
        pred = np.rint(mu, out=lay.buffer("sq_pred", mu.size))
        np.clip(pred, 0, self.n_outputs_ - 1, out=pred)
        if np.diff(lay.bounds).max() == lay.idx.size:       # a single class
            return 0.0
        if sample_weight is None:
            t, st, stt = lay.class_float()
            return _class_qwk_whole(t.size, st, stt, float(pred.sum()), float(pred @ pred), float(t @ pred))
        return class_qwk(lay.idx, pred.astype(np.int64), sample_weight)

    def metric_sums(self, y, score, sample_weight=None):
        r""":math:`(W, \sum wt, \sum wt^2, \sum wp, \sum wp^2, \sum wtp)` of the class indices :math:`t` and the
        rounded expected classes :math:`p` of :meth:`metric`: they add up over sets of rows."""
        score = np.asarray(score, dtype=np.float64)
        lay = self._layout(y, sample_weight)
        ex = Exps(score, lay)
        self._memo().put(lay, score, (), ex)        # the next gradients start from these scores, as after metric
        mu, _ = self._moments(ex)
        p = np.clip(np.rint(mu), 0, self.n_outputs_ - 1)
        t = lay.class_float()[0]
        w = np.ones_like(t) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        wt, wp = w * t, w * p
        return np.array([float(w.sum()), float(wt.sum()), float(wt @ t), float(wp.sum()), float(wp @ p),
                         float(wt @ p)])

    def metric_from_sums(self, sums) -> float:
        r""":math:`\kappa = 1 - W \sum w(t-p)^2 / \big(W(\sum wt^2 + \sum wp^2) - 2 \sum wt \sum wp\big)`, with
        :math:`\sum w(t-p)^2 = \sum wt^2 - 2\sum wtp + \sum wp^2`; 0 when the labels are one class, as
        :meth:`metric`."""
        W, st, stt, sp, spp, stp = (float(v) for v in sums)
        if W * stt - st * st <= 1e-12 * max(1.0, W * stt):      # a single class
            return 0.0
        return 1.0 - W * (stt - 2.0 * stp + spp) / (W * (stt + spp) - 2.0 * st * sp)


def class_qwk(t: np.ndarray, p: np.ndarray, sample_weight=None) -> float:
    r"""QWK of class indices ``t`` (true) and ``p`` (predicted), both in ``0..K-1`` with ``t`` not constant: the
    expansion of :func:`qwkboost.evaluation.metrics.qwk`,
    :math:`\kappa = 1 - n\sum (t-p)^2 / \big(n(\sum t^2 + \sum p^2) - 2 \sum t \sum p\big)`, in exact
    integer arithmetic (with weights, in floating point), without that function's checks of its input."""
    if sample_weight is not None:
        w = np.asarray(sample_weight, dtype=np.float64)
        tf, pf = t.astype(np.float64), p.astype(np.float64)
        d = tf - pf
        W, st, sp = float(w.sum()), float(w @ tf), float(w @ pf)
        return 1.0 - float(w @ (d * d)) / (float(w @ (tf * tf)) + float(w @ (pf * pf)) - 2.0 * st * sp / W)
    return _class_qwk_whole(t.size, int(t.sum()), int(t @ t), int(p.sum()), int(p @ p), int(t @ p))


def _class_qwk_whole(n: int, st, stt, sp, spp, stp) -> float:
    r""":func:`class_qwk` from the sums :math:`\sum t, \sum t^2, \sum p, \sum p^2, \sum tp` of whole numbers, in
    integer arithmetic (float64 sums of whole numbers below :math:`2^{53}` are exact, so they may come from
    BLAS products): :math:`\sum (t-p)^2 = \sum t^2 - 2 \sum tp + \sum p^2`."""
    st, stt, sp, spp, stp = int(st), int(stt), int(sp), int(spp), int(stp)
    expected_n = n * (stt + spp) - 2 * st * sp
    return 1.0 - (n * (stt - 2 * stp + spp)) / expected_n
