"""What refitting on the true loss does for extended QWK (native engine only).

    python benchmarks/native_refit.py [--rows 100000]

Extended QWK is not convex and its hessian is a stand-in (constant, or the
Gauss-Newton curvature of its numerator), so the Newton leaf weights
-G/(H + lambda) have the wrong scale. ``refit="step"`` rescales each tree by a
line search on the objective's true loss (Friedman's rho_m), ``"leaves"``
re-estimates every leaf value on it. The DSB2019 article's protocol (quartile data,
80/20 fit / early-stopping split, max_depth 5, early stopping 100, test QWK
of rounded predictions), for several learning rates.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import qwkboost as qb  # noqa: E402
from qwkboost.data.sources import quartiles  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--learning-rates", type=float, nargs="*", default=[0.1, 0.3, 1.0])
    args = ap.parse_args()
    ds = quartiles(n_train=args.rows, n_test=args.rows)
    idx = np.random.RandomState(0).permutation(args.rows)
    cut = int(0.8 * args.rows)
    tr, va = idx[:cut], idx[cut:]
    print(f"extended QWK objective, quartile data, {args.rows:,} train / {args.rows:,} test rows, max_depth 5")
    print("| hessian | learning rate | refit | rounds | test QWK (rounded) | test extended QWK | train loss | seconds |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    with threadpool_limits(1, user_api="blas"):
        for hessian in ("constant", "gauss_newton"):
            for lr in args.learning_rates:
                for refit in ("none", "step", "leaves"):
                    t0 = time.perf_counter()
                    m = qb.train(ds.X_train[tr], ds.y_train[tr], engine="native", objective="extended_qwk",
                                 objective_params={"hessian": hessian},
                                 params={"learning_rate": lr, "max_depth": 5, "refit": refit},
                                 num_boost_round=3000, eval_set=(ds.X_train[va], ds.y_train[va]),
                                 early_stopping_rounds=100)
                    secs = time.perf_counter() - t0
                    s = m.predict(ds.X_test)
                    q = qb.qwk(ds.y_test, np.clip(np.rint(s), 0, 3))
                    e = qb.extended_qwk(ds.y_test, np.clip(s, 0, 3))
                    loss = m.objective.loss(ds.y_train[tr], m.predict(ds.X_train[tr]))
                    print(f"| {hessian} | {lr} | {refit} | {m.best_iteration} | {q:.4f} | {e:.4f} | {loss:.4f} "
                          f"| {secs:.1f} |", flush=True)


if __name__ == "__main__":
    main()
