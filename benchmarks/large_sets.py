"""qwkboost's one-command path against AutoGluon with the same wall time, on the large packaged sets.

    python benchmarks/large_sets.py --engines lightgbm xgboost --presets best_quality medium_quality \
        --json benchmarks/results/large_sets.json --workdir outputs/large_sets      # the five sets, about 40 min
    python benchmarks/large_sets.py --sets happiness --n-train 2000 --engines lightgbm   # a smoke run, minutes

Per set (``qwkboost.data.packaged``; the fixed train/test split) and seed: the README's multirun (every engine of
``--engines`` times squared error and extended QWK, the configured defaults, as a user runs it) and
``experiments/blend.py`` on it, timed from start to end; then AutoGluon's ``TabularPredictor(eval_metric=
"quadratic_kappa")`` in its own environment (``benchmarks/autogluon_peer.py``, ``.venv-autogluon``) with that wall
time as its ``time_limit``, once per ``--presets``. Reported: each side's test QWK and seconds, the blend's
nested out-of-fold QWK, and the best single run's test QWK. Finished (set, seed) pairs and presets are kept in
``--json``: the same command resumes, and a new preset runs only AutoGluon.
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


def run(cmd: list[str], log: str, cwd: str | None = None, env: dict | None = None) -> float:
    """Run ``cmd`` (in ``cwd``, with the environment ``env``; by default this process's), its output to ``log``;
    its wall seconds. A failure ends the benchmark, naming the log."""
    t = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, text=True, cwd=cwd, env=env)
    if proc.returncode:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}; see {log}")
    return time.perf_counter() - t


def one(name: str, seed: int, args, work: str, data: list[str] | None = None) -> dict:
    """The multirun and blend by hand on set ``name`` (``data``: its data overrides instead of ``data=<name>``,
    e.g. another split's files as ``data=csv``), in ``<work>/<name>-<seed>``; its seconds and QWK."""
    d = os.path.abspath(os.path.join(work, f"{name}-{seed}"))    # tracking.uri wants an absolute path
    os.makedirs(d, exist_ok=True)
    common = [*(data or [f"data={name}"]), f"seed={seed}", f"tracking.uri=sqlite:///{d}/mlflow.db"]
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
    return out


def autogluon(row: dict, preset: str, args, work: str) -> dict:
    """AutoGluon on ``row``'s set and seed with ``preset``, its time limit qwkboost's measured wall time."""
    from qwkboost.data.packaged import PACKAGED, materialise

    if not os.path.exists(AG_PYTHON):
        raise SystemExit(f"{AG_PYTHON} is missing; make it as benchmarks/autogluon_peer.py says")
    name, seed = row["set"], row["seed"]
    spec = PACKAGED[name]
    train, test = materialise(name)
    d = os.path.abspath(os.path.join(work, f"{name}-{seed}", f"autogluon-{preset}"))
    os.makedirs(d, exist_ok=True)
    cmd = [AG_PYTHON, os.path.join(HERE, "autogluon_peer.py"), "--train", str(train), "--test", str(test),
           "--target", spec.target, "--time-limit", f"{row['qwkboost_seconds']:.0f}", "--seed", str(seed),
           "--presets", preset, "--json", f"{d}/autogluon.json", "--workdir", f"{d}/models"]
    if spec.classes:
        cmd += ["--classes", *map(str, spec.classes)]
    if args.n_train:
        cmd += ["--n-train", str(args.n_train)]
    run(cmd, f"{d}/autogluon.log")
    with open(f"{d}/autogluon.json") as f:
        ag = json.load(f)
    return {"test_qwk": ag["test_qwk"], "seconds": ag["seconds"], "best_model": ag["best_model"],
            "models": len(ag["models"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="*", default=["diamonds", "chem97", "insteval", "gss_vocab", "happiness"])
    ap.add_argument("--seeds", type=int, nargs="*", default=[0])
    ap.add_argument("--engines", nargs="*", default=["xgboost", "lightgbm", "catboost"])
    ap.add_argument("--n-train", type=int, help="a stratified sample of each set's training rows (smoke runs)")
    ap.add_argument("--no-autogluon", dest="autogluon", action="store_false")
    ap.add_argument("--presets", nargs="*", default=["best_quality"],
                    help="AutoGluon presets, each given qwkboost's time (best_quality: what AutoGluon recommends "
                         "for competitions; medium_quality trains more models in a short time)")
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
                row = next((r for r in rows if (r["set"], r["seed"], r["n_train"]) == (name, seed, args.n_train)),
                           None)
                if row is None:
                    row = one(name, seed, args, work)
                    rows.append(row)
                for preset in args.presets if args.autogluon else []:
                    ag = row.setdefault("autogluon", {})
                    if preset not in ag:
                        if preset == "best_quality" and "autogluon_test_qwk" in row:     # files of the first version
                            ag[preset] = {"test_qwk": row.pop("autogluon_test_qwk"),
                                          "seconds": row.pop("autogluon_seconds"),
                                          "best_model": row.pop("autogluon_best_model"),
                                          "models": row.pop("autogluon_models")}
                        else:
                            ag[preset] = autogluon(row, preset, args, work)
                print(json.dumps(row), flush=True)
                with open(args.json, "w") as f:
                    json.dump(rows, f, indent=1)
    presets = list(dict.fromkeys(p for r in rows for p in r.get("autogluon", {})))
    print("| set | seed | qwkboost: multirun + blend, s | blend test QWK (nested OOF) | best single run test QWK | "
          + "".join(f"AutoGluon {p}, same time: test QWK (best model) | " for p in presets))
    print("|---|---:|---:|---|---:|" + "---|" * len(presets))
    for r in rows:
        ags = "".join(f"{r['autogluon'][p]['test_qwk']:.4f} ({r['autogluon'][p]['best_model']}) | "
                      if p in r.get("autogluon", {}) else "- | " for p in presets)
        print(f"| {r['set']} | {r['seed']} | {r['qwkboost_seconds']:.0f} | {r['qwkboost_test_qwk']:.4f} "
              f"({r['qwkboost_nested_oof_qwk']:.4f}) | {r['best_member_test_qwk']:.4f} | {ags}")


if __name__ == "__main__":
    main()
