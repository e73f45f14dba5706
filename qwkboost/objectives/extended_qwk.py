r"""Extended QWK as a boosting objective (rsakata, "[Kaggle] DSB2019: QWKをGBDTで直接最適化する", 2020).

The loss is the ratio :math:`L = f/g` with

.. math:: f = \tfrac12\sum_k (\hat y_k - y_k)^2, \qquad
          g = \tfrac12\sum_k \left((\hat y_k - a)^2 + b\right),

so that :math:`\tilde\kappa = 1 - f/g`, where :math:`\hat y_k` is the raw score
clipped to the label range. Its gradient, multiplied by :math:`n` so that its
scale does not shrink with the data size, is

.. math:: g_k = n\left(\frac{\hat y_k - y_k}{g} - \frac{f\,(\hat y_k - a)}{g^2}\right).

:math:`L` is not convex: its exact diagonal curvature
:math:`\frac1g(1 - f/g) + O(1/g^2)` is zero at the constant start
:math:`\hat y = a` (where :math:`f = g`). Two hessians are offered:

``"constant"``
    :math:`h_k = 1`, the DSB2019 article's choice (plain gradient boosting).
``"gauss_newton"``
    :math:`h_k = n/g`, the curvature of the numerator alone: always positive,
    and it rescales the step to the data's spread.

What clipping does at the range edges:

``"range"``
    Clip to the label range before the gradient, as the DSB2019 article does. A row already past the top
    label with :math:`y_k = \max y` gets :math:`g_k = -n f(\hat y_k-a)/g^2 < 0`,
    so its score keeps drifting outward without bound.
``"hold"``
    As ``"range"``, but the outward gradient of a row already beyond an edge is
    set to zero. Such rows still move with the other rows of their leaf, but
    nothing pushes them outward, so the drift stops (measured: within about
    0.8 of the range after 1,500 rounds, against 48 with ``"range"``).
``"none"``
    No clipping; the gradient of the unclipped ratio (it pulls scores back).

With sample weights :math:`w_k` both sums are weighted,
:math:`f = \tfrac12\sum_k w_k(\hat y_k-y_k)^2`, :math:`g = \tfrac12\sum_k w_k((\hat y_k-a)^2+b)`,
:math:`a, b` are the weighted label mean and variance, :math:`n` becomes
:math:`W = \sum_k w_k`, and row :math:`k`'s gradient and hessian carry a factor
:math:`w_k`: with integer weights the histograms equal those of the data with
rows repeated.
"""

from __future__ import annotations

import numpy as np

from qwkboost.evaluation.metrics import extended_qwk_ratio, weighted_mean_var
from qwkboost.objectives.base import Objective

__all__ = ["ExtendedQWK"]

HESSIANS = ("constant", "gauss_newton")
CLIPS = ("range", "hold", "none")
#: Earlier name of ``"range"``, still read from configs and model files.
_CLIP_ALIASES = {"seed": "range"}


class ExtendedQWK(Objective):
    r"""Extended QWK :math:`\tilde\kappa` objective (module docstring for the equations).

    Parameters
    ----------
    a, b : float, optional
        Mean and population variance of the *target* label distribution. By
        default they come from the training labels; give them to target another
        distribution, e.g. a test set under label shift.
    hessian : {"constant", "gauss_newton"}, default "constant"
    clip : {"range", "hold", "none"}, default "range"
    """

    metric_name = "kappa"
    higher_is_better = True
    ordinal = True
    state = ("a_", "b_", "lo_", "hi_", "init_score_")
    #: :meth:`default_min_delta` per unit of learning rate.
    MIN_DELTA_PER_RATE = 0.01
    gradient_needs = "sums"      # the numerator f and denominator g over every row
    allreduce_ready = True

    def __init__(self, a: float | None = None, b: float | None = None,
                 hessian: str = "constant", clip: str = "range"):
        if hessian not in HESSIANS:
            raise ValueError(f"hessian must be one of {HESSIANS}; got {hessian!r}")
        clip = _CLIP_ALIASES.get(clip, clip)
        if clip not in CLIPS:
            raise ValueError(f"clip must be one of {CLIPS}; got {clip!r}")
        for key, v in (("a", a), ("b", b)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating))
                                  or not np.isfinite(v)):
                raise ValueError(f"{key} must be a finite number or None; got {v!r}")
        if b is not None and not b > 0:
            raise ValueError(f"b (label variance) must be > 0; got {b!r}")
        self.a = a
        self.b = b
        self.hessian = hessian
        self.clip = clip

    @property
    def hessian_kind(self) -> str:
        """``"constant"``, or ``"approximate"`` for the Gauss-Newton stand-in (the ratio is not convex)."""
        return "constant" if self.hessian == "constant" else "approximate"

    def fit(self, y, sample_weight=None):
        y = np.asarray(y, dtype=np.float64)
        if y.min() == y.max() and (self.a is None or self.b is None):
            raise ValueError(f"y contains a single class ({float(y[0])!r}); extended QWK needs labels that vary")
        self.lo_ = float(y.min())
        self.hi_ = float(y.max())
        if self.a is not None and not self.lo_ <= self.a <= self.hi_:
            raise ValueError(f"a (the target label mean) must lie within the labels' range [{self.lo_:g}, "
                             f"{self.hi_:g}]; got {self.a!r}")
        if self.b is not None and self.b > (self.hi_ - self.lo_) ** 2:
            raise ValueError(f"b (the target label variance) must be at most (max - min)**2 = "
                             f"{(self.hi_ - self.lo_) ** 2:g} for labels in [{self.lo_:g}, {self.hi_:g}]; "
                             f"got {self.b!r}")
        mean, var = weighted_mean_var(y, sample_weight)
        self.a_ = mean if self.a is None else float(self.a)
        self.b_ = var if self.b is None else float(self.b)
        return super().fit(y, sample_weight)

    def _clipped(self, score):
        return np.clip(score, self.lo_, self.hi_)

    def _sums(self, p, y, w):
        r""":math:`(f, g, n)` of the module docstring over every training row (every worker's, distributed), from
        the clipped scores ``p``."""
        r = p - y
        s = p - self.a_
        if w is None:
            n = y.size
            f = 0.5 * float(r @ r)
            g = 0.5 * (float(s @ s) + self.b_ * n)
        else:
            n = float(w.sum())
            f = 0.5 * float(w @ (r * r))
            g = 0.5 * (float(w @ (s * s)) + self.b_ * n)
        if self.allreduce is not None:          # distributed: f, g and n over every worker's rows
            f, g, n = self.global_sums(f, g, n)
        return f, g, n, r, s

    def round_state(self, y, score, sample_weight=None):
        r""":math:`f`, :math:`g` and :math:`n` (:math:`W` with weights) at the round's scores: with them and the
        fitted :math:`a, b` and label range, row :math:`k`'s gradient is the module docstring's :math:`g_k`."""
        p = score if self.clip == "none" else self._clipped(score)
        f, g, n, _, _ = self._sums(p, y, sample_weight)
        return {"f": float(f), "g": float(g), "n": float(n)}

    def grad_hess(self, y, score, sample_weight=None):
        p = score if self.clip == "none" else self._clipped(score)
        w = sample_weight
        f, g, n, r, s = self._sums(p, y, w)
        if w is None:
            grad = (r / g - (f / (g * g)) * s) * n
        else:
            grad = (r / g - (f / (g * g)) * s) * (n * w)
        if self.clip == "hold":
            grad[(score >= self.hi_) & (grad < 0)] = 0.0
            grad[(score <= self.lo_) & (grad > 0)] = 0.0
        if self.hessian == "constant":
            hess = np.ones_like(grad) if w is None else np.array(w, dtype=np.float64)
        else:
            hess = np.full_like(grad, n / g) if w is None else (n / g) * w
        return grad, hess

    def default_min_delta(self, learning_rate: float) -> float:
        r"""Early stopping counts a gain of the validation :math:`\tilde\kappa` as an improvement only from
        :math:`0.01\,\eta` on (0.001 at the article's learning rate 0.1).

        Without it a fold can creep for thousands of rounds on gains of about :math:`10^{-5}` a round, e.g.
        when validation rows repeat training rows (``benchmarks/RESULTS.md``, issue 23). The gain a round
        makes is proportional to the learning rate :math:`\eta` (boosting follows one path in
        :math:`\eta \times` rounds), so the threshold is too: at :math:`\eta = 0.03` it is 0.0003. It only
        decides when training stops; the best round trained is kept
        (:class:`qwkboost.callback.EarlyStopping`).
        """
        return self.MIN_DELTA_PER_RATE * float(learning_rate)

    def metric(self, y, score, sample_weight=None):
        r"""Extended QWK of the scores clipped to the training label range.

        :math:`a, b` are the evaluated labels' own (weighted) mean and variance,
        so on integer predictions this is the QWK of that set.
        """
        a, b = weighted_mean_var(y, sample_weight)
        return 1.0 - extended_qwk_ratio(y, self._clipped(score), a, b, sample_weight)

    def metric_sums(self, y, score, sample_weight=None):
        r""":math:`(W, \sum wy, \sum wy^2, \sum w(\hat y - y)^2, \sum w\hat y, \sum w\hat y^2)`, clipped as in
        :meth:`metric`: enough for :math:`a, b` of the labels and both sums of the ratio."""
        p = self._clipped(score)
        w = np.ones_like(y) if sample_weight is None else sample_weight
        r = p - y
        return np.array([float(w.sum()), float(w @ y), float(w @ (y * y)), float(w @ (r * r)), float(w @ p),
                         float(w @ (p * p))])

    def metric_from_sums(self, sums):
        r""":math:`\tilde\kappa = 1 - \sum w(\hat y - y)^2 / \sum w((\hat y - a)^2 + b)`, the denominator expanded
        as :math:`\sum w\hat y^2 - 2a\sum w\hat y + (a^2 + b) W`."""
        W, sy, syy, srr, sp, spp = (float(v) for v in sums)
        a = sy / W
        b = max(syy / W - a * a, 0.0)
        return 1.0 - srr / (spp - 2.0 * a * sp + (a * a + b) * W)

    def loss(self, y, score, sample_weight=None):
        """:math:`f/g = 1 - \\tilde\\kappa` with the fitted ``a``, ``b``, clipped as in training."""
        p = score if self.clip == "none" else self._clipped(score)
        return extended_qwk_ratio(y, p, self.a_, self.b_, sample_weight)
