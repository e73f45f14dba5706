"""The time budget (``experiment=auto``) against AutoGluon at the same time limit, and against the multirun and
blend by hand, on the five large packaged sets with every training row.

    python benchmarks/auto_budget.py --json benchmarks/results/auto_budget.json --workdir outputs/auto_budget
    python benchmarks/auto_budget.py --long 0 --by-hand-engines lightgbm xgboost \
        --json benchmarks/results/auto_budget.json --workdir outputs/auto_budget          # as in RESULTS.md
    python benchmarks/auto_budget.py --json benchmarks/results/auto_budget.json --report-only   # its tables
    python benchmarks/auto_budget.py --json benchmarks/results/auto_budget.json --workdir outputs/auto_budget \
        --reblend                       # the finished runs' candidates blended again with the current pool rule
    python benchmarks/auto_budget.py --sets happiness --budgets 60 --no-autogluon --no-by-hand \
        --json /tmp/smoke.json                                              # a smoke run, two minutes

Per set (``qwkboost.data.packaged``, its fixed train/test split) and budget (``--budgets``, 60 and 300 s, and
``--long`` on ``--long-set``): ``python experiments/run.py experiment=auto auto.time_limit=<budget> data=<set>``
in a fresh process, as a user runs it, its wall time measured from outside; then AutoGluon's
``TabularPredictor(eval_metric="quadratic_kappa")`` in its own environment (``benchmarks/autogluon_peer.py``,
``.venv-autogluon``) with the same ``time_limit``, once per preset (``best_quality``, ``medium_quality``); and once
per set the path by hand (``benchmarks/large_sets.py``: the multirun of ``--by-hand-engines`` times squared error
and extended QWK, then ``experiments/blend.py``), timed. Every row is kept in ``--json`` as it finishes: the same
command resumes. The runs of a set follow each other, so the machine's load is alike for all of them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from large_sets import one, run  # noqa: E402
from machine import machine  # noqa: E402


def auto(name: str, budget: float, seed: int, work: str) -> dict:
    """``experiment=auto`` on a packaged set in a fresh process; its figures from ``leaderboard.csv`` and the
    blend's files."""
    import pandas as pd

    d = os.path.abspath(os.path.join(work, f"{name}-{seed}", f"auto-{budget:g}"))
    os.makedirs(d, exist_ok=True)
    wall = run([sys.executable, os.path.join(ROOT, "experiments", "run.py"), "experiment=auto",
                f"auto.time_limit={budget:g}", f"data={name}", f"seed={seed}",
                f"tracking.uri=sqlite:///{d}/mlflow.db", f"hydra.run.dir={d}/out"], f"{d}/auto.log")
    board = pd.read_csv(f"{d}/out/leaderboard.csv")
    record = json.load(open(f"{d}/out/auto.json"))
    session = record["sessions"][-1]
    blend = json.load(open(f"{d}/out/blend.json")) if os.path.exists(f"{d}/out/blend.json") else None
    finished = board[board.status == "finished"]
    best = finished.sort_values("nested_oof_qwk", ascending=False).iloc[0]
    return {"set": name, "seed": seed, "budget": budget, "wall_seconds": wall, "auto_seconds": session["seconds"],
            "test_qwk": blend["test_qwk"] if blend else float(best["test_qwk"]),
            "nested_oof_qwk": blend["nested_oof_qwk"] if blend else float(best["nested_oof_qwk"]),
            "finished": int(len(finished)), "stopped": int((board.status == "stopped").sum()),
            "pruned": int((board.status == "pruned").sum()),
            "trials": int(finished.candidate.str.contains("-trial-").sum()),
            "members": int((board.weight > 0).sum()),
            "best_single": str(best.candidate), "best_single_test_qwk": float(best["test_qwk"])}


def reblend(name: str, budget: float, seed: int, work: str) -> dict:
    """An auto run's finished candidates blended again as its last step does now (the pool of
    ``qwkboost.autoblend.driver.diverse_pool``, greedy selection, exact cut points): what the blend rule alone
    changes, on the same candidates."""
    from dataclasses import replace
    from pathlib import Path

    from qwkboost.autoblend.driver import diverse_pool
    from qwkboost.blending import blend, read_members

    out = Path(work) / f"{name}-{seed}" / f"auto-{budget:g}" / "out"
    rec = json.loads((out / "auto.json").read_text())
    done = [(n, r) for n, r in rec["candidates"].items()
            if r.get("status") == "finished" and (out / r["dir"] / "oof.parquet").exists()]
    pool = diverse_pool(done, 15)
    members = [replace(m, name=n) for m, (n, _) in zip(read_members([out / r["dir"] for _, r in pool]), pool)]
    result = blend(members, method="greedy", thresholds="exact")
    return {"set": name, "seed": seed, "budget": budget, "pool": len(pool),
            "members": int(sum(w > 0 for w in result.weights)), "test_qwk": result.metrics["test_qwk"],
            "nested_oof_qwk": result.metrics["nested_oof_qwk"]}


def autogluon(name: str, budget: float, preset: str, seed: int, work: str) -> dict:
    from large_sets import autogluon as ag_run

    row = {"set": name, "seed": seed, "qwkboost_seconds": budget}
    args = argparse.Namespace(n_train=None)
    sub = os.path.join(work, f"budget-{budget:g}")
    out = ag_run(row, preset, args, sub)
    return {"set": name, "seed": seed, "budget": budget, "preset": preset, **out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="*", default=["diamonds", "chem97", "insteval", "gss_vocab", "happiness"])
    ap.add_argument("--budgets", type=float, nargs="*", default=[60, 300])
    ap.add_argument("--long", type=float, default=900, help="a longer budget, on --long-set only")
    ap.add_argument("--long-set", default="insteval", help="the largest set")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--presets", nargs="*", default=["best_quality", "medium_quality"])
    ap.add_argument("--no-autogluon", dest="autogluon", action="store_false")
    ap.add_argument("--no-by-hand", dest="by_hand", action="store_false")
    ap.add_argument("--by-hand-engines", nargs="*", default=["lightgbm", "xgboost", "catboost"])
    ap.add_argument("--workdir", help="keep the runs here (default: a temporary directory)")
    ap.add_argument("--json", required=True, help="every row as it finishes; finished rows are not rerun")
    ap.add_argument("--report-only", action="store_true", help="print the tables of --json and run nothing")
    ap.add_argument("--reblend", action="store_true",
                    help="re-blend every finished auto run in --workdir with the current blend pool (no training) "
                         "and keep the figures as kind=reblend rows")
    args = ap.parse_args()
    rows = json.load(open(args.json)) if os.path.exists(args.json) else []
    if args.reblend:
        rows = [r for r in rows if r["kind"] != "reblend"]
        for r in [r for r in rows if r["kind"] == "auto"]:
            rows.append({"kind": "reblend", **reblend(r["set"], r["budget"], r["seed"], args.workdir)})
            print(json.dumps(rows[-1]), flush=True)
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.report_only or args.reblend:
        report(rows)
        return
    print(json.dumps(machine()), flush=True)

    def have(**key) -> bool:
        return any(all(r.get(k) == v for k, v in key.items()) for r in rows)

    def keep(row: dict) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)

    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or tmp
        for name in args.sets:
            budgets = list(args.budgets) + ([args.long] if args.long and name == args.long_set else [])
            for budget in budgets:
                if not have(kind="auto", set=name, budget=budget):
                    keep({"kind": "auto", **auto(name, budget, args.seed, work)})
                for preset in args.presets if args.autogluon else []:
                    if not have(kind="autogluon", set=name, budget=budget, preset=preset):
                        keep({"kind": "autogluon", **autogluon(name, budget, preset, args.seed, work)})
            if args.by_hand and not have(kind="by_hand", set=name):
                t = time.perf_counter()
                r = one(name, args.seed, argparse.Namespace(n_train=None, engines=args.by_hand_engines), work)
                keep({"kind": "by_hand", "set": name, "seed": args.seed, "engines": args.by_hand_engines,
                      "seconds": r["qwkboost_seconds"], "test_qwk": r["qwkboost_test_qwk"],
                      "nested_oof_qwk": r["qwkboost_nested_oof_qwk"], "wall_seconds": time.perf_counter() - t})
    report(rows)


def report(rows: list[dict]) -> None:
    """The table of RESULTS.md: per set and budget, auto's test QWK and time against AutoGluon's presets, and at
    300 s the path by hand; then how each budget was kept."""
    budgets = sorted({r["budget"] for r in rows if r["kind"] == "auto"})
    presets = list(dict.fromkeys(r["preset"] for r in rows if r["kind"] == "autogluon"))
    print("| set | budget, s | auto: test QWK (nested OOF) | the same candidates re-blended (pool of each pair's best "
          "first) | auto: wall s | candidates finished / pruned / out of time (finished trials) | "
          + "".join(f"AutoGluon {p}: test QWK, s | " for p in presets) + "by hand: test QWK, s |")
    print("|---|---:|---|---|---:|---|" + "---|" * len(presets) + "---|")
    for name in dict.fromkeys(r["set"] for r in rows):
        hand = next((r for r in rows if r["kind"] == "by_hand" and r["set"] == name), None)
        for b in budgets:
            a = next((r for r in rows if r["kind"] == "auto" and r["set"] == name and r["budget"] == b), None)
            if a is None:
                continue
            ags = "".join(
                (lambda g: f"{g['test_qwk']:.4f}, {g['seconds']:.0f} | " if g else "- | ")(
                    next((r for r in rows if r["kind"] == "autogluon" and r["set"] == name and r["budget"] == b
                          and r["preset"] == p), None)) for p in presets)
            by_hand = f"{hand['test_qwk']:.4f}, {hand['wall_seconds']:.0f} |" if hand and b == 300 else " |"
            rb = next((r for r in rows if r["kind"] == "reblend" and r["set"] == name and r["budget"] == b), None)
            again = f" {rb['test_qwk']:.4f} ({rb['nested_oof_qwk']:.4f}) |" if rb else " |"
            print(f"| {name} | {b:g} | **{a['test_qwk']:.4f}** ({a['nested_oof_qwk']:.4f}) |{again} "
                  f"{a['wall_seconds']:.0f} | {a['finished']} / {a.get('pruned', 0)} / {a['stopped']} ({a['trials']}) | "
                  f"{ags}{by_hand}")
    autos = [r for r in rows if r["kind"] == "auto"]
    if autos:
        worst = max(autos, key=lambda r: r["wall_seconds"] / r["budget"])
        print(f"\nauto's wall time (the process, from outside) at most {worst['wall_seconds'] / worst['budget']:.0%} "
              f"of its budget ({worst['set']}, {worst['budget']:g} s); its own clock "
              f"{min(r['auto_seconds'] / r['budget'] for r in autos):.0%}-"
              f"{max(r['auto_seconds'] / r['budget'] for r in autos):.0%}")
        for p in presets:
            gaps = [a["test_qwk"] - g["test_qwk"] for a in autos for g in rows
                    if g["kind"] == "autogluon" and g.get("preset") == p and g["set"] == a["set"]
                    and g["budget"] == a["budget"]]
            if gaps:
                print(f"auto minus AutoGluon {p}: {min(gaps):+.4f} to {max(gaps):+.4f} over {len(gaps)} (set, budget)")
        hands = [(a["test_qwk"] - h["test_qwk"]) for a in autos if a["budget"] == 300 for h in rows
                 if h["kind"] == "by_hand" and h["set"] == a["set"]]
        if hands:
            print(f"auto at 300 s minus the path by hand: {min(hands):+.4f} to {max(hands):+.4f} over {len(hands)} sets")


if __name__ == "__main__":
    main()
