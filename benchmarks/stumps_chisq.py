"""Depth-1 stumps on the chi-square data, test MSE against the number of trees 1..100, native vs XGBoost.

    python benchmarks/stumps_chisq.py [--plot benchmarks/stumps_chisq.png]

As a from-scratch GBDT tutorial would, every point retrains from scratch with ``m`` trees
(m = 1..100) on Y = sum of X_i^2 over 10 N(0,1) features, 2,000 rows split
80/20. Settings are a plain XGBoost call (``max_depth=1``, otherwise
defaults: learning rate 0.3, lambda 1), for both engines, through
``qwkboost.train`` with squared error (both start from the label mean).
The native engine has at most 255 value bins (a byte, with a code kept for
missing values), so the reference with the same settings is XGBoost with
``max_bin=255``; XGBoost's default 256 bins is shown too.

Also shown:

* ``native, XGBoost's cuts``: the native engine given XGBoost's own 255-bin
  cut points, to separate the learner from the binning;
* ``native Friedman``: a from-scratch implementation's model, i.e. Friedman's (2001) algorithm
  with learning rate 1 and each leaf refit to the mean residual
  (``refit="leaves"``, ``reg_lambda=0``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import xgboost as xgb  # noqa: E402

import qwkboost as qb  # noqa: E402
from qwkboost.data.sources import chisq  # noqa: E402
from qwkboost.native.binning import BinMapper  # noqa: E402
from qwkboost.native.boosting import train_booster  # noqa: E402
from qwkboost.objectives import get as get_objective  # noqa: E402

STUMP = {"max_depth": 1, "learning_rate": 0.3}


def xgboost_cuts(X: np.ndarray) -> BinMapper:
    d = xgb.QuantileDMatrix(X, max_bin=255)
    ptr, cuts = (np.asarray(a) for a in d.get_quantile_cut())
    bm = BinMapper()
    bm.edges_ = [cuts[ptr[f] + 1: ptr[f + 1] - 1].astype(np.float64) for f in range(X.shape[1])]
    bm.n_bins_ = np.array([e.size + 1 for e in bm.edges_])
    return bm


def curve(fit, ms, Xte, yte):
    """Retrain for every m (as a from-scratch tutorial does); return test MSEs and the total seconds."""
    t0 = time.perf_counter()
    out = []
    for m in ms:
        pred = fit(m).predict(Xte)
        out.append(float(np.mean((pred - yte) ** 2)))
    return np.array(out), time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-trees", type=int, default=100)
    ap.add_argument("--plot", help="write the curves to this PNG")
    args = ap.parse_args()
    ds = chisq()
    X, y, Xte, yte = ds.X_train, ds.y_train, ds.X_test, ds.y_test
    ms = np.arange(1, args.max_trees + 1)
    Xf = X.astype(np.float32).astype(np.float64)
    cuts = xgboost_cuts(Xf)

    class Wrap:
        def __init__(self, b):
            self.b = b

        def predict(self, Z):
            return self.b.predict(Z)

    fits = {
        "xgboost hist": lambda m: qb.train(X, y, engine="xgboost", objective="squared_error",
                                           params={**STUMP, "max_bin": 255, "nthread": 1},
                                           num_boost_round=int(m)),
        "xgboost hist, 256 bins": lambda m: qb.train(X, y, engine="xgboost", objective="squared_error",
                                                     params={**STUMP, "nthread": 1}, num_boost_round=int(m)),
        "native": lambda m: qb.train(X, y, engine="native", objective="squared_error", params=STUMP,
                                     num_boost_round=int(m)),
        "native, XGBoost's cuts": lambda m: Wrap(train_booster(
            Xf, y, get_objective("squared_error").fit(y), STUMP, int(m), bin_mapper=cuts)[0]),
        "native Friedman (lr 1, leaf refit)": lambda m: qb.train(
            X, y, engine="native", objective="squared_error",
            params={"max_depth": 1, "learning_rate": 1.0, "reg_lambda": 0.0, "min_child_weight": 0.0,
                    "refit": "leaves"}, num_boost_round=int(m)),
    }
    res, secs = {}, {}
    for name, fit in fits.items():
        fit(1)                                                    # imports and first-call costs
        res[name], secs[name] = curve(fit, ms, Xte.astype(np.float32).astype(np.float64) if "cuts" in name else Xte, yte)
    # one training of 100 rounds with staged predictions gives the same curve
    t0 = time.perf_counter()
    model = qb.train(X, y, engine="native", objective="squared_error", params=STUMP, num_boost_round=int(ms[-1]))
    staged = np.array([np.mean((p - yte) ** 2) for p in model.booster.staged_predict(Xte)])
    secs["native, one run + staged predictions"] = time.perf_counter() - t0
    assert np.allclose(staged, res["native"]), "staged predictions differ from retraining"

    ratio = res["native"] / res["xgboost hist"]
    ratio_cuts = res["native, XGBoost's cuts"] / res["xgboost hist"]
    ratio_256 = res["native"] / res["xgboost hist, 256 bins"]
    show = [m for m in (1, 2, 3, 5, 10, 20, 30, 50, 75, 100) if m <= ms[-1]]
    print(f"chi-square data: {len(y)} train / {len(yte)} test rows, depth-1 stumps, learning rate 0.3\n")
    print("| trees | " + " | ".join(res) + " | native / xgboost (255 bins) |")
    print("|---:|" + "---:|" * (len(res) + 1))
    for m in show:
        i = m - 1
        print(f"| {m} | " + " | ".join(f"{v[i]:.3f}" for v in res.values()) + f" | {ratio[i]:.4f} |")
    print(f"\nnative / xgboost test MSE over m = 1..{ms[-1]}: max |ratio - 1| = {np.abs(ratio - 1).max():.4f}, "
          f"mean |ratio - 1| = {np.abs(ratio - 1).mean():.4f}, at m = {ms[-1]}: {ratio[-1]:.4f}")
    print(f"native / xgboost with 256 bins: max |ratio - 1| = {np.abs(ratio_256 - 1).max():.4f}, "
          f"at m = {ms[-1]}: {ratio_256[-1]:.4f}")
    print(f"native with XGBoost's 255-bin cut points / xgboost 255 bins: max |ratio - 1| = "
          f"{np.abs(ratio_cuts - 1).max():.2e}")
    print("\nseconds for the whole experiment (retraining for every m):")
    for k, v in secs.items():
        print(f"  {k}: {v:.2f} s")
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4))
        for k, v in res.items():
            ax.plot(ms, v, label=k, lw=1.2)
        ax.set_xlabel("number of trees")
        ax.set_ylabel("test MSE")
        ax.set_yscale("log")
        ax.set_title("depth-1 stumps on Y = sum X_i^2 (chi-square data)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
