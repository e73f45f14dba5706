r"""Stage 6: the boosting loop, and :class:`NativeBooster`, the trained model.

Newton boosting (XGBoost): starting from the objective's :math:`F_0`, round
:math:`m` computes :math:`g_i, h_i` at :math:`F_{m-1}`, grows a tree with
leaf weights :math:`w_j^* = -G_j/(H_j + \lambda)` and adds it shrunk:

.. math:: F_m(x) = F_{m-1}(x) + \eta\, f_m(x).

**Refit** (Friedman, "Greedy function approximation: a gradient boosting machine", 2001, Algorithm 1). The Newton weights use the
objective's hessian, which for a non-convex loss such as extended QWK is a
stand-in (a constant). ``refit`` re-estimates the tree's output on the
objective's true :meth:`~qwkboost.objectives.Objective.loss` :math:`L` before
shrinkage:

``"step"``
    One step size for the whole tree, :math:`\rho_m = \arg\min_{\rho \ge 0} L(y, F_{m-1} + \rho f_m)`
    (Friedman's line search), then :math:`F_m = F_{m-1} + \eta\,\rho_m f_m`.
``"leaves"``
    Every leaf value, :math:`\gamma_{jm} = \arg\min_{\gamma} L(y, F_{m-1} + \sum_j \gamma_j 1[x \in R_{jm}])`
    (Friedman's per-region step). The loss need not be separable, so the
    leaves are moved together: ``refit_iter`` times, a Newton direction from
    the objective's gradients at the current point, then a line search on
    :math:`L` along it. Monotone bounds are kept by clipping.

Measured on the DSB2019 article's data (``benchmarks/native_refit.py``, results in
``benchmarks/RESULTS.md``): neither refit improves test QWK for extended QWK;
at learning rate 0.1 they change it by less than 0.001, and at larger rates
the bigger, line-searched steps overfit sooner.

Early stopping follows the objective's metric on the eval set; the model keeps
every round it trained and remembers the best.
"""

from __future__ import annotations

import json
from typing import Callable, NamedTuple

import numpy as np
from scipy.optimize import minimize_scalar
from threadpoolctl import threadpool_limits

from qwkboost.callback import EarlyStopException, EarlyStopping, RoundFunction, run_callbacks
from qwkboost.native.binning import MAX_BINS, MISSING_BIN, BinMapper
from qwkboost.native.bundling import make_layout
from qwkboost.native.grower import GrowerParams, grow_tree
from qwkboost.native.histogram import HistogramBuilder
from qwkboost.native.params import resolve_params
from qwkboost.native.predictor import EnsemblePredictor, Tree
from qwkboost.native.sampling import column_mask, goss, goss_active, row_subsample
from qwkboost.native.splitting import FlatBins, SplitParams
from qwkboost.validation import check_features

__all__ = ["NativeBooster", "NativeFit", "train_booster", "boost", "FORMAT"]

FORMAT = "qwkboost-native"
#: 2 added n_outputs (one tree per output per round) and a vector initial score; 3 categorical columns
#: with more levels than ``max_bin`` (their levels beside their bins, 16-bit codes) and LightGBM's
#: categorical split limits. Versions 1 and 2 still load.
FORMAT_VERSION = 3


class NativeBooster:
    """A trained native model: bin edges, trees, parameters and :math:`F_0`.

    Attributes
    ----------
    bin_mapper : BinMapper
    trees : list of Tree
        Leaf values already multiplied by the learning rate (and refit step).
    params : dict
        Resolved training parameters.
    init_score : float or ndarray of shape (n_outputs,)
        :math:`F_0`.
    n_features : int
    best_iteration : int
        Rounds to use by default (1-based).
    n_outputs : int
        Scores per row; each round grows one tree per output, stored round by round
        (tree ``r * n_outputs + k`` is round ``r``'s tree of output ``k``).
    """

    def __init__(self, bin_mapper: BinMapper, trees: list[Tree], params: dict, init_score,
                 n_features: int, best_iteration: int | None = None, n_outputs: int = 1):
        self.bin_mapper = bin_mapper
        self.trees = trees
        self.params = params
        self.n_outputs = int(n_outputs)
        self.init_score = float(init_score) if self.n_outputs == 1 else np.asarray(init_score, dtype=np.float64)
        self.n_features = int(n_features)
        self.best_iteration = self.num_rounds if best_iteration is None else int(best_iteration)
        self._predictors: dict = {}

    @property
    def num_trees(self) -> int:
        return len(self.trees)

    @property
    def num_rounds(self) -> int:
        return len(self.trees) // self.n_outputs

    # -- prediction ------------------------------------------------------------
    def _codes(self, X) -> np.ndarray:
        X = check_features(X)
        if X.shape[1] != self.n_features:
            raise ValueError(f"X has {X.shape[1]} features but the model was trained on {self.n_features}")
        return self.bin_mapper.transform(X)

    def _check_iter(self, n_iter):
        n_iter = self.best_iteration if n_iter is None else int(n_iter)
        if not 0 <= n_iter <= self.num_rounds:
            raise ValueError(f"n_iter must be in [0, {self.num_rounds}]; got {n_iter}")
        return n_iter

    def output_predictor(self, k: int = 0) -> EnsemblePredictor:
        """The predictor of output ``k``'s trees (built once)."""
        trees = self.trees if self.n_outputs == 1 else self.trees[k::self.n_outputs]
        cached = self._predictors.get(k)
        if cached is None or cached[0] != len(self.trees):
            cached = self._predictors[k] = (len(self.trees), EnsemblePredictor(trees, self.n_features,
                                                                                 n_codes=self.bin_mapper.n_codes_))
        return cached[1]

    @property
    def predictor(self) -> EnsemblePredictor:
        return self.output_predictor(0)

    def predict_margin(self, X, n_iter: int | None = None) -> np.ndarray:
        r""":math:`\sum_{t \le T} f_t(x)` without :math:`F_0`; shape ``(n,)``, or ``(n, n_outputs)``."""
        n_iter = self._check_iter(n_iter)
        codes = self._codes(X)
        if self.n_outputs == 1:
            return self.predictor.predict(codes, n_iter)
        return np.stack([self.output_predictor(k).predict(codes, n_iter) for k in range(self.n_outputs)], axis=1)

    def predict(self, X, n_iter: int | None = None) -> np.ndarray:
        r""":math:`F_0 + \sum_{t \le T} f_t(x)` with :math:`T` = ``n_iter`` (default: best iteration)."""
        return self.init_score + self.predict_margin(X, n_iter)

    def staged_predict(self, X, n_iter: int | None = None):
        """Yield the prediction after each of the first ``n_iter`` rounds (default: all trees)."""
        if self.n_outputs > 1:
            raise ValueError("staged_predict gives one score per row; this model has several outputs")
        n_iter = len(self.trees) if n_iter is None else self._check_iter(n_iter)
        codes = self._codes(X)
        per_tree = self.predictor.predict_trees(codes, n_iter)
        acc = np.full(codes.shape[1], self.init_score)
        for t in range(n_iter):
            acc = acc + per_tree[:, t]
            yield acc

    def apply(self, X, n_iter: int | None = None) -> np.ndarray:
        """Leaf id of every row in every tree, shape (n_samples, n_iter)."""
        n_iter = len(self.trees) if n_iter is None else self._check_iter(n_iter)
        codes = self._codes(X)
        return np.stack([t.apply(codes) for t in self.trees[:n_iter * self.n_outputs]], axis=1) if n_iter else \
            np.zeros((codes.shape[1], 0), dtype=np.int64)

    # -- inspection ------------------------------------------------------------
    def feature_importance(self, importance_type: str = "gain", n_iter: int | None = None) -> np.ndarray:
        """Per feature: total split gain (``"gain"``), or number of splits (``"split"``)."""
        if importance_type not in ("gain", "split"):
            raise ValueError(f"importance_type must be 'gain' or 'split'; got {importance_type!r}")
        n_iter = len(self.trees) if n_iter is None else self._check_iter(n_iter)
        out = np.zeros(self.n_features)
        for t in self.trees[:n_iter * self.n_outputs]:
            internal = t.feature >= 0
            w = t.gain[internal] if importance_type == "gain" else np.ones(int(internal.sum()))
            np.add.at(out, t.feature[internal], w)
        return out

    # -- persistence -----------------------------------------------------------
    def to_dict(self) -> dict:
        params = dict(self.params)
        mono = params.get("monotone_constraints")
        params["monotone_constraints"] = None if mono is None else np.asarray(mono).tolist()
        init = self.init_score if self.n_outputs == 1 else self.init_score.tolist()
        return {"format": FORMAT, "format_version": FORMAT_VERSION, "params": params, "n_outputs": self.n_outputs,
                "init_score": init, "n_features": self.n_features,
                "best_iteration": self.best_iteration, "bins": self.bin_mapper.to_dict(),
                "trees": [t.to_dict() for t in self.trees]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, d: dict) -> "NativeBooster":
        """A booster from :meth:`to_dict`, every part checked.

        Raises
        ------
        ValueError
            For a foreign or malformed model: a missing key, a non-finite
            initial score, bins or trees that do not fit the features.
        """
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise ValueError("not a qwkboost native model")
        if d.get("format_version") not in (1, 2, FORMAT_VERSION):
            raise ValueError(f"native model format version {d.get('format_version')!r} is not supported")
        missing = [k for k in ("params", "init_score", "n_features", "best_iteration", "bins", "trees") if k not in d]
        if missing:
            raise ValueError(f"native model lacks {missing}")
        try:
            params = dict(d["params"])
            if params.get("monotone_constraints") is not None:
                params["monotone_constraints"] = np.asarray(params["monotone_constraints"], dtype=np.int64)
            n_features = d["n_features"]
            if isinstance(n_features, bool) or not isinstance(n_features, int) or n_features < 1:
                raise ValueError(f"n_features must be a positive integer; got {n_features!r}")
            k = d.get("n_outputs", 1)
            if isinstance(k, bool) or not isinstance(k, int) or k < 1:
                raise ValueError(f"n_outputs must be a positive integer; got {k!r}")
            init = np.asarray(d["init_score"], dtype=np.float64)
            if init.shape != (() if k == 1 else (k,)) or not np.all(np.isfinite(init)):
                raise ValueError(f"init_score must be {'a finite number' if k == 1 else f'{k} finite numbers'}; "
                                 f"got {d['init_score']!r}")
            bm = BinMapper.from_dict(d["bins"])
            if bm.n_features != n_features:
                raise ValueError(f"bins are given for {bm.n_features} features; the model has {n_features}")
            if not isinstance(d["trees"], list):
                raise ValueError("trees must be a list")
            trees = [Tree.from_dict(t, n_features, bm.n_codes_) for t in d["trees"]]
            if len(trees) % k:
                raise ValueError(f"{len(trees)} trees are not whole rounds of {k} outputs")
            best = d["best_iteration"]
            if isinstance(best, bool) or not isinstance(best, int) or not 0 <= best <= len(trees) // k:
                raise ValueError(f"best_iteration must be in [0, {len(trees) // k}]; got {best!r}")
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed native model: {exc}") from None
        return cls(bm, trees, params, init if k > 1 else float(init), n_features, best, k)

    @classmethod
    def from_json(cls, text: str) -> "NativeBooster":
        try:
            d = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not a qwkboost native model (invalid JSON: {exc})") from None
        return cls.from_dict(d)

    def __repr__(self) -> str:
        return (f"NativeBooster(trees={len(self.trees)}, n_outputs={self.n_outputs}, n_features={self.n_features}, "
                f"init_score={np.round(self.init_score, 6)})")


# -- refit ---------------------------------------------------------------------------------------

def _line_search(f: Callable[[float], float], rho_max: float = 1024.0) -> float:
    """argmin over rho >= 0 of f: bracket by doubling from 1, then bounded Brent."""
    f0, f1 = f(0.0), f(1.0)
    hi, fhi = 1.0, f1
    if f1 < f0:
        while hi < rho_max:
            f2 = f(2.0 * hi)
            if f2 >= fhi:
                break
            hi, fhi = 2.0 * hi, f2
        hi = 2.0 * hi
    res = minimize_scalar(f, bounds=(0.0, hi), method="bounded", options={"xatol": 1e-4 * hi})
    best = min(((0.0, f0), (1.0, f1), (float(res.x), float(res.fun))), key=lambda t: t[1])
    return best[0]


def _refit(kind: str, grown, objective, y, score, rows, p: dict, weight=None) -> None:
    """Re-estimate the unshrunk leaf values of ``grown.tree`` on ``objective.loss`` (in place)."""
    tree = grown.tree
    leaf_rows = grown.leaf_rows()
    leaves = np.array(sorted(leaf_rows), dtype=np.int64)
    ys = y if rows is None else y[rows]
    ws = weight if weight is None or rows is None else weight[rows]
    base = score if rows is None else score[rows]
    m = ys.size
    # position of each leaf's rows within the refit rows
    leaf_of = np.empty(m, dtype=np.int64)
    if rows is None:
        for k, j in enumerate(leaves):
            r = leaf_rows[j]
            leaf_of[slice(None) if r is None else r] = k
    else:
        pos = np.full(y.size, -1, dtype=np.int64)
        pos[rows] = np.arange(m)
        for k, j in enumerate(leaves):
            r = leaf_rows[j]
            leaf_of[pos[r] if r is not None else slice(None)] = k
    v = tree.value[leaves].copy()
    lo, hi = grown.lower[leaves], grown.upper[leaves]

    def loss_at(vals):
        return objective.loss(ys, base + vals[leaf_of]) if ws is None else \
            objective.loss(ys, base + vals[leaf_of], ws)

    if kind == "step":
        rho = _line_search(lambda r: loss_at(r * v))
        tree.value = tree.value * rho
        return
    lam = p["reg_lambda"]
    for _ in range(p["refit_iter"]):
        g, h = objective.grad_hess(ys, base + v[leaf_of])
        G = np.bincount(leaf_of, g, minlength=leaves.size)
        H = np.bincount(leaf_of, h, minlength=leaves.size)
        d = -G / (H + lam)
        if not np.any(d):
            break
        rho = _line_search(lambda r: loss_at(np.clip(v + r * d, lo, hi)))
        if rho == 0.0:
            break
        v = np.clip(v + rho * d, lo, hi)
    tree.value[leaves] = v


# -- training ----------------------------------------------------------------------------------------

def _metrics(objective, y, score, weight=None):
    if weight is None:
        return {objective.metric_name: float(objective.metric(y, score))}
    return {objective.metric_name: float(objective.metric(y, score, weight))}


class NativeFit(NamedTuple):
    """What :func:`train_booster` returns (a named tuple: it also unpacks in this order)."""

    booster: "NativeBooster"
    num_rounds: int
    best_iteration: int
    """1-based number of rounds to use."""
    evals_result: dict


def train_booster(X, y, objective, params: dict | None = None, num_boost_round: int = 100, eval_set=None,
                  early_stopping_rounds: int | None = None, callbacks=(), seed: int = 0,
                  bin_mapper=None, categorical=(), names=None) -> NativeFit:
    """Boost ``num_boost_round`` trees on a fitted ``objective``.

    Parameters
    ----------
    X : ndarray (n_samples, n_features)
        NaN is missing.
    y : ndarray (n_samples,)
    objective : Objective
        Fitted (``init_score_`` set).
    params : dict, optional
        See :data:`qwkboost.native.params.DEFAULTS`.
    num_boost_round : int
    eval_set : (X_val, y_val), optional
    early_stopping_rounds : int, optional
        Stop when the eval set's metric has not improved for this many rounds
        (:class:`qwkboost.callback.EarlyStopping`).
    callbacks : list of callable
        ``fn(round, {"train": {metric: value}, "valid": {...}})`` after every
        round; raising :class:`qwkboost.callback.EarlyStopException` stops training.
    seed : int
        Seeds binning subsample, row/column sampling and GOSS.
    categorical : sequence of int, optional
        Columns holding category codes (0, 1, ...; NaN missing): split by category sets.
    names : sequence of str, optional
        Column names, for errors.
    bin_mapper : BinMapper, optional
        Fitted bins to use instead of fitting them on ``X`` (e.g. another library's cut points).

    Returns
    -------
    NativeFit
        ``(booster, num_rounds, best_iteration, evals_result)``.
    """
    stopper = None
    cbs = [RoundFunction(fn) for fn in callbacks or ()]
    if early_stopping_rounds:
        if eval_set is None:
            raise ValueError("early_stopping_rounds needs an eval_set to score")
        stopper = EarlyStopping(early_stopping_rounds, objective.metric_name, objective.higher_is_better)
        cbs.append(stopper)     # after the user's callbacks: they see every round trained
    # BLAS threads only serve the objective's dot products here, and on a busy
    # machine their wake-ups stall every round by milliseconds: use one.
    with threadpool_limits(1, user_api="blas"):
        booster, stopped_at_best, evals_result = boost(X, y, objective, params, num_boost_round, eval_set, cbs,
                                                      seed, bin_mapper, categorical, names=names)
    best = stopper.best_iteration if stopper is not None and stopper.best_iteration is not None else stopped_at_best
    num_rounds = booster.num_rounds
    best_iteration = num_rounds if best is None or not num_rounds else best + 1
    booster.best_iteration = best_iteration
    return NativeFit(booster, num_rounds, best_iteration, evals_result)


def boost(X, y, objective, params, num_boost_round, eval_set, callbacks, seed, bin_mapper=None, categorical=(),
          sample_weight=None, names=None):
    """The boosting loop: ``(booster, stopped_at_best, evals_result)``.

    ``categorical`` lists the columns of category codes (categorical splits); ``names`` name the
    columns in errors.
    ``sample_weight`` (training rows) and an ``eval_set``'s third entry weigh the
    metric and the refits' loss; the objective weighs its own gradients.

    ``callbacks`` take a :class:`qwkboost.callback.CallbackEnv` after every
    round; when one raises :class:`~qwkboost.callback.EarlyStopException`,
    training stops and ``stopped_at_best`` is its 0-based best round (else ``None``).
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n, F = X.shape
    p = resolve_params(params, F)
    rng = np.random.default_rng(seed)
    categorical = sorted({int(j) for j in categorical})
    if categorical and (min(categorical) < 0 or max(categorical) >= F):
        raise ValueError(f"categorical features must be column positions in [0, {F}); got {categorical}")
    bm = bin_mapper if bin_mapper is not None else \
        BinMapper(p["max_bin"], p["bin_construct_sample_cnt"], seed, p["min_data_in_bin"]).fit(X, categorical, names)
    if bin_mapper is not None:
        if categorical and categorical != sorted(bm.categorical):
            raise ValueError(f"categorical={categorical} disagrees with bin_mapper's categorical features "
                             f"{sorted(bm.categorical)}")
        categorical = sorted(bm.categorical)           # the features the split search treats as categories
    mono = p["monotone_constraints"]
    if mono is not None and categorical and np.any(mono[categorical] != 0):
        bad = [j for j in categorical if mono[j] != 0]
        raise ValueError(f"monotone_constraints: features {bad} are categorical; categories have no order to "
                         "be monotone in")
    if bin_mapper is not None:
        nb = np.asarray(bm.n_bins_)
        if nb.size != F or nb.max(initial=1) > MAX_BINS:
            raise ValueError(f"bin_mapper must have n_bins_ for {F} features, each at most {MAX_BINS} "
                             f"(code {MISSING_BIN} is the missing bin); got {nb.size} features, "
                             f"at most {int(nb.max(initial=0))} bins")
    codes = bm.transform(X)
    has_missing = bool(np.isnan(X).any())
    layout = make_layout(codes, p["enable_bundle"], p["max_conflict_rate"], seed)
    hb = HistogramBuilder(layout.codes, p["n_jobs"], wide=zip(layout.wide_codes, layout.n_codes[bm.wide]))
    sampling = p["subsample"] < 1.0 or p["sampling_method"] == "goss"
    if not sampling:
        hb.cache_root_counts()
    gp = GrowerParams(
        split=SplitParams(p["reg_lambda"], p["reg_alpha"], p["gamma"], p["min_child_weight"],
                          p["min_samples_leaf"], p["cat_smooth"], p["cat_l2"], p["max_cat_threshold"],
                          p["max_cat_to_onehot"], p["min_data_per_group"]),
        max_depth=p["max_depth"], max_leaves=p["max_leaves"], grow_policy=p["grow_policy"], prune=p["prune"])
    fb = FlatBins(bm.n_bins_, layout, bm.categorical, {j: bm.cat_levels_[j].size for j in bm.categorical})
    K = int(getattr(objective, "n_outputs", None) or getattr(objective, "n_outputs_", 1))   # trees per round
    if p["refit"] == "auto":
        # the objective says what its hessian is: line-search the leaves where it is a stand-in
        kind = getattr(objective, "hessian_kind", "exact")
        p = {**p, "refit": "none" if kind == "exact" or K > 1 else "leaves"}
    if K > 1 and p["refit"] != "none":
        raise ValueError(f"refit={p['refit']!r} line-searches one score per row; objective {objective.name!r} has "
                         f"{K} outputs (use refit='none')")
    f0 = float(objective.init_score_) if K == 1 else np.asarray(objective.init_score_, dtype=np.float64)
    # several outputs: column-major scores, so that each output's gradients (the objectives keep the scores'
    # memory order) are a contiguous column the histograms read without a copy
    start = (lambda m: np.full(m, f0)) if K == 1 else (lambda m: np.asfortranarray(np.tile(f0, (m, 1))))
    score = start(n)
    if eval_set is not None:
        Xv, yv = np.asarray(eval_set[0], dtype=np.float64), np.asarray(eval_set[1], dtype=np.float64)
        wv = eval_set[2] if len(eval_set) > 2 else None
        codes_v = bm.transform(Xv)
        score_v = start(yv.size)
    evals_result: dict = {"train": {objective.metric_name: []}}
    if eval_set is not None:
        evals_result["valid"] = {objective.metric_name: []}
    trees: list[Tree] = []
    stopped_at_best = None
    lr = p["learning_rate"]
    update = np.empty(n)                       # each round's training-score update (every row written)
    for it in range(num_boost_round):
        g, h = objective.grad_hess(y, score)
        g = np.asarray(g, dtype=np.float64)
        h = np.asarray(h, dtype=np.float64)
        rows = None
        if p["sampling_method"] == "goss" and goss_active(it, lr):
            # (several outputs: rows ranked by the sum of their gradients' sizes, kept for every output)
            rows, w = goss(g if K == 1 else np.abs(g).sum(axis=1), p["top_rate"], p["other_rate"], rng)
            g = g.copy(); h = h.copy()
            g[rows] *= w if K == 1 else w[:, None]
            h[rows] *= w if K == 1 else w[:, None]
        elif p["subsample"] < 1.0:
            rows = row_subsample(n, p["subsample"], rng)
        fmask = column_mask(F, p["colsample_bytree"], rng)
        for k in range(K):
            gk, hk = (g, h) if K == 1 else (np.ascontiguousarray(g[:, k]), np.ascontiguousarray(h[:, k]))
            # (categorical splits need row counts: min_data_per_group, cat_smooth)
            hb.set_gradients(gk, hk, need_counts=p["min_samples_leaf"] > 1 or bool(bm.categorical))
            # set_gradients checks finiteness in passes it makes anyway; a sum may also
            # overflow with finite terms, so look element-wise before refusing
            if not hb.finite and not (np.all(np.isfinite(gk)) and np.all(np.isfinite(hk))):
                raise ValueError(f"objective {objective.name!r} returned non-finite gradients at round {it}")
            grown = grow_tree(layout, hb, bm.n_bins_, bm.edges_, gp, rows, fmask, mono, has_missing, fb)
            tree = grown.tree
            if p["refit"] != "none":
                _refit(p["refit"], grown, objective, y, score, rows, p, sample_weight)
            tree.scale(lr)
            # training scores: the leaves' row lists, or a pass over all rows when sampling
            step = grown.leaf_values(update) if rows is None else tree.predict(codes)
            if K == 1:
                score += step
            else:
                score[:, k] += step
            trees.append(tree)
        if eval_set is not None:
            # the round's trees on the eval rows at once, by bit masks (several times faster than a traversal)
            step_v = EnsemblePredictor(trees[-K:], F, n_codes=bm.n_codes_).predict_trees(codes_v)
            score_v += step_v[:, 0] if K == 1 else step_v
        evals = {"train": _metrics(objective, y, score, sample_weight)}
        if eval_set is not None:
            evals["valid"] = _metrics(objective, yv, score_v, wv)
        for k, d in evals.items():
            for mname, val in d.items():
                evals_result[k][mname].append(val)
        try:
            run_callbacks(callbacks, it, evals)
        except EarlyStopException as stop:
            stopped_at_best = stop.best_iteration
            break
    best = len(trees) // K if stopped_at_best is None else stopped_at_best + 1
    return NativeBooster(bm, trees, p, f0, F, best, K), stopped_at_best, evals_result
