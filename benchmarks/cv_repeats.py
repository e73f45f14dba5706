"""What repeated K-fold CV (cv.repeats) costs in time and buys in steadiness, as ``experiments/run.py`` runs it.

For each number of repeats R and each of several seeds, one run of the article's data (LightGBM, squared error,
5 folds, early stopping): fit time, test QWK with exact cut points fitted on the (averaged) out-of-fold scores,
and the OOF QWK. The spread of test QWK over seeds is what a single run's number moves by.

    .venv/bin/python benchmarks/cv_repeats.py                 # R = 1, 2, 3; 8 seeds; 20,000 training rows
    .venv/bin/python benchmarks/cv_repeats.py --repeats 1 3 5 --seeds 10
"""

from __future__ import annotations

import argparse
import json
import logging
import time
import warnings

import numpy as np

from machine import machine


def run(repeats: int, seed: int, n_train: int) -> dict:
    from qwkboost.cv.crossval import cross_validate
    from qwkboost.data.sources import quartiles
    from qwkboost.runs.experiment import evaluate

    ds = quartiles(n_train=n_train, n_test=50_000, seed=seed, test_seed=10_000 + seed)
    t0 = time.perf_counter()
    cv = cross_validate(ds.X_train, ds.y_train, ds.X_test, engine="lightgbm", objective="squared_error",
                        params={"learning_rate": 0.1, "verbose": -1}, num_boost_round=2000,
                        early_stopping_rounds=100, n_splits=5, seed=seed, repeats=repeats, progress=False)
    wall = time.perf_counter() - t0
    m = evaluate(ds, cv, "exact").metrics
    return {"repeats": repeats, "seed": seed, "wall": wall, "test": m["qwk_thresholds"],
            "oof": m["qwk_thresholds_oof"], "nested": m["qwk_thresholds_oof_nested"],
            "repeat_sd": m.get("qwk_thresholds_oof_repeat_sd", float("nan"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--n-train", type=int, default=20_000)
    args = ap.parse_args()
    logging.getLogger("qwkboost").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore")
    rows = []
    for seed in range(args.seeds):          # interleaved: the machine's load hits every R alike
        for r in args.repeats:
            rows.append(run(r, seed, args.n_train))
            print(json.dumps(rows[-1]), flush=True)
    base = {row["seed"]: row for row in rows if row["repeats"] == args.repeats[0]}
    print(f"\n| repeats | wall s (median) | x {args.repeats[0]} repeat (paired median) | test QWK mean | test QWK sd over seeds | "
          "OOF QWK mean | one repeat's OOF QWK sd | test − R=1, paired mean [min, max] |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in args.repeats:
        sel = [row for row in rows if row["repeats"] == r]
        wall = np.median([s["wall"] for s in sel])           # medians: a loaded machine makes a few runs crawl
        ratio = np.median([s["wall"] / base[s["seed"]]["wall"] for s in sel])
        test = np.array([s["test"] for s in sel])
        diff = test - np.array([base[s["seed"]]["test"] for s in sel])
        print(f"| {r} | {wall:.1f} | {ratio:.2f} | {test.mean():.4f} | {test.std(ddof=1):.4f} | "
              f"{np.mean([s['oof'] for s in sel]):.4f} | {np.nanmean([s['repeat_sd'] for s in sel]):.4f} | "
              f"{diff.mean():+.4f} [{diff.min():+.4f}, {diff.max():+.4f}] |")
    print("\nmachine:", json.dumps(machine()))


if __name__ == "__main__":
    main()
