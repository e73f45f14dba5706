"""Native engine speed against LightGBM and XGBoost hist, measured in the same run.

    python benchmarks/native_speed.py                    # 80k and 1M rows, id columns, prediction, memory
    python benchmarks/native_speed.py --rows 80000 --repeats 5 --skip-memory
    git worktree add ../before <commit>                  # then: this code against that one, A/B
    python benchmarks/native_speed.py --compare-to ../before --rows 80000 --repeats 9 --skip-predict --skip-memory

Training: the DSB2019 article's quartile data, one fold of a 5-fold split (80,000 x 5
from 100,000 rows; 1,000,000 x 5 from 1,250,000), depth 5, 255 bins,
squared error, learning rate 0.1. Every engine runs through
``qwkboost.train`` with the same objective; the per-round time is the median
gap between progress callbacks (after 5 warm-up rounds). LightGBM and XGBoost
use 2 threads; their built-in objectives are timed as well, without
``qwkboost``'s Python gradient and metric. Each configuration is repeated and
the fastest median kept: the machine may be shared, and OpenMP libraries
suffer most from that. Every run is a fresh process (engines interleaved),
so that no engine inherits another's heap or threads; ``--same-process``
times them all in one.

Id columns: ``qwkboost.data.synthetic.id_frames`` (50,000 rows; two integer id
columns of 2,500 and 900 levels, about 20 and 55 rows per level, named
categorical; three numeric columns), native and LightGBM through ``qwkboost.train``,
the same shape and rounds as above.

A/B (``--compare-to DIR``, a checkout of another qwkboost commit): the native
engine of this code and of ``DIR`` on the numeric 80k fold, in fresh processes,
alternating; reported are both medians and the median of the paired ratios
(this code / ``DIR``'s) with its range.

Prediction: 200 trees of depth 5 trained on the 80k fold, predicting 20,000
rows, median of 7 calls after one warm-up.

Peak memory: one child process per engine loads the saved fold (``.npy``)
and trains 30 rounds; reported is the increase of its peak RSS
(``VmHWM``) over the process with the data loaded.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lightgbm as lgb  # noqa: E402
import xgboost as xgb  # noqa: E402

import qwkboost as qb  # noqa: E402
from qwkboost.data.sources import quartiles  # noqa: E402
from machine import machine  # noqa: E402

PARAMS = {
    "native": {"max_depth": 5, "learning_rate": 0.1, "max_bin": 255, "n_jobs": 2},
    "lightgbm": {"max_depth": 5, "num_leaves": 32, "max_bin": 255, "learning_rate": 0.1, "num_threads": 2,
                 "min_data_in_leaf": 1, "min_sum_hessian_in_leaf": 1.0, "lambda_l2": 1.0},
    "xgboost": {"max_depth": 5, "learning_rate": 0.1, "max_bin": 256, "nthread": 2},
}


def fold(rows: int, seed: int = 0):
    """One training fold of a 5-fold split of ``rows / 0.8`` quartile rows."""
    total = int(round(rows / 0.8))
    ds = quartiles(n_train=total, n_test=20_000, seed=seed)
    idx = np.random.RandomState(seed).permutation(total)[:rows]
    return ds.X_train[idx], ds.y_train[idx], ds.X_test, ds.y_test


def id_columns(rows: int = 50_000):
    """The id-column data (module docstring) as floats, and its categorical columns."""
    from qwkboost.data.synthetic import id_frames

    train, _ = id_frames(n_train=rows, n_test=10)
    X = train.drop(columns=["id", "label"])
    return X, train["label"].to_numpy(dtype=np.float64), ["id_1", "id_2"]


def per_round_ms(fn, rounds: int) -> float:
    stamps: list[float] = []
    fn(rounds, lambda *a, **k: stamps.append(time.perf_counter()))
    gaps = np.diff(stamps)[5:]
    return float(np.median(gaps) * 1e3)


def qb_runner(engine, X, y, categorical=None):
    def run(rounds, cb):
        qb.train(X, y, engine=engine, objective="squared_error", params=PARAMS[engine],
                 num_boost_round=rounds, callbacks=[lambda r, e: cb()], categorical=categorical)
    return run


def lgb_builtin(X, y):
    def run(rounds, cb):
        p = {**PARAMS["lightgbm"], "objective": "regression", "verbose": -1}
        lgb.train(p, lgb.Dataset(X, y), rounds, callbacks=[lambda env: cb()])
    return run


def xgb_builtin(X, y):
    class CB(xgb.callback.TrainingCallback):
        def __init__(self, cb):
            self.cb = cb

        def after_iteration(self, model, epoch, evals_log):
            self.cb()
            return False

    def run(rounds, cb):
        p = {**PARAMS["xgboost"], "tree_method": "hist", "objective": "reg:squarederror", "verbosity": 0}
        xgb.train(p, xgb.DMatrix(X, label=y), rounds, callbacks=[CB(cb)])
    return run


RUNNERS = {"native": lambda X, y: qb_runner("native", X, y), "lightgbm": lambda X, y: qb_runner("lightgbm", X, y),
           "xgboost": lambda X, y: qb_runner("xgboost", X, y), "lightgbm (built-in objective)": lgb_builtin,
           "xgboost (built-in objective)": xgb_builtin}


def time_child(engine: str, rows: int, rounds: int, data: str = "quartiles") -> None:
    """One timing run in a fresh process (``--isolate``): prints its ms per round."""
    with threadpool_limits(1, user_api="blas"):
        if data == "ids":
            X, y, cat = id_columns(rows)
            ms = per_round_ms(qb_runner(engine, X, y, cat), rounds)
        else:
            X, y, _, _ = fold(rows)
            ms = per_round_ms(RUNNERS[engine](X, y), rounds)
        print(json.dumps({"ms": ms}))


def child_ms(engine: str, rows: int, rounds: int, data: str = "quartiles", code: str | None = None) -> float:
    """:func:`time_child` in a fresh process, on this code or on the checkout ``code``."""
    env = dict(os.environ)
    script = __file__
    if code is not None:
        env["PYTHONPATH"] = os.path.abspath(code)
        script = os.path.join(os.path.abspath(code), "benchmarks", os.path.basename(__file__))
        if not os.path.exists(script):      # an older checkout without this script: time it with this one
            script = __file__
    r = subprocess.run([sys.executable, script, "--time-child", engine, "--rows", str(rows), "--rounds", str(rounds),
                        *(["--data", data] if data != "quartiles" else [])],
                       capture_output=True, text=True, check=True, env=env)
    return json.loads(r.stdout.strip().splitlines()[-1])["ms"]


def compare(code: str, rows: int, rounds: int, repeats: int) -> dict:
    """The native engine of this code against ``code``'s, alternating fresh processes (module docstring)."""
    ours, theirs = [], []
    for i in range(repeats):
        pair = [("ours", None), ("theirs", code)]
        for who, where in (pair if i % 2 == 0 else pair[::-1]):      # alternate which goes first
            (ours if who == "ours" else theirs).append(child_ms("native", rows, rounds, code=where))
    ratio = np.array(ours) / np.array(theirs)
    return {"ours_ms": ours, "theirs_ms": theirs, "ours_median": float(np.median(ours)),
            "theirs_median": float(np.median(theirs)), "paired_ratio_median": float(np.median(ratio)),
            "paired_ratio_min": float(ratio.min()), "paired_ratio_max": float(ratio.max())}


def id_training(rows: int, rounds: int, repeats: int) -> dict:
    """ms per round of the native engine and LightGBM on the id columns, interleaved fresh processes."""
    times = {"native": [], "lightgbm": []}
    for _ in range(repeats):
        for k in times:
            times[k].append(child_ms(k, rows, rounds, data="ids"))
    return {k: {"best_ms": min(v), "median_ms": float(np.median(v)), "all_ms": v} for k, v in times.items()}


def training(rows: int, rounds: int, repeats: int, isolate: bool = True) -> dict:
    """ms per round of every engine, ``repeats`` times, interleaved so that load changes hit every engine.

    With ``isolate`` every run is a fresh process: an engine's run then cannot
    leave state behind (heap, thread pools, caches) that speeds up or slows down
    the next engine's (measured: LightGBM at 1M rows ran 17 or 24 ms per round
    depending on which native code ran before it in the same process).
    """
    times: dict[str, list[float]] = {k: [] for k in RUNNERS}
    if not isolate:
        X, y, _, _ = fold(rows)
        runners = {k: make(X, y) for k, make in RUNNERS.items()}
    for _ in range(repeats):
        for k in RUNNERS:
            if isolate:
                times[k].append(child_ms(k, rows, rounds))
            else:
                times[k].append(per_round_ms(runners[k], rounds))
    return {k: {"best_ms": min(v), "median_ms": float(np.median(v)), "all_ms": v} for k, v in times.items()}


def prediction(repeats: int = 7) -> dict:
    X, y, Xt, _ = fold(80_000)
    out = {}
    for engine in ("native", "xgboost", "lightgbm"):
        m = qb.train(X, y, engine=engine, objective="squared_error", params=PARAMS[engine], num_boost_round=200)
        calls = {"Model.predict": lambda: m.predict(Xt)}
        if engine == "xgboost":
            calls["booster.inplace_predict"] = lambda: m.booster.inplace_predict(Xt)
        if engine == "native":
            codes = m.booster.bin_mapper.transform(Xt)
            calls["binning only"] = lambda: m.booster.bin_mapper.transform(Xt)
            calls["trees on binned rows"] = lambda: m.booster.predictor.predict(codes, 200)
        for name, fn in calls.items():
            fn()
            ts = []
            for _ in range(repeats):
                t = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t)
            out[f"{engine} {name}"] = float(np.median(ts) * 1e3)
    return out


def _hwm_mb() -> float:
    """Peak RSS of this process image (VmHWM: unlike ru_maxrss, not inherited through fork/exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) / 1024


def memory_child(engine: str, path: str, rounds: int) -> None:
    X, y = np.load(path + "_X.npy"), np.load(path + "_y.npy")
    base = _hwm_mb()
    with threadpool_limits(1, user_api="blas"):
        qb.train(X, y, engine=engine, objective="squared_error", params=PARAMS[engine], num_boost_round=rounds)
    print(json.dumps({"base_mb": base, "peak_mb": _hwm_mb()}))


def memory(rows: int, rounds: int) -> dict:
    """Peak RSS of a child that loads the saved data and trains: its increase over the loaded data."""
    X, y, _, _ = fold(rows)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "fold")
        np.save(path + "_X.npy", X)
        np.save(path + "_y.npy", y)
        out = {}
        for engine in ("native", "lightgbm", "xgboost"):
            r = subprocess.run([sys.executable, __file__, "--memory-child", engine, "--data", path,
                                "--rounds", str(rounds)], capture_output=True, text=True, check=True)
            d = json.loads(r.stdout.strip().splitlines()[-1])
            out[engine] = {**d, "increase_mb": d["peak_mb"] - d["base_mb"]}
    out["data_mb"] = (X.nbytes + y.nbytes) / 2**20
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="*", default=[80_000, 1_000_000])
    ap.add_argument("--rounds", type=int, default=None, help="rounds per timing run (default 100 / 30 at 1M)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--skip-predict", action="store_true")
    ap.add_argument("--skip-ids", action="store_true", help="skip the id-column row")
    ap.add_argument("--compare-to", metavar="DIR",
                    help="a checkout of another qwkboost commit: time its native engine against this one's, A/B")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--same-process", action="store_true",
                    help="time every engine in this process (default: a fresh process per run)")
    ap.add_argument("--memory-child", help=argparse.SUPPRESS)
    ap.add_argument("--time-child", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_child:
        memory_child(args.memory_child, args.data, args.rounds or 30)
        return
    if args.time_child:
        time_child(args.time_child, args.rows[0], args.rounds, args.data or "quartiles")
        return
    res = {"machine": machine(), "training": {}, "memory": {}}
    if args.compare_to:
        for rows in args.rows:
            rounds = args.rounds or (100 if rows <= 200_000 else 30)
            c = compare(args.compare_to, rows, rounds, args.repeats)
            res.setdefault("compare", {})[rows] = c
            print(f"\n## A/B, native, {rows:,} x 5, {rounds} rounds, {args.repeats} alternating pairs: this code "
                  f"{c['ours_median']:.2f} ms/round, {args.compare_to} {c['theirs_median']:.2f} (medians); "
                  f"paired ratio {c['paired_ratio_median']:.3f} [{c['paired_ratio_min']:.3f}, "
                  f"{c['paired_ratio_max']:.3f}]")
        args.skip_ids = True
        args.rows = []
    with threadpool_limits(1, user_api="blas"):
        for rows in args.rows:
            rounds = args.rounds or (100 if rows <= 200_000 else 30)
            t = training(rows, rounds, args.repeats, isolate=not args.same_process)
            res["training"][rows] = t
            nat = t["native"]["best_ms"]
            print(f"\n## training, {rows:,} x 5, depth 5, 255 bins, squared error ({rounds} rounds, "
                  f"best of {args.repeats}, {'one process' if args.same_process else 'a fresh process per run'})")
            print("| engine | ms/round (best) | ms/round (median) | native / engine |")
            print("|---|---:|---:|---:|")
            for k, v in t.items():
                print(f"| {k} | {v['best_ms']:.2f} | {v['median_ms']:.2f} | {nat / v['best_ms']:.2f} |")
        if not args.skip_ids:
            t = id_training(50_000, args.rounds or 100, args.repeats)
            res["id_columns"] = t
            print(f"\n## training, id columns: 50,000 rows, ids of 2,500 and 900 levels (categorical) and 3 "
                  f"numeric columns, depth 5, squared error (best of {args.repeats}, a fresh process per run)")
            print("| engine | ms/round (best) | ms/round (median) | native / engine |")
            print("|---|---:|---:|---:|")
            for k, v in t.items():
                print(f"| {k} | {v['best_ms']:.2f} | {v['median_ms']:.2f} | "
                      f"{t['native']['best_ms'] / v['best_ms']:.2f} |")
        if not args.skip_predict and not args.compare_to:
            p = prediction()
            res["prediction"] = p
            print("\n## prediction, 20,000 rows x 200 trees (depth 5), ms")
            for k, v in p.items():
                print(f"| {k} | {v:.2f} |")
            print(f"native Model.predict / xgboost Model.predict = "
                  f"{p['native Model.predict'] / p['xgboost Model.predict']:.2f}; "
                  f"/ xgboost inplace_predict = {p['native Model.predict'] / p['xgboost booster.inplace_predict']:.2f}")
    if not args.skip_memory and not args.compare_to:
        for rows in args.rows:
            m = memory(rows, 30)
            res["memory"][rows] = m
            print(f"\n## peak memory, {rows:,} rows x 5 ({m['data_mb']:.0f} MB of float64 data), 30 rounds (MB)")
            print("| engine | process with data loaded | peak while training | increase |")
            print("|---|---:|---:|---:|")
            for k, v in m.items():
                if k != "data_mb":
                    print(f"| {k} | {v['base_mb']:.0f} | {v['peak_mb']:.0f} | {v['increase_mb']:.0f} |")
    res["machine"]["loadavg_end"] = os.getloadavg()
    print("\nmachine:", json.dumps(res["machine"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1, default=str)


if __name__ == "__main__":
    main()
