"""qwkboost's objectives on CatBoost per boosting round, beside CatBoost's built-in RMSE, in fresh processes.

    python benchmarks/catboost_speed.py                 # 80,000 x 5 rows, a 20,000-row eval set, 60 rounds, 3 repeats
    python benchmarks/catboost_speed.py --repeats 1 --rows 20000
    python benchmarks/catboost_speed.py --multiclass      # why K-output objectives are refused on CatBoost

The DSB2019 article's quartile data, one training fold of 80,000 rows and an eval set of 20,000 rows scored
every round (as cross-validation does), CatBoost's symmetric trees of depth 6, learning rate 0.1, 2 threads.
``builtin_rmse`` is ``catboost.CatBoost`` with ``loss_function=RMSE`` and the settings qwkboost fixes
(``boosting_type=Plain``, one leaf step, no backtracking, every round scored), without qwkboost;
``builtin_rmse_defaults`` is the same with CatBoost's own defaults. ``python_loss`` is the floor of any
Python loss: RMSE written as the smallest ``calc_ders_range`` (one NumPy expression a block) with CatBoost's
built-in RMSE metric; ``python_loss_and_metric`` adds the smallest Python ``eval_metric`` (as qwkboost scores
every round). The other rows are ``qwkboost.train(..., engine="catboost")`` from a plain ``import qwkboost``. Every run is a fresh process; a run's figure is its
wall time per round over rounds 6..60 (from the after-iteration callback); configurations are interleaved and
each is repeated, a configuration's figure being the median of its repeats. The ratio is against
``builtin_rmse`` of the same repeat.

``--multiclass`` times instead what a Python loss with several scores per row costs: CatBoost calls its
``calc_ders_multi`` once per row (a softmax written as plainly as CatBoost's documentation shows it), against
its built-in ``MultiClass``, on 80,000 rows and K = 5, two iterations, setup included.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from machine import machine  # noqa: E402

CONFIGS = ("builtin_rmse", "builtin_rmse_defaults", "python_loss", "python_loss_and_metric", "squared_error",
           "extended_qwk", "ordinal_logit")

CHILD = r"""
import json, sys, time, warnings
import numpy as np
config, rows, rounds, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
from qwkboost.data.sources import quartiles
ds = quartiles(n_train=rows + rows // 4, n_test=10)
X, y = ds.X_train[:rows], ds.y_train[:rows]
Xv, yv = ds.X_train[rows:], ds.y_train[rows:]
stamps = []
if config.startswith(("builtin", "python")):
    import catboost
    warnings.filterwarnings("ignore")
    class Tick:
        def after_iteration(self, info):
            stamps.append(time.perf_counter())
            return True
    class Loss:
        def calc_ders_range(self, a, t, w):
            return np.column_stack([t - a, np.full(len(a), -1.0)])
    class Metric:
        def is_max_optimal(self):
            return False
        def evaluate(self, approxes, target, weight):
            a = np.asarray(approxes[0])
            return float(np.mean((a - np.asarray(target)) ** 2)), 1.0
        def get_final_error(self, error, weight):
            return error
    fixed = {} if config.endswith("defaults") else dict(boosting_type="Plain", leaf_estimation_iterations=1,
             leaf_estimation_backtracking="No", metric_period=1)
    loss = {"loss_function": Loss(), "boost_from_average": False} if config.startswith("python") else \
        {"loss_function": "RMSE"}
    if config.startswith("python"):     # a Python loss needs an eval_metric: CatBoost's own, or the smallest Python one
        loss["eval_metric"] = Metric() if config == "python_loss_and_metric" else "RMSE"
    m = catboost.CatBoost(dict(iterations=rounds, learning_rate=0.1, depth=6, **loss,
                               thread_count=threads, random_seed=0, logging_level="Silent",
                               allow_writing_files=False, use_best_model=False, **fixed))
    m.fit(catboost.Pool(X, y), eval_set=catboost.Pool(Xv, yv), callbacks=[Tick()])
else:
    import qwkboost as qb
    qb.train(X, y, "catboost", config, {"learning_rate": 0.1, "depth": 6}, num_boost_round=rounds,
             eval_set=(Xv, yv), n_jobs=threads, callbacks=[lambda r, e: stamps.append(time.perf_counter())])
d = np.diff(stamps[5:])
print(json.dumps({"ms": float(np.median(d) * 1000), "mean_ms": float(np.mean(d) * 1000)}))
"""


def run(config: str, rows: int, rounds: int, threads: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, config, str(rows), str(rounds), str(threads)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def multiclass(rows: int, threads: int) -> None:
    import time
    import warnings

    from catboost import CatBoost, Pool

    from qwkboost.data.sources import quartiles

    warnings.filterwarnings("ignore")
    ds = quartiles(n_train=rows, n_test=10, n_classes=5)

    class Softmax:
        def calc_ders_multi(self, approx, target, weight):
            a = np.asarray(approx)
            p = np.exp(a - a.max())
            p /= p.sum()
            t = np.zeros_like(p)
            t[int(target)] = 1.0
            return list(t - p), -np.diag(p)

    class Silent:
        def is_max_optimal(self):
            return False

        def evaluate(self, approxes, target, weight):
            return 0.0, 1.0

        def get_final_error(self, error, weight):
            return error

    for name, loss in (("built-in MultiClass", "MultiClass"), ("Python calc_ders_multi", Softmax())):
        params = dict(iterations=2, learning_rate=0.1, depth=6, thread_count=threads, logging_level="Silent",
                      allow_writing_files=False, loss_function=loss, classes_count=5)
        if not isinstance(loss, str):
            params["eval_metric"] = Silent()
        t = time.perf_counter()
        CatBoost(params).fit(Pool(ds.X_train, ds.y_train))
        print(f"| {name} | {(time.perf_counter() - t) / 2:.2f} s per iteration |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=80_000)
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--multiclass", action="store_true", help="time a K-output Python loss instead")
    args = ap.parse_args()
    print(json.dumps(machine()))
    if args.multiclass:
        multiclass(args.rows, args.threads)
        return
    got: dict[str, list[float]] = {c: [] for c in CONFIGS}
    ratios: dict[str, list[float]] = {c: [] for c in CONFIGS}
    for rep in range(args.repeats):
        order = CONFIGS if rep % 2 == 0 else CONFIGS[::-1]
        now = {c: run(c, args.rows, args.rounds, args.threads)["ms"] for c in order}
        for c in CONFIGS:
            got[c].append(now[c])
            ratios[c].append(now[c] / now["builtin_rmse"])
        print(f"repeat {rep + 1}: " + ", ".join(f"{c} {now[c]:.1f} ms" for c in CONFIGS), flush=True)
    print(f"\n{args.rows:,} training rows x 5, {args.rows // 4:,} eval rows, depth 6, {args.threads} threads, "
          f"median of {args.repeats} repeats (ms per round; ratio to builtin_rmse, median of the repeats' ratios)")
    print("| configuration | ms / round | x builtin RMSE |\n|---|---:|---:|")
    for c in CONFIGS:
        print(f"| {c} | {np.median(got[c]):.1f} | {np.median(ratios[c]):.2f} |")


if __name__ == "__main__":
    main()
