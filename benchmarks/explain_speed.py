"""What explanations cost: 2,000 rows of a 500-tree, depth-6 model on every engine, and a run with and without them.

    python benchmarks/explain_speed.py                  # both parts, 3 repeats
    python benchmarks/explain_speed.py --part models    # qb.explain against the engines' own TreeSHAP
    python benchmarks/explain_speed.py --part run       # the default run, tracking.explain=true / false

``models``: the article's data (20,000 training rows), 500 rounds of depth-6 trees (LightGBM: 63 leaves, no
depth limit beyond 6), squared error, learning rate 0.05, 2 threads; then 2,000 rows explained with
``qb.explain`` (the engine's TreeSHAP, F0 added, importances) and with the engine's own call alone
(XGBoost ``pred_contribs``, LightGBM ``pred_contrib``, CatBoost ``ShapValues``; the native engine has none:
qwkboost's TreeSHAP is its own). Seconds, the best of the repeats, in one process per engine.

``run``: ``python experiments/run.py`` (the default configuration: XGBoost, extended QWK, the article's
100,000 + 100,000 rows, 5 folds) with ``tracking.explain=true`` and ``false``, each a fresh process, the two
interleaved and repeated; wall seconds, the median of the repeats and the median of the paired ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from machine import machine  # noqa: E402

CHILD = r"""
import json, sys, time, warnings
import numpy as np
warnings.filterwarnings("ignore")
engine, repeats = sys.argv[1], int(sys.argv[2])
import qwkboost as qb
from qwkboost.data.sources import quartiles
from qwkboost.engines import get_engine
ds = quartiles(n_train=20_000, n_test=2_000)
shape = {"lightgbm": {"max_depth": 6, "num_leaves": 63}, "catboost": {"depth": 6}}.get(engine, {"max_depth": 6})
m = qb.train(ds.X_train, ds.y_train, engine, "squared_error", {"learning_rate": 0.05, **shape}, num_boost_round=500,
             n_jobs=2)
X = ds.X_test
best = {"qb.explain": 1e9, "engine": 1e9}
for _ in range(repeats):
    t = time.perf_counter(); e = qb.explain(m, X, max_rows=None); best["qb.explain"] = min(best["qb.explain"], time.perf_counter() - t)
    if engine != "native":
        t = time.perf_counter()
        get_engine(engine).contributions(m.booster, X, n_iter=m.best_iteration, init_score=m.init_score)
        best["engine"] = min(best["engine"], time.perf_counter() - t)
err = float(np.abs(e.score - m.predict_raw(X)).max())
print(json.dumps({"engine": engine, "trees": m.best_iteration, **best, "max_additivity_error": err}))
"""


def models(repeats: int) -> None:
    print("| engine | trees | qb.explain s | the engine's own TreeSHAP s | max |values + bias - raw score| |")
    print("|---|---:|---:|---:|---:|")
    for engine in ("xgboost", "lightgbm", "catboost", "native"):
        out = subprocess.run([sys.executable, "-c", CHILD, engine, str(repeats)], capture_output=True, text=True,
                             check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        own = "(qwkboost's: the same call)" if engine == "native" else f"{r['engine']:.2f}"
        print(f"| {engine} | {r['trees']} | {r['qb.explain']:.2f} | {own} | {r['max_additivity_error']:.1e} |",
              flush=True)


def run(repeats: int) -> None:
    times: dict[str, list[float]] = {"true": [], "false": []}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(repeats):
            for flag in (("true", "false") if rep % 2 == 0 else ("false", "true")):
                t = time.perf_counter()
                subprocess.run([sys.executable, os.path.join(ROOT, "experiments", "run.py"),
                                f"tracking.explain={flag}", f"hydra.run.dir={tmp}/{rep}_{flag}",
                                f"tracking.uri=sqlite:///{tmp}/mlflow.db"], check=True, capture_output=True)
                times[flag].append(time.perf_counter() - t)
            print(f"repeat {rep + 1}: with {times['true'][-1]:.1f} s, without {times['false'][-1]:.1f} s", flush=True)
    ratio = np.array(times["true"]) / np.array(times["false"])
    print(f"\nthe default run: {np.median(times['false']):.1f} s without explanations, {np.median(times['true']):.1f} s "
          f"with them; paired ratio {np.median(ratio):.3f} (range {ratio.min():.3f}-{ratio.max():.3f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("models", "run", "both"), default="both")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(json.dumps(machine()))
    if args.part in ("models", "both"):
        models(args.repeats)
    if args.part in ("run", "both"):
        run(args.repeats)


if __name__ == "__main__":
    main()
