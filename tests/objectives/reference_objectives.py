"""The objectives' implementations as they were before issue 23 (commit 1fd4ab2), kept verbatim as references.

Issue 23 rewrote ``ordinal_logit``, ``multiclass`` and ``soft_qwk`` for speed; the tests compare the new code
paths with these to 1e-10 where the arithmetic is the same. Not registered as objectives: import the classes.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from qwkboost.objectives.base import Objective

# ---- qwkboost/objectives/multiclass.py at 1fd4ab2 ----------------------------------------------------------

#: Class objectives refuse more classes than this (a score per class per row).
MAX_CLASSES = 100
#: Smallest prior, so that an empty class in the label range starts at a finite score.
MIN_PRIOR = 1e-12
MULTICLASS_HESSIANS = ("xgboost", "diagonal")


def _row_max(score: np.ndarray) -> np.ndarray:
    # column by column: NumPy reduces a short axis 1 row by row, several times slower for K of a few
    return np.maximum.reduce([score[:, k] for k in range(score.shape[1])])


def _row_sum(a: np.ndarray) -> np.ndarray:
    tot = a[:, 0].copy()
    for k in range(1, a.shape[1]):
        tot += a[:, k]
    return tot


def softmax(score: np.ndarray) -> np.ndarray:
    """Row-wise softmax of ``(n, K)`` scores."""
    e = np.exp(score - _row_max(score)[:, None])
    e /= _row_sum(e)[:, None]
    return e


def log_softmax_at(score: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``log softmax(score)[i, idx[i]]`` of every row."""
    m = _row_max(score)
    lse = np.log(_row_sum(np.exp(score - m[:, None])))
    return score[np.arange(idx.size), idx] - m - lse


def class_scale(y: np.ndarray, name: str) -> tuple[float, int]:
    """The lowest class and the number of classes of whole-numbered labels, checked for a class objective.

    Raises
    ------
    ValueError
        For fractional labels, a single class, or more than :data:`MAX_CLASSES` classes.
    """
    if np.any(y != np.round(y)):
        i = int(np.flatnonzero(y != np.round(y))[0])
        raise ValueError(f"objective {name!r} needs whole-numbered class labels; y[{i}] is {y[i]!r}")
    lo, hi = float(y.min()), float(y.max())
    if lo == hi:
        raise ValueError(f"y contains a single class ({lo:g}); a class objective needs at least 2")
    k = int(hi - lo) + 1
    if k > MAX_CLASSES:
        raise ValueError(f"y spans {k} classes ({lo:g}..{hi:g}); class objectives take at most {MAX_CLASSES} "
                         "(one score per class per row)")
    return lo, k


def class_indices(y: np.ndarray, lo: float, k: int, name: str = "y") -> np.ndarray:
    """Labels as class indices ``0..K-1`` (``lo`` the lowest class); labels outside the range are refused."""
    idx = np.asarray(y, dtype=np.float64) - lo
    if np.any(idx != np.round(idx)) or idx.min() < 0 or idx.max() > k - 1:
        raise ValueError(f"{name} holds labels outside the classes {lo:g}..{lo + k - 1:g} the objective was fitted on")
    return idx.astype(np.int64)


class Multiclass(Objective):
    """Softmax cross-entropy with K outputs (module docstring for the equations).

    Parameters
    ----------
    hessian : {"xgboost", "diagonal"}, default "xgboost"
        :math:`2p(1-p)` as XGBoost's ``multi:softprob``, or the diagonal :math:`p(1-p)`.
    """

    metric_name = "logloss"
    higher_is_better = False
    ordinal = True
    centre_labels = False
    state = ("init_score_", "lo_", "n_outputs_")

    def __init__(self, hessian: str = "xgboost"):
        if hessian not in MULTICLASS_HESSIANS:
            raise ValueError(f"hessian must be one of {MULTICLASS_HESSIANS}; got {hessian!r}")
        self.hessian = hessian

    @property
    def hessian_kind(self) -> str:
        return "exact" if self.hessian == "diagonal" else "approximate"

    def fit(self, y, sample_weight=None):
        y = np.asarray(y, dtype=np.float64)
        lo, k = class_scale(y, self.name)
        self.lo_ = lo
        self.n_outputs_ = k
        counts = np.bincount((y - lo).astype(np.int64), weights=sample_weight, minlength=k)
        self.init_score_ = np.log(np.maximum(counts / counts.sum(), MIN_PRIOR)).tolist()
        return self

    @property
    def classes(self) -> np.ndarray:
        return self.lo_ + np.arange(self.n_outputs_, dtype=np.float64)

    def init_score(self, y, sample_weight=None):
        return np.asarray(self.init_score_)

    def _onehot(self, y) -> np.ndarray:
        idx = class_indices(y, self.lo_, self.n_outputs_)
        out = np.zeros((idx.size, self.n_outputs_))
        out[np.arange(idx.size), idx] = 1.0
        return out

    def grad_hess(self, y, score, sample_weight=None):
        p = softmax(score)
        g = p - self._onehot(y)
        h = p * (1.0 - p) * (2.0 if self.hessian == "xgboost" else 1.0)
        np.maximum(h, 1e-16, out=h)
        if sample_weight is not None:
            g *= sample_weight[:, None]
            h *= sample_weight[:, None]
        return g, h

    def metric(self, y, score, sample_weight=None):
        """Mean log-loss of the true class (weighted)."""
        idx = class_indices(y, self.lo_, self.n_outputs_)
        return float(-np.average(log_softmax_at(score, idx), weights=sample_weight))

    def metric_sums(self, y, score, sample_weight=None):
        """:math:`(W, -\\sum_k w_k \\log p_{k, y_k})`: the log-loss is their ratio."""
        ll = log_softmax_at(score, class_indices(y, self.lo_, self.n_outputs_))
        if sample_weight is None:
            return np.array([float(ll.size), -float(ll.sum())])
        return np.array([float(sample_weight.sum()), -float(sample_weight @ ll)])

    def metric_from_sums(self, sums):
        return float(sums[1] / sums[0])

    def loss(self, y, score, sample_weight=None):
        return self.metric(y, score, sample_weight)

    def predict_proba(self, score):
        return softmax(np.asarray(score, dtype=np.float64))

    def decode(self, score):
        """The expected class :math:`\\sum_k p_k c_k`, on the labels' scale."""
        return self.predict_proba(score) @ self.classes


# ---- qwkboost/objectives/ordinal_logit.py at 1fd4ab2 -------------------------------------------------------

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


# ---- qwkboost/objectives/soft_qwk.py at 1fd4ab2 ------------------------------------------------------------

SOFT_QWK_HESSIANS = ("constant", "local")


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
        if hessian not in SOFT_QWK_HESSIANS:
            raise ValueError(f"hessian must be one of {SOFT_QWK_HESSIANS}; got {hessian!r}")
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
