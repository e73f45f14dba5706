"""Where a native boosting round spends its time, stage by stage.

    python benchmarks/native_profile.py [--rows 80000] [--rounds 150] [--n-jobs 1] [--objective ordinal_logit]

Same data and settings as ``native_speed.py`` (the DSB2019 article's quartiles, depth 5,
255 bins, learning rate 0.1), squared error unless ``--objective`` names another. The stages are timed by wrapping
the engine's functions (histogram builds, split searches, partitions, the
objective's gradient and metric), so the total is slightly above an
uninstrumented run. With ``--n-jobs 2`` the stage times are summed over threads.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from qwkboost.native import boosting, grower, histogram  # noqa: E402
from qwkboost.objectives import get as get_objective  # noqa: E402

from native_speed import fold  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=80_000)
    ap.add_argument("--rounds", type=int, default=150)
    ap.add_argument("--n-jobs", type=int, default=1)
    ap.add_argument("--objective", default="squared_error")
    args = ap.parse_args()
    X, y, _, _ = fold(args.rows)
    spent: collections.Counter = collections.Counter()
    calls: collections.Counter = collections.Counter()

    def wrap(owner, name, label):
        f = getattr(owner, name)

        def timed(*a, **k):
            t = time.perf_counter()
            out = f(*a, **k)
            spent[label] += time.perf_counter() - t
            calls[label] += 1
            return out
        setattr(owner, name, timed)

    obj = get_objective(args.objective).fit(y)
    wrap(histogram.HistogramBuilder, "build", "histograms of the root and large nodes (scatter-adds)")
    wrap(histogram.HistogramBuilder, "build_many", "histograms of a level's small nodes (one scatter-add per column)")
    wrap(grower.TreeGrower, "finish", "tree assembly (flat arrays from the nodes)")
    wrap(grower.TreeGrower, "_search", "split search (vectorised per level)")
    wrap(grower, "go_left", "row partitions: go-left masks (take + compare)")
    wrap(grower, "split_rows", "row partitions: row lists (np.compress)")
    wrap(grower.GrownTree, "leaf_values", "score update of the deepest level (from the masks)")
    wrap(grower, "grow_tree", "grow_tree in total")
    boosting.grow_tree = grower.grow_tree
    wrap(type(obj), "grad_hess", "objective gradient")
    wrap(type(obj), "metric", "objective metric (train)")
    stamps: list[float] = []
    with threadpool_limits(1, user_api="blas"):
        boosting.train_booster(X, y, obj, {"max_depth": 5, "learning_rate": 0.1, "n_jobs": args.n_jobs},
                               args.rounds, callbacks=[lambda r, e: stamps.append(time.perf_counter())])
    per_round = (stamps[-1] - stamps[0]) / (len(stamps) - 1) * 1e3
    R = args.rounds
    print(f"{args.rows:,} rows x 5, {args.objective}, n_jobs={args.n_jobs}: {per_round:.2f} ms per round (instrumented)\n")
    print("| stage | ms/round | share | calls/round |")
    print("|---|---:|---:|---:|")
    for label, v in spent.most_common():
        print(f"| {label} | {v / R * 1e3:.2f} | {v / R * 1e3 / per_round:.0%} | {calls[label] / R:.0f} |")
    grow = spent["grow_tree in total"] / R * 1e3
    rest = per_round - grow - (spent["objective gradient"] + spent["objective metric (train)"]) / R * 1e3
    print(f"| rest of the round (score update, sampling, bookkeeping) | {rest:.2f} | {rest / per_round:.0%} | |")


if __name__ == "__main__":
    main()
