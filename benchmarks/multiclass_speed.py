"""Ordinal objectives per boosting round on every engine, beside each engine's built-in objectives.

    python benchmarks/multiclass_speed.py                      # 80,000 x 5 rows, K = 4, 60 rounds, 5 repeats
    python benchmarks/multiclass_speed.py --repeats 1 --rows 20000
    python benchmarks/multiclass_speed.py --baseline 95dd1b5   # this tree against an older commit, A/B
    python benchmarks/multiclass_speed.py --threads 1          # one engine thread: CPU time is all the work

The DSB2019 article's quartile data (K = 4 classes), one training fold of 80,000 rows and an eval set of
20,000 rows scored every round (as cross-validation does), trees of depth 5 with at most 32 leaves on every
engine (LightGBM's other limits as in ``native_speed.py``), learning rate 0.1, 2 engine threads
(``--threads``). Every run is a fresh process (``qwkboost.train`` from a plain ``import qwkboost``); a
run's figures are the median wall time and the median process CPU time between progress callbacks over
rounds 6..60. The configurations are interleaved, so that a busy spell of a shared machine hits every one
of them, and each is repeated: a configuration's figure is the median of its repeats. Built-in rows use
the engine's own objective and metric without ``qwkboost`` (``multiclass`` / ``multi:softprob`` with
log-loss, ``regression`` / ``reg:squarederror`` with RMSE).

With ``--baseline REV`` the ``qwkboost`` package of commit ``REV`` (``git archive``) is timed too, each of
its runs next to the same configuration of this tree (the order alternating by repeat): the table then has
both columns and their ratio. The ratios printed are the targets of issue 23: ``ordinal_logit`` against
``squared_error`` on the same engine (at most 1.5x), ``multiclass`` and ``soft_qwk`` against the engine's
built-in multiclass (at most 1.5x), native ``multiclass`` against LightGBM's built-in multiclass (at most
2.0x).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from machine import machine  # noqa: E402

ENGINES = ("lightgbm", "xgboost", "native")
OBJECTIVES = ("builtin_regression", "builtin_multiclass", "squared_error", "ordinal_logit", "multiclass",
              "soft_qwk")

CHILD = r"""
import json, os, sys, time
import numpy as np
engine, objective, rows, rounds, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
from qwkboost.data.sources import quartiles
ds = quartiles(n_train=rows + rows // 4, n_test=10)
X, y = ds.X_train[:rows], ds.y_train[:rows]
Xv, yv = ds.X_train[rows:], ds.y_train[rows:]
stamps, cpu = [], []
def tick():
    stamps.append(time.perf_counter())
    cpu.append(time.process_time())
# one tree shape for every engine, as in native_speed.py: depth 5, at most 32 leaves
SHAPE = {"native": {"max_depth": 5}, "xgboost": {"max_depth": 5},
         "lightgbm": {"max_depth": 5, "num_leaves": 32, "min_data_in_leaf": 1, "min_sum_hessian_in_leaf": 1.0,
                      "lambda_l2": 1.0}}
if objective.startswith("builtin_"):
    multi = objective == "builtin_multiclass"
    if engine == "lightgbm":
        import lightgbm as lgb
        cb = lambda env: tick()
        p = {"objective": "multiclass", "num_class": 4} if multi else {"objective": "regression"}
        lgb.train({**p, "num_threads": threads, "verbose": -1, "learning_rate": 0.1, **SHAPE["lightgbm"]},
                  lgb.Dataset(X, y), rounds, valid_sets=[lgb.Dataset(Xv, yv)], callbacks=[cb])
    else:
        import xgboost as xgb
        class CB(xgb.callback.TrainingCallback):
            def after_iteration(self, model, epoch, evals_log):
                tick()
                return False
        p = {"objective": "multi:softprob", "num_class": 4, "eval_metric": "mlogloss"} if multi else \
            {"objective": "reg:squarederror", "eval_metric": "rmse"}
        xgb.train({**p, "nthread": threads, "learning_rate": 0.1, "tree_method": "hist", **SHAPE["xgboost"]},
                  xgb.DMatrix(X, label=y), rounds, evals=[(xgb.DMatrix(Xv, label=yv), "valid")],
                  callbacks=[CB()], verbose_eval=False)
else:
    import qwkboost as qb
    params = {"learning_rate": 0.1, **SHAPE[engine]}
    qb.train(X, y, engine, objective, params, num_boost_round=rounds, eval_set=(Xv, yv), n_jobs=threads,
             callbacks=[lambda r, e: tick()])
gaps, cpus = np.diff(stamps)[5:], np.diff(cpu)[5:]
print(json.dumps({"ms": float(np.median(gaps) * 1e3), "cpu_ms": float(np.median(cpus) * 1e3),
                  "load": os.getloadavg()[0]}))
"""


def configs(engines, objectives) -> list[tuple[str, str]]:
    """(engine, objective) pairs; built-in objectives only on LightGBM and XGBoost."""
    return [(e, o) for o in objectives for e in engines if not (o.startswith("builtin_") and e == "native")]


def run(engine: str, objective: str, rows: int, rounds: int, threads: int, code: str) -> dict:
    """One fresh process timing one configuration with the ``qwkboost`` package found under ``code``."""
    env = {**os.environ, "PYTHONPATH": code + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", CHILD, engine, objective, str(rows), str(rounds), str(threads)],
                         capture_output=True, text=True, check=True, env=env, cwd=code)
    return json.loads(out.stdout.strip().splitlines()[-1])


def extract(rev: str, into: str) -> str:
    """The ``qwkboost`` package of commit ``rev`` written under ``into`` (``git archive``; the repository is
    left as it is)."""
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev, "qwkboost"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", into], input=archive.stdout, check=True)
    return into


def ratios(ms: dict) -> list[tuple[str, float, float]]:
    """The issue's ratios from a ``{(engine, objective): ms}`` table: (name, value, target)."""
    out = []
    for e in ENGINES:
        if (e, "ordinal_logit") in ms and (e, "squared_error") in ms:
            out.append((f"{e}: ordinal_logit / squared_error", ms[e, "ordinal_logit"] / ms[e, "squared_error"], 1.5))
    for e in ("lightgbm", "xgboost"):
        for o in ("multiclass", "soft_qwk"):
            if (e, o) in ms and (e, "builtin_multiclass") in ms:
                out.append((f"{e}: {o} / built-in multiclass", ms[e, o] / ms[e, "builtin_multiclass"], 1.5))
    if ("native", "multiclass") in ms and ("lightgbm", "builtin_multiclass") in ms:
        out.append(("native multiclass / LightGBM built-in multiclass",
                    ms["native", "multiclass"] / ms["lightgbm", "builtin_multiclass"], 2.0))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=80_000)
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2, help="engine threads (1: CPU time is the whole work)")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--objectives", default=",".join(OBJECTIVES))
    ap.add_argument("--baseline", metavar="REV", help="also time the qwkboost package of this git commit")
    ap.add_argument("--json", metavar="PATH", help="write every run's figure here")
    args = ap.parse_args()
    todo = configs(args.engines.split(","), args.objectives.split(","))
    m0 = machine()
    with tempfile.TemporaryDirectory() as tmp:
        codes = {"head": ROOT}
        if args.baseline:
            codes["base"] = extract(args.baseline, tmp)
        runs: dict = {}
        for rep in range(args.repeats):
            for eng, obj in todo:                  # interleaved: a busy spell hits every configuration
                order = list(codes) if rep % 2 == 0 else list(codes)[::-1]
                for name in order:
                    if name == "base" and obj.startswith("builtin_"):
                        continue                   # the engines' own objectives do not depend on qwkboost
                    r = run(eng, obj, args.rows, args.rounds, args.threads, codes[name])
                    runs.setdefault((name, eng, obj), []).append(r)
                    print(f"  {name} {eng} {obj}: {r['ms']:.2f} ms, CPU {r['cpu_ms']:.2f} ms (load {r['load']:.2f})",
                          file=sys.stderr)
    for measure in ("ms", "cpu_ms"):
        table(runs, measure, args)
    loads = [r["load"] for v in runs.values() for r in v]
    print(f"\nload average (1 min) seen by the runs: median {np.median(loads):.2f}, range "
          f"{min(loads):.2f}-{max(loads):.2f}; the machine was shared with other jobs")
    print(f"machine: {json.dumps({**m0, 'loadavg_end': os.getloadavg()})}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "machine": m0,
                       "runs": [{"code": n, "engine": e, "objective": o, **r}
                                for (n, e, o), v in runs.items() for r in v]}, f, indent=1)


def table(runs: dict, measure: str, args) -> None:
    """The medians of ``measure`` (wall ``ms`` or process ``cpu_ms``) per configuration, and the ratios."""
    med = {k: float(np.median([r[measure] for r in v])) for k, v in runs.items()}
    head = {(e, o): v for (n, e, o), v in med.items() if n == "head" or o.startswith("builtin_")}
    what = "wall ms" if measure == "ms" else "process CPU ms"
    print(f"\n## {what} per round, {args.rows:,} x 5 rows, K = 4, eval set of {args.rows // 4:,} rows, "
          f"{args.threads} engine thread(s) (median of {args.repeats} fresh processes, interleaved)\n")
    cols = [e for e in ENGINES if e in args.engines.split(",")]
    base = "base" in {n for n, _, _ in runs}
    print("| objective | " + " | ".join(f"{e}" + (f" (base {args.baseline}) | {e} (this tree) | ratio" if base else "")
                                         for e in cols) + " |")
    print("|---|" + "---:|" * (len(cols) * (3 if base else 1)))
    for o in args.objectives.split(","):
        cells = []
        for e in cols:
            h = head.get((e, o))
            b = med.get(("base", e, o))
            if base:
                cells += ["" if b is None else f"{b:.1f}", "" if h is None else f"{h:.1f}",
                          "" if b is None or h is None else f"{h / b:.2f}"]
            else:
                cells.append("" if h is None else f"{h:.1f}")
        print(f"| `{o}` | " + " | ".join(cells) + " |")
    print("\n| ratio (this tree) | value | target |\n|---|---:|---:|")
    for name, v, target in ratios(head):
        print(f"| {name} | {v:.2f}x | <= {target:.1f}x |")


if __name__ == "__main__":
    main()
