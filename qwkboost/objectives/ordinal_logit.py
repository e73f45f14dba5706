r"""A cumulative-link ("proportional odds") model: one boosted latent score and K-1 learned cut points.

Class :math:`k \in \{0..K-1\}` of a row with latent score :math:`F` has probability

.. math:: P(y = k) = G(\theta_k - F) - G(\theta_{k-1} - F), \qquad \theta_{-1} = -\infty,\ \theta_{K-1} = +\infty,
   :label: ol-proba

with :math:`G` the logistic CDF (``link="logit"``) or the normal CDF
(``link="probit"``) and cut points :math:`\theta_0 < \dots < \theta_{K-2}`
(McCullagh 1980, "Regression models for ordinal data"; boosted as in OGBoost,
Journal of Statistical Software 117, 2025). The loss is the mean negative
log-likelihood. With :math:`a = \theta_k - F`, :math:`b = \theta_{k-1} - F`,
:math:`p = G(a) - G(b)` and :math:`g = G'`,

.. math:: \frac{\partial L_i}{\partial F} = \frac{g(a) - g(b)}{p}, \qquad
          \frac{\partial^2 L_i}{\partial F^2} = \frac{(g'(b) - g'(a))\,p + (g(a) - g(b))^2}{p^2},
   :label: ol-grad

the exact curvature (positive: both CDFs are log-concave). For the logistic
link, :math:`g = G(1-G)` turns them into

.. math:: \frac{\partial L_i}{\partial F} = 1 - G(a) - G(b), \qquad
          \frac{\partial^2 L_i}{\partial F^2} = g(a) + g(b),
   :label: ol-logit

and with :math:`u = e^{F}` and :math:`c_j = e^{-\theta_j}`,
:math:`G(\theta_j - F) = 1/(1 + u c_j)`: one exponential per row gives both
bounds, and :math:`1 - G = u c_j G` needs no subtraction.

**Cut points.** Boosting starts at :math:`F = 0` with :math:`\theta_j = G^{-1}(\pi_{\le j})`,
the link of the cumulative class proportions. In every round, once the
gradients are computed, the cut points take a Newton step on the likelihood
at the same scores, from per-class sums of the same per-row quantities
(with :math:`r_a = g(a)/p`, :math:`r_b = g(b)/p`):

.. math:: \frac{\partial L}{\partial \theta_j} = -\sum_{y_i = j} r_a + \sum_{y_i = j+1} r_b, \qquad
          \frac{\partial^2 L}{\partial \theta_j^2} = \sum_{y_i = j} \Big(r_a^2 - \frac{g'(a)}{p}\Big)
             + \sum_{y_i = j+1} \Big(r_b^2 + \frac{g'(b)}{p}\Big), \qquad
          \frac{\partial^2 L}{\partial \theta_{j-1} \partial \theta_j} = -\sum_{y_i = j} r_a r_b,
   :label: ol-cuts

a tridiagonal system. A step that moves no cut point by more than
:data:`TRUSTED_STEP` is taken as it is (in that range the likelihood's
curvature changes little, so the quadratic model is accurate); a longer one is
checked on the likelihood and halved until the likelihood does not rise; every
step keeps the cut points increasing. A round's step whose predicted gain
:math:`\tfrac12 g^\top H^{-1} g` (with the last hessian computed), per unit
weight, is below :data:`MIN_GAIN` is not taken, and its hessian's sums are not
formed: late in boosting, when the cut points have settled. The tree of round :math:`m` is fitted to
gradients at the cut points of round :math:`m-1`, and round :math:`m`'s metric
and saved cut points are those after its step, which are fitted to the
scores before its tree (as they were when three steps came before the
gradients). The cut points are part of the fitted state, saved with a model.
The decoded ordinal score is the expected class :math:`\sum_k k\,P(y=k)` on the labels' scale.

**Work per round.** The metric on the training rows after round :math:`m`
evaluates :eq:`ol-proba` at the scores round :math:`m+1`'s gradients start
from, with the same cut points: its per-row quantities are kept
(:class:`qwkboost.objectives.rows.Memo`) and the gradients, hessians and
cut-point sums are a few arithmetic passes over them. Rows are kept sorted by
class (:class:`qwkboost.objectives.rows.ClassRows`), so a class's cut points
are constants over a slice and per-class sums are slice sums. The hessian of
:eq:`ol-cuts` changes slowly from round to round; it is computed every
``hessian_every`` rounds and kept in between (a quasi-Newton step with a
frozen hessian), unless the kept one's step would leave :data:`TRUSTED_STEP`,
when it is computed from the round's rows. Every array is written into the
layout's buffers (:meth:`qwkboost.objectives.rows.ClassRows.buffer`).
"""

from __future__ import annotations

import numpy as np
from scipy import special

from qwkboost.objectives.base import Objective
from qwkboost.objectives.multiclass import class_indices, class_scale, outputs
from qwkboost.objectives.rows import Memo, class_rows, sum_log

__all__ = ["OrdinalLogit"]

LINKS = ("logit", "probit")
#: Cut points stay at least this far apart (an empty class keeps a sliver of probability).
MIN_GAP = 1e-6
#: Probability floor in the log-likelihood.
P_MIN = 1e-15
#: A Newton step on the cut points moving none by more than this is taken without checking the likelihood.
TRUSTED_STEP = 0.1
#: A round's first Newton step is taken only when its predicted gain (with the last hessian computed) is at
#: least this, in mean log-loss; below it the cut points stay and the hessian's sums are not taken.
MIN_GAIN = 1e-8
#: Logistic link: scores are clipped to :math:`[-700, 690 + \theta_0]` before :math:`u = e^F`, so that
#: :math:`u c_j \le e^{690}` stays finite (rows that far out have :math:`G < 10^{-299}` anyway).
EXP_CAP = 690.0
_SQRT_2PI = float(np.sqrt(2.0 * np.pi))


def _cdf(x, link):
    return special.expit(x) if link == "logit" else special.ndtr(x)


def _inverse(p, link):
    return special.logit(p) if link == "logit" else special.ndtri(p)


class _Rows:
    r"""Per-row quantities of :eq:`ol-proba` at one score vector and one set of cut points, in class order.

    ``sa`` (:math:`G(a)`) and everything ending in ``a`` belong to the rows below the top class (their upper
    bound :math:`a` is finite), ``sb`` and the ``b`` names to the rows above the bottom class; ``p`` covers
    every row. Logistic link: ``u`` is :math:`e^F` per row (kept for further steps at the same scores),
    ``ta`` / ``tb`` are :math:`e^{-a}` / :math:`e^{-b}`; probit: ``a`` / ``b`` are the bounds.
    :meth:`slopes` adds ``oma`` (:math:`1 - G(a)`), ``ga``, ``gb`` (:math:`g`), :meth:`curvature` ``ka``,
    ``kb`` (:math:`g'/g`)."""

    __slots__ = ("link", "lay", "u", "ta", "tb", "a", "b", "sa", "sb", "p", "oma", "ga", "gb", "ka", "kb")

    def buf(self, name: str, n: int) -> np.ndarray:
        """An array of ``n`` values: the layout's scratch buffer ``name`` (:meth:`ClassRows.buffer`) when the
        rows were computed into buffers, else a new one."""
        return np.empty(n) if self.lay is None else self.lay.buffer("ol_" + name, n)

    def slopes(self, oma_out=None, ga_out=None) -> "_Rows":
        """Add the slopes; with the logistic link, :math:`1 - G(a)` and :math:`g(a)` may be written into the
        given arrays (the gradient's and hessian's first rows, so that they are not copied there)."""
        if hasattr(self, "ga"):
            return self
        if self.link == "logit":
            na, nb = self.sa.size, self.sb.size
            self.oma = np.multiply(self.ta, self.sa, out=self.buf("oma", na) if oma_out is None else oma_out)
            self.ga = np.multiply(self.oma, self.sa, out=self.buf("ga", na) if ga_out is None else ga_out)
            omb = self.tb
            omb *= self.sb                                          # in place of e^{-b}
            self.gb = np.multiply(omb, self.sb, out=self.buf("gb", nb))
            self.ka = self.kb = None                                # g'/g, for the hessian only: curvature()
        else:
            self.ga = np.exp(-0.5 * self.a * self.a) / _SQRT_2PI
            self.gb = np.exp(-0.5 * self.b * self.b) / _SQRT_2PI
            self.ka, self.kb = -self.a, -self.b                     # g'(x) = -x g(x)
        return self

    def curvature(self) -> "_Rows":
        """Add ``ka``, ``kb`` (:math:`g'/g`; logistic link: :math:`1 - 2G = (1 - G) - G`), which only the cut
        points' hessian needs; before the gradient is completed over ``oma``."""
        if self.link == "logit" and self.ka is None:
            self.ka = np.subtract(self.oma, self.sa, out=self.buf("ka", self.sa.size))
            self.kb = np.subtract(self.tb, self.sb, out=self.buf("kb", self.sb.size))    # tb holds 1 - G(b)
        return self


class OrdinalLogit(Objective):
    """Cumulative-link model (module docstring for the equations).

    Parameters
    ----------
    link : {"logit", "probit"}, default "logit"
    cut_steps : int, default 1
        Newton steps on the cut points per round (0: keep the initial ones). The first is made from the
        round's own per-row quantities; each further one evaluates the likelihood at the new cut points.
    hessian_every : int, default 8
        The first step's hessian :eq:`ol-cuts` is computed anew every this many rounds and kept in between
        (1: every round); a kept hessian whose step would leave :data:`TRUSTED_STEP` is computed anew.
    """

    metric_name = "logloss"
    gradient_needs = "sums"      # the cut points' Newton steps sum over every row
    allreduce_ready = True       # every sum goes through _global (per-class arrays) or global_sums
    higher_is_better = False
    ordinal = True
    centre_labels = False
    hessian_kind = "exact"
    state = ("init_score_", "lo_", "n_classes_", "cuts_")

    def __init__(self, link: str = "logit", cut_steps: int = 1, hessian_every: int = 8):
        if link not in LINKS:
            raise ValueError(f"link must be one of {LINKS}; got {link!r}")
        if isinstance(cut_steps, bool) or not isinstance(cut_steps, (int, np.integer)) or cut_steps < 0:
            raise ValueError(f"cut_steps must be an integer >= 0; got {cut_steps!r}")
        if isinstance(hessian_every, bool) or not isinstance(hessian_every, (int, np.integer)) or hessian_every < 1:
            raise ValueError(f"hessian_every must be an integer >= 1; got {hessian_every!r}")
        self.link = link
        self.cut_steps = int(cut_steps)
        self.hessian_every = int(hessian_every)

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
    def _layout(self, y, sample_weight=None):
        cache = self.__dict__.setdefault("_layouts", {})
        return class_rows(cache, y, lambda v: class_indices(v, self.lo_, self.n_classes_), self.n_classes_,
                          sample_weight)

    def _rows(self, lay, score, cuts, u=None, scratch=False) -> _Rows:
        r"""Per-row quantities of :eq:`ol-proba` at ``score`` (row order) and ``cuts``, in class order;
        ``u`` reuses :math:`e^F` of an earlier call at the same scores (logistic link). With ``scratch`` they
        are written into the layout's buffers (:meth:`ClassRows.buffer`): only for the rows the memo or one
        call keeps, never while other rows computed into them are still in use."""
        b = lay.bounds
        n, top, bottom = int(b[-1]), int(b[-2]), int(b[1])      # rows below the top class, above the bottom one
        r = _Rows()
        r.link = self.link
        r.lay = lay if scratch else None
        cuts = np.asarray(cuts, dtype=np.float64)
        if self.link == "logit":
            cap = EXP_CAP + float(cuts.min(initial=0.0))     # u c_j <= e^{EXP_CAP}: 1 - G = u c G stays finite
            if u is None or _exceeds(u, cap):
                u = np.take(score, lay.perm, out=r.buf("u", n), mode="clip")   # (valid indices: no checks)
                np.clip(u, -EXP_CAP - 10.0, cap, out=u)
                np.exp(u, out=u)
            r.u = u
            c = np.exp(-cuts)                                   # c_j = e^{-theta_j}
            r.ta, r.sa = _expit_from(u, c, b[:-1], 0, r.buf("ta", top), r.buf("sa", top))   # upper cut theta_k
            r.tb, r.sb = _expit_from(u, c, b[1:] - bottom, bottom, r.buf("tb", n - bottom),
                                     r.buf("sb", n - bottom))  # class k's lower cut theta_{k-1}
        else:
            fs = score[lay.perm]
            counts = np.diff(b)
            r.a = np.repeat(cuts, counts[:-1]) - fs[:top]
            r.b = np.repeat(cuts, counts[1:]) - fs[bottom:]
            r.sa, r.sb = special.ndtr(r.a), special.ndtr(r.b)
        p = r.buf("p", n)
        p[:bottom] = r.sa[:bottom]                              # the bottom class: G(a)
        np.subtract(r.sa[bottom:], r.sb[:top - bottom], out=p[bottom:top])
        np.subtract(1.0, r.sb[top - bottom:], out=p[top:])      # the top class: 1 - G(b)
        np.maximum(p, P_MIN, out=p)
        r.p = p
        return r

    def _global(self, sums: np.ndarray) -> np.ndarray:
        """Per-class ``sums`` over every worker's rows (all-reduced on a cluster; as they are on one machine)."""
        return sums if self.allreduce is None else np.asarray(self.allreduce(sums), dtype=np.float64)

    def _nll(self, lay, p) -> float:
        """Mean negative log-likelihood from class-ordered ``p`` (over every worker's rows)."""
        s, n = self.global_sums(*self._log_sums(lay, p))
        return -s / n

    @staticmethod
    def _log_sums(lay, p) -> tuple[float, float]:
        r""":math:`(\sum_i w_i \log p_i, \sum_i w_i)` from class-ordered ``p``."""
        if lay.w is None:
            return float(sum_log(p)), float(p.size)
        return float(lay.w @ np.log(p)), float(lay.w.sum())

    def _cut_grad(self, lay, r: _Rows):
        """The gradient of :eq:`ol-cuts` (summed log-loss), with :math:`r_a, r_b` (weighted) for the hessian."""
        b = lay.bounds
        K = lay.n_classes
        top, bottom = int(b[-2]), int(b[1])
        ra = np.divide(r.ga, r.p[:top], out=r.buf("ra", top))
        rb = np.divide(r.gb, r.p[bottom:], out=r.buf("rb", r.gb.size))
        if lay.w is None:
            grad = -lay.sums(ra, 0, K - 2) + lay.sums(rb, 1, K - 1)
        else:
            wa, wb = lay.w[:top], lay.w[bottom:]
            grad = -lay.sums(ra * wa, 0, K - 2) + lay.sums(rb * wb, 1, K - 1)
        return self._global(grad), ra, rb

    def _cut_hess(self, lay, r: _Rows, ra, rb) -> np.ndarray:
        """The tridiagonal hessian of :eq:`ol-cuts`."""
        r.curvature()
        b = lay.bounds
        K = lay.n_classes
        top, bottom = int(b[-2]), int(b[1])
        da = np.subtract(ra, r.ka, out=r.buf("da", ra.size))
        da *= ra                                                # r_a^2 - g'(a)/p
        db = np.add(rb, r.kb, out=r.buf("db", rb.size))
        db *= rb                                                # r_b^2 + g'(b)/p
        off = np.multiply(ra[bottom:], rb[:top - bottom], out=r.buf("off", top - bottom))
        if lay.w is not None:
            da *= lay.w[:top]
            db *= lay.w[bottom:]
            off *= lay.w[bottom:top]
        hd = lay.sums(da, 0, K - 2) + lay.sums(db, 1, K - 1)
        ho = -lay.sums(off, 1, K - 2) if K > 2 else np.zeros(0)
        if self.allreduce is not None:
            both = self._global(np.concatenate([hd, ho]))
            hd, ho = both[:hd.size], both[hd.size:]
        return np.diag(hd + 1e-9) + np.diag(ho, 1) + np.diag(ho, -1)

    def _first_step(self, lay, r: _Rows):
        r"""The first Newton step's ``(gradient, hessian, step)`` from rows ``r``, or ``None`` when it does not pay.

        With the last hessian computed, a step whose predicted gain :math:`\tfrac12 g^\top H^{-1} g` per unit
        weight is below :data:`MIN_GAIN` does not pay (every step pays until a hessian was computed). That
        hessian is kept while it is younger than ``hessian_every`` rounds and its step stays within
        :data:`TRUSTED_STEP`; otherwise the hessian is computed from ``r`` (``step`` is then ``None``)."""
        grad, ra, rb = self._cut_grad(lay, r)
        H = self.__dict__.get("_last_hessian")
        step = _solve(H, grad) if H is not None and H.shape[0] == grad.size else None
        if step is not None:
            total = float(lay.bounds[-1]) if lay.w is None else float(lay.w.sum())
            if self.allreduce is not None:
                total, = self.global_sums(total)
            if 0.5 * float(grad @ step) < MIN_GAIN * total:
                return None
        age = self.__dict__.get("_hessian_age", 0) + 1
        if step is None or age >= self.hessian_every or float(np.max(np.abs(step), initial=0.0)) > TRUSTED_STEP:
            H, age, step = self._cut_hess(lay, r, ra, rb), 0, None
            self._last_hessian = H
        self._hessian_age = age
        return grad, H, step

    def _step_cuts(self, lay, score, cuts, r: _Rows, newton) -> tuple[np.ndarray, bool]:
        """One Newton step from ``cuts`` at ``score`` (rows ``r`` computed there, ``newton`` its gradient,
        hessian and step, ``None`` if not solved yet); ``(cuts, moved)``."""
        grad, H, step = newton
        if step is None:
            step = _solve(H, grad)
        if step is None:
            return cuts, False
        cand = cuts - step
        if np.max(np.abs(step), initial=0.0) <= TRUSTED_STEP and np.all(np.diff(cand) > MIN_GAP):
            return cand, True
        base = self._nll(lay, r.p)
        t = 1.0
        while t > 1e-4:
            cand = cuts - t * step
            if np.all(np.diff(cand) > MIN_GAP) and \
                    self._nll(lay, self._rows(lay, score, cand, getattr(r, "u", None)).p) <= base:
                return cand, True
            t *= 0.5
        return cuts, False

    def _rows_at(self, lay, score, cuts) -> _Rows:
        """Rows at ``score`` and ``cuts`` in the layout's buffers, from the memo of the last metric call when
        it was made there (the memo forgets them either way: the caller writes over them)."""
        r = self.__dict__.setdefault("_memo", Memo()).take(lay, score, tuple(cuts))
        return self._rows(lay, score, cuts, scratch=True) if r is None else r

    def update_cuts(self, y, score, sample_weight=None) -> None:
        """``cut_steps`` Newton steps on the cut points at the current scores (kept increasing)."""
        lay = self._layout(y, sample_weight)
        score = np.asarray(score, dtype=np.float64)
        r = self._rows_at(lay, score, self.cuts_).slopes()
        self._update(lay, score, r, self._first_step(lay, r) if self.cut_steps else None)

    def _update(self, lay, score, r: _Rows, newton) -> None:
        """``cut_steps`` Newton steps from rows ``r``, the first with ``newton`` (``None``: it does not pay)."""
        cuts = np.asarray(self.cuts_, dtype=np.float64)
        for s in range(self.cut_steps):
            if s:
                r = self._rows(lay, score, cuts, getattr(r, "u", None)).slopes()
                grad, ra, rb = self._cut_grad(lay, r)
                newton = grad, self._cut_hess(lay, r, ra, rb), None
            if newton is None:
                break
            cuts, moved = self._step_cuts(lay, score, cuts, r, newton)
            if not moved:
                break
        self.cuts_ = cuts.tolist()

    # -- boosting --------------------------------------------------------------
    def round_state(self, y, score, sample_weight=None):
        r"""The cut points this round's gradients :eq:`ol-logit` are taken at (``cuts``, :math:`\theta_j`), then
        the cut points' Newton step from the same rows, as :meth:`grad_hess` takes it."""
        cuts = np.asarray(self.cuts_, dtype=np.float64)
        if self.cut_steps:
            self.update_cuts(y, score, sample_weight)
        self.__dict__.setdefault("_cuts_by_round", []).append(list(self.cuts_))
        return {"cuts": cuts}

    def grad_hess(self, y, score, sample_weight=None, out=None):
        r""":eq:`ol-logit` (:eq:`ol-grad` for the probit link) at the current cut points, then the cut
        points' Newton step :eq:`ol-cuts` from the same rows; ``out``: a (gradient, hessian) pair of float64
        arrays to write them into (as a training loop passes every round)."""
        score = np.asarray(score, dtype=np.float64)
        lay = self._layout(y, sample_weight)
        r = self._rows_at(lay, score, self.cuts_)
        b = lay.bounds
        top, bottom = int(b[-2]), int(b[1])
        gs = lay.buffer("ol_gs", score.size)                    # class order
        hs = lay.buffer("ol_hs", score.size)
        if self.link == "logit":
            r.slopes(oma_out=gs[:top], ga_out=hs[:top])         # 1 - G(a) and g(a) where they belong
        else:
            r.slopes()
        # the cut points' step uses these rows: its sums are taken before gs and hs are completed over them
        newton = self._first_step(lay, r) if self.cut_steps else None
        gs[top:] = 0.0
        if self.link == "logit":
            hs[top:] = 0.0
            gs[bottom:] -= r.sb                                 # 1 - G(a) - G(b)
            hs[bottom:] += r.gb                                 # g(a) + g(b)
        else:
            p = r.p
            gs[:top] = r.ga                                     # (g(a) - g(b)) / p
            gs[bottom:] -= r.gb
            gs /= p
            hs[:top] = -r.ka * r.ga                             # g'(b) - g'(a), g' = k g
            hs[top:] = 0.0
            hs[bottom:] += r.kb * r.gb
            hs *= p                                             # (g'(b) - g'(a)) p
            hs += (gs * p) ** 2
            hs /= p * p
        np.maximum(hs, 1e-16, out=hs)
        if lay.w is not None:
            gs *= lay.w
            hs *= lay.w
        grad, hess = outputs(out, score)
        np.take(gs, lay.inv, out=grad, mode="clip")             # back to row order
        np.take(hs, lay.inv, out=hess, mode="clip")
        if self.cut_steps:
            self._update(lay, score, r, newton)
        # round r's tree and its metric use these cut points
        self.__dict__.setdefault("_cuts_by_round", []).append(list(self.cuts_))
        return grad, hess

    def finish(self, best_iteration: int) -> None:
        """Keep the cut points of the best round (early stopping may have trained past it)."""
        history = self.__dict__.pop("_cuts_by_round", [])
        for kept in ("_memo", "_layouts", "_last_hessian", "_hessian_age"):
            self.__dict__.pop(kept, None)
        if 0 < best_iteration <= len(history):
            self.cuts_ = history[best_iteration - 1]

    def metric(self, y, score, sample_weight=None):
        """Mean negative log-likelihood of the true class (weighted), :eq:`ol-proba`."""
        score = np.asarray(score, dtype=np.float64)
        lay = self._layout(y, sample_weight)
        r = self._rows(lay, score, np.asarray(self.cuts_, dtype=np.float64), scratch=True)
        self.__dict__.setdefault("_memo", Memo()).put(lay, score, tuple(self.cuts_), r)
        return self._nll(lay, r.p)

    def metric_sums(self, y, score, sample_weight=None):
        r""":math:`(\sum_i w_i \log p_i, \sum_i w_i)` of :meth:`metric`'s likelihood: they add up over sets of rows."""
        score = np.asarray(score, dtype=np.float64)
        lay = self._layout(y, sample_weight)
        r = self._rows(lay, score, np.asarray(self.cuts_, dtype=np.float64), scratch=True)
        self.__dict__.setdefault("_memo", Memo()).put(lay, score, tuple(self.cuts_), r)
        return np.array(self._log_sums(lay, r.p))

    def metric_from_sums(self, sums) -> float:
        r"""The mean negative log-likelihood, :math:`-\sum w \log p / \sum w`."""
        return float(-sums[0] / sums[1])

    def learned(self) -> dict | None:
        """The cut points learned while boosting, every round's (:meth:`finish` keeps the best round's)."""
        return {"cuts": list(self.cuts_), "cuts_by_round": list(self.__dict__.get("_cuts_by_round", []))}

    def take_learned(self, learned: dict) -> None:
        """Take :meth:`learned` of a copy that boosted elsewhere (a cluster's worker)."""
        self.cuts_ = [float(c) for c in learned["cuts"]]
        self._cuts_by_round = [[float(c) for c in cuts] for cuts in learned["cuts_by_round"]]

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


def _solve(H: np.ndarray, grad: np.ndarray) -> np.ndarray | None:
    """The Newton step :math:`H^{-1} g`, or ``None`` for a singular hessian or a non-finite step."""
    try:
        step = np.linalg.solve(H, grad)
    except np.linalg.LinAlgError:
        return None
    return step if np.all(np.isfinite(step)) else None


def _exceeds(u: np.ndarray, cap: float) -> bool:
    """Whether a reused :math:`u = e^F` holds values above :math:`e^{cap}` (the cut points moved down since)."""
    return bool(u.size) and float(u.max()) > np.exp(cap)


def _expit_from(u: np.ndarray, c: np.ndarray, starts: np.ndarray, offset: int, t: np.ndarray, s: np.ndarray):
    r""":math:`t = u c_j = e^{-x}` and :math:`G(x) = 1/(1 + t)` over the sorted rows from ``offset`` on, class by
    class: ``c[j]`` on rows ``offset + starts[j]`` to ``offset + starts[j + 1]`` (``starts[0]`` is 0); written
    into ``t`` and ``s`` (``starts[-1]`` values each)."""
    for j in range(c.size):
        lo, hi = int(starts[j]), int(starts[j + 1])
        np.multiply(u[offset + lo:offset + hi], c[j], out=t[lo:hi])
    np.add(t, 1.0, out=s)
    np.divide(1.0, s, out=s)
    return t, s


def _increasing(c: np.ndarray) -> np.ndarray:
    """Cut points pushed apart to at least :data:`MIN_GAP` (empty classes give equal ones)."""
    c = np.array(c, dtype=np.float64)
    for j in range(1, c.size):
        c[j] = max(c[j], c[j - 1] + 2 * MIN_GAP)
    return c
