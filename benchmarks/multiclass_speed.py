"""Ordinal objectives with several outputs: ms per boosting round on every engine, beside the engines'
built-in multiclass, in one run.

    python benchmarks/multiclass_speed.py                 # 80,000 x 5 rows, K = 4, 60 rounds, 3 repeats
    python benchmarks/multiclass_speed.py --repeats 1 --rows 20000

The DSB2019 article's quartile data (K = 4 classes), one training fold of 80,000 rows, an eval set of
20,000 rows scored every round (as cross-validation does), trees of depth 5 with at most 32 leaves on every
engine (LightGBM's other limits as in ``native_speed.py``), learning rate 0.1. Each configuration runs in a fresh process
(``qwkboost.train`` from a plain ``import qwkboost``, 2 threads), the configurations interleaved; a
configuration's figure is the median gap between progress callbacks over rounds 6..60, best of the repeats.
Built-in rows use the engine's own ``multi:softprob`` / ``multiclass`` objective and log-loss metric
without ``qwkboost``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import machine  # noqa: E402

CONFIGS = [("lightgbm", "builtin"), ("xgboost", "builtin")] + [
    (engine, objective) for objective in ("multiclass", "ordinal_logit", "soft_qwk")
    for engine in ("lightgbm", "xgboost", "native")]

CHILD = r"""
import json, sys, time
import numpy as np
engine, objective, rows, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
from qwkboost.data.sources import quartiles
ds = quartiles(n_train=rows + rows // 4, n_test=10)
X, y = ds.X_train[:rows], ds.y_train[:rows]
Xv, yv = ds.X_train[rows:], ds.y_train[rows:]
stamps = []
# one tree shape for every engine, as in native_speed.py: depth 5, at most 32 leaves
SHAPE = {"native": {"max_depth": 5}, "xgboost": {"max_depth": 5},
         "lightgbm": {"max_depth": 5, "num_leaves": 32, "min_data_in_leaf": 1, "min_sum_hessian_in_leaf": 1.0,
                      "lambda_l2": 1.0}}
if objective == "builtin":
    from threadpoolctl import threadpool_limits
    if engine == "lightgbm":
        import lightgbm as lgb
        cb = lambda env: stamps.append(time.perf_counter())
        lgb.train({"objective": "multiclass", "num_class": 4, "num_threads": 2, "verbose": -1, "learning_rate": 0.1,
                   **SHAPE["lightgbm"]},
                  lgb.Dataset(X, y), rounds, valid_sets=[lgb.Dataset(Xv, yv)], callbacks=[cb])
    else:
        import xgboost as xgb
        class CB(xgb.callback.TrainingCallback):
            def after_iteration(self, model, epoch, evals_log):
                stamps.append(time.perf_counter())
                return False
        xgb.train({"objective": "multi:softprob", "num_class": 4, "nthread": 2, "learning_rate": 0.1,
                   "tree_method": "hist", "eval_metric": "mlogloss", **SHAPE["xgboost"]},
                  xgb.DMatrix(X, label=y), rounds, evals=[(xgb.DMatrix(Xv, label=yv), "valid")],
                  callbacks=[CB()], verbose_eval=False)
else:
    import qwkboost as qb
    params = {"learning_rate": 0.1, **SHAPE[engine]}
    qb.train(X, y, engine, objective, params, num_boost_round=rounds, eval_set=(Xv, yv), n_jobs=2,
             callbacks=[lambda r, e: stamps.append(time.perf_counter())])
gaps = np.diff(stamps)[5:]
print(json.dumps({"ms": float(np.median(gaps) * 1e3)}))
"""


def run(engine: str, objective: str, rows: int, rounds: int) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD, engine, objective, str(rows), str(rounds)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["ms"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=80_000)
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    m0 = machine()
    best: dict = {}
    for _ in range(args.repeats):
        for eng, obj in CONFIGS:                       # interleaved: a busy spell hits every configuration
            ms = run(eng, obj, args.rows, args.rounds)
            best[(eng, obj)] = min(best.get((eng, obj), float("inf")), ms)
    lgb_builtin = best[("lightgbm", "builtin")]
    print(f"## ms per round, {args.rows:,} x 5 rows, K = 4, eval set of {args.rows // 4:,} rows "
          f"(best of {args.repeats}, a fresh process per run)\n")
    print("| objective | LightGBM | XGBoost | native | native / LightGBM built-in |")
    print("|---|---:|---:|---:|---:|")
    print(f"| built-in multiclass / multi:softprob | {lgb_builtin:.1f} | {best[('xgboost', 'builtin')]:.1f} | | |")
    for obj in ("multiclass", "ordinal_logit", "soft_qwk"):
        row = [best[(e, obj)] for e in ("lightgbm", "xgboost", "native")]
        print(f"| `{obj}` | {row[0]:.1f} | {row[1]:.1f} | {row[2]:.1f} | {row[2] / lgb_builtin:.2f}x |")
    print(f"\nmachine: {json.dumps({**m0, 'loadavg_end': os.getloadavg()})}")


if __name__ == "__main__":
    main()
