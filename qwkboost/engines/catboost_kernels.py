r"""Compiled row kernels for CatBoost's Python loss: each block's derivatives from the round's state.

CatBoost asks a Python loss for the derivatives of blocks of rows (``calc_ders_range``) about 340 times a round
at 80,000 rows; each call costs what Python and NumPy cost to start, so the lever is the cost of one call. An
objective whose gradient needs sums over every row (extended QWK's numerator and denominator) or a state it
learns while boosting (ordinal logit's cut points) gives, once a round, those quantities at every training
row's scores (:meth:`qwkboost.objectives.Objective.round_state`); given them, each row's gradient depends only
on its own score and label. The kernels here compute a block's rows from that state in one compiled call
(numba, ``nogil``: CatBoost's threads may run two blocks at once), and write CatBoost's derivatives
:math:`(-g, -h)` into an ``(n, 2)`` array.

**The block's scores are the round's** (:func:`build_index`, checked in every kernel). The round's state is
computed from the scores CatBoost's metric was given after the last iteration; a block whose (score, label)
pairs are not among those of the training rows would get a gradient from a state of other scores. Every row of
every block is looked up in a hash index of the round's (score, label) pairs (open addressing, built once a
round in :math:`O(n)`), and a kernel that finds a row missing returns ``False`` before anything is used: the
caller stops training with an error.

Equations: extended QWK's gradient (:mod:`qwkboost.objectives.extended_qwk`),
ordinal logit's :eq:`ol-logit` (:mod:`qwkboost.objectives.ordinal_logit`), written as the NumPy code computes
them, operation for operation.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["build_index", "extended_qwk_block", "ordinal_logit_block", "EMPTY_WEIGHTS", "QWK_STATE",
           "OLOGIT_STATE"]

#: The weights a kernel is given for a block CatBoost hands without weights.
EMPTY_WEIGHTS = np.zeros(0, dtype=np.float32)
#: Slots of :func:`extended_qwk_block`'s state array.
QWK_STATE = ("f0", "offset", "lo", "hi", "a", "f", "g", "n", "clip", "hold", "gauss_newton")
#: Slots of :func:`ordinal_logit_block`'s state array (then the cut points' :math:`c_j = e^{-\theta_j}`).
OLOGIT_STATE = ("f0", "lo", "cap", "floor")
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, nogil=True)
def _slot(bits, label_bits, mask):
    h = (bits ^ (label_bits * _GOLDEN)) * _GOLDEN
    return np.int64((h >> np.uint64(29)) & mask)


@njit(cache=True, nogil=True)
def build_index(scores, labels, slots):
    """Fill ``slots`` (int32, a power of two at least twice the rows, every entry -1) with the rows of the
    distinct (score, label) pairs: row ``i`` of ``scores`` (float64) and ``labels`` (float32)."""
    bits = scores.view(np.uint64)
    lab = labels.view(np.uint32)
    mask = np.uint64(slots.size - 1)
    for i in range(scores.size):
        j = _slot(bits[i], np.uint64(lab[i]), mask)
        while True:
            k = slots[j]
            if k < 0:
                slots[j] = i
                break
            if bits[k] == bits[i] and lab[k] == lab[i]:
                break
            j = (j + 1) & (slots.size - 1)


@njit(cache=True, nogil=True)
def _known(a_bits, t_bits, scores_bits, labels_bits, slots):
    """Whether every (score, label) pair of a block is in the round's index."""
    mask = np.uint64(slots.size - 1)
    for i in range(a_bits.size):
        j = _slot(a_bits[i], np.uint64(t_bits[i]), mask)
        while True:
            k = slots[j]
            if k < 0:
                return False
            if scores_bits[k] == a_bits[i] and labels_bits[k] == t_bits[i]:
                break
            j = (j + 1) & (slots.size - 1)
    return True


@njit(cache=True, nogil=True)
def extended_qwk_block(approx, target, weight, state, scores, labels, slots, out):
    r"""``out[:, 0], out[:, 1] = -g, -h`` of extended QWK for a block (``weight`` empty: unweighted), from
    ``state`` (:data:`QWK_STATE`); ``False`` (and ``out`` untouched) if a row's pair is not the round's."""
    if not _known(approx.view(np.uint64), target.view(np.uint32), scores.view(np.uint64),
                  labels.view(np.uint32), slots):
        return False
    f0, off, lo, hi, a, f, g, n = state[0], state[1], state[2], state[3], state[4], state[5], state[6], state[7]
    clip, hold, gn = state[8] > 0.0, state[9] > 0.0, state[10] > 0.0
    c = f / (g * g)
    weighted = weight.size > 0
    for i in range(approx.size):
        s = (f0 + approx[i]) + off
        y = np.float64(target[i]) + off
        p = min(max(s, lo), hi) if clip else s
        grad = (p - y) / g - c * (p - a)
        grad = grad * n
        if hold and ((s >= hi and grad < 0.0) or (s <= lo and grad > 0.0)):
            grad = 0.0
        hess = n / g if gn else 1.0
        if weighted:
            w = np.float64(weight[i])
            grad *= w
            hess *= w
        out[i, 0] = -grad
        out[i, 1] = -hess
    return True


@njit(cache=True, nogil=True)
def ordinal_logit_block(approx, target, weight, state, cuts_c, scores, labels, slots, out):
    r"""``-g, -h`` of ordinal logit's :eq:`ol-logit` for a block, with :math:`u = e^F` clipped as the NumPy
    code clips it and :math:`c_j = e^{-\theta_j}` (``cuts_c``) of the round's cut points; ``False`` if a row's
    pair is not the round's."""
    if not _known(approx.view(np.uint64), target.view(np.uint32), scores.view(np.uint64),
                  labels.view(np.uint32), slots):
        return False
    f0, lo, cap, floor = state[0], state[1], state[2], state[3]
    top = cuts_c.size                       # the top class index (K - 1)
    weighted = weight.size > 0
    for i in range(approx.size):
        u = np.exp(min(max(f0 + approx[i], floor), cap))
        k = int(np.float64(target[i]) - lo)
        grad = 0.0
        hess = 0.0
        if k < top:                         # the upper cut theta_k: 1 - G(a) and g(a)
            t = u * cuts_c[k]
            sa = 1.0 / (t + 1.0)
            oma = t * sa
            grad = oma
            hess = oma * sa
        if k > 0:                           # the lower cut theta_{k-1}: - G(b) and g(b)
            t = u * cuts_c[k - 1]
            sb = 1.0 / (t + 1.0)
            grad -= sb
            hess += (t * sb) * sb
        hess = max(hess, 1e-16)
        if weighted:
            w = np.float64(weight[i])
            grad *= w
            hess *= w
        out[i, 0] = -grad
        out[i, 1] = -hess
    return True
