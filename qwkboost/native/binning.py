r"""Stage 1: quantile binning of the features into ``uint8`` codes.

Every feature :math:`j` gets sorted cut points :math:`e_{j,0} < \dots < e_{j,k_j-2}`
and a value :math:`x` falls in bin

.. math:: b_j(x) = \#\{c : e_{j,c} \le x\}, \qquad\text{so}\qquad b_j(x) \le t \iff x < e_{j,t}.

A split "bin :math:`\le t`" is therefore XGBoost's threshold rule :math:`x < e_{j,t}`.
Missing values (NaN) get a bin of their own, :data:`MISSING_BIN` = 255, above
every value bin, so at most :data:`MAX_BINS` = 255 value bins fit in a byte.

The cut points are data values, as in XGBoost's ``hist``: with at most
``max_bin`` distinct values, every distinct value but the smallest (each value
gets its own bin); otherwise the order statistics at (0-based) ranks
:math:`\lfloor c_0 + i\,(n - c_0 - c_1)/\text{max\_bin} \rfloor`, :math:`i = 1 \dots \text{max\_bin}-1`,
where :math:`c_0, c_1` count the rows at the minimum and at the maximum: the
``max_bin``-quantiles between the two end values, at the ranks an exact
weighted quantile summary (XGBoost's sketch, on small data) picks, computed on a random subsample of at most
``subsample`` rows.

**Categorical features** (columns of category codes 0, 1, ..., see
:class:`qwkboost.data.features.FeatureSchema`) are not cut: each category is a bin
of its own. With more than ``max_bin`` categories, the ``max_bin - 1`` most
frequent keep their own bins and the rest share the last one (LightGBM also
bins rare categories together). Codes the training data never had go to the
missing bin.

Codes are stored feature-major, shape ``(n_features, n_samples)``, so that one
feature's codes are contiguous: the histogram stage reads them one feature at
a time.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BinMapper", "MISSING_BIN", "MAX_BINS", "N_CODES"]

MISSING_BIN = 255
MAX_BINS = 255
N_CODES = 256  # value bins plus the missing bin, the width of every histogram


def _feature_edges(x: np.ndarray, max_bin: int) -> np.ndarray:
    """Cut points for one feature's finite values ``x`` (may be empty)."""
    if x.size == 0:
        return np.empty(0)
    distinct = np.unique(x)
    if distinct.size <= max_bin:
        return distinct[1:]                      # every distinct value its own bin
    xs = np.sort(x)
    n = xs.size
    # weighted-rank targets between the minimum's and the maximum's runs (an exact quantile sketch)
    c_min = int(np.searchsorted(xs, xs[0], side="right"))
    c_max = n - int(np.searchsorted(xs, xs[-1], side="left"))
    t = c_min + np.arange(1, max_bin) * ((n - c_max - c_min) / max_bin)
    edges = np.unique(xs[np.clip(np.floor(t).astype(np.int64), 0, n - 1)])
    return edges[edges > distinct[0]]            # a cut at the minimum would leave bin 0 empty


class BinMapper:
    """Quantile bins per feature; ``transform`` maps floats to ``uint8`` codes.

    Parameters
    ----------
    max_bin : int, default 255
        Maximum number of value bins per feature, in ``[2, 255]``.
    subsample : int, default 200_000
        Fit the edges on at most this many randomly chosen rows.
    seed : int, default 0
        Seed of that subsample.

    Attributes
    ----------
    edges_ : list of ndarray
        Sorted cut points per feature; bin ``t`` holds ``edges_[j][t-1] <= x < edges_[j][t]``
        (empty for a categorical feature).
    n_bins_ : ndarray of int
        Number of value bins per feature (``len(edges_[j]) + 1``; categories for a categorical one).
    cat_bins_ : dict of int to ndarray
        For each categorical feature, the bin of every category code.
    """

    def __init__(self, max_bin: int = MAX_BINS, subsample: int = 200_000, seed: int = 0):
        if isinstance(max_bin, bool) or int(max_bin) != max_bin or not 2 <= max_bin <= MAX_BINS:
            raise ValueError(f"max_bin must be an integer in [2, {MAX_BINS}]; got {max_bin!r}")
        self.max_bin = int(max_bin)
        self.subsample = int(subsample)
        self.seed = seed

    def fit(self, X: np.ndarray, categorical=()) -> "BinMapper":
        """Fit edges on ``X`` of shape (n_samples, n_features); NaN is ignored.

        ``categorical`` lists the columns holding category codes (whole numbers >= 0);
        their bins are fitted on every row, so that no category is missed.
        """
        X = np.asarray(X, dtype=np.float64)
        full = X
        n = X.shape[0]
        if n > self.subsample:
            rng = np.random.default_rng(self.seed)
            X = X[np.sort(rng.choice(n, self.subsample, replace=False))]
        cat = {int(j) for j in categorical}
        self.edges_ = []
        self.cat_bins_ = {}
        for j in range(X.shape[1]):
            if j in cat:
                self.cat_bins_[j] = self._category_bins(full[:, j], j)
                self.edges_.append(np.empty(0))
                continue
            col = X[:, j]
            self.edges_.append(_feature_edges(col[~np.isnan(col)], self.max_bin))
        self._set_n_bins()
        return self

    def _category_bins(self, col: np.ndarray, j: int) -> np.ndarray:
        codes = col[~np.isnan(col)]
        if codes.size and (codes.min() < 0 or np.any(codes != np.round(codes))):
            raise ValueError(f"categorical feature {j} must hold category codes (whole numbers >= 0, NaN missing)")
        counts = np.bincount(codes.astype(np.int64)) if codes.size else np.zeros(1, dtype=np.int64)
        k = counts.size
        if k <= self.max_bin:
            return np.arange(k, dtype=np.int64)
        # the most frequent categories keep their own bins, the rest share the last
        out = np.full(k, self.max_bin - 1, dtype=np.int64)
        top = np.argsort(-counts, kind="stable")[: self.max_bin - 1]
        out[np.sort(top)] = np.arange(self.max_bin - 1)
        return out

    def _set_n_bins(self) -> None:
        self.n_bins_ = np.array([int(self.cat_bins_[j].max()) + 1 if j in self.cat_bins_ else e.size + 1
                                 for j, e in enumerate(self.edges_)], dtype=np.int64)

    @property
    def categorical(self) -> list[int]:
        """The categorical features, by position."""
        return sorted(getattr(self, "cat_bins_", {}))

    @property
    def n_features(self) -> int:
        return len(self.edges_)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Codes of shape ``(n_features, n_samples)``, ``uint8``, C-contiguous.

        NaN maps to :data:`MISSING_BIN`; values beyond the last edge fall in the last bin.
        """
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"X must have shape (n, {self.n_features}); got {X.shape}")
        codes = np.empty((X.shape[1], X.shape[0]), dtype=np.uint8)
        presort = X.shape[0] <= 100_000
        cat_bins = getattr(self, "cat_bins_", {})
        for j, e in enumerate(self.edges_):
            col = X[:, j]
            if j in cat_bins:
                m = cat_bins[j]
                ok = (col >= 0) & (col < m.size)             # NaN and unseen codes: the missing bin
                out = np.full(col.size, MISSING_BIN, dtype=np.uint8)
                out[ok] = m[col[ok].astype(np.int64)]
                codes[j] = out
                continue
            # NaN sorts after every edge, so it lands at len(e); patch it to MISSING_BIN
            if presort:
                # binary search on sorted queries is branch-predictable: ~3x faster up to ~1e5 rows
                order = np.argsort(col)
                codes[j, order] = np.searchsorted(e, col[order], side="right")
            else:
                codes[j] = np.searchsorted(e, col, side="right")
            nan = np.isnan(col)
            if nan.any():
                codes[j][nan] = MISSING_BIN
        return codes

    def fit_transform(self, X: np.ndarray) -> np.ndarray:
        return self.fit(X).transform(X)

    def bin_upper_value(self, feature: int, b: int) -> float:
        """The threshold of the split ``bin <= b``, i.e. ``x < edges_[feature][b]`` (inf past the last cut)."""
        e = self.edges_[feature]
        return float(e[b]) if b < e.size else float("inf")

    def to_dict(self) -> dict:
        d = {"max_bin": self.max_bin, "subsample": self.subsample, "seed": self.seed,
             "edges": [e.tolist() for e in self.edges_]}
        if getattr(self, "cat_bins_", None):
            d["categorical"] = {str(j): m.tolist() for j, m in self.cat_bins_.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "BinMapper":
        """Bins from :meth:`to_dict`; raises :class:`ValueError` for malformed edges."""
        m = cls(d["max_bin"], d["subsample"], d["seed"])
        try:
            m.edges_ = [np.asarray(e, dtype=np.float64) for e in d["edges"]]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"bin edges must be lists of numbers ({exc})") from None
        for j, e in enumerate(m.edges_):
            if e.ndim != 1 or e.size > MAX_BINS - 1 or not np.all(np.isfinite(e)) or np.any(np.diff(e) <= 0):
                raise ValueError(f"bin edges of feature {j} must be at most {MAX_BINS - 1} increasing finite numbers")
        m.cat_bins_ = {}
        for k, v in (d.get("categorical") or {}).items():
            try:
                j, bins = int(k), np.asarray(v, dtype=np.int64)
            except (TypeError, ValueError):
                raise ValueError("categorical bins must map feature indices to lists of bins") from None
            if not 0 <= j < len(m.edges_) or bins.ndim != 1 or bins.size == 0 or bins.min() < 0 \
                    or bins.max() >= MAX_BINS or m.edges_[j].size:
                raise ValueError(f"categorical bins of feature {k} must be a list of bins in [0, {MAX_BINS}) "
                                 "for a feature without edges")
            m.cat_bins_[j] = bins
        m._set_n_bins()
        return m
