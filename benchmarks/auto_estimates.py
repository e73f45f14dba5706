"""Where auto's plan guesses, from the rows ``benchmarks/auto_budget.py`` wrote (each auto row's ``candidates``):

- each estimate's error (seconds taken over seconds estimated) by what it rested on (``estimate_kind``: measured,
  upper, projected, bound, scaled), per code (``auto``, ``auto_before``) and machine (the whole one, ``taskset``);
- each finished candidate's seconds outside its engine's training (its seconds less its folds' training seconds),
  as a share of the candidate, per engine and set;
- the candidates of each run that restarted (``not converged``) and the blend's members whose folds were cut at
  their share of the time before early stopping (``capped_folds``).

    python benchmarks/auto_estimates.py outputs/auto57/whole.json outputs/auto57/half_new.json \
        outputs/auto57/half_before.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict


def _machine(row: dict) -> str:
    return "whole" if row.get("cpus") is None else f"taskset -c {row['cpus']}"


def _runs(paths: list[str]) -> list[dict]:
    rows = []
    for p in paths:
        rows += [r for r in json.load(open(p)) if r["kind"] in ("auto", "auto_before") and r.get("candidates")]
    return rows


def _quantiles(values: list[float]) -> str:
    values = sorted(values)
    if len(values) < 2:
        return f"{values[0]:.2f}" if values else "-"
    q = statistics.quantiles(values, n=10, method="inclusive")
    return f"{statistics.median(values):.2f} [{q[0]:.2f}, {q[-1]:.2f}]"


def errors(rows: list[dict]) -> None:
    """Seconds taken over seconds estimated, per kind, code and machine: median [10th, 90th percentile] (n)."""
    table: dict = defaultdict(list)
    for r in rows:
        for c in r["candidates"]:
            if c.get("estimate_error") is not None and c.get("estimate_kind"):
                table[(c["estimate_kind"], r["kind"], _machine(r))].append(c["estimate_error"])
    print("\n| estimate kind | code | machine | taken / estimated: median [p10, p90] | n |\n|---|---|---|---|---|")
    for (kind, code, machine), v in sorted(table.items()):
        print(f"| {kind} | {code} | {machine} | {_quantiles(v)} | {len(v)} |")


def outside(rows: list[dict], budget: float = 300.0) -> None:
    """Each finished candidate's seconds outside its folds' training over its seconds, per engine and set (the
    median over candidates and trials), at ``budget``."""
    table: dict = defaultdict(list)
    for r in rows:
        if r["budget"] != budget:
            continue
        for c in r["candidates"]:
            if c["status"] == "finished" and c.get("fit_seconds") and c.get("seconds") and c["seconds"] >= 1:
                table[(r["set"], c["engine"], r["kind"], _machine(r))].append(
                    max(c["seconds"] - c["fit_seconds"], 0.0) / c["seconds"])
    print(f"\n| set | engine | code | machine | outside training, share of the candidate: median [p10, p90] | n |"
          f"\n|---|---|---|---|---|---|")
    for (name, engine, code, machine), v in sorted(table.items()):
        print(f"| {name} | {engine} | {code} | {machine} | {_quantiles(v)} | {len(v)} |")


def cut(rows: list[dict]) -> None:
    """Per run: the candidates that restarted at a raised learning rate, and the blend's members with cut folds."""
    print("\n| set | budget | code | machine | restarted (not converged) | members with cut folds |"
          "\n|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: (r["set"], r["budget"], r["kind"], _machine(r))):
        restarted = [c["name"] for c in r["candidates"] if c["status"] == "not converged"]
        capped = [f"{c['name']} ({c['capped_folds']:.0f})" for c in r["candidates"]
                  if (c.get("weight") or 0) > 0 and (c.get("capped_folds") or 0) > 0]
        print(f"| {r['set']} | {r['budget']:g} | {r['kind']} | {_machine(r)} | {', '.join(restarted) or '-'} | "
              f"{', '.join(capped) or '-'} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+", help="rows of benchmarks/auto_budget.py")
    ap.add_argument("--budget", type=float, default=300.0, help="the budget of the outside-training table")
    args = ap.parse_args()
    rows = _runs(args.json)
    errors(rows)
    outside(rows, args.budget)
    cut(rows)


if __name__ == "__main__":
    main()
