"""qwkboost's one-command path against AutoGluon with the same wall time, on the large packaged sets.

    python benchmarks/large_sets.py --sets diamonds chem97 insteval gss_vocab happiness --json large_sets.json
    python benchmarks/large_sets.py --sets happiness --n-train 2000 --engines lightgbm   # a smoke run, minutes

Per set (``qwkboost.data.packaged``; the fixed train/test split) and seed: the README's multirun (every engine of
``--engines`` times squared error and extended QWK, the configured defaults, as a user runs it) and
``experiments/blend.py`` on it, timed from start to end; then AutoGluon's ``TabularPredictor(eval_metric=
"quadratic_kappa")`` in its own environment (``benchmarks/autogluon_peer.py``, ``.venv-autogluon``) with that wall
time as its ``time_limit``. Reported: each side's test QWK and seconds, the blend's nested out-of-fold QWK, and
the best single run's test QWK. Finished (set, seed) pairs are kept in ``--json``: the same command resumes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from machine import machine  # noqa: E402

AG_PYTHON = os.path.join(ROOT, ".venv-autogluon", "bin", "python")


def run(cmd: list[str], log: str) -> float:
    t = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, text=True)
    if proc.returncode:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}; see {log}")
    return time.perf_counter() - t


def one(name: str, seed: int, args, work: str) -> dict:
    from qwkboost.data.packaged import PACKAGED, materialise

    spec = PACKAGED[name]
    train, test = materialise(name)
    d = os.path.abspath(os.path.join(work, f"{name}-{seed}"))    # tracking.uri wants an absolute path
    os.makedirs(d, exist_ok=True)
    common = [f"data={name}", f"seed={seed}", f"tracking.uri=sqlite:///{d}/mlflow.db"]
    if args.n_train:
        common.append(f"data.n_train={args.n_train}")
    t_qb = run([sys.executable, os.path.join(ROOT, "experiments", "run.py"), "-m", f"engine={','.join(args.engines)}",
                "objective=squared_error,extended_qwk", *common, f"hydra.sweep.dir={d}/multirun"], f"{d}/multirun.log")
    t_qb += run([sys.executable, os.path.join(ROOT, "experiments", "blend.py"), f"runs=[{d}/multirun]",
                 f"tracking.uri=sqlite:///{d}/mlflow.db", f"hydra.run.dir={d}/blend"], f"{d}/blend.log")
    with open(f"{d}/blend/blend.json") as f:
        blend = json.load(f)
    metrics = blend            # blend.json holds the metrics at its top level
    out = {"set": name, "seed": seed, "n_train": args.n_train, "engines": args.engines, "qwkboost_seconds": t_qb,
           "qwkboost_test_qwk": metrics["test_qwk"], "qwkboost_nested_oof_qwk": metrics["nested_oof_qwk"],
           "best_member_test_qwk": metrics.get("best_member_test_qwk"),
           "chosen_member_test_qwk": metrics.get("chosen_member_test_qwk")}
    if args.autogluon:
        if not os.path.exists(AG_PYTHON):
            raise SystemExit(f"{AG_PYTHON} is missing; make it as benchmarks/autogluon_peer.py says")
        cmd = [AG_PYTHON, os.path.join(HERE, "autogluon_peer.py"), "--train", str(train), "--test", str(test),
               "--target", spec.target, "--time-limit", f"{t_qb:.0f}", "--seed", str(seed), "--json",
               f"{d}/autogluon.json", "--workdir", f"{d}/autogluon-models"]
        if spec.classes:
            cmd += ["--classes", *map(str, spec.classes)]
        if args.n_train:
            cmd += ["--n-train", str(args.n_train)]
        run(cmd, f"{d}/autogluon.log")
        with open(f"{d}/autogluon.json") as f:
            ag = json.load(f)
        out.update(autogluon_test_qwk=ag["test_qwk"], autogluon_seconds=ag["seconds"],
                   autogluon_best_model=ag["best_model"], autogluon_models=len(ag["models"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="*", default=["diamonds", "chem97", "insteval", "gss_vocab", "happiness"])
    ap.add_argument("--seeds", type=int, nargs="*", default=[0])
    ap.add_argument("--engines", nargs="*", default=["xgboost", "lightgbm", "catboost"])
    ap.add_argument("--n-train", type=int, help="a stratified sample of each set's training rows (smoke runs)")
    ap.add_argument("--no-autogluon", dest="autogluon", action="store_false")
    ap.add_argument("--workdir", help="keep the runs here (default: a temporary directory)")
    ap.add_argument("--json", required=True, help="every (set, seed)'s figures; finished pairs are not rerun")
    args = ap.parse_args()
    print(json.dumps(machine()), flush=True)
    rows = json.load(open(args.json)) if os.path.exists(args.json) else []
    done = {(r["set"], r["seed"], r["n_train"]) for r in rows}
    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or tmp
        for name in args.sets:
            for seed in args.seeds:
                if (name, seed, args.n_train) in done:
                    continue
                rows.append(one(name, seed, args, work))
                print(json.dumps(rows[-1]), flush=True)
                with open(args.json, "w") as f:
                    json.dump(rows, f, indent=1)
    print("| set | seed | qwkboost: multirun + blend, s | blend test QWK (nested OOF) | best single run test QWK | "
          "AutoGluon, same time: test QWK | AutoGluon best model |")
    print("|---|---:|---:|---|---:|---:|---|")
    for r in rows:
        print(f"| {r['set']} | {r['seed']} | {r['qwkboost_seconds']:.0f} | {r['qwkboost_test_qwk']:.4f} "
              f"({r['qwkboost_nested_oof_qwk']:.4f}) | {r['best_member_test_qwk']:.4f} | "
              f"{r.get('autogluon_test_qwk', float('nan')):.4f} | {r.get('autogluon_best_model', '-')} |")


if __name__ == "__main__":
    main()
