"""Id-like categorical columns through the run command: test QWK and out-of-fold RMSE on every engine.

    python benchmarks/native_categorical.py                  # squared error and extended QWK, 3 engines
    python benchmarks/native_categorical.py --objectives squared_error --seeds 0 1 2
    python benchmarks/native_categorical.py --engines lightgbm catboost --strings   # the ids as strings

The data is ``qwkboost.data.synthetic.id_frames``: 50,000 training and 20,000 test rows, two integer id
columns of 2,500 and 900 levels (about 20 and 55 rows per level, skewed) whose effects carry most of the
signal, three numeric columns, four classes. Both files are written as CSV (the test file with its labels,
so that the run scores it) and every engine runs as a user would run it, one fresh process per run:

    python experiments/run.py engine=E objective=O data=csv data.path=train.csv data.test_path=test.csv
        data.target=label data.id=id data.categorical=[id_1,id_2]

with the engines' shipped configs (5-fold CV, early stopping 100 on each fold, learning rate 0.1). Reported
per run: test QWK with the cut points fitted on the out-of-fold scores, the out-of-fold RMSE, the mean best
round and the fit time; then the native engine's and CatBoost's gaps to LightGBM. With ``--strings`` the id
columns are written as strings (``a17``, ``b3``): categorical by their type, without ``data.categorical``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import machine  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def write_files(d: str, seed: int, strings: bool = False) -> None:
    from qwkboost.data.synthetic import id_frames

    train, test = id_frames(seed=seed)
    if strings:
        for frame in (train, test):
            for col, prefix in (("id_1", "a"), ("id_2", "b")):
                frame[col] = prefix + frame[col].astype(str)
    train.to_csv(os.path.join(d, "train.csv"), index=False)
    test.to_csv(os.path.join(d, "test.csv"), index=False)


def run(d: str, engine: str, objective: str, store: str, strings: bool = False) -> dict:
    out = os.path.join(d, f"{engine}__{objective}")
    cmd = [sys.executable, os.path.join(ROOT, "experiments", "run.py"), f"engine={engine}", f"objective={objective}",
           "data=csv", f"data.path={d}/train.csv", f"data.test_path={d}/test.csv", "data.target=label", "data.id=id",
           *([] if strings else ["data.categorical=[id_1,id_2]"]), f"hydra.run.dir={out}", f"tracking.uri={store}"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    with open(os.path.join(out, "result.json")) as f:
        return json.load(f)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", nargs="*", default=["lightgbm", "xgboost", "native"])
    ap.add_argument("--objectives", nargs="*", default=["squared_error", "extended_qwk"])
    ap.add_argument("--seeds", type=int, nargs="*", default=[0])
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--strings", action="store_true", help="write the id columns as strings")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{tmp}/mlflow.db"
        for seed in args.seeds:
            d = os.path.join(tmp, f"seed{seed}")
            os.makedirs(d)
            write_files(d, seed, args.strings)
            for objective in args.objectives:
                for engine in args.engines:
                    r = run(d, engine, objective, store, args.strings)
                    rows.append({"seed": seed, "engine": engine, "objective": objective,
                                 "test_qwk": r["qwk_thresholds"], "rmse_oof": r["rmse_oof"],
                                 "best_round": r["best_iteration_mean"], "fit_seconds": r["fit_seconds"]})
                    print(json.dumps(rows[-1]), flush=True)
    print("\n| seed | objective | engine | test QWK | OOF RMSE | best round | fit s |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['seed']} | {r['objective']} | {r['engine']} | {r['test_qwk']:.4f} | {r['rmse_oof']:.4f} | "
              f"{r['best_round']:.0f} | {r['fit_seconds']:.1f} |")
    by = {(r["seed"], r["objective"], r["engine"]): r for r in rows}
    for seed in args.seeds:
        for objective in args.objectives:
            lg = by.get((seed, objective, "lightgbm"))
            for other in ("native", "catboost"):
                n = by.get((seed, objective, other))
                if n and lg:
                    print(f"seed {seed}, {objective}: {other} - LightGBM test QWK {n['test_qwk'] - lg['test_qwk']:+.4f}, "
                          f"OOF RMSE {other} / LightGBM {n['rmse_oof'] / lg['rmse_oof']:.4f}, fit time "
                          f"{n['fit_seconds'] / lg['fit_seconds']:.1f}x")
    m = machine()
    print("\nmachine:", json.dumps(m))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "machine": m}, f, indent=1)


if __name__ == "__main__":
    main()
