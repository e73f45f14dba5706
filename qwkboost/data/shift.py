r"""Label shift: when the test set's class proportions are known and differ from training's.

Under label shift :math:`P(x \mid y)` stays and :math:`P(y)` changes from
:math:`\pi` (training) to :math:`\pi'` (target). Two corrections follow from
Bayes' rule (Saerens, Latinne and Decaestecker 2002, "Adjusting the outputs of a
classifier to new a priori probabilities", Neural Computation 14(1)):

* class probabilities: :math:`p'(k \mid x) \propto p(k \mid x)\, \pi'_k / \pi_k`;
* training rows weighted by :math:`w_i = \pi'_{y_i} / \pi_{y_i}` have the target's
  joint distribution, so cut points fitted on weighted out-of-fold scores suit the target.

Extended QWK takes the target's label mean and variance as its ``a`` and ``b``
(:func:`target_moments`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["class_proportions", "shift_weights", "shift_proba", "target_moments"]


def _prior(prior, n_classes: int, name: str) -> np.ndarray:
    p = np.asarray(prior, dtype=float)
    if p.shape != (n_classes,) or not np.isfinite(p).all() or (p < 0).any() or p.sum() <= 0:
        raise ValueError(f"{name} must be {n_classes} non-negative class proportions; got {prior!r}")
    return p / p.sum()


def class_proportions(y_idx, n_classes: int) -> np.ndarray:
    """Proportions of the class indices ``y_idx`` (0..K-1)."""
    y_idx = np.asarray(y_idx).astype(np.int64)
    return np.bincount(y_idx, minlength=n_classes) / y_idx.size


def shift_weights(y_idx, target_prior) -> np.ndarray:
    r"""Row weights :math:`\pi'_{y_i} / \pi_{y_i}` that give training rows the target's class proportions."""
    y_idx = np.asarray(y_idx).astype(np.int64)
    target = np.asarray(target_prior, dtype=float)
    k = target.size
    target = _prior(target, k, "target_prior")
    train = class_proportions(y_idx, k)
    ratio = np.divide(target, train, out=np.zeros(k), where=train > 0)
    return ratio[y_idx]


def shift_proba(proba, train_prior, target_prior) -> np.ndarray:
    r"""Class probabilities moved to the target prior: :math:`p'_k \propto p_k\, \pi'_k / \pi_k`."""
    proba = np.asarray(proba, dtype=float)
    k = proba.shape[1]
    train = _prior(train_prior, k, "train_prior")
    target = _prior(target_prior, k, "target_prior")
    ratio = np.divide(target, train, out=np.zeros(k), where=train > 0)
    out = proba * ratio
    total = out.sum(axis=1, keepdims=True)
    return np.divide(out, total, out=np.full_like(out, 1.0 / k), where=total > 0)


def target_moments(classes, target_prior) -> tuple[float, float]:
    r"""Mean and variance of labels ``classes`` drawn with ``target_prior``: extended QWK's ``a`` and ``b``."""
    c = np.asarray(classes, dtype=float)
    q = _prior(target_prior, c.size, "target_prior")
    a = float(q @ c)
    return a, float(q @ (c - a) ** 2)
