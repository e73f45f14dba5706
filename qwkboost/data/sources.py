r"""Data sources: the DSB2019 article's quartile data, the chi-square data, user CSV/Parquet files
(:mod:`qwkboost.data.files`) and the real data sets shipped with qwkboost; the registry a config names them by.

Every loader returns a :class:`~qwkboost.data.dataset.Dataset`.
"""

from __future__ import annotations

import inspect
from math import comb, factorial
from pathlib import Path

import numpy as np

from qwkboost.data import packaged
from qwkboost.data.dataset import MAX_CLASSES, Dataset, class_range, warn_empty_classes  # noqa: F401 (re-exported)
from qwkboost.data.files import from_file, read_table  # noqa: F401 (re-exported)
from qwkboost.validation import check_int, check_real, check_seed

__all__ = ["quartiles", "latent_classes", "check_latent_classes_args", "chisq", "check_quartiles_args",
           "check_chisq_args", "SOURCES", "SOURCE_KEYS", "SOURCE_CHECKS", "dataset_path"]


def _quartile_draw(n: int, seed: int, n_features: int, n_visible: int, n_classes: int):
    rs = np.random.RandomState(seed)
    X = rs.rand(n, n_features)
    m = X.mean(axis=1)
    y = np.floor(np.argsort(np.argsort(m)) / n * n_classes)
    return X[:, :n_visible], y


def check_quartiles_args(n_train=100_000, n_test=100_000, seed=0, test_seed=1, n_features=10, n_visible=5,
                         n_classes=4) -> dict:
    """The arguments of :func:`quartiles`, checked (messages name the ``data.*`` config keys)."""
    out = {"n_train": check_int(n_train, "data.n_train", 2), "n_test": check_int(n_test, "data.n_test", 1),
           "seed": check_seed(seed, "data.seed"), "test_seed": check_seed(test_seed, "data.test_seed"),
           "n_features": check_int(n_features, "data.n_features", 1),
           "n_visible": check_int(n_visible, "data.n_visible", 1),
           "n_classes": check_int(n_classes, "data.n_classes", 2, MAX_CLASSES)}
    if out["n_visible"] > out["n_features"]:
        raise ValueError(f"data.n_visible ({n_visible}) must be <= data.n_features ({n_features})")
    if out["n_classes"] > out["n_train"]:
        raise ValueError(f"data.n_classes ({n_classes}) must be <= data.n_train ({n_train})")
    return out


def check_chisq_args(n=2000, n_features=10, test_size=0.2, seed=1) -> dict:
    """The arguments of :func:`chisq`, checked (messages name the ``data.*`` config keys)."""
    out = {"n": check_int(n, "data.n", 4), "n_features": check_int(n_features, "data.n_features", 1),
           "test_size": check_real(test_size, "data.test_size", 0.0, 1.0, lo_open=True, hi_open=True),
           "seed": check_seed(seed, "data.seed")}
    n_test = int(round(out["n"] * out["test_size"]))
    if not 0 < n_test < out["n"]:
        raise ValueError(f"data.test_size={test_size!r} of data.n={n} rows leaves {n_test} test rows and "
                         f"{out['n'] - n_test} training rows; both need at least one")
    return out


def quartiles(n_train: int = 100_000, n_test: int = 100_000, seed: int = 0, test_seed: int = 1,
              n_features: int = 10, n_visible: int = 5, n_classes: int = 4) -> Dataset:
    r"""The synthetic data of the DSB2019 article (rsakata 2020), behind its QWK table.

    ``n_features`` uniforms per row; the class is the rank-quantile of their
    mean, :math:`y = \lfloor \mathrm{rank}(\bar x)/n \cdot K \rfloor`; only the
    first ``n_visible`` columns are kept. The test set is drawn the same way
    with ``test_seed``.
    """
    n_train, n_test, seed, test_seed, n_features, n_visible, n_classes = check_quartiles_args(
        n_train, n_test, seed, test_seed, n_features, n_visible, n_classes).values()
    Xtr, ytr = _quartile_draw(n_train, seed, n_features, n_visible, n_classes)
    Xte, yte = _quartile_draw(n_test, test_seed, n_features, n_visible, n_classes)
    return Dataset(Xtr, ytr, Xte, yte, [f"x{i}" for i in range(n_visible)],
                   np.arange(n_classes, dtype=float), "quartiles")


def _irwin_hall_mean_quantiles(n_features: int, probs: np.ndarray) -> np.ndarray:
    r"""Quantiles of the mean of ``n_features`` uniforms (the Irwin-Hall distribution scaled by :math:`1/n`).

    :math:`F(s) = \frac{1}{n!}\sum_{k=0}^{\lfloor s \rfloor} (-1)^k \binom{n}{k} (s-k)^n` for the sum
    :math:`s = n\bar x` (Irwin 1927, Hall 1927), inverted by bisection to float precision.
    """

    from scipy.optimize import brentq  # slow to import: scipy.optimize

    n = n_features

    def cdf(s):
        return sum((-1) ** k * comb(n, k) * (s - k) ** n for k in range(int(np.floor(s)) + 1)) / factorial(n)

    return np.array([brentq(lambda s: cdf(s) - p, 0.0, float(n), xtol=1e-12) / n for p in probs])


def _proportions(value, n_classes: int, key: str) -> np.ndarray | None:
    if value is None:
        return None
    p = np.asarray(list(value), dtype=float)
    if p.shape != (n_classes,) or not np.all(np.isfinite(p)) or np.any(p <= 0):
        raise ValueError(f"{key} must be {n_classes} positive class proportions (one per class); got {list(value)!r}")
    return p / p.sum()


def check_latent_classes_args(n_train=20_000, n_test=20_000, seed=0, test_seed=1, n_features=10, n_visible=5,
                              n_classes=4, proportions=None, test_proportions=None, label_noise=0.0) -> dict:
    """The arguments of :func:`latent_classes`, checked (messages name the ``data.*`` config keys)."""
    out = check_quartiles_args(n_train, n_test, seed, test_seed, n_features, n_visible, n_classes)
    k = out["n_classes"]
    out["proportions"] = _proportions(proportions, k, "data.proportions")
    out["test_proportions"] = _proportions(test_proportions, k, "data.test_proportions")
    out["label_noise"] = check_real(label_noise, "data.label_noise", 0.0, 1.0, hi_open=True)
    if out["n_features"] > 60:
        raise ValueError(f"data.n_features={n_features} is too many for the exact class cut points (at most 60)")
    return out


def _latent_draw(rs: np.random.RandomState, n: int, n_features: int, n_visible: int, cuts: np.ndarray):
    X = rs.rand(n, n_features)
    return X[:, :n_visible], np.searchsorted(cuts, X.mean(axis=1)).astype(float)


def _add_label_noise(rs: np.random.RandomState, y: np.ndarray, share: float, n_classes: int) -> np.ndarray:
    moved = rs.rand(y.size) < share
    step = np.where(rs.rand(y.size) < 0.5, -1.0, 1.0)
    return np.where(moved, np.clip(y + step, 0, n_classes - 1), y)


def latent_classes(n_train: int = 20_000, n_test: int = 20_000, seed: int = 0, test_seed: int = 1,
                   n_features: int = 10, n_visible: int = 5, n_classes: int = 4, proportions=None,
                   test_proportions=None, label_noise: float = 0.0) -> Dataset:
    r"""The quartile data generalised: class proportions, label shift and label noise.

    As in :func:`quartiles`, each row has ``n_features`` uniforms of which the
    first ``n_visible`` are kept, and its class is set by the mean
    :math:`\bar x` of all of them, here at fixed cut points: the quantiles of
    :math:`\bar x`'s distribution at the cumulative ``proportions`` (equal
    classes by default). So :math:`P(y \mid x)` is one rule for both splits.

    ``test_proportions`` gives the test split other class proportions while
    :math:`P(x \mid y)` stays the same (label shift, as between the DSB2019
    training and test sets): each class keeps that share of the test rows,
    drawn from as many rows as it takes. The Dataset's ``test_prior`` then
    holds them, for methods that are given the target distribution.
    ``label_noise`` moves that share of the labels, in both splits, one class
    up or down at random (within the range), as raters who disagree do.
    """
    args = check_latent_classes_args(n_train, n_test, seed, test_seed, n_features, n_visible, n_classes,
                                     proportions, test_proportions, label_noise)
    k, nf, nv = args["n_classes"], args["n_features"], args["n_visible"]
    p = args["proportions"] if args["proportions"] is not None else np.full(k, 1.0 / k)
    cuts = _irwin_hall_mean_quantiles(nf, np.cumsum(p)[:-1])
    rs = np.random.RandomState(args["seed"])
    Xtr, ytr = _latent_draw(rs, args["n_train"], nf, nv, cuts)
    rt = np.random.RandomState(args["test_seed"])
    q = args["test_proportions"]
    if q is None:
        Xte, yte = _latent_draw(rt, args["n_test"], nf, nv, cuts)
    else:
        want = np.floor(q * args["n_test"]).astype(int)
        want[np.argmax(q)] += args["n_test"] - want.sum()
        parts_X, parts_y, have = [], [], np.zeros(k, dtype=int)
        while (have < want).any():
            Xb, yb = _latent_draw(rt, max(args["n_test"], 10_000), nf, nv, cuts)
            for c in range(k):
                take = np.flatnonzero(yb == c)[: want[c] - have[c]]
                parts_X.append(Xb[take])
                parts_y.append(yb[take])
                have[c] += take.size
        order = rt.permutation(args["n_test"])
        Xte, yte = np.concatenate(parts_X)[order], np.concatenate(parts_y)[order]
    if args["label_noise"] > 0:
        ytr = _add_label_noise(rs, ytr, args["label_noise"], k)
        yte = _add_label_noise(rt, yte, args["label_noise"], k)
    return Dataset(Xtr, ytr, Xte, yte, [f"x{i}" for i in range(nv)], np.arange(k, dtype=float), "latent_classes",
                   test_prior=None if q is None else q)


def chisq(n: int = 2000, n_features: int = 10, test_size: float = 0.2, seed: int = 1) -> Dataset:
    r"""Chi-square data: :math:`Y = \sum_{i=1}^{10} X_i^2`, :math:`X_i \sim N(0, 1)`, split 80/20.

    The features of Hastie, Tibshirani and Friedman's example (The Elements of
    Statistical Learning, 2nd ed., eq. 10.2), with the sum itself as a regression target.
    """
    n, n_features, test_size, seed = check_chisq_args(n, n_features, test_size, seed).values()
    n_test = int(round(n * test_size))
    rs = np.random.RandomState(seed)
    X = rs.normal(0.0, 1.0, size=(n, n_features))
    y = (X ** 2).sum(axis=1)
    idx = rs.permutation(n)
    te, tr = idx[:n_test], idx[n_test:]
    return Dataset(X[tr], y[tr], X[te], y[te], [f"X{i + 1}" for i in range(n_features)], None, "chisq")

#: The data sources a config can name (``data.name``), each a loader above.
SOURCES = {"quartiles": quartiles, "latent_classes": latent_classes, "chisq": chisq, "csv": from_file,
           "packaged": packaged.load}
#: The settings of each data source (``data.*`` in a config): its loader's arguments; any other key is refused.
#: (``group`` comes from ``cv.group``, not from the data group.)
SOURCE_KEYS = {name: ("_target_", "name", *(p for p in inspect.signature(fn).parameters if p != "group"))
               for name, fn in SOURCES.items()}
#: The argument checks of the generated sources, run on a config before anything is drawn.
SOURCE_CHECKS = {"quartiles": check_quartiles_args, "latent_classes": check_latent_classes_args,
                 "chisq": check_chisq_args, "packaged": packaged.check_args}

#: The real ordinal data sets shipped with qwkboost (``qwkboost/data/datasets/README.md``).
DATASETS_DIR = Path(__file__).resolve().parent / "datasets"


def dataset_path(name: str) -> str:
    """The path of a data set shipped with qwkboost (the ``${dataset:era.csv}`` resolver of the data configs)."""
    path = DATASETS_DIR / name
    if not path.is_file():
        shipped = sorted(p.name for p in DATASETS_DIR.glob("*.csv"))
        raise ValueError(f"no shipped data set {name!r}; qwkboost ships: {', '.join(shipped)}")
    return str(path)
