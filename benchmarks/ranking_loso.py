"""The ranking rule of the time budget (``qwkboost.autoblend.ranking``) checked leave-one-set-out on the path by
hand's candidates.

    python benchmarks/ranking_loso.py --json outputs/auto_plan/by_hand.json            # the table of RESULTS.md

The evidence: ``benchmarks/auto_budget.py``'s by-hand rows, whose ``members`` hold, per packaged set, every
(engine, objective) of the README's multirun (LightGBM, XGBoost and CatBoost x squared error and extended QWK at
the defaults, every training row, 5 folds) with its nested out-of-fold QWK, test QWK and seconds. Three rules
order those six candidates: the default order (no move), ``move``: CatBoost's pairs moved up when the set has an
id-like column (:func:`~qwkboost.autoblend.ranking.rank`, the rule shipped), and ``always``: moved up on every
set. A rule's regret on a set is the best nested out-of-fold QWK of all six minus the best among its first ``k``
(what a budget that runs ``k`` candidates gets). For each set held out, the rule with the least mean regret on the
other sets is chosen and its regret on the held-out set reported beside the default order's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from qwkboost.autoblend.candidates import ORDER  # noqa: E402
from qwkboost.autoblend.ranking import DataShape, rank, shape_of  # noqa: E402

RULES = ("default", "move", "always")


def ordered(rule: str, pairs: list, shape: DataShape) -> list:
    """``pairs`` (in :data:`ORDER`'s order) as ``rule`` orders them on data of ``shape``."""
    if rule == "default":
        return pairs
    if rule == "always":        # as if every set had an id-like column
        shape = DataShape(shape.rows, shape.columns, shape.levels + (10 ** 6,), shape.classes)
    return [p for p, _ in rank(pairs, shape)]


def regret(rule: str, members: dict, shape: DataShape, k: int) -> float:
    pairs = [p for p in ORDER if p in members]
    best = max(members.values())
    return best - max(members[p] for p in ordered(rule, pairs, shape)[:k])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", required=True, help="auto_budget.py's rows with by-hand members")
    ap.add_argument("--k", type=int, nargs="*", default=[2, 3])
    ap.add_argument("--score", default="qwk_thresholds_oof_nested", help="the members' figure ranked by")
    args = ap.parse_args()
    from qwkboost.data.packaged import load

    rows = [r for r in json.load(open(args.json)) if r.get("kind") == "by_hand" and r.get("members")]
    sets = {}
    for r in rows:
        members = {(m["engine"], m["objective"]): m[args.score] for m in r["members"]}
        sets[r["set"]] = (members, shape_of(load(r["set"])))
    print(f"{len(sets)} sets: " + "; ".join(f"{n}: {s.describe()}" for n, (_, s) in sets.items()))
    print("\n| set | id-like columns | best by hand | " + " | ".join(
        f"first {k}: default / chosen (rule)" for k in args.k) + " |")
    print("|---|---:|---|" + "---|" * len(args.k))
    totals = {k: {"default": [], "chosen": []} for k in args.k}
    for name, (members, shape) in sets.items():
        best = max(members, key=members.get)
        cells = []
        for k in args.k:
            train = {n: v for n, v in sets.items() if n != name}
            mean = {rule: sum(regret(rule, m, s, k) for m, s in train.values()) / max(len(train), 1)
                    for rule in RULES}
            chosen = min(RULES, key=lambda rule: (round(mean[rule], 6), RULES.index(rule)))
            d, c = regret("default", members, shape, k), regret(chosen, members, shape, k)
            totals[k]["default"].append(d)
            totals[k]["chosen"].append(c)
            cells.append(f"{d:.4f} / {c:.4f} ({chosen})")
        print(f"| {name} | {shape.id_like} | {best[0]} {best[1]} {members[best]:.4f} | " + " | ".join(cells) + " |")
    for k in args.k:
        t = totals[k]
        print(f"\nfirst {k}: mean regret held out, default order {sum(t['default']) / len(t['default']):.4f}, "
              f"rule chosen on the other sets {sum(t['chosen']) / len(t['chosen']):.4f}")


if __name__ == "__main__":
    main()
