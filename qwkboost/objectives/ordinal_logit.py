r"""A cumulative-link ("proportional odds") model: one boosted latent score and K-1 learned cut points.

Class :math:`k \in \{0..K-1\}` of a row with latent score :math:`F` has probability

.. math:: P(y = k) = G(\theta_k - F) - G(\theta_{k-1} - F), \qquad \theta_{-1} = -\infty,\ \theta_{K-1} = +\infty,

with :math:`G` the logistic CDF (``link="logit"``) or the normal CDF
(``link="probit"``) and cut points :math:`\theta_0 < \dots < \theta_{K-2}`
(McCullagh 1980, "Regression models for ordinal data"; boosted as in OGBoost,
Journal of Statistical Software 117, 2025). The loss is the mean negative
log-likelihood. With :math:`a = \theta_k - F`, :math:`b = \theta_{k-1} - F`,
:math:`p = G(a) - G(b)` and :math:`g = G'`,

.. math:: \frac{\partial L_i}{\partial F} = \frac{g(a) - g(b)}{p}, \qquad
          \frac{\partial^2 L_i}{\partial F^2} = \frac{(g'(b) - g'(a))\,p + (g(a) - g(b))^2}{p^2},

the exact curvature (positive: both CDFs are log-concave). Boosting starts at
:math:`F = 0` with :math:`\theta_j = G^{-1}(\pi_{\le j})`, the link of the
cumulative class proportions. Before each round's gradients the cut points
take a few Newton steps on the likelihood at the current scores (a tridiagonal
system), halved until the likelihood does not rise and the cut points stay
increasing; they are part of the fitted state, saved with a model. The decoded
ordinal score is the expected class :math:`\sum_k k\,P(y=k)` on the labels' scale.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from qwkboost.objectives.base import Objective
from qwkboost.objectives.multiclass import class_indices, class_scale

__all__ = ["OrdinalLogit"]

LINKS = ("logit", "probit")
#: Cut points stay at least this far apart (an empty class keeps a sliver of probability).
MIN_GAP = 1e-6
#: Probability floor in the log-likelihood.
P_MIN = 1e-15


def _cdf(x, link):
    return special.expit(x) if link == "logit" else special.ndtr(x)


_SQRT_2PI = float(np.sqrt(2.0 * np.pi))


def _pdf(x, link):
    if link == "logit":
        s = special.expit(x)
        return s * (1.0 - s)
    return np.exp(-0.5 * x * x) / _SQRT_2PI


def _dpdf(x, link):
    if link == "logit":
        s = special.expit(x)
        return s * (1.0 - s) * (1.0 - 2.0 * s)
    return -x * np.exp(-0.5 * x * x) / _SQRT_2PI


def _inverse(p, link):
    return special.logit(p) if link == "logit" else special.ndtri(p)


class OrdinalLogit(Objective):
    """Cumulative-link model (module docstring for the equations).

    Parameters
    ----------
    link : {"logit", "probit"}, default "logit"
    cut_steps : int, default 3
        Newton steps on the cut points before each round's gradients (0: keep the initial ones).
    """

    metric_name = "logloss"
    gradient_needs = "sums"      # the cut points' Newton steps sum over every row
    higher_is_better = False
    ordinal = True
    centre_labels = False
    hessian_kind = "exact"
    state = ("init_score_", "lo_", "n_classes_", "cuts_")

    def __init__(self, link: str = "logit", cut_steps: int = 3):
        if link not in LINKS:
            raise ValueError(f"link must be one of {LINKS}; got {link!r}")
        if isinstance(cut_steps, bool) or not isinstance(cut_steps, (int, np.integer)) or cut_steps < 0:
            raise ValueError(f"cut_steps must be an integer >= 0; got {cut_steps!r}")
        self.link = link
        self.cut_steps = int(cut_steps)

    # -- fitting ---------------------------------------------------------------
    def fit(self, y, sample_weight=None):
        y = np.asarray(y, dtype=np.float64)
        lo, k = class_scale(y, self.name)
        self.lo_, self.n_classes_ = lo, k
        counts = np.bincount((y - lo).astype(np.int64), weights=sample_weight, minlength=k)
        cum = np.clip(np.cumsum(counts)[:-1] / counts.sum(), 1e-12, 1 - 1e-12)
        self.cuts_ = _increasing(_inverse(cum, self.link)).tolist()
        self.init_score_ = 0.0
        return self

    @property
    def classes(self) -> np.ndarray:
        return self.lo_ + np.arange(self.n_classes_, dtype=np.float64)

    def init_score(self, y, sample_weight=None):
        return 0.0

    # -- the likelihood --------------------------------------------------------
    def _bounds(self, idx, score, cuts):
        """``a = theta_k - F`` and ``b = theta_{k-1} - F`` per row (+-inf at the ends)."""
        ext = np.concatenate([[-np.inf], cuts, [np.inf]])
        return ext[idx + 1] - score, ext[idx] - score

    def _proba_of(self, idx, score, cuts):
        a, b = self._bounds(idx, score, cuts)
        return np.maximum(_cdf(a, self.link) - _cdf(b, self.link), P_MIN)

    def _nll(self, idx, score, cuts, w):
        return float(-np.average(np.log(self._proba_of(idx, score, cuts)), weights=w))

    def update_cuts(self, y, score, sample_weight=None) -> None:
        """A few damped Newton steps on the cut points at the current scores (kept increasing)."""
        idx = class_indices(y, self.lo_, self.n_classes_)
        cuts = np.asarray(self.cuts_, dtype=np.float64)
        w = np.ones(idx.size) if sample_weight is None else sample_weight
        m = cuts.size
        for _ in range(self.cut_steps):
            a, b = self._bounds(idx, score, cuts)
            p = np.maximum(_cdf(a, self.link) - _cdf(b, self.link), P_MIN)
            ga = np.where(np.isfinite(a), _pdf(np.where(np.isfinite(a), a, 0.0), self.link), 0.0)
            gb = np.where(np.isfinite(b), _pdf(np.where(np.isfinite(b), b, 0.0), self.link), 0.0)
            da = np.where(np.isfinite(a), _dpdf(np.where(np.isfinite(a), a, 0.0), self.link), 0.0)
            db = np.where(np.isfinite(b), _dpdf(np.where(np.isfinite(b), b, 0.0), self.link), 0.0)
            # row i touches cut idx_i (as its upper bound a) and idx_i - 1 (as its lower bound b)
            # row i touches cut idx_i (its upper bound a; none for the top class) and idx_i - 1 (its lower
            # bound b; none for the bottom class): sums per class, then shifted onto the cuts.
            # L = -log p, dp/da = g(a), dp/db = -g(b)
            K = m + 1
            per = lambda v: np.bincount(idx, weights=w * v, minlength=K)
            grad = -per(ga / p)[:m] + per(gb / p)[1:]
            hd = per(ga * ga / p ** 2 - da / p)[:m] + per(gb * gb / p ** 2 + db / p)[1:]
            ho = per(-ga * gb / p ** 2)[1:m]
            H = np.diag(hd + 1e-9) + np.diag(ho, 1) + np.diag(ho, -1)
            try:
                step = np.linalg.solve(H, grad)
            except np.linalg.LinAlgError:
                break
            base = float(-np.average(np.log(p), weights=w))
            t = 1.0
            while t > 1e-4:
                cand = cuts - t * step
                if np.all(np.diff(cand) > MIN_GAP) and self._nll(idx, score, cand, w) <= base:
                    cuts = cand
                    break
                t *= 0.5
            else:
                break
        self.cuts_ = cuts.tolist()

    # -- boosting --------------------------------------------------------------
    def grad_hess(self, y, score, sample_weight=None):
        if self.cut_steps:
            self.update_cuts(y, score, sample_weight)
        # round r's tree and its metric use these cut points
        self.__dict__.setdefault("_cuts_by_round", []).append(list(self.cuts_))
        idx = class_indices(y, self.lo_, self.n_classes_)
        a, b = self._bounds(idx, score, np.asarray(self.cuts_))
        fa, fb = np.isfinite(a), np.isfinite(b)
        a0, b0 = np.where(fa, a, 0.0), np.where(fb, b, 0.0)
        p = np.maximum(np.where(fa, _cdf(a0, self.link), 1.0) - np.where(fb, _cdf(b0, self.link), 0.0), P_MIN)
        ga = np.where(fa, _pdf(a0, self.link), 0.0)
        gb = np.where(fb, _pdf(b0, self.link), 0.0)
        da = np.where(fa, _dpdf(a0, self.link), 0.0)
        db = np.where(fb, _dpdf(b0, self.link), 0.0)
        grad = (ga - gb) / p
        hess = np.maximum(((db - da) * p + (ga - gb) ** 2) / (p * p), 1e-16)
        if sample_weight is not None:
            grad = grad * sample_weight
            hess = hess * sample_weight
        return grad, hess

    def finish(self, best_iteration: int) -> None:
        """Keep the cut points of the best round (early stopping may have trained past it)."""
        history = self.__dict__.pop("_cuts_by_round", [])
        if 0 < best_iteration <= len(history):
            self.cuts_ = history[best_iteration - 1]

    def metric(self, y, score, sample_weight=None):
        """Mean negative log-likelihood of the true class (weighted)."""
        idx = class_indices(y, self.lo_, self.n_classes_)
        return self._nll(idx, score, np.asarray(self.cuts_), sample_weight)

    def loss(self, y, score, sample_weight=None):
        return self.metric(y, score, sample_weight)

    def predict_proba(self, score):
        score = np.asarray(score, dtype=np.float64)
        cdf = _cdf(np.asarray(self.cuts_)[None, :] - score[:, None], self.link)
        full = np.concatenate([np.zeros((score.size, 1)), cdf, np.ones((score.size, 1))], axis=1)
        return np.diff(full, axis=1)

    def decode(self, score):
        """The expected class, on the labels' scale."""
        return self.predict_proba(score) @ self.classes


def _increasing(c: np.ndarray) -> np.ndarray:
    """Cut points pushed apart to at least :data:`MIN_GAP` (empty classes give equal ones)."""
    c = np.array(c, dtype=np.float64)
    for j in range(1, c.size):
        c[j] = max(c[j], c[j - 1] + 2 * MIN_GAP)
    return c
