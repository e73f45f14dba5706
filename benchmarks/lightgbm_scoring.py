"""What a LightGBM cross-validation costs when its test rows are scored as each fold boosts, against predicting them
afterwards, and against LightGBM alone (issue 57: "time outside training counts").

Three ways, side by side in one process, on a packaged set's fixed split, five stratified folds:

- ``qwkboost``: :func:`qwkboost.cross_validate` as a user calls it (LightGBM's squared error, qwkboost's defaults,
  ``early_stopping_on="other_folds"``): each fold's test rows are scored as it boosts
  (:func:`qwkboost.engines.engine.train_scoring`);
- ``qwkboost_predicting``: the same with the engine's ``scores_while_training`` switched off, which is the code
  before: each fold model predicts its test rows, and its own rows at the other folds' rounds, after training;
- ``lightgbm``: LightGBM alone on the same folds with its own ``regression`` objective and early stopping, then
  ``Booster.predict`` of each fold's rows and the test rows: what the engine costs without qwkboost.

Each is timed whole (wall seconds) and split into training and predictions; every arm runs ``--repeats`` times in
turn and the median is reported. The out-of-fold and test scores of the two qwkboost arms are compared (largest
difference). Run it on one core to see what a slower machine sees::

    taskset -c 0 python benchmarks/lightgbm_scoring.py --sets movielens diamonds --threads 1 \\
        --json benchmarks/results/lightgbm_scoring.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from machine import machine  # noqa: E402


def qwkboost_cv(ds, threads: int, scoring: bool) -> dict:
    from qwkboost.cv.crossval import cross_validate
    from qwkboost.engines.lightgbm import LightGBMEngine

    LightGBMEngine.scores_while_training = scoring
    try:
        t0 = time.perf_counter()
        cv = cross_validate(ds.X_train, ds.y_train, ds.X_test, schema=ds.schema, engine="lightgbm",
                            objective="squared_error", n_splits=5, seed=0, progress=False,
                            early_stopping_on="other_folds", n_jobs=threads)
        wall = time.perf_counter() - t0
    finally:
        LightGBMEngine.scores_while_training = True
    return {"wall": wall, "training": cv.fit_seconds, "predicting": cv.predict_seconds,
            "rounds": [m.best_iteration for m in cv.models], "oof": cv.oof, "test": cv.test}


def lightgbm_cv(ds, threads: int) -> dict:
    import lightgbm as lgb

    from qwkboost import defaults
    from qwkboost.cv.folds import make_repeated_folds

    params = {**defaults.engine_params("lightgbm", "squared_error"), "objective": "regression", "verbose": -1,
              "num_threads": threads, "seed": 0}
    cat = sorted(int(j) for j in ds.schema.categorical)
    folds = make_repeated_folds(ds.y_train, 5, True, True, 0, 1, None)[0]
    training = predicting = 0.0
    oof, test, rounds = np.zeros(len(ds.y_train)), np.zeros(len(ds.X_test)), []
    t0 = time.perf_counter()
    for tr, va in folds:
        t = time.perf_counter()
        dtr = lgb.Dataset(ds.X_train[tr], ds.y_train[tr], categorical_feature=cat or "auto", free_raw_data=False)
        dva = lgb.Dataset(ds.X_train[va], ds.y_train[va], reference=dtr)
        b = lgb.train(params, dtr, 10_000, valid_sets=[dva], callbacks=[lgb.early_stopping(100, verbose=False)])
        training += time.perf_counter() - t
        t = time.perf_counter()
        oof[va] = b.predict(ds.X_train[va], num_iteration=b.best_iteration)
        test += b.predict(ds.X_test, num_iteration=b.best_iteration) / len(folds)
        predicting += time.perf_counter() - t
        rounds.append(b.best_iteration)
    return {"wall": time.perf_counter() - t0, "training": training, "predicting": predicting, "rounds": rounds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", nargs="*", default=["movielens", "diamonds"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()

    from qwkboost.data.packaged import load

    out = {"machine": machine(), "command": " ".join(sys.argv), "sets": {}}
    for name in args.sets:
        ds = load(name)
        runs: dict[str, list[dict]] = {"qwkboost": [], "qwkboost_predicting": [], "lightgbm": []}
        for _ in range(args.repeats):
            runs["qwkboost"].append(qwkboost_cv(ds, args.threads, True))
            runs["qwkboost_predicting"].append(qwkboost_cv(ds, args.threads, False))
            runs["lightgbm"].append(lightgbm_cv(ds, args.threads))
        a, b = runs["qwkboost"][0], runs["qwkboost_predicting"][0]
        row = {"rows": [len(ds.y_train), len(ds.X_test)],
               "largest_difference": {"oof": float(np.abs(a["oof"] - b["oof"]).max()),
                                      "test": float(np.abs(a["test"] - b["test"]).max())}}
        for arm, rs in runs.items():
            row[arm] = {k: round(statistics.median(r[k] for r in rs), 2) for k in ("wall", "training", "predicting")}
            row[arm]["rounds"] = rs[0]["rounds"]
        out["sets"][name] = row
        base = row["qwkboost_predicting"]["wall"]
        print(f"{name} ({row['rows'][0]:,} training rows, {row['rows'][1]:,} test rows), {args.threads} thread(s):")
        for arm in runs:
            r = row[arm]
            print(f"  {arm:20s} {r['wall']:7.2f} s  training {r['training']:7.2f} s  predictions "
                  f"{r['predicting']:6.2f} s  ({r['predicting'] / r['wall']:.0%})  {base / r['wall']:.2f}x")
        print(f"  largest difference of the two qwkboost arms: oof {row['largest_difference']['oof']:.1e}, "
              f"test {row['largest_difference']['test']:.1e}")
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
