"""Training rows per second on a Dask LocalCluster (2 workers) against one process, and memory per worker.

    python benchmarks/dask_scale.py                       # 1M and 10M rows, 20 rounds
    python benchmarks/dask_scale.py --rows 200000 --rounds 10

Synthetic ordinal data, 10 features (5 informative), 4 classes, generated in blocks of 500,000 rows with
a fixed seed per block: one process builds every block in memory, the Dask workers build their own blocks
(the data never passes through the client), so both train on the same rows. Trees of depth 6, learning
rate 0.1, 256 bins. Each configuration runs in a fresh process, the configurations interleaved:

* ``qwkboost`` rows: ``qwkboost.train`` (one process, 2 threads) and ``qwkboost.distributed.training.train_dask``
  (2 workers x 1 thread), extended QWK on XGBoost (its sums all-reduced every round) and squared error
  on LightGBM;
* ``raw`` rows: XGBoost's own ``reg:squarederror`` with ``xgboost.train`` and ``xgboost.dask.train``,
  no qwkboost.

Time is wall time from the arrays to the trained model (DMatrix or Dataset construction included);
rows/s is rows x rounds / that time. Each configuration also runs with one round: its time is the setup
(input checks, quantile sketch, DMatrix or Dataset, one round), and (time - setup) / (rounds - 1) the time
per round. Memory is the peak resident set (``ru_maxrss``) of the training
process, or of each Dask worker process. On Dask, the bytes that crossed the loopback interface while
training (every message between client, scheduler and workers: the quantile sketch, the histogram
all-reduces, the objective's sums, the returned model) are recorded too.
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

CONFIGS = [("qwkboost", "xgboost", "extended_qwk"), ("qwkboost", "lightgbm", "squared_error"),
           ("raw", "xgboost", "reg:squarederror")]
BLOCK = 500_000

CHILD = r"""
import json, resource, sys, time
import numpy as np

kind, engine, objective, where, rows, rounds, block = sys.argv[1:8]
rows, rounds, block = int(rows), int(rounds), int(block)


def loopback_bytes():
    with open("/proc/net/dev") as f:
        for line in f:
            if line.strip().startswith("lo:"):
                return int(line.split(":")[1].split()[0])     # bytes received on loopback = bytes sent
    return 0


def make_block(i, n):
    rng = np.random.default_rng(1000 + i)
    X = rng.random((n, 10))
    s = X[:, :5].sum(axis=1) + rng.normal(0.0, 0.3, n)
    return X, np.searchsorted([2.0, 2.5, 3.0], s).astype(np.float64)


sizes = [min(block, rows - i) for i in range(0, rows, block)]
XGB = {"max_depth": 6, "learning_rate": 0.1, "max_bin": 256}
LGB = {"num_leaves": 63, "max_depth": 6, "learning_rate": 0.1, "max_bin": 255}
out = {"kind": kind, "engine": engine, "objective": objective, "where": where, "rows": rows, "rounds": rounds}

if where == "single":
    parts = [make_block(i, n) for i, n in enumerate(sizes)]
    X = np.concatenate([p[0] for p in parts]); y = np.concatenate([p[1] for p in parts]); del parts
    t0 = time.perf_counter()
    if kind == "qwkboost":
        import qwkboost
        model = qwkboost.train(X, y, engine=engine, objective=objective, num_boost_round=rounds, n_jobs=2,
                               params=XGB if engine == "xgboost" else LGB)
    else:
        import xgboost as xgb
        booster = xgb.train({**XGB, "objective": objective, "nthread": 2, "tree_method": "hist"},
                            xgb.DMatrix(X, label=y), rounds)
    out["seconds"] = time.perf_counter() - t0
    out["peak_rss_mib"] = [resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]
else:
    import dask
    import dask.array as da
    import distributed
    from qwkboost.distributed.training import ClusterSpec, connect, train_dask

    if __name__ == "__main__":
        with connect(ClusterSpec(n_workers=2, threads_per_worker=1)) as client:
            Xs, ys = [], []
            for i, n in enumerate(sizes):
                d = dask.delayed(make_block)(i, n)
                Xs.append(da.from_delayed(d[0], (n, 10), dtype=np.float64))
                ys.append(da.from_delayed(d[1], (n,), dtype=np.float64))
            X, y = da.concatenate(Xs), da.concatenate(ys)
            X, y = client.persist([X, y])            # built on the workers, kept there
            distributed.wait([X, y])
            lo0 = loopback_bytes()
            t0 = time.perf_counter()
            if kind == "qwkboost":
                model = train_dask(client, X, y, engine=engine, objective=objective, num_boost_round=rounds,
                                   params=XGB if engine == "xgboost" else LGB)
            else:
                from xgboost import dask as dxgb
                dxgb.train(client, {**XGB, "objective": objective, "tree_method": "hist"},
                           dxgb.DaskDMatrix(client, X, y), rounds)
            out["seconds"] = time.perf_counter() - t0
            out["loopback_mib"] = (loopback_bytes() - lo0) / 2**20
            peaks = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
            out["peak_rss_mib"] = sorted(peaks.values())
if "seconds" in out:
    out["rows_per_s"] = rows * rounds / out["seconds"]
    print("RESULT " + json.dumps(out))
"""


def run_one(kind, engine, objective, where, rows, rounds) -> dict:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".dask_scale_child.py")
    with open(path, "w") as f:
        f.write(CHILD)
    try:
        p = subprocess.run([sys.executable, path, kind, engine, objective, where, str(rows), str(rounds), str(BLOCK)],
                           capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    finally:
        os.unlink(path)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if p.returncode or not line:
        raise RuntimeError(f"{kind} {engine} {where} {rows} failed:\n{p.stderr[-3000:]}")
    return json.loads(line[0][len("RESULT "):])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()
    print(json.dumps(machine()))
    results = []
    for rows in args.rows:
        for kind, engine, objective in CONFIGS:
            pair = {}
            for where in ("single", "dask"):
                # the same configuration with one round: what building the data and the model costs
                setup = run_one(kind, engine, objective, where, rows, 1)
                r = run_one(kind, engine, objective, where, rows, args.rounds)
                r["setup_seconds"] = setup["seconds"]
                r["ms_per_round"] = 1e3 * (r["seconds"] - setup["seconds"]) / (args.rounds - 1)
                if where == "dask":
                    r["loopback_kib_per_round"] = 1024 * (r["loopback_mib"] - setup["loopback_mib"]) / (args.rounds - 1)
                pair[where] = r
                results.append(r)
                print(json.dumps(r), flush=True)
            s, d = pair["single"], pair["dask"]
            print(f"{rows:>10,} {kind:8} {engine:8} {objective:17} | single: {s['seconds']:6.1f} s, setup "
                  f"{s['setup_seconds']:5.1f} s, {s['ms_per_round']:7.1f} ms/round, {s['rows_per_s'] / 1e6:5.2f} M "
                  f"rows/s, {s['peak_rss_mib'][0]:5.0f} MiB | dask 2x1: {d['seconds']:6.1f} s, setup "
                  f"{d['setup_seconds']:5.1f} s, {d['ms_per_round']:7.1f} ms/round, {d['rows_per_s'] / 1e6:5.2f} M "
                  f"rows/s, workers {'/'.join(f'{m:.0f}' for m in d['peak_rss_mib'])} MiB, "
                  f"{d['loopback_kib_per_round']:.0f} KiB/round over loopback | dask/single time "
                  f"{d['seconds'] / s['seconds']:.2f}x", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
