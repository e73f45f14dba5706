r"""Cut points that turn continuous scores into ordinal classes ``0..K-1``.

A cut vector :math:`t_1 \le \dots \le t_{K-1}` maps a score :math:`s` to

.. math:: c(s) = \#\{k : t_k \le s\}, \quad\text{i.e. class } k \iff t_k \le s < t_{k+1}
   \quad (t_0 = -\infty,\ t_K = +\infty).

Four ways to choose the cuts:

``round``
    :math:`t_k = k - \tfrac12` (rounding to the nearest label, clipped to ``0..K-1``).
``exact``
    The globally optimal monotone labelling for QWK (:func:`fit_exact`).
``nelder_mead``
    Kaggle's "OptimizedRounder": Nelder--Mead on :math:`-\kappa` from the
    rounding cuts (:func:`fit_nelder_mead`), a local search.
``distribution``
    Cut the scores at the cumulative label proportions (:func:`fit_distribution`).

Why an exact method exists. With weights :math:`(i-j)^2`, QWK of a labelling
:math:`c` against labels :math:`y` (see :mod:`qwkboost.evaluation.metrics`) is

.. math:: \kappa(c) = 1 - \frac{N(c)}{D(c)}, \qquad
   N(c) = \sum_i (c_i - y_i)^2, \qquad
   D(c) = \sum_i \left((c_i - a)^2 + b\right),
   :label: qwk-ratio

with :math:`a, b` the mean and population variance of :math:`y`. Both are sums
of per-sample terms, so :math:`\min N/D` over monotone labellings is a
fractional programme that Dinkelbach's method solves exactly through a
sequence of *additive* problems, each a dynamic programme.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from qwkboost.evaluation.metrics import extended_qwk_ratio, weighted_mean_var
from qwkboost.validation import check_1d, check_labels, check_same_length, check_weight, shown

__all__ = [
    "METHODS",
    "apply_thresholds",
    "round_cuts",
    "fit_exact",
    "fit_nelder_mead",
    "fit_distribution",
    "fit_thresholds",
    "nested_classes",
]

METHODS = ("round", "exact", "nelder_mead", "distribution")

_MAX_DINKELBACH_ITER = 100
#: More classes than this are not an ordinal scale (and K - 1 cuts would not fit in memory long before).
MAX_CLASSES = 1_000_000


# --------------------------------------------------------------------------- checks

def _check_n_classes(n_classes, y: np.ndarray | None = None) -> int:
    """Validate ``n_classes`` (or infer it as ``max(y) + 1``)."""
    top = None if y is None else int(y.max())
    if n_classes is None:
        if y is None:
            raise ValueError("n_classes is required")
        if top + 1 > MAX_CLASSES:
            raise ValueError(f"y has class index {top}: the thresholds work on class indices 0..K-1 with K at most "
                             f"{MAX_CLASSES:,}; subtract the lowest label first")
        return max(top + 1, 2)
    ok = (isinstance(n_classes, (int, np.integer, float, np.floating))
          and not isinstance(n_classes, (bool, np.bool_))
          and np.isfinite(n_classes) and n_classes == int(n_classes) and 2 <= n_classes <= MAX_CLASSES)
    if not ok:
        raise ValueError(f"n_classes must be an integer in [2, {MAX_CLASSES:,}]; got {n_classes!r}")
    n_classes = int(n_classes)
    if top is not None and n_classes <= top:
        raise ValueError(f"n_classes={n_classes} is too small: y has label {top}, so n_classes must be >= {top + 1}")
    return n_classes


#: The exact method's dynamic programme holds K arrays of one value per distinct score.
MAX_DP_BYTES = 2 ** 30


def _check_fit_inputs(scores, y, n_classes, sample_weight=None):
    """Common checks of the ``fit_*`` functions; return ``(scores, y, K, weight)``."""
    s = check_1d(scores, "scores")
    yy = check_labels(y, "y")
    check_same_length(s, yy, "scores", "y")
    w = check_weight(sample_weight, yy.size)
    if w is not None:
        keep = w > 0                     # rows of weight 0 do not count
        s, yy, w = s[keep], yy[keep], w[keep]
    if yy.min() == yy.max():
        raise ValueError(
            f"y contains a single class ({int(yy[0])}); QWK is undefined when the labels do not vary, "
            "so there is nothing to fit thresholds against")
    return s, yy, _check_n_classes(n_classes, yy), w


def _check_cuts(cuts, name: str = "cuts", n: int | None = None) -> np.ndarray:
    c = check_1d(cuts, name)
    if n is not None and c.size != n:
        raise ValueError(f"{name} must have n_classes - 1 = {n} values; got {c.size}")
    if c.size > 1 and np.any(np.diff(c) < 0):
        first = int(np.flatnonzero(np.diff(c) < 0)[0])
        raise ValueError(f"{name} must be non-decreasing; {name}[{first}]={shown(c[first])} > "
                         f"{name}[{first + 1}]={shown(c[first + 1])}")
    return c


# --------------------------------------------------------------------------- simple methods

def apply_thresholds(scores, cuts, classes=None) -> np.ndarray:
    r"""Classes of ``scores`` under ``cuts``: :math:`c(s) = \#\{k : t_k \le s\}`.

    Class ``k`` is :math:`t_k \le s < t_{k+1}` (``cuts[k-1] <= s < cuts[k]``),
    which is ``np.searchsorted(cuts, scores, side="right")``.

    Parameters
    ----------
    scores : array-like of float, shape (n,)
        Finite scores.
    cuts : array-like of float, shape (K-1,)
        Non-decreasing cut points (equal cuts leave a class empty).
    classes : array-like, shape (K,), optional
        The labels the classes stand for, lowest first, e.g. the ``classes``
        of a run's ``thresholds.json`` (``[1, 2, 3, 4, 5]``). Given, the
        result is on the labels' own scale; else it is the class index.

    Returns
    -------
    ndarray, shape (n,)
        Class indices ``0..K-1`` (int64), or ``classes[index]``.

    Raises
    ------
    ValueError
        If ``scores`` or ``cuts`` is empty or not finite, ``cuts`` decreases,
        or ``classes`` does not have one more entry than ``cuts``.

    Examples
    --------
    Cut points from a run's ``thresholds.json`` are on the labels' scale, and
    so are the classes it lists:

    >>> apply_thresholds([0.9, 2.6, 4.8], [1.5, 2.5, 3.5, 4.5], classes=[1, 2, 3, 4, 5])
    array([1, 3, 5])
    >>> apply_thresholds([0.9, 2.6, 4.8], [1.5, 2.5, 3.5, 4.5])
    array([0, 2, 4])
    """
    s = check_1d(scores, "scores")
    c = _check_cuts(cuts)
    idx = np.searchsorted(c, s, side="right").astype(np.int64)
    if classes is None:
        return idx
    labels = np.asarray(classes)
    if labels.ndim != 1 or labels.size != c.size + 1:
        raise ValueError(f"classes must list one label per class, {c.size + 1} for {c.size} cuts; "
                         f"got {labels.size}")
    return labels[idx]


def round_cuts(n_classes: int) -> np.ndarray:
    r"""Rounding cuts :math:`t_k = k - \tfrac12`, ``[0.5, 1.5, ..., K-1.5]``.

    Applied with :func:`apply_thresholds` this is rounding to the nearest label,
    clipped to ``0..K-1`` (a score of exactly ``k + 0.5`` goes up).

    Raises
    ------
    ValueError
        If ``n_classes`` is not an integer >= 2.
    """
    k = _check_n_classes(n_classes)
    return np.arange(1, k, dtype=np.float64) - 0.5


def fit_distribution(scores, y, n_classes: int | None = None, sample_weight=None) -> np.ndarray:
    r"""Cut the scores at the label proportions of ``y`` (distribution matching).

    With :math:`m_k = \#\{i : y_i \le k\}` the cut :math:`t_{k+1}` is put between
    the :math:`m_k`-th and :math:`(m_k+1)`-th smallest scores, i.e. at the
    empirical quantile of the scores at the cumulative proportion
    :math:`m_k / n`; so exactly :math:`m_k` scores fall below it. Tied scores
    cannot be split: the cut goes to the nearest boundary between distinct
    scores (the lower one on a draw). Empty boundaries are placed as in
    :func:`fit_exact`.

    Parameters
    ----------
    scores : array-like of float, shape (n,)
    y : array-like of int, shape (n,)
        Labels ``0..K-1`` with at least two classes.
    n_classes : int, optional
        K; default ``max(y) + 1``.
    sample_weight : array-like, optional
        Row weights: proportions and counts are weighted sums.

    Returns
    -------
    ndarray of float, shape (K-1,)
        Strictly increasing cuts (see :func:`fit_exact` for the rare exception).
    """
    s, yy, k, w = _check_fit_inputs(scores, y, n_classes, sample_weight)
    u, inv, counts = np.unique(s, return_inverse=True, return_counts=True)
    if w is not None:
        counts = np.bincount(inv, weights=w, minlength=u.size)    # weighted counts
    cc = np.concatenate([[0], np.cumsum(counts)])          # samples below boundary t, t = 0..G
    m = np.cumsum(np.bincount(yy, weights=w, minlength=k))[:-1]   # target counts below each cut
    # nearest group boundary to each m_k (lower on a draw); monotone in m_k
    hi = np.searchsorted(cc, m, side="left")
    lo = np.maximum(hi - 1, 0)
    hi = np.minimum(hi, cc.size - 1)
    pos = np.where(m - cc[lo] <= cc[hi] - m, lo, hi)
    return _cuts_from_positions(u, pos, k)


def fit_nelder_mead(scores, y, n_classes: int | None = None, init=None, sample_weight=None) -> np.ndarray:
    r"""Kaggle's "OptimizedRounder": Nelder--Mead on :math:`-\kappa` over the cuts.

    Minimises :math:`-\kappa(c(\cdot\,; \mathrm{sort}(t)))` with
    ``scipy.optimize.minimize(method="nelder-mead")`` (SciPy's default options)
    from :func:`round_cuts` or ``init``, and returns the sorted result. The
    objective is piecewise constant in :math:`t`, so this is a local,
    derivative-free search with no optimality guarantee -- the baseline that
    :func:`fit_exact` is compared against. :math:`\kappa` is evaluated with
    eq. :eq:`qwk-ratio`.

    Parameters
    ----------
    scores : array-like of float, shape (n,)
    y : array-like of int, shape (n,)
    n_classes : int, optional
    init : array-like of float, shape (K-1,), optional
        Starting cuts; default ``round_cuts(K)``.
    sample_weight : array-like, optional
        Row weights of the (weighted) QWK.

    Returns
    -------
    ndarray of float, shape (K-1,)
        Sorted cuts.
    """
    s, yy, k, w = _check_fit_inputs(scores, y, n_classes, sample_weight)
    x0 = round_cuts(k) if init is None else _check_cuts(init, "init", k - 1)
    yf = yy.astype(np.float64)
    a, b = weighted_mean_var(yf, w)

    def loss(t):
        c = np.searchsorted(np.sort(t), s, side="right").astype(np.float64)
        return -(1.0 - extended_qwk_ratio(yf, c, a, b, w))     # -kappa, eq. (qwk-ratio)

    from scipy import optimize  # slow to import: scipy.optimize (only the Nelder-Mead fit needs it)

    res = optimize.minimize(loss, x0, method="nelder-mead")
    return np.sort(np.asarray(res.x, dtype=np.float64))


# --------------------------------------------------------------------------- exact method

def _group(s: np.ndarray, y: np.ndarray, w: np.ndarray | None = None):
    """Distinct sorted scores ``u`` and per-group (weighted) count, sum and sum of squares of ``y``.

    Integers (exact) without weights or with whole-numbered weights; floats otherwise.
    """
    u, inv, cnt = np.unique(s, return_inverse=True, return_counts=True)
    g = u.size
    yw = y if w is None else y * w
    if w is not None:
        cnt = np.bincount(inv, weights=w, minlength=g)
    s1 = np.bincount(inv, weights=yw, minlength=g)
    s2 = np.bincount(inv, weights=yw * y, minlength=g)
    if w is None or np.all(w == np.round(w)) and float(w.sum()) * float(np.max(y)) ** 2 < 2 ** 53:
        return u, np.rint(cnt).astype(np.int64), np.rint(s1).astype(np.int64), np.rint(s2).astype(np.int64)
    return u, cnt, s1, s2


def _ratio(pos, cnt, s1, s2, n, sy, sy2) -> Fraction:
    r"""Exact :math:`N/D` of eq. :eq:`qwk-ratio` for the labelling given by boundary positions.

    Integer arithmetic: :math:`N = \sum c^2 - 2\sum c y + \sum y^2` and
    :math:`nD = n\sum c^2 - 2 (\sum y)(\sum c) + n \sum y^2`
    (since :math:`n(a^2 + b) = \sum y^2`).
    """
    c = np.searchsorted(pos, np.arange(cnt.size), side="right").astype(np.int64)  # class of each group
    exact = Fraction if cnt.dtype.kind == "i" else (lambda v: Fraction(float(v)))   # float sums with real weights
    sc = exact(int(cnt @ c) if cnt.dtype.kind == "i" else cnt @ c)
    sc2 = exact(int(cnt @ (c * c)) if cnt.dtype.kind == "i" else cnt @ (c * c))
    scy = exact(int(s1 @ c) if cnt.dtype.kind == "i" else s1 @ c)
    n, sy, sy2 = exact(n), exact(sy), exact(sy2)
    num = sc2 - 2 * scy + sy2
    den = n * sc2 - 2 * sy * sc + n * sy2
    return n * num / den


def _dp(lam: float, cum_n: np.ndarray, cum_s1: np.ndarray, a: float, k: int) -> np.ndarray:
    r"""Boundary positions minimising :math:`\sum_i [(c_i-y_i)^2 - \lambda((c_i-a)^2+b)]` over monotone :math:`c`.

    Write the labelling by boundaries :math:`0 \le p_1 \le \dots \le p_{K-1} \le G`
    (groups :math:`[p_k, p_{k+1})` get class :math:`k`). With
    :math:`C_k(p)` the summed cost of class :math:`k` on groups :math:`< p`, the
    total telescopes to a constant plus :math:`\sum_{k=1}^{K-1} \Delta_k(p_k)`,

    .. math:: \Delta_k(p) = C_{k-1}(p) - C_k(p)
       = 2 S_1(p) + (1-2k)\, S_0(p) - \lambda\,(1 - 2k + 2a)\, S_0(p),

    where :math:`S_0, S_1` are the prefix count and prefix label sum (the
    :math:`y^2` and :math:`b` terms cancel). The DP
    :math:`h_1 = \Delta_1`, :math:`h_k(p) = \Delta_k(p) + \min_{q \le p} h_{k-1}(q)`
    is a running minimum over all :math:`G+1` positions per class: :math:`O(GK)`,
    vectorised over groups.
    """
    hs = []
    run = None
    for j in range(1, k):
        delta = 2.0 * cum_s1 + (1 - 2 * j) * cum_n - lam * (1 - 2 * j + 2 * a) * cum_n
        h = delta if run is None else delta + run
        hs.append(h)
        run = np.minimum.accumulate(h)
    # backtrack: last boundary at the global argmin, each earlier one at the argmin to its left
    pos = np.empty(k - 1, dtype=np.int64)
    lim = cum_n.size
    for j in range(k - 2, -1, -1):
        pos[j] = int(np.argmin(hs[j][:lim]))
        lim = pos[j] + 1
    return pos


def _fit_exact_positions(s: np.ndarray, y: np.ndarray, k: int, w: np.ndarray | None = None):
    """Dinkelbach loop; return ``(u, positions, kappa as Fraction, iterations)``."""
    u, cnt, s1, s2 = _group(s, y, w)
    total = int if cnt.dtype.kind == "i" else float
    n, sy, sy2 = total(cnt.sum()), total(s1.sum()), total(s2.sum())
    a = sy / n
    cum_n = np.concatenate([[0.0], np.cumsum(cnt, dtype=np.float64)])
    cum_s1 = np.concatenate([[0.0], np.cumsum(s1, dtype=np.float64)])
    # start from a feasible labelling: rounding (monotone in the scores)
    best = np.searchsorted(u, round_cuts(k), side="left").astype(np.int64)
    lam = _ratio(best, cnt, s1, s2, n, sy, sy2)
    it = 0
    for it in range(1, _MAX_DINKELBACH_ITER + 1):
        pos = _dp(float(lam), cum_n, cum_s1, a, k)
        r = _ratio(pos, cnt, s1, s2, n, sy, sy2)
        if r >= lam:            # min_c N - lam D >= 0 (up to rounding): lam is optimal
            break
        best, lam = pos, r
    return u, best, 1 - lam, it


def _cuts_from_positions(u: np.ndarray, pos: np.ndarray, k: int) -> np.ndarray:
    r"""Cut values for boundary positions ``pos`` (non-decreasing, in ``0..G``) between distinct scores ``u``.

    A boundary at ``0 < p < G`` lies in the gap :math:`(u_{p-1}, u_p]`; ``m``
    cuts sharing a gap (``m - 1`` empty classes) are spread evenly at
    :math:`u_{p-1} + \frac{j}{m+1}(u_p - u_{p-1})`, :math:`j = 1..m` -- the
    midpoint when ``m = 1``. Boundaries at ``0`` (or ``G``) use the virtual gap
    :math:`(u_0 - w, u_0)` (or :math:`(u_{G-1}, u_{G-1} + w)`) with
    :math:`w = (u_{G-1} - u_0)/(K-1)`, the width of one class if the scores
    spread over the classes (``w = max(1, |u_0|)`` when all scores are equal).
    """
    g = u.size
    w = (u[-1] - u[0]) / (k - 1) if g > 1 else max(1.0, abs(float(u[0])))
    w = max(w, 16 * k * np.spacing(max(abs(u[0]), abs(u[-1]))))   # a few ulps at least
    cuts = np.empty(pos.size, dtype=np.float64)
    i = 0
    while i < pos.size:
        p = int(pos[i])
        m = int(np.sum(pos[i:] == p))
        lo = u[p - 1] if p > 0 else u[0] - w
        hi = u[p] if p < g else u[g - 1] + w
        frac = np.arange(1, m + 1) / (m + 1)
        c = lo + frac * (hi - lo)
        # keep every cut in (lo, hi] so the labelling is reproduced; binds only in gaps of a few ulps
        c = np.minimum(np.maximum(c, np.nextafter(lo, np.inf)), hi)
        cuts[i:i + m] = c
        i += m
    return cuts


def fit_exact(scores, y, n_classes: int | None = None, sample_weight=None) -> np.ndarray:
    r"""Globally optimal monotone cut points for QWK.

    Maximises :math:`\kappa = 1 - N(c)/D(c)` (eq. :eq:`qwk-ratio`) over every
    labelling :math:`c` that is non-decreasing in the score (equal scores get
    equal classes), i.e. over every cut vector.

    Method (Dinkelbach). With :math:`\lambda^\star = \min_c N(c)/D(c)` and
    :math:`D > 0` (``y`` has two classes, so :math:`b > 0`),

    .. math:: F(\lambda) = \min_c \; N(c) - \lambda D(c)
       = \min_c \sum_i \left[(c_i - y_i)^2 - \lambda\left((c_i - a)^2 + b\right)\right]

    is zero exactly at :math:`\lambda = \lambda^\star`. Starting from
    :math:`\lambda_0 = N/D` of rounding, iterate :math:`c_{t+1} = \arg\min F(\lambda_t)`,
    :math:`\lambda_{t+1} = N(c_{t+1})/D(c_{t+1})` until :math:`\lambda` stops
    decreasing; each :math:`\lambda_t` is the ratio of a feasible labelling, so
    the sequence is strictly decreasing over a finite set and ends at
    :math:`\lambda^\star` (superlinearly; a handful of iterations in practice).

    Each :math:`\arg\min F(\lambda)` is a dynamic programme over the
    :math:`G \le n` groups of tied scores and the K classes, :math:`O(GK)`
    after an :math:`O(n \log n)` sort, written as K-1 running minima over all
    groups at once (see ``_dp``). Ratios are compared in exact integer
    arithmetic; only the DP's cost uses floating point, so the result is exact
    unless two labellings' QWK differ by less than about 1e-12 relative.

    Cut placement. Where the class changes between consecutive distinct scores
    :math:`u_{p-1} < u_p` the cut is their midpoint. Classes the optimum leaves
    empty still get strictly increasing cuts: cuts sharing a gap are spread
    evenly inside it, and cuts below the lowest (above the highest) score are
    placed inside a virtual gap one class-width :math:`w = (u_{G-1}-u_0)/(K-1)`
    wide. Only a gap narrower than a few floating-point ulps can force equal cuts.

    Parameters
    ----------
    scores : array-like of float, shape (n,)
        Finite scores, e.g. out-of-fold predictions.
    y : array-like of int, shape (n,)
        Labels ``0..K-1`` with at least two classes.
    n_classes : int, optional
        K; default ``max(y) + 1``.
    sample_weight : array-like, optional
        Row weights: the counts and sums of the ratio become weighted sums, so the
        cuts maximise the weighted QWK. Whole-numbered weights keep the
        comparisons exact; other weights compare float sums.

    Returns
    -------
    ndarray of float, shape (K-1,)
        Cuts; ``apply_thresholds(scores, cuts)`` is the optimal labelling.

    Raises
    ------
    ValueError
        On NaN/inf scores, non-integer or negative labels, length mismatch,
        empty input, a single class in ``y`` or ``n_classes`` too small.

    References
    ----------
    W. Dinkelbach, "On nonlinear fractional programming", Management Science 13(7), 1967.
    """
    s, yy, k, w = _check_fit_inputs(scores, y, n_classes, sample_weight)
    groups = np.unique(s).size
    if 8 * (groups + 1) * k > MAX_DP_BYTES:
        low = int(yy.min())
        hint = (f"y holds class indices {low}..{int(yy.max())}, so the first {low} classes are empty: pass "
                f"y - {low} and apply_thresholds(..., classes=range({low}, {int(yy.max()) + 1})); or "
                if low > 0 else "")
        raise ValueError(f"the exact method would need {8 * (groups + 1) * k / 2**30:.1f} GiB for {k} classes and "
                         f"{groups} distinct scores; {hint}round the scores (e.g. to 4 decimals)")
    u, pos, _, _ = _fit_exact_positions(s, yy, k, w)
    return _cuts_from_positions(u, pos, k)


# --------------------------------------------------------------------------- dispatcher

def fit_thresholds(method: str, scores, y, n_classes: int | None = None, sample_weight=None) -> np.ndarray:
    """Fit cuts by ``method``, one of ``"round"``, ``"exact"``, ``"nelder_mead"``, ``"distribution"``.

    ``"round"`` ignores the scores but still validates the inputs and infers
    ``K`` from ``y``.

    Raises
    ------
    ValueError
        For an unknown method (the message lists the choices) or bad input.
    """
    if method not in METHODS:
        raise ValueError(f"unknown thresholds method {method!r}; choose one of: {', '.join(METHODS)}")
    if method == "round":
        _, _, k, _ = _check_fit_inputs(scores, y, n_classes, sample_weight)
        return round_cuts(k)
    if method == "exact":
        return fit_exact(scores, y, n_classes, sample_weight)
    if method == "nelder_mead":
        return fit_nelder_mead(scores, y, n_classes, sample_weight=sample_weight)
    return fit_distribution(scores, y, n_classes, sample_weight)


def nested_classes(method: str, scores, y, fold, n_classes: int | None = None, sample_weight=None) -> np.ndarray:
    r"""Classes of every row under cut points fitted without that row's fold.

    For each fold :math:`k` of ``fold`` (a fold index per row), cuts are fitted
    by ``method`` on the rows of the other folds and applied to fold :math:`k`.
    QWK of the result is an honest estimate of the cut points' test QWK: the
    *optimism* of a threshold fit is its in-sample QWK minus this one.

    Raises
    ------
    ValueError
        For fewer than two folds, or a length that differs from ``scores``.
    """
    s = check_1d(scores, "scores")
    yy = check_labels(y, "y")
    f = np.asarray(fold)
    check_same_length(s, f, "scores", "fold")
    check_same_length(s, yy, "scores", "y")
    w = check_weight(sample_weight, s.size)
    ids = np.unique(f)
    if ids.size < 2:
        raise ValueError("fold must hold at least two folds")
    k = _check_n_classes(n_classes, yy)
    out = np.empty(s.size, dtype=np.int64)
    for v in ids:
        held = f == v
        fit = ~held
        cuts = fit_thresholds(method, s[fit], yy[fit], n_classes=k, sample_weight=None if w is None else w[fit])
        out[held] = apply_thresholds(s[held], cuts)
    return out
