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
every block is checked: against the row after the last one found (CatBoost's split search hands the rows in
order, so most rows cost one comparison), else in a hash index of the round's (score, label) pairs (open
addressing, built once a round in :math:`O(n)`; the leaves' blocks are looked up there). A kernel that finds a
row missing returns ``False`` before anything is written: the caller stops training with an error. Scores and
labels are compared as their bits (``scores``: the float64 scores viewed as uint64, ``labels``: the float32
labels viewed as uint32).

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
def build_index(scores, labels, table):
    """Fill ``table`` (uint64, shape ``(m, 2)``, ``m`` a power of two at least twice the rows, all zero) with the
    distinct (score, label) pairs of the round: row ``i`` of ``scores`` (float64 bits) and ``labels`` (float32
    bits) as ``[score bits, (i + 1) << 32 | label bits]``, by open addressing."""
    mask = np.uint64(table.shape[0] - 1)
    for i in range(scores.size):
        bits, lab = scores[i], np.uint64(labels[i])
        j = _slot(bits, lab, mask)
        while True:
            tag = table[j, 1]
            if tag == 0:
                table[j, 0] = bits
                table[j, 1] = (np.uint64(i + 1) << np.uint64(32)) | lab
                break
            if table[j, 0] == bits and (tag & np.uint64(0xFFFFFFFF)) == lab:
                break
            j = (j + np.int64(1)) & np.int64(mask)


@njit(cache=True, nogil=True)
def _known(a_bits, t_bits, scores, labels, table):
    """Whether every (score, label) pair of a block is among the round's: compared with the row after the last
    one found (CatBoost's split search hands rows in order: no lookup), else looked up in ``table``."""
    mask = np.uint64(table.shape[0] - 1)
    n = scores.size
    hint = -2
    for i in range(a_bits.size):
        bits, lab = a_bits[i], t_bits[i]
        nxt = hint + 1
        if 0 <= nxt < n and scores[nxt] == bits and labels[nxt] == lab:
            hint = nxt
            continue
        j = _slot(bits, np.uint64(lab), mask)
        while True:
            tag = table[j, 1]
            if tag == 0:
                return False
            if table[j, 0] == bits and (tag & np.uint64(0xFFFFFFFF)) == np.uint64(lab):
                hint = np.int64(tag >> np.uint64(32)) - 1
                break
            j = (j + np.int64(1)) & np.int64(mask)
    return True


@njit(cache=True, nogil=True)
def extended_qwk_block(approx, target, weight, state, scores, labels, table, out):
    r"""``out[:, 0], out[:, 1] = -g, -h`` of extended QWK for a block (``weight`` empty: unweighted), from
    ``state`` (:data:`QWK_STATE`); ``False`` (and ``out`` untouched) if a row's pair is not the round's."""
    if not _known(approx.view(np.uint64), target.view(np.uint32), scores, labels, table):
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
def ordinal_logit_block(approx, target, weight, state, cuts_c, scores, labels, table, out):
    r"""``-g, -h`` of ordinal logit's :eq:`ol-logit` for a block, with :math:`u = e^F` clipped as the NumPy
    code clips it and :math:`c_j = e^{-\theta_j}` (``cuts_c``) of the round's cut points; ``False`` if a row's
    pair is not the round's."""
    if not _known(approx.view(np.uint64), target.view(np.uint32), scores, labels, table):
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
