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

**Categorical features** (columns of category codes, whole numbers >= 0, see
:class:`qwkboost.data.features.FeatureSchema`) are not cut: each level (category)
is a bin of its own. A column with codes below ``max_bin`` keeps today's dense
bins, bin = code. A column with more levels follows LightGBM's rule
(``bin.cpp``): ``max_bin`` is a floor, not a ceiling. Levels are taken by
falling count (ties by code) while they cover less than 99 % of the non-missing
training rows or fewer than ``max_bin - 1`` have been taken, stopping at the
first level with fewer than ``min_data_in_bin`` rows (the two most frequent are
always taken); the levels taken get bins in code order, the rarest rest share
one bin after them. Missing values and codes the training data never had go to
the missing bin.

A column whose bins do not fit in a byte (more than :data:`MAX_BINS` value bins)
is *wide*: its codes are ``uint16``, value bins ``0 .. K-1`` and the missing
code ``K``, at most :data:`MAX_WIDE_BINS` value bins. Every other column keeps
the packed ``uint8`` codes; :meth:`BinMapper.transform` returns a plain
``uint8`` array when no column is wide, and a :class:`CodeMatrix` otherwise.
For every feature the missing code is the last of its ``n_codes_`` codes.

Codes are stored feature-major, shape ``(n_features, n_samples)``, so that one
feature's codes are contiguous: the histogram stage reads them one feature at
a time.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BinMapper", "CodeMatrix", "n_codes_of", "MISSING_BIN", "MAX_BINS", "N_CODES", "MAX_WIDE_BINS",
           "MAX_CATEGORY", "CATEGORY_COVERAGE"]

MISSING_BIN = 255
MAX_BINS = 255
N_CODES = 256  # value bins plus the missing bin: the codes of a uint8 column, the width of its histogram
MAX_WIDE_BINS = 65_535  # value bins of a wide (uint16) categorical column; its missing code is the next
MAX_CATEGORY = 2 ** 31 - 1  # largest category code (LightGBM's limit: an int32)
CATEGORY_COVERAGE = 0.99  # a wide categorical's bins cover this share of the training rows (LightGBM's)


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


class CodeMatrix:
    """Feature-major bin codes where some features (wide categoricals) need 16 bits.

    ``codes[f]`` is feature ``f``'s codes over the rows, ``uint8`` or ``uint16``;
    ``codes.shape`` is ``(n_features, n_samples)``, as for a plain code array.

    Attributes
    ----------
    narrow : ndarray of uint8, shape (n_features, n_samples)
        Codes of the other features; the rows of wide features are zero and never read.
    wide : dict of int to ndarray of uint16
        Codes of each wide feature.
    n_codes : ndarray of int, shape (n_features,)
        Codes per feature, the missing code (the last) included: 256 for a ``uint8`` feature.
    """

    def __init__(self, narrow: np.ndarray, wide: dict, n_codes: np.ndarray):
        self.narrow = narrow
        self.wide = wide
        self.n_codes = np.asarray(n_codes, dtype=np.int64)

    @property
    def shape(self) -> tuple[int, int]:
        return self.narrow.shape

    def __getitem__(self, f) -> np.ndarray:
        w = self.wide.get(int(f))
        return self.narrow[f] if w is None else w


def n_codes_of(codes, f: int) -> int:
    """Codes of feature ``f`` in ``codes`` (a plain ``uint8`` array or a :class:`CodeMatrix`), missing included."""
    return int(codes.n_codes[f]) if isinstance(codes, CodeMatrix) else N_CODES


class BinMapper:
    """Quantile bins per feature, a bin per level of a categorical one; ``transform`` maps floats to codes.

    Parameters
    ----------
    max_bin : int, default 255
        Maximum number of value bins per numeric feature, in ``[2, 255]``; for a
        categorical feature with more levels, the floor of LightGBM's rule (module docstring).
    subsample : int, default 200_000
        Fit the numeric edges on at most this many randomly chosen rows.
    seed : int, default 0
        Seed of that subsample.
    min_data_in_bin : int, default 3
        A categorical feature with more levels than ``max_bin`` stops taking levels of its own
        at the first with fewer training rows (LightGBM's ``min_data_in_bin``).

    Attributes
    ----------
    edges_ : list of ndarray
        Sorted cut points per feature; bin ``t`` holds ``edges_[j][t-1] <= x < edges_[j][t]``
        (empty for a categorical feature).
    n_bins_ : ndarray of int
        Number of value bins per feature (``len(edges_[j]) + 1``; bins of levels for a categorical one).
    cat_levels_, cat_bins_ : dict of int to ndarray
        For each categorical feature, its training levels (sorted codes) and the bin of each.
    n_codes_ : ndarray of int
        Codes per feature, the missing code (the last) included: 256, or ``n_bins_ + 1`` for a wide feature.
    """

    def __init__(self, max_bin: int = MAX_BINS, subsample: int = 200_000, seed: int = 0, min_data_in_bin: int = 3):
        if isinstance(max_bin, bool) or int(max_bin) != max_bin or not 2 <= max_bin <= MAX_BINS:
            raise ValueError(f"max_bin must be an integer in [2, {MAX_BINS}]; got {max_bin!r}")
        if isinstance(min_data_in_bin, bool) or int(min_data_in_bin) != min_data_in_bin or min_data_in_bin < 1:
            raise ValueError(f"min_data_in_bin must be an integer >= 1; got {min_data_in_bin!r}")
        self.max_bin = int(max_bin)
        self.subsample = int(subsample)
        self.seed = seed
        self.min_data_in_bin = int(min_data_in_bin)

    def fit(self, X: np.ndarray, categorical=(), names=None) -> "BinMapper":
        """Fit edges on ``X`` of shape (n_samples, n_features); NaN is ignored.

        ``categorical`` lists the columns holding category codes (whole numbers in
        ``[0, 2**31 - 1]``, NaN missing); their bins are fitted on every row, so that no
        level is missed. ``names`` (one per column) name the columns in errors.

        Raises
        ------
        ValueError
            For a categorical column with a negative, fractional or too large code, or
            with more levels to keep than :data:`MAX_WIDE_BINS` bins can code.
        """
        X = np.asarray(X, dtype=np.float64)
        full = X
        n = X.shape[0]
        if n > self.subsample:
            rng = np.random.default_rng(self.seed)
            X = X[np.sort(rng.choice(n, self.subsample, replace=False))]
        cat = {int(j) for j in categorical}
        self.edges_ = []
        self.cat_levels_, self.cat_bins_ = {}, {}
        for j in range(X.shape[1]):
            if j in cat:
                name = f"{names[j]!r} (column {j})" if names is not None else str(j)
                self.cat_levels_[j], self.cat_bins_[j] = self._category_bins(full[:, j], name)
                self.edges_.append(np.empty(0))
                continue
            col = X[:, j]
            self.edges_.append(_feature_edges(col[~np.isnan(col)], self.max_bin))
        self._set_n_bins()
        return self

    def _category_bins(self, col: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
        """``(levels, bins)`` of one categorical column (module docstring)."""
        codes = col[~np.isnan(col)]
        if codes.size and (not np.all(np.isfinite(codes)) or codes.min() < 0 or codes.max() > MAX_CATEGORY
                           or np.any(codes != np.round(codes))):
            bad = codes[~np.isfinite(codes) | (codes < 0) | (codes > MAX_CATEGORY) | (codes != np.round(codes))]
            raise ValueError(f"categorical feature {name} must hold category codes, whole numbers in "
                             f"[0, {MAX_CATEGORY}] (NaN missing); got {float(bad[0])!r}")
        if not codes.size:
            return np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
        top = int(codes.max())
        if top < self.max_bin:
            # dense bins: bin = code up to the largest; codes training never had have an empty bin, but as levels
            # only the codes seen, so that an unseen code goes to the missing bin as every other unseen code does
            seen = np.unique(codes.astype(np.int64))
            return seen, seen.copy()
        levels, counts = np.unique(codes.astype(np.int64), return_counts=True)
        order = np.lexsort((levels, -counts))                   # most frequent first, ties by code
        c = counts[order]
        before = np.cumsum(c) - c                               # rows covered before each level
        i = np.arange(c.size)
        cut = int(np.floor(CATEGORY_COVERAGE * codes.size + 0.5))
        take = ((before < cut) | (i < self.max_bin - 1)) & ((c >= self.min_data_in_bin) | (i <= 1))
        n_keep = int(np.argmin(take)) if not take.all() else c.size
        n_bins = n_keep + (n_keep < c.size)
        if n_bins > MAX_WIDE_BINS:
            raise ValueError(f"categorical feature {name} has {n_keep:,} levels with at least {self.min_data_in_bin} "
                             f"rows to keep, more than the {MAX_WIDE_BINS:,} bins a column can code; drop it, "
                             "or group its levels")
        kept = np.zeros(levels.size, dtype=bool)
        kept[order[:n_keep]] = True
        bins = np.full(levels.size, n_keep, dtype=np.int64)     # the rarest rest share the last bin
        bins[kept] = np.arange(n_keep)                          # levels taken: bins in code order
        return levels, bins

    def _set_n_bins(self) -> None:
        self.n_bins_ = np.array([int(self.cat_bins_[j].max()) + 1 if j in self.cat_bins_ else e.size + 1
                                 for j, e in enumerate(self.edges_)], dtype=np.int64)

    @property
    def n_codes_(self) -> np.ndarray:
        """Codes per feature, the missing code (the last) included: 256, or ``n_bins_ + 1`` for a wide one."""
        nb = np.asarray(self.n_bins_, dtype=np.int64)
        return np.where(nb > MAX_BINS, nb + 1, N_CODES)

    @property
    def categorical(self) -> list[int]:
        """The categorical features, by position."""
        return sorted(getattr(self, "cat_bins_", {}))

    @property
    def wide(self) -> list[int]:
        """The features whose codes need 16 bits (more than :data:`MAX_BINS` value bins)."""
        return [int(j) for j in np.flatnonzero(self.n_bins_ > MAX_BINS)]

    @property
    def n_features(self) -> int:
        return len(self.edges_)

    def transform(self, X: np.ndarray):
        """Codes of shape ``(n_features, n_samples)``: ``uint8``, C-contiguous, or a :class:`CodeMatrix`
        when a feature is wide.

        NaN maps to the missing code (:data:`MISSING_BIN` for a ``uint8`` feature); values beyond the
        last edge fall in the last bin; a category code the training data never had is missing.
        """
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"X must have shape (n, {self.n_features}); got {X.shape}")
        codes = np.empty((X.shape[1], X.shape[0]), dtype=np.uint8)
        wide = {}
        presort = X.shape[0] <= 100_000
        cat_bins = getattr(self, "cat_bins_", {})
        for j, e in enumerate(self.edges_):
            col = X[:, j]
            if j in cat_bins:
                out = self._category_codes(j, col)
                if out.dtype == np.uint8:
                    codes[j] = out
                else:
                    codes[j] = 0
                    wide[j] = out
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
        return codes if not wide else CodeMatrix(codes, wide, self.n_codes_)

    def _category_codes(self, j: int, col: np.ndarray) -> np.ndarray:
        """Codes of categorical feature ``j``: its level's bin, or the missing code."""
        levels, bins = self.cat_levels_[j], self.cat_bins_[j]
        nb = int(self.n_bins_[j])
        wide = nb > MAX_BINS
        missing = nb if wide else MISSING_BIN
        out = np.full(col.size, missing, dtype=np.uint16 if wide else np.uint8)
        # whole numbers among the levels only: NaN, unseen and fractional codes stay missing
        if levels[-1] - levels[0] + 1 == levels.size:
            ok = (col >= levels[0]) & (col <= levels[-1]) & (col == np.floor(col))
            out[ok] = bins[col[ok].astype(np.int64) - levels[0]]
        else:
            idx = np.searchsorted(levels, col).clip(0, levels.size - 1)
            ok = levels[idx] == col
            out[ok] = bins[idx[ok]]
        return out

    def fit_transform(self, X: np.ndarray):
        return self.fit(X).transform(X)

    def bin_upper_value(self, feature: int, b: int) -> float:
        """The threshold of the split ``bin <= b``, i.e. ``x < edges_[feature][b]`` (inf past the last cut)."""
        e = self.edges_[feature]
        return float(e[b]) if b < e.size else float("inf")

    def to_dict(self) -> dict:
        d = {"max_bin": self.max_bin, "subsample": self.subsample, "seed": self.seed,
             "min_data_in_bin": self.min_data_in_bin, "edges": [e.tolist() for e in self.edges_]}
        if getattr(self, "cat_bins_", None):
            d["categorical"] = {str(j): m.tolist() for j, m in self.cat_bins_.items()}
            # levels other than 0, 1, ..., k-1 are written beside their bins
            sparse = {str(j): lv.tolist() for j, lv in self.cat_levels_.items()
                      if not (lv[0] == 0 and lv[-1] == lv.size - 1)}
            if sparse:
                d["categorical_levels"] = sparse
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "BinMapper":
        """Bins from :meth:`to_dict`; raises :class:`ValueError` for malformed edges or levels."""
        m = cls(d["max_bin"], d["subsample"], d["seed"], d.get("min_data_in_bin", 3))
        try:
            m.edges_ = [np.asarray(e, dtype=np.float64) for e in d["edges"]]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"bin edges must be lists of numbers ({exc})") from None
        for j, e in enumerate(m.edges_):
            if e.ndim != 1 or e.size > MAX_BINS - 1 or not np.all(np.isfinite(e)) or np.any(np.diff(e) <= 0):
                raise ValueError(f"bin edges of feature {j} must be at most {MAX_BINS - 1} increasing finite numbers")
        m.cat_levels_, m.cat_bins_ = {}, {}
        sparse = d.get("categorical_levels") or {}
        for k, v in (d.get("categorical") or {}).items():
            try:
                j, bins = int(k), np.asarray(v, dtype=np.int64)
                levels = np.asarray(sparse[k], dtype=np.int64) if k in sparse else np.arange(bins.size)
            except (TypeError, ValueError):
                raise ValueError("categorical bins must map feature indices to lists of bins") from None
            if not 0 <= j < len(m.edges_) or bins.ndim != 1 or bins.size == 0 or bins.min() < 0 \
                    or bins.max() >= MAX_WIDE_BINS or m.edges_[j].size or levels.shape != bins.shape \
                    or np.any(np.diff(levels) <= 0) or levels[0] < 0:
                raise ValueError(f"categorical bins of feature {k} must be a list of bins in [0, {MAX_WIDE_BINS}) "
                                 "for a feature without edges, one per increasing level")
            m.cat_levels_[j], m.cat_bins_[j] = levels, bins
        m._set_n_bins()
        return m
