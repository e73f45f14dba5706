"""What an API user gets: ``qwkboost.train`` against the raw engines with the same custom objective.

    python benchmarks/api_speed.py                     # quiet machine, then one busy background process
    python benchmarks/api_speed.py --repeats 5 --json api_speed.json

Every run is a fresh Python process that does a plain ``import qwkboost`` (or
only the raw engine) and nothing else: no ``OMP_WAIT_POLICY``, no thread
settings, exactly what a user's script sees. Data: the article's quartile data,
16,000 training x 5 features and a 4,000-row eval set, 100 boosting rounds of
extended QWK at learning rate 0.1 (depth 5 on XGBoost and native, LightGBM's
defaults), scored on both sets every round. The time per round is the median
gap between round callbacks after 5 warm-up rounds; each configuration runs
``--repeats`` times, interleaved, and the median is reported.

Configurations per engine:

``qwkboost``
    ``qwkboost.train(X, y, engine=..., objective="extended_qwk", eval_set=...)``.
``qwkboost, OMP_WAIT_POLICY=PASSIVE``
    The same with OpenMP's threads sleeping instead of spinning, as the
    entry points used to set.
``raw, same objective``
    ``xgboost.train`` / ``lightgbm.train`` with qwkboost's extended-QWK gradient
    and metric passed as ``obj``/``fobj`` and ``custom_metric``/``feval``, as a
    user would wire a custom objective by hand (threads left at the defaults).
``raw, same objective, BLAS 1 thread``
    The same inside ``threadpool_limits(1, "blas")``: what an expert gets.
``raw, built-in objective``
    ``reg:squarederror`` / ``regression`` with the built-in RMSE metric: the
    floor, with no Python in the loop.

The busy condition starts one process spinning on one core for the whole
measurement, as a browser tab or another job would. Side by side, two
``qwkboost.train`` processes run at once, as two jobs of Hydra's joblib
launcher do: with every core each (OpenMP's default), and with one thread
each (what qwkboost gives each of two parallel jobs on two cores).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from machine import machine  # noqa: E402
ROUNDS = 100
WARMUP = 5

CONFIGS = {
    "lightgbm": ["qwkboost", "qwkboost, OMP_WAIT_POLICY=PASSIVE", "raw, same objective",
                 "raw, same objective, BLAS 1 thread", "raw, built-in objective"],
    "xgboost": ["qwkboost", "qwkboost, OMP_WAIT_POLICY=PASSIVE", "raw, same objective",
                "raw, same objective, BLAS 1 thread", "raw, built-in objective"],
    "native": ["qwkboost", "raw (train_booster)"],
}


def _data():
    sys.path.insert(0, os.path.join(HERE, ".."))
    from qwkboost.data.sources import quartiles

    ds = quartiles(n_train=20_000, n_test=100)
    return ds.X_train[:16_000], ds.y_train[:16_000], ds.X_train[16_000:], ds.y_train[16_000:]


def _per_round(stamps: list[float]) -> float:
    import numpy as np

    return float(np.median(np.diff(stamps)[WARMUP:]) * 1e3)


def child(engine: str, config: str) -> float:
    """One measurement in this (fresh) process; returns ms per round."""
    X, y, Xv, yv = _data()
    stamps: list[float] = []
    tick = lambda *a, **k: stamps.append(time.perf_counter())  # noqa: E731
    params = {"learning_rate": 0.1}
    if engine != "lightgbm":
        params["max_depth"] = 5
    if config.startswith("qwkboost"):
        import qwkboost as qb

        n_jobs = 1 if config.endswith("n_jobs=1") else None
        qb.train(X, y, engine=engine, objective="extended_qwk", params=params, num_boost_round=ROUNDS,
                 eval_set=(Xv, yv), callbacks=[tick], n_jobs=n_jobs)
        return _per_round(stamps)
    from qwkboost.objectives import ExtendedQWK

    obj = ExtendedQWK().fit(y)
    if engine == "native":
        from qwkboost.native import train_booster

        train_booster(X, y, obj, params, ROUNDS, (Xv, yv), None, [tick], 0)
        return _per_round(stamps)
    import contextlib

    import numpy as np
    from threadpoolctl import threadpool_limits

    limit = threadpool_limits(1, user_api="blas") if "BLAS" in config else contextlib.nullcontext()
    builtin = "built-in" in config
    with limit:
        if engine == "lightgbm":
            import lightgbm as lgb

            p = {**params, "verbose": -1}
            if builtin:
                p.update(objective="regression", metric="rmse")
                lgb.train(p, lgb.Dataset(X, y), ROUNDS, valid_sets=[lgb.Dataset(Xv, yv)],
                          callbacks=[lambda env: tick()])
            else:
                f0 = obj.init_score_
                p.update(objective=lambda pred, d: obj.grad_hess(y, pred), metric="None")
                dtr = lgb.Dataset(X, y, init_score=np.full(len(y), f0))
                dva = lgb.Dataset(Xv, yv, init_score=np.full(len(yv), f0), reference=dtr)
                labels = {id(dtr): y, id(dva): yv}
                lgb.train(p, dtr, ROUNDS, valid_sets=[dtr, dva],
                          feval=lambda pred, d: ("kappa", obj.metric(labels[id(d)], pred), True),
                          callbacks=[lambda env: tick()])
        else:
            import xgboost as xgb

            class CB(xgb.callback.TrainingCallback):
                def after_iteration(self, model, epoch, evals_log):
                    tick()
                    return False

            dtr, dva = xgb.DMatrix(X, label=y), xgb.DMatrix(Xv, label=yv)
            p = {**params, "tree_method": "hist"}
            if builtin:
                p.update(objective="reg:squarederror", eval_metric="rmse")
                xgb.train(p, dtr, ROUNDS, evals=[(dtr, "train"), (dva, "valid")], verbose_eval=False,
                          callbacks=[CB()])
            else:
                p.update(base_score=obj.init_score_, disable_default_eval_metric=1)
                labels = {id(dtr): y, id(dva): yv}
                xgb.train(p, dtr, ROUNDS, evals=[(dtr, "train"), (dva, "valid")], verbose_eval=False,
                          obj=lambda pred, d: obj.grad_hess(y, pred.astype(np.float64)),
                          custom_metric=lambda pred, d: ("kappa", obj.metric(labels[id(d)],
                                                                             pred.astype(np.float64))),
                          callbacks=[CB()])
    return _per_round(stamps)


def measure(repeats: int) -> dict:
    """Median ms/round of every configuration, each run in a fresh process, interleaved."""
    import numpy as np

    out: dict = {e: {c: [] for c in cs} for e, cs in CONFIGS.items()}
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS",
                                                            "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    for _ in range(repeats):
        for engine, configs in CONFIGS.items():
            for config in configs:
                run_env = {**env, "OMP_WAIT_POLICY": "PASSIVE"} if "PASSIVE" in config else env
                r = subprocess.run([sys.executable, __file__, "--child", engine, config], capture_output=True,
                                   text=True, env=run_env)
                if r.returncode != 0:
                    raise RuntimeError(f"{engine}/{config} failed:\n{r.stderr[-2000:]}")
                out[engine][config].append(json.loads(r.stdout.strip().splitlines()[-1])["ms"])
    return {e: {c: {"median_ms": float(np.median(v)), "all_ms": v} for c, v in d.items()} for e, d in out.items()}


def side_by_side(repeats: int) -> dict:
    """Two ``qwkboost.train`` processes at once (as Hydra's joblib launcher runs two jobs): every core each,
    against one thread each (what qwkboost gives each of two parallel launcher jobs)."""
    import numpy as np

    out: dict = {}
    for _ in range(repeats):
        for engine in ("lightgbm", "xgboost"):
            for config in ("qwkboost, every core", "qwkboost, n_jobs=1"):
                procs = [subprocess.Popen([sys.executable, __file__, "--child", engine, config],
                                          stdout=subprocess.PIPE, text=True) for _ in range(2)]
                ms = [json.loads(p.communicate()[0].strip().splitlines()[-1])["ms"] for p in procs]
                out.setdefault(engine, {}).setdefault(config, []).extend(ms)
    return {e: {c: {"median_ms": float(np.median(v)), "all_ms": v} for c, v in d.items()} for e, d in out.items()}


def report(title: str, res: dict) -> None:
    print(f"\n## {title}")
    print("| engine | configuration | ms/round (median) | first row / this |")
    print("|---|---|---:|---:|")
    for engine, d in res.items():
        ours = next(iter(d.values()))["median_ms"]
        for config, v in d.items():
            print(f"| {engine} | {config} | {v['median_ms']:.2f} | {ours / v['median_ms']:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-busy", action="store_true")
    ap.add_argument("--skip-side-by-side", action="store_true")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps({"ms": child(*args.child)}))
        return
    res = {"machine": machine(), "quiet": measure(args.repeats)}
    report(f"quiet machine ({args.repeats} runs each, a fresh process per run)", res["quiet"])
    if not args.skip_busy:
        spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            time.sleep(0.5)
            res["busy"] = measure(args.repeats)
        finally:
            spin.kill()
            spin.wait()
        report("one busy background process (a Python loop on one core)", res["busy"])
    if not args.skip_side_by_side:
        res["side_by_side"] = side_by_side(args.repeats)
        report("two training processes side by side (each row: both processes' runs)", res["side_by_side"])
    res["machine"]["loadavg_end"] = os.getloadavg()
    print("\nmachine:", json.dumps(res["machine"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
