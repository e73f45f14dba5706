"""Native engine against XGBoost hist with the same settings: the DSB2019 article's QWK table and the chi-square data.

    python benchmarks/native_faithfulness.py [--rows 100000] [--skip-chisq] [--skip-refit]

QWK table (the article's protocol, as ``experiments/demo.py``): quartile data,
100,000 training rows (80% fit, 20% early-stopping set) and 100,000 test rows,
learning rate 0.1, max_depth 5, up to 3,000 rounds, early stopping 100,
QWK of the rounded test predictions. Both engines use 255 bins (the native
maximum) and start from the label mean through ``qwkboost.train``.

Refit: the same table rows for the native engine's ``refit="leaves"`` and
``refit="step"`` (line searches on the objective's true loss).

Chi-square data: test MSE ratio native / XGBoost for a few depths, sizes and
round counts (squared error, learning rate 0.3).
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
from qwkboost.data.sources import chisq, quartiles  # noqa: E402

BASE = {"learning_rate": 0.1, "max_depth": 5, "max_bin": 255}
ENGINE_EXTRA = {"native": {}, "xgboost": {"nthread": 2}}


def qwk_table(rows: int, refit: bool) -> list[dict]:
    ds = quartiles(n_train=rows, n_test=rows)
    idx = np.random.RandomState(0).permutation(rows)
    cut = int(0.8 * rows)
    tr, va = idx[:cut], idx[cut:]
    runs = [(e, o, "none") for e in ("xgboost", "native") for o in ("squared_error", "extended_qwk")]
    if refit:
        runs += [("native", o, r) for o in ("squared_error", "extended_qwk") for r in ("step", "leaves")]
    out = []
    for engine, objective, rf in runs:
        params = {**BASE, **ENGINE_EXTRA[engine]}
        if rf != "none":
            params["refit"] = rf
        t0 = time.perf_counter()
        m = qb.train(ds.X_train[tr], ds.y_train[tr], engine=engine, objective=objective, params=params,
                     num_boost_round=3000, eval_set=(ds.X_train[va], ds.y_train[va]), early_stopping_rounds=100)
        secs = time.perf_counter() - t0
        score = m.predict(ds.X_test)
        q = qb.qwk(ds.y_test, np.clip(np.rint(score), 0, 3))
        ext = qb.extended_qwk(ds.y_test, np.clip(score, 0, 3))
        out.append({"engine": engine, "objective": objective, "refit": rf, "rounds": m.best_iteration,
                    "qwk": q, "extended_qwk": ext, "seconds": secs, "ms_per_round": secs / m.num_rounds * 1e3})
        print(f"| {engine} | {objective} | {rf} | {m.best_iteration} | {q:.4f} | {ext:.4f} | {secs:.1f} |",
              flush=True)
    return out


def chisq_ratios() -> None:
    print("\n| rows | max_depth | rounds | native MSE | xgboost MSE | ratio |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in (2_000, 20_000):
        ds = chisq(n=n)
        for depth in (1, 3, 5):
            p = {"max_depth": depth, "learning_rate": 0.3, "max_bin": 255}
            preds = {}
            for engine in ("native", "xgboost"):
                m = qb.train(ds.X_train, ds.y_train, engine=engine, objective="squared_error",
                             params={**p, **ENGINE_EXTRA[engine]}, num_boost_round=100)
                preds[engine] = m
            for k in (10, 100):
                a, b = (np.mean((preds[e].predict(ds.X_test, num_iteration=k) - ds.y_test) ** 2)
                        for e in ("native", "xgboost"))
                print(f"| {n:,} | {depth} | {k} | {a:.4f} | {b:.4f} | {a / b:.4f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--skip-chisq", action="store_true")
    ap.add_argument("--skip-refit", action="store_true")
    args = ap.parse_args()
    with threadpool_limits(1, user_api="blas"):
        print(f"## QWK table, quartile data, {args.rows:,} train / {args.rows:,} test rows")
        print("| engine | objective | refit | rounds | test QWK (rounded) | test extended QWK | seconds |")
        print("|---|---|---|---:|---:|---:|---:|")
        res = qwk_table(args.rows, not args.skip_refit)
        for obj in ("squared_error", "extended_qwk"):
            n, x = (next(r for r in res if r["engine"] == e and r["objective"] == obj and r["refit"] == "none")
                    for e in ("native", "xgboost"))
            print(f"{obj}: native - xgboost QWK = {n['qwk'] - x['qwk']:+.4f}")
        if not args.skip_chisq:
            chisq_ratios()


if __name__ == "__main__":
    main()
