"""Pruners and samplers: how long a study takes, and how good its winner is, with and without each.

    python benchmarks/tuning.py                                   # the issue's protocol (hours on 2 cores)
    python benchmarks/tuning.py --rows 8000 --trials 30 --seeds 0 1 2

For each data set (the article's quartile data; ``latent_classes`` with 10% label noise; ``imbalanced``, class
shares 55/25/13/7), seed and configuration, one study of ``--trials`` trials on LightGBM (its shipped search
space, extended QWK, 5-fold CV), each study a fresh ``experiments/tune.py`` process on its own storage; the
configurations of a (data, seed) pair run one after the other, in a rotating order. Reported per study: wall
seconds, and the best trial's nested OOF QWK (cut points fitted without each fold) and test QWK (the data's own
test rows, never seen by the study). Per configuration: the median of the wall-time ratios to ``none`` (paired by
data and seed) and the mean difference of test QWK to ``none`` with its standard error.

To fit a benchmark, every trial trains at most ``--rounds`` rounds with early stopping after ``--patience``
(the shipped configs: 10,000 and 100) and logs no fold models (``tracking.log_models=false``); all of it applies
to every configuration alike.
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

DATA = {"quartiles": ["data=quartiles"], "latent_noisy": ["data=latent_classes", "data.label_noise=0.1"],
        "imbalanced": ["data=imbalanced"]}
CONFIGS = {"none": ["tune.pruner=none"], "median": ["tune.pruner=median"], "wilcoxon": ["tune.pruner=wilcoxon"],
           "successive_halving": ["tune.pruner=successive_halving"],
           "random+median": ["tune.pruner=median", "tune.sampler=random"],
           "cmaes+median": ["tune.pruner=median", "tune.sampler=cmaes"]}


def study(tmp: str, data: str, seed: int, config: str, args) -> dict:
    d = os.path.join(tmp, f"{data}-{seed}-{config}")
    os.makedirs(d)
    sizes = [f"data.n_train={args.rows}", f"data.n_test={args.rows}"]
    cmd = [sys.executable, os.path.join(ROOT, "experiments", "tune.py"), "engine=lightgbm", *DATA[data], *sizes,
           f"seed={seed}", f"tune.n_trials={args.trials}", f"tune.storage=sqlite:///{d}/optuna.db",
           f"tracking.uri=sqlite:///{d}/mlflow.db", f"engine.num_boost_round={args.rounds}",
           f"engine.early_stopping_rounds={args.patience}", f"hydra.run.dir={d}/out", "tracking.log_models=false",
           *CONFIGS[config]]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t
    import mlflow
    import optuna

    st = optuna.load_study(study_name=None, storage=f"sqlite:///{d}/optuna.db")
    best = st.best_trial
    run = mlflow.MlflowClient(f"sqlite:///{d}/mlflow.db").get_run(best.user_attrs["mlflow_run_id"])
    states = [tr.state.name for tr in st.trials]
    return {"data": data, "seed": seed, "config": config, "wall": wall, "best_oof": best.value,
            "best_nested": run.data.metrics.get("nested_oof_qwk", run.data.metrics.get("qwk_thresholds_oof_nested")),
            "test": run.data.metrics.get("test_qwk", run.data.metrics.get("qwk_thresholds")),
            "pruned": states.count("PRUNED"),
            "complete": states.count("COMPLETE")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--patience", type=int, default=50)
    ap.add_argument("--data", nargs="*", default=list(DATA))
    ap.add_argument("--configs", nargs="*", default=list(CONFIGS))
    ap.add_argument("--json", help="also write every study's figures here")
    ap.add_argument("--plot", help="also draw wall-time ratio against test QWK difference to this PNG")
    ap.add_argument("--report-only", action="store_true", help="print the table (and --plot) from --json, run nothing")
    ap.add_argument("--resume", action="store_true",
                    help="keep the studies already in --json (same settings) and run only the missing ones")
    args = ap.parse_args()
    print(json.dumps(machine()), flush=True)
    settings = {"rows": args.rows, "trials": args.trials, "rounds": args.rounds, "patience": args.patience}
    rows = []
    if args.resume or args.report_only:
        if not args.json:
            ap.error("--resume needs --json, the file of the studies already run")
        if os.path.exists(args.json):
            with open(args.json) as f:
                rows = [r for r in json.load(f) if r.get("settings", settings) == settings]
            print(f"resuming: {len(rows)} studies already in {args.json}", flush=True)
    done = {(r["data"], r["seed"], r["config"]) for r in rows}
    if args.report_only:
        report(rows, args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        for data in args.data:
            for seed in args.seeds:
                order = args.configs[seed % len(args.configs):] + args.configs[:seed % len(args.configs)]
                for config in order:
                    if (data, seed, config) in done:
                        continue
                    r = {**study(tmp, data, seed, config, args), "settings": settings}
                    rows.append(r)
                    print(json.dumps(r), flush=True)
                    if args.json:
                        with open(args.json, "w") as f:
                            json.dump(rows, f, indent=1)
    report(rows, args)


def report(rows: list[dict], args) -> None:
    """The table (paired with ``none`` by data and seed) and, with ``--plot``, the figure."""
    print(f"\n{args.trials} trials per study, {args.rows:,} training and test rows, LightGBM extended QWK, "
          f"at most {args.rounds} rounds, early stopping {args.patience}")
    print("| configuration | studies | median wall s | wall / none (median, paired; range) | trials pruned | "
          "best nested OOF QWK | test QWK | test QWK - none (mean +- se) | wins/losses |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    base = {(r["data"], r["seed"]): r for r in rows if r["config"] == "none"}
    points = []
    for config in args.configs:
        mine = [r for r in rows if r["config"] == config]
        paired = [(r, base[(r["data"], r["seed"])]) for r in mine if (r["data"], r["seed"]) in base]
        if not paired:
            continue
        ratios = np.array([a["wall"] / b["wall"] for a, b in paired])
        diff = np.array([a["test"] - b["test"] for a, b in paired])
        se = diff.std(ddof=1) / np.sqrt(diff.size) if diff.size > 1 else float("nan")
        points.append((config, ratios, diff, se))
        print(f"| {config} | {len(mine)} | {np.median([r['wall'] for r in mine]):.0f} | {np.median(ratios):.2f} "
              f"({ratios.min():.2f}-{ratios.max():.2f}) | {np.mean([r['pruned'] for r in mine]):.1f} / {args.trials} | "
              f"{np.mean([r['best_nested'] for r in mine]):.4f} | {np.mean([r['test'] for r in mine]):.4f} | "
              f"{diff.mean():+.4f} +- {se:.4f} | {(diff > 1e-9).sum()}/{(diff < -1e-9).sum()} |")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.2))
        for i, (config, ratios, diff, se) in enumerate(points):
            ax.scatter(ratios, diff, s=14, alpha=0.35, color=f"C{i}")
            ax.errorbar(np.median(ratios), diff.mean(), yerr=se, fmt="o", ms=8, capsize=4, color=f"C{i}",
                        label=config)
        ax.axhline(0, color="k", lw=0.8)
        ax.axvline(0.5, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("study wall time / the `none` study (TPE, no pruning; paired by data and seed)")
        ax.set_ylabel("best trial's test QWK − the `none` study's")
        ax.set_title(f"{len(rows)} studies of {args.trials} trials (large: mean ± se, median ratio)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
        print(f"figure written to {args.plot}")

if __name__ == "__main__":
    main()
