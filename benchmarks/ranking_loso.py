"""The ranking rule of the time budget (``qwkboost.autoblend.ranking``) checked leave-one-set-out on the path by
hand's candidates.

    python benchmarks/ranking_loso.py --json outputs/auto_plan/by_hand.json            # the table of RESULTS.md

The evidence: ``benchmarks/auto_budget.py``'s by-hand rows, whose ``members`` hold, per packaged set, every
(engine, objective) of the README's multirun (LightGBM, XGBoost and CatBoost x squared error and extended QWK at
the defaults, every training row, 5 folds) with its nested out-of-fold QWK, test QWK and seconds. Three rules
order those six candidates: ``default`` (:data:`~qwkboost.autoblend.candidates.ORDER`, no move), ``ids``:
CatBoost's squared error second when the set has an id-like column, and ``always``: CatBoost's squared error
second on every set (:data:`~qwkboost.autoblend.ranking.MOVES`, the rule shipped). A rule's regret on a set is the best nested out-of-fold QWK of all six minus the best among its first ``k``
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

from qwkboost.autoblend.ranking import ORDER, DataShape, shape_of  # noqa: E402

RULES = ("default", "ids", "always")


def ordered(rule: str, pairs: list, shape: DataShape) -> list:
    """``pairs`` (in :data:`ORDER`'s order) as ``rule`` orders them on data of ``shape``."""
    cat = ("catboost", "squared_error")
    if rule == "default" or cat not in pairs or (rule == "ids" and not shape.id_like):
        return pairs
    rest = [p for p in pairs if p != cat]
    return rest[:1] + [cat] + rest[1:]


def regret(rule: str, members: dict, shape: DataShape, k: int) -> float:
    """The best score of all candidates minus the best of ``rule``'s first ``k``."""
    scores = {p: m["score"] for p, m in members.items()}
    pairs = [p for p in ORDER if p in scores]
    return max(scores.values()) - max(scores[p] for p in ordered(rule, pairs, shape)[:k])


def uncovered(rule: str, members: dict, shape: DataShape, k: int) -> float:
    """The share of the by-hand blend's weight on candidates outside ``rule``'s first ``k``."""
    weights = {p: m["weight"] for p, m in members.items()}
    pairs = [p for p in ORDER if p in weights]
    return 1.0 - sum(weights[p] for p in ordered(rule, pairs, shape)[:k]) / max(sum(weights.values()), 1e-12)


def loso(sets: dict, loss, k: int) -> list[tuple[str, float, float, str]]:
    """Per held-out set: ``loss`` of the default order and of the rule with the least mean loss on the others."""
    out = []
    for name, (members, shape) in sets.items():
        train = {n: v for n, v in sets.items() if n != name}
        mean = {rule: sum(loss(rule, m, s, k) for m, s in train.values()) / max(len(train), 1) for rule in RULES}
        chosen = min(RULES, key=lambda rule: (round(mean[rule], 6), RULES.index(rule)))
        out.append((name, loss("default", members, shape, k), loss(chosen, members, shape, k), chosen))
    return out


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
        members = {(m["engine"], m["objective"]): {"score": m[args.score], "weight": m.get("weight") or 0.0}
                   for m in r["members"]}
        sets[r["set"]] = (members, shape_of(load(r["set"])))
    print(f"{len(sets)} sets: " + "; ".join(f"{n}: {s.describe()}" for n, (_, s) in sets.items()))
    for title, loss, fmt in (("the best single candidate's nested out-of-fold QWK minus the best of the first k",
                              regret, "{:.4f}"),
                             ("the share of the by-hand blend's weight outside the first k", uncovered, "{:.2f}")):
        print(f"\n**{title}** (held out: default order / the rule chosen on the other five sets):\n")
        print("| set | id-like columns | " + " | ".join(f"first {k}" for k in args.k) + " |")
        print("|---|---:|" + "---|" * len(args.k))
        per_k = {k: loso(sets, loss, k) for k in args.k}
        for i, (name, (_, shape)) in enumerate(sets.items()):
            print(f"| {name} | {shape.id_like} | " + " | ".join(
                f"{fmt.format(per_k[k][i][1])} / {fmt.format(per_k[k][i][2])} ({per_k[k][i][3]})" for k in args.k)
                + " |")
        print("| mean | | " + " | ".join(
            f"{fmt.format(sum(r[1] for r in per_k[k]) / len(sets))} / {fmt.format(sum(r[2] for r in per_k[k]) / len(sets))}"
            for k in args.k) + " |")
    print("\nThe by-hand blend's weight of each candidate (`experiments/blend.py`):\n")
    pairs = [p for p in ORDER if any(p in members for members, _ in sets.values())]
    print("| set | " + " | ".join(f"{e} {o}" for e, o in pairs) + " |")
    print("|---|" + "---:|" * len(pairs))
    for name, (members, _) in sets.items():
        print(f"| {name} | " + " | ".join(f"{members[p]['weight']:.2f}" if p in members else "" for p in pairs)
              + " |")


if __name__ == "__main__":
    main()
