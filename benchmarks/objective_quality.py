"""Does a rewritten objective fit as well as before? Test QWK and log-loss, paired over seeds, this tree
against an older commit.

    python benchmarks/objective_quality.py --baseline 1fd4ab2                 # ordinal_logit, 3 engines, 10 seeds
    python benchmarks/objective_quality.py --baseline 1fd4ab2 --objectives multiclass,soft_qwk --engines lightgbm

Seed ``s`` draws the article's quartile data (``quartiles(n_train, n_test, seed=s, test_seed=1000 + s)``),
holds out the last 20 % of the training rows as the early-stopping set (``--early-stopping`` rounds, at most
``--rounds``), trains with learning rate 0.1 (depth 5 on XGBoost and native) and scores the test rows:
QWK of the expected class rounded to the nearest class, QWK of the most likely class, and the log-loss of the
class probabilities. Both versions see the same data, split and engine seed; each run is a fresh process
(the older one imports the ``qwkboost`` package of ``--baseline`` from ``git archive``). Reported per engine
and objective: the mean of each version, the mean paired difference (this tree minus the baseline) with its
95 % t interval, and the Wilcoxon signed-rank p-value (``qwkboost.evaluation.stats.paired_comparison``).
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
sys.path.insert(0, ROOT)

from machine import machine  # noqa: E402
from multiclass_speed import extract  # noqa: E402

CHILD = r"""
import json, sys
import numpy as np
import qwkboost as qb
from qwkboost.data.sources import quartiles
engine, objective, seed, n_train, n_test, rounds, es = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:8])
ds = quartiles(n_train=n_train, n_test=n_test, seed=seed, test_seed=1000 + seed)
cut = int(n_train * 0.8)
params = {"learning_rate": 0.1, **({} if engine == "lightgbm" else {"max_depth": 5})}
m = qb.train(ds.X_train[:cut], ds.y_train[:cut], engine, objective, params, num_boost_round=rounds,
             eval_set=(ds.X_train[cut:], ds.y_train[cut:]), early_stopping_rounds=es, seed=seed, n_jobs=1)
P = m.predict_proba(ds.X_test)
yt = ds.y_test.astype(int)
expected = P @ np.arange(P.shape[1])
out = {"qwk_rounded": qb.qwk(yt, np.clip(np.rint(expected), 0, P.shape[1] - 1).astype(int)),
       "qwk_argmax": qb.qwk(yt, P.argmax(axis=1)),
       "logloss": float(-np.mean(np.log(np.maximum(P[np.arange(yt.size), yt], 1e-15)))),
       "best_iteration": m.best_iteration}
print(json.dumps(out))
"""

METRICS = ("qwk_rounded", "qwk_argmax", "logloss", "best_iteration")


def run(code: str, engine: str, objective: str, seed: int, args) -> dict:
    env = {**os.environ, "PYTHONPATH": code + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", CHILD, engine, objective, str(seed), str(args.n_train),
                          str(args.n_test), str(args.rounds), str(args.early_stopping)],
                         capture_output=True, text=True, check=True, env=env, cwd=code)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    from qwkboost.evaluation.stats import paired_comparison

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, metavar="REV")
    ap.add_argument("--engines", default="lightgbm,xgboost,native")
    ap.add_argument("--objectives", default="ordinal_logit")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--n-train", type=int, default=20_000)
    ap.add_argument("--n-test", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3000)
    ap.add_argument("--early-stopping", type=int, default=50)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    m0 = machine()
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        codes = {"base": extract(args.baseline, tmp), "head": ROOT}
        for seed in range(args.seeds):
            for eng in args.engines.split(","):
                for obj in args.objectives.split(","):
                    for name in (("base", "head") if seed % 2 == 0 else ("head", "base")):
                        r = run(codes[name], eng, obj, seed, args)
                        results.setdefault((eng, obj, name), []).append(r)
                        print(f"  seed {seed} {eng} {obj} {name}: {r}", file=sys.stderr)
    print(f"## test scores, {args.baseline} against this tree, paired over {args.seeds} seeds "
          f"({args.n_train:,} training rows, 20 % of them for early stopping ({args.early_stopping}), "
          f"{args.n_test:,} test rows)\n")
    print("| engine | objective | metric | baseline | this tree | difference (95 % CI) | Wilcoxon p |")
    print("|---|---|---|---:|---:|---|---:|")
    for eng in args.engines.split(","):
        for obj in args.objectives.split(","):
            base, head = results[(eng, obj, "base")], results[(eng, obj, "head")]
            for met in METRICS:
                a = np.array([r[met] for r in head], dtype=float)
                b = np.array([r[met] for r in base], dtype=float)
                c = paired_comparison(a, b)
                p = "" if np.isnan(c.p_value) else f"{c.p_value:.3f}"
                fmt = ".1f" if met == "best_iteration" else ".4f"
                print(f"| {eng} | `{obj}` | {met} | {b.mean():{fmt}} | {a.mean():{fmt}} | "
                      f"{c.diff.mean:+{fmt}} [{c.diff.low:+{fmt}}, {c.diff.high:+{fmt}}] | {p} |")
    print(f"\nmachine: {json.dumps({**m0, 'loadavg_end': os.getloadavg()})}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "machine": m0,
                       "runs": [{"engine": e, "objective": o, "code": n, "seed": i, **r}
                                for (e, o, n), v in results.items() for i, r in enumerate(v)]}, f, indent=1)


if __name__ == "__main__":
    main()
