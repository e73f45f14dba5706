r"""Compiled row kernels for CatBoost's Python loss: each block's derivatives from the round's state.

CatBoost asks a Python loss for the derivatives of blocks of rows (``calc_ders_range``) about 340 times a round
at 80,000 rows; each call costs what Python and NumPy cost to start, so the lever is the cost of one call. An
objective whose gradient needs sums over every row (extended QWK's numerator and denominator) or a state it
learns while boosting (ordinal logit's cut points) gives, once a round, those quantities at every training
row's scores (:meth:`qwkboost.objectives.Objective.round_state`); given them, each row's gradient depends only
on its own score and label. The kernels here compute a block's rows from that state in one compiled call
(numba), and write CatBoost's derivatives :math:`(-g, -h)` into an ``(n, 2)`` array.

**The kernels keep the GIL.** CatBoost's two threads call the loss under the GIL; a block's kernel takes about
2 microseconds, less than handing the GIL to the other thread and taking it back costs: measured at 80,000 rows on
2 cores, a round took 16.3 ms with ``nogil=True`` and 12.9 ms without (``benchmarks/RESULTS.md``). They divide
with IEEE semantics (``error_model="numpy"``: no zero-division check a division, which made ordinal logit's kernel
1.6 times slower): no divisor here can be 0, extended QWK's :math:`g \ge bn/2` with :math:`b > 0` (the labels'
variance, or a user's :math:`b`, refused unless positive) and ordinal logit's :math:`1 + t \ge 1`.

**Extended QWK's round in one pass** (:func:`extended_qwk_round`): the metric on the training rows, the round's
state and its fingerprint come from one compiled loop over the rows, in place of the objective's NumPy metric and
:meth:`~qwkboost.objectives.ExtendedQWK.round_state` (equal to rounding: ``tests/engines/test_catboost_paths.py``),
while CatBoost's threads wait between iterations.

**The blocks' scores are the round's** (:func:`fingerprint`). The round's state is computed from the scores
CatBoost's metric was given after the last iteration; a block whose (score, label) pairs were not among the
training rows' would get a gradient from a state of other scores. CatBoost hands every training row once in
the split search and once in the leaf values (measured on catboost 1.2: two passes of every row a round, with
every bootstrap type, grow policy and leaf method), so the multiset of (score, label) pairs of a round's
blocks is the metric's, repeated. Each kernel returns a 64-bit fingerprint of its block (a sum of hashes, which
adds up over blocks in any order), and the round's sum must be a whole multiple of the metric's rows' sum, for
as many passes as there were rows: checked when the metric starts the next round, before the tree built on
them is kept. One comparison a round replaces a lookup a row; a round at other scores stops training with an
error (:class:`qwkboost.engines.catboost_losses.KernelLoss`).

Equations: extended QWK's gradient (:mod:`qwkboost.objectives.extended_qwk`), written as its NumPy code computes
it, and ordinal logit's :eq:`ol-logit` (:mod:`qwkboost.objectives.ordinal_logit`), both bounds of every row
computed and the missing one multiplied by 0: both equal the objectives' own ``grad_hess`` to rounding
(``tests/engines/test_catboost_paths.py``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["fingerprint", "extended_qwk_block", "extended_qwk_round", "ordinal_logit_block", "EMPTY_WEIGHTS", "QWK_STATE",
           "OLOGIT_STATE", "QWK_ROUND"]

#: The weights a kernel is given for a block CatBoost hands without weights.
EMPTY_WEIGHTS = np.zeros(0, dtype=np.float32)
#: Slots of :func:`extended_qwk_block`'s state array.
QWK_STATE = ("f0", "offset", "lo", "hi", "a", "f", "g", "n", "clip", "hold", "gauss_newton")
#: Slots of :func:`ordinal_logit_block`'s state array (then the cut points' :math:`c_j = e^{-\theta_j}`).
OLOGIT_STATE = ("f0", "lo", "cap", "floor")
#: Slots of :func:`extended_qwk_round`'s constants: the score's shift and clip, the fitted :math:`a, b`, whether
#: the objective clips, and the evaluated labels' own :math:`a, b` (the metric's).
QWK_ROUND = ("f0", "offset", "lo", "hi", "a", "b", "clip", "metric_a", "metric_b")
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, error_model="numpy")
def _mix(x):
    """splitmix64's finaliser (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA
    2014): every bit of ``x`` moves every bit of the result."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(cache=True, error_model="numpy")
def fingerprint(score_bits, label_bits):
    """The sum (modulo :math:`2^{64}`) of a 64-bit hash of every row's (score, label) pair: equal sums for
    equal multisets of pairs, in any order and any split into blocks."""
    total = np.uint64(0)
    for i in range(score_bits.size):
        total += _mix(score_bits[i] ^ _mix(np.uint64(label_bits[i]) + _GOLDEN))
    return total


@njit(cache=True, error_model="numpy")
def extended_qwk_block(approx, target, weight, state, out):
    r"""``out[:, 0], out[:, 1] = -g, -h`` of extended QWK for a block (``weight`` empty: unweighted), from
    ``state`` (:data:`QWK_STATE`); returns the block's :func:`fingerprint`."""
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
    return fingerprint(approx.view(np.uint64), target.view(np.uint32))


@njit(cache=True, error_model="numpy")
def ordinal_logit_block(approx, target, weight, state, out):
    r"""``-g, -h`` of ordinal logit's :eq:`ol-logit` for a block, with :math:`u = e^F` clipped as the NumPy
    code clips it and :math:`c_j = e^{-\theta_j}` of the round's cut points (``state``: :data:`OLOGIT_STATE`,
    then the :math:`c_j`); returns the block's :func:`fingerprint`.

    Both bounds are computed for every row and the missing one (the bottom class's lower, the top class's upper)
    is multiplied by 0: rows of random classes would otherwise mispredict a branch each (measured: 21 against
    10 ns a row). :math:`t = u c_j \le e^{690}` by the clip, so every term stays finite."""
    f0, lo, cap, floor = state[0], state[1], state[2], state[3]
    top = state.size - 4                    # the top class index (K - 1); c_j is state[4 + j]
    weighted = weight.size > 0
    for i in range(approx.size):
        u = np.exp(min(max(f0 + approx[i], floor), cap))
        k = int(np.float64(target[i]) - lo)
        has_a = 1.0 if k < top else 0.0     # the upper cut theta_k: 1 - G(a) and g(a)
        has_b = 1.0 if k > 0 else 0.0       # the lower cut theta_{k-1}: - G(b) and g(b)
        ta = u * state[4 + min(k, top - 1)]
        tb = u * state[4 + max(k - 1, 0)]
        sa = 1.0 / (ta + 1.0)
        sb = 1.0 / (tb + 1.0)
        oma = ta * sa
        grad = has_a * oma - has_b * sb
        hess = max(has_a * (oma * sa) + has_b * ((tb * sb) * sb), 1e-16)
        if weighted:
            w = np.float64(weight[i])
            grad *= w
            hess *= w
        out[i, 0] = -grad
        out[i, 1] = -hess
    return fingerprint(approx.view(np.uint64), target.view(np.uint32))


@njit(cache=True, error_model="numpy")
def extended_qwk_round(approx, target, weight, label_bits, consts):
    r"""One pass over the training rows at a round's scores :math:`F_0 + \text{approx}` (``weight`` empty:
    unweighted; ``consts``: :data:`QWK_ROUND`): returns ``(metric, f, g, n, fingerprint)``.

    ``metric`` is :math:`\tilde\kappa` of the scores clipped to the label range, with the labels' own
    :math:`a, b` (:meth:`qwkboost.objectives.ExtendedQWK.metric`); :math:`f = \tfrac12\sum w(p - y)^2`,
    :math:`g = \tfrac12(\sum w(p - a)^2 + bW)` and :math:`n = W` are the round's state at :math:`p`, the
    scores clipped only if the objective clips (:meth:`~qwkboost.objectives.ExtendedQWK.round_state`); the
    fingerprint is :func:`fingerprint`'s of the rows' (score, label) pairs."""
    f0, off, lo, hi, a, b = consts[0], consts[1], consts[2], consts[3], consts[4], consts[5]
    clip, ma, mb = consts[6] > 0.0, consts[7], consts[8]
    weighted = weight.size > 0
    sf = 0.0
    sg = 0.0
    mr = 0.0
    ms = 0.0
    total = 0.0
    for i in range(approx.size):
        s = (f0 + approx[i]) + off
        y = target[i] + off
        pm = min(max(s, lo), hi)
        p = pm if clip else s
        w = weight[i] if weighted else 1.0
        sf += w * (p - y) * (p - y)
        sg += w * (p - a) * (p - a)
        mr += w * (pm - y) * (pm - y)
        ms += w * (pm - ma) * (pm - ma)
        total += w
    n = total if weighted else np.float64(approx.size)
    metric = 1.0 - mr / (ms + mb * n)
    return metric, 0.5 * sf, 0.5 * (sg + b * n), n, fingerprint(approx.view(np.uint64), label_bits)
