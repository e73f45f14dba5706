r"""Softmax cross-entropy over the K ordered classes (``multiclass``).

Each row gets :math:`K` scores :math:`F_{k}`, class probabilities
:math:`p_k = e^{F_k} / \sum_j e^{F_j}`, and the loss is the (weighted) mean
log-loss :math:`-\frac1W\sum_i w_i \log p_{i, y_i}`. Per row and class,

.. math:: g_k = p_k - [y = k], \qquad h_k = 2\,p_k(1 - p_k),

XGBoost's ``multi:softprob`` gradient and hessian (twice the exact diagonal
:math:`p_k(1-p_k)`, a bound that keeps Newton steps short; ``hessian="diagonal"``
gives the diagonal itself). Boosting starts from the log class priors
:math:`F_{0,k} = \log \pi_k`. The decoded ordinal score is the expected class
:math:`\sum_k p_k c_k` on the labels' own scale, cut into classes by the
out-of-fold cut points like every other objective's score.

**Work per round.** The metric on the training rows after round :math:`m` is
the log-loss at the scores round :math:`m+1`'s gradients start from; the
exponentials it computes, :math:`e^{F_k - \max_j F_j - 1}` and their row sums, are
kept (:class:`qwkboost.objectives.rows.Memo`), so the gradients take one
division and a few arithmetic passes instead of a second softmax. The log-loss
sums :math:`\log \sum_j e^{F_j - \max F - 1}` as logarithms of products
(:func:`qwkboost.objectives.rows.sum_log`). Arrays keep the memory order of the
engine's scores (LightGBM's are column-major), so nothing is copied to change it.
"""

from __future__ import annotations

import numpy as np

from qwkboost.objectives.base import Objective
from qwkboost.objectives.rows import Memo, class_rows, sum_log
from qwkboost.validation import shown

__all__ = ["Multiclass", "MAX_CLASSES", "by_column", "class_indices", "class_scale", "memory_order", "outputs", "softmax"]

#: Class objectives refuse more classes than this (a score per class per row).
MAX_CLASSES = 100
#: Smallest prior, so that an empty class in the label range starts at a finite score.
MIN_PRIOR = 1e-12
HESSIANS = ("xgboost", "diagonal")


def _row_max(score: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    # column by column: NumPy reduces a short axis 1 row by row, several times slower for K of a few
    if out is None:
        out = score[:, 0].copy()
    else:
        np.copyto(out, score[:, 0])
    for k in range(1, score.shape[1]):
        np.maximum(out, score[:, k], out=out)
    return out


def _row_sum(a: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    if out is None:
        tot = a[:, 0].copy()
    else:
        tot = out
        np.copyto(tot, a[:, 0])
    for k in range(1, a.shape[1]):
        tot += a[:, k]
    return tot


def by_column(ufunc, a: np.ndarray, v, out: np.ndarray) -> np.ndarray:
    """``out[:, k] = ufunc(a[:, k], v)`` for every column ``k`` of ``(n, K)`` arrays (``v`` one value per row or
    a scalar): ``ufunc(a, v[:, None])`` without its inner loop of length K, which NumPy runs row by row on
    row-major arrays (XGBoost's), several times slower for K of a few."""
    for k in range(a.shape[1]):
        ufunc(a[:, k], v, out=out[:, k])
    return out


def memory_order(a: np.ndarray) -> str:
    """"F" for a column-major ``(n, K)`` array (LightGBM's scores), else "C"."""
    return "F" if a.flags.f_contiguous and not a.flags.c_contiguous else "C"


def softmax(score: np.ndarray) -> np.ndarray:
    """Row-wise softmax of ``(n, K)`` scores."""
    e = np.exp(score - _row_max(score)[:, None])
    e /= _row_sum(e)[:, None]
    return e


class Exps:
    r"""The pieces of a softmax at one score matrix: shifts :math:`m` (each row's maximum plus one),
    :math:`e = e^{F - m}` and its row sums :math:`s`. :meth:`proba` divides :math:`e` by :math:`s` in place,
    once, into the probabilities; ``moments`` may hold what an objective derived from them.

    The shift is one more than the maximum (:func:`softmax` subtracts the maximum itself; the probabilities
    agree to rounding) so that no argument of the exponential is exactly zero: every row's maximum would
    give one, and glibc's ``exp`` takes a slower branch on zero, mispredicted among other arguments (measured:
    2.2 against 1.6 ms for 80,000 x 4 values)."""

    __slots__ = ("lay", "m", "e", "s", "normalised", "moments")

    def __init__(self, score: np.ndarray, lay=None):
        """With ``lay`` (a :class:`~qwkboost.objectives.rows.ClassRows`), written into its scratch buffers."""
        n = score.shape[0]
        self.lay = lay
        self.m = _row_max(score, self.buffer("mc_m", n))
        self.m += 1.0
        e = by_column(np.subtract, score, self.m, self.buffer("mc_e", score.shape, memory_order(score)))
        self.e = np.exp(e, out=e)
        self.s = _row_sum(self.e, self.buffer("mc_s", n))
        self.normalised = False
        self.moments = None

    def buffer(self, name: str, shape, order: str = "C") -> np.ndarray:
        """The layout's scratch buffer ``name`` when this softmax was computed into buffers, else a new array."""
        return np.empty(shape, order=order) if self.lay is None else self.lay.buffer(name, shape, order)

    def proba(self, out: np.ndarray | None = None) -> np.ndarray:
        """The probabilities, in place of :math:`e` or (``out``) written into ``out``, which then holds them."""
        if not self.normalised:
            self.e = by_column(np.divide, self.e, self.s, self.e if out is None else out)
            self.normalised = True
        elif out is not None and out is not self.e:
            np.copyto(out, self.e)
            self.e = out
        return self.e


def _flat(a: np.ndarray, lay) -> tuple[np.ndarray, np.ndarray] | None:
    """The flat memory of a C- or F-ordered ``(n, K)`` array and the positions of every row's true class in it."""
    if a.flags.c_contiguous:
        return a.reshape(-1), lay.true_class_at(a.shape, "C")
    if a.flags.f_contiguous:
        return a.T.reshape(-1), lay.true_class_at(a.shape, "F")
    return None


def true_class_scores(score: np.ndarray, lay) -> np.ndarray:
    """``score[i, idx[i]]`` of every row (``lay`` a :class:`~qwkboost.objectives.rows.ClassRows`)."""
    flat = _flat(score, lay)
    return score[np.arange(score.shape[0]), lay.idx] if flat is None else np.take(*flat)


def log_softmax_at(score: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``log softmax(score)[i, idx[i]]`` of every row."""
    m = _row_max(score)
    lse = np.log(_row_sum(np.exp(score - m[:, None])))
    return score[np.arange(idx.size), idx] - m - lse


def _add_at_true_class(a: np.ndarray, lay, value: float) -> None:
    """``a[i, idx[i]] += value`` of every row, in place."""
    flat = _flat(a, lay)
    if flat is None:
        a[np.arange(a.shape[0]), lay.idx] += value
    else:
        flat[0][flat[1]] += value


def outputs(out, like: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The (gradient, hessian) arrays a ``grad_hess`` writes for scores ``like``: ``out`` when given (checked:
    float64 and ``like``'s shape), else two new arrays in ``like``'s memory order."""
    if out is None:
        return np.empty_like(like, dtype=np.float64), np.empty_like(like, dtype=np.float64)
    g, h = out
    if g.shape != like.shape or h.shape != like.shape or g.dtype != np.float64 or h.dtype != np.float64:
        raise ValueError(f"out must be two float64 arrays of shape {like.shape}; got {g.shape} {g.dtype} and "
                         f"{h.shape} {h.dtype}")
    return g, h


def class_scale(y: np.ndarray, name: str) -> tuple[float, int]:
    """The lowest class and the number of classes of whole-numbered labels, checked for a class objective.

    Raises
    ------
    ValueError
        For fractional labels, a single class, or more than :data:`MAX_CLASSES` classes.
    """
    if np.any(y != np.round(y)):
        i = int(np.flatnonzero(y != np.round(y))[0])
        raise ValueError(f"objective {name!r} needs whole-numbered class labels; y[{i}] is {shown(y[i])}")
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
        if hessian not in HESSIANS:
            raise ValueError(f"hessian must be one of {HESSIANS}; got {hessian!r}")
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

    def _layout(self, y, sample_weight=None):
        cache = self.__dict__.setdefault("_layouts", {})
        return class_rows(cache, y, lambda v: class_indices(v, self.lo_, self.n_outputs_), self.n_outputs_,
                          sample_weight)

    def _memo(self) -> Memo:
        return self.__dict__.setdefault("_memo_", Memo())

    def _exps(self, lay, score) -> Exps:
        """The softmax pieces at ``score`` in the layout's buffers: kept by the last metric call there, else
        computed (the memo forgets them either way: the caller writes over them)."""
        hit = self._memo().take(lay, score, ())
        return Exps(score, lay) if hit is None else hit

    def grad_hess(self, y, score, sample_weight=None, out=None):
        """:math:`g = p - [y = k]`, :math:`h = 2p(1-p)` (or :math:`p(1-p)`) of the module docstring; ``out``:
        a (gradient, hessian) pair of float64 arrays to write them into (as a training loop passes)."""
        score = np.asarray(score, dtype=np.float64)
        lay = self._layout(y, sample_weight)
        g, h = outputs(out, score)
        p = self._exps(lay, score).proba(out=g)
        np.subtract(1.0, p, out=h)
        h *= p
        if self.hessian == "xgboost":
            h *= 2.0
        np.maximum(h, 1e-16, out=h)
        g = p                                               # the kept probabilities become the gradient
        _add_at_true_class(g, lay, -1.0)
        if sample_weight is not None:
            w = np.asarray(sample_weight, dtype=np.float64)
            by_column(np.multiply, g, w, g)
            by_column(np.multiply, h, w, h)
        return g, h

    def finish(self, best_iteration: int) -> None:
        """Drop what was kept between the rounds."""
        self.__dict__.pop("_memo_", None)
        self.__dict__.pop("_layouts", None)

    def metric(self, y, score, sample_weight=None):
        r"""Mean log-loss of the true class (weighted): :math:`-\frac1W \sum_i w_i (F_{i,y_i} - m_i - \log s_i)`
        (:class:`Exps`)."""
        score = np.asarray(score, dtype=np.float64)
        lay = self._layout(y, sample_weight)
        ex = Exps(score, lay)
        self._memo().put(lay, score, (), ex)
        ll = true_class_scores(score, lay)
        ll -= ex.m
        if sample_weight is None:
            return float(-(ll.sum() - sum_log(ex.s)) / ll.size)
        w = np.asarray(sample_weight, dtype=np.float64)
        ll -= np.log(ex.s)
        return float(-(w @ ll) / w.sum())

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
