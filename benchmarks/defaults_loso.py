"""Defaults chosen leave-one-set-out on the five large packaged sets, so that no set picks its own defaults.

Three steps, each a study run by the study's own machinery (its cells cached and resumable):

1. ``tuned``: the large study's protocol (20,000 training rows per seed, 3-fold CV, 5 seeds) for squared error,
   extended QWK and the ordinal logit on LightGBM and XGBoost, each with the engine's configured parameters and
   tuned on the study's budget (10 seeded TPE trials, pruned after each fold)::

       python experiments/run.py experiment=study_large 'study.only=[squared_error,extended_qwk,ordinal_logit]' \\
           'study.engines=[lightgbm,xgboost]' 'study.tuning.methods=[squared_error,extended_qwk,ordinal_logit]' \\
           study.cache_dir=outputs/defaults/cache

2. ``candidates``: every engine's candidate defaults are its configured parameters, the distinct parameter sets its
   tunings found (five sets times three objectives), and a small grid fixed beforehand (:data:`GRID`); each
   candidate runs every objective (and extended QWK's Gauss-Newton hessian) on every set at seed 1 (other rows and
   folds than the tuning's seed 0)::

       python benchmarks/defaults_loso.py candidates --cache outputs/defaults/cache \\
           --out benchmarks/results/defaults_candidates.yaml
       cp benchmarks/results/defaults_candidates.yaml conf/experiment/
       python experiments/run.py experiment=defaults_candidates study.cache_dir=outputs/defaults/cache

3. ``select``: for each held-out set, each engine and objective the candidate with the least mean regret (its
   out-of-fold QWK below the best candidate's, exact cut points, never a test figure) on the other four sets;
   and the defaults chosen on all five. The objective keeps the engine's shared choice unless its own choice
   lowers its mean regret by more than ``--own-margin``. Then the chosen defaults run at the five seeds of step
   1 and are compared with the tuned results on the test rows::

       python benchmarks/defaults_loso.py select --cache outputs/defaults/cache \\
           --json benchmarks/results/defaults_loso.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SETS = ("diamonds", "chem97", "insteval", "gss_vocab", "happiness")
ENGINES = ("lightgbm", "xgboost")
OBJECTIVES = ("squared_error", "extended_qwk", "ordinal_logit")
#: Candidates fixed before any result was seen: each engine's usual settings at learning rate 0.1 with row and
#: column sampling of 0.8 and an L2 of 1, over tree size and the smallest leaf; and XGBoost's own defaults.
GRID = {
    "lightgbm": {f"grid_leaves{nl}_child{mcs}": {"learning_rate": 0.1, "num_leaves": nl, "min_child_samples": mcs,
                                                  "feature_fraction": 0.8, "lambda_l2": 1.0}
                 for nl in (15, 31, 63) for mcs in (20, 50)},
    "xgboost": {**{f"grid_depth{d}_child{mcw}": {"learning_rate": 0.1, "max_depth": d, "min_child_weight": mcw,
                                                 "subsample": 0.8, "colsample_bytree": 0.8, "reg_lambda": 1.0}
                   for d in (4, 6, 8) for mcw in (1, 10)},
                "grid_xgboost_own": {"learning_rate": 0.3, "max_depth": 6}},
}
#: Objective variants tried as candidates beside the engine parameters: extended QWK's Gauss-Newton hessian
#: (its step scaled by n/g instead of 1).
VARIANTS = {"extended_qwk_gauss_newton": ["objective=extended_qwk", "objective.params.hessian=gauss_newton"]}


def _cells(cache: str) -> list[dict]:
    """Every cached cell: its label's parts and its result."""
    out = []
    d = os.path.join(cache, "cells")
    for f in sorted(os.listdir(d)):
        if not f.endswith(".json"):
            continue
        rec = json.load(open(os.path.join(d, f)))
        regime, engine, method, seed = rec["label"].split("/")
        out.append({"set": regime, "engine": engine, "method": method, "seed": int(seed.removeprefix("seed")),
                    **rec["result"]})
    return out


def _round(v):
    return round(v, 6) if isinstance(v, float) else v


def candidates(cache: str) -> dict[str, list[dict]]:
    """Per engine: ``default`` (the configured parameters) and each distinct parameter set a tuning found, named
    after the first ``<set>_<objective>`` that found it (``also``: the others)."""
    out = {e: [{"name": "default", "params": {}}] for e in ENGINES}
    for c in _cells(cache):
        if c["method"].endswith("_tuned") and c["seed"] == 0 and c["engine"] in ENGINES:
            obj = c["method"].removesuffix("_tuned")
            if obj in OBJECTIVES and c["set"] in SETS:
                out[c["engine"]].append({"name": f"{c['set']}_{obj}",
                                         "params": {k: _round(v) for k, v in c["tuning"]["params"].items()}})
    for e in out:
        out[e] += [{"name": name, "params": params} for name, params in GRID.get(e, {}).items()]
    for e in out:      # one candidate per distinct parameter set (tunings of one seed often draw the same trials)
        seen: dict[str, dict] = {}
        for c in sorted(out[e], key=lambda c: c["name"]):
            key = json.dumps(c["params"], sort_keys=True)
            if key in seen:
                seen[key].setdefault("also", []).append(c["name"])
            else:
                seen[key] = c
        out[e] = list(seen.values())
    return out


def write_experiment(cands: dict[str, list[dict]], path: str) -> None:
    """A study experiment whose methods are every candidate on every objective, at seed 1."""
    import yaml

    methods = {}
    for engine, cs in cands.items():
        for c in cs:
            for obj, choice in [*((o, [f"objective={o}"]) for o in OBJECTIVES), *VARIANTS.items()]:
                name = f"cand_{engine}_{c['name']}__{obj}"
                methods[name] = {"overrides": [*choice, *(f"++engine.params.{k}={v}" for k, v in c["params"].items())],
                                 "engines": [engine], "decode": ["exact"]}
    doc = {"defaults": ["study_large", "_self_"], "run_name": "defaults_candidates",
           "study": {"seeds": 1, "first_seed": 1, "engines": list(ENGINES), "only": list(methods), "methods": methods,
                     "tuning": {"n_trials": 0, "variants": ["default"], "methods": None, "engines": None}}}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write("# @package _global_\n# Generated by benchmarks/defaults_loso.py candidates: every candidate default "
                "of each engine on every objective and set, at seed 1.\n")
        yaml.safe_dump(doc, f, sort_keys=False, width=120)


def _scores(cache: str) -> dict:
    """``(engine, candidate, objective) -> {set: OOF QWK}`` of the candidates' cells (seed 1, exact cuts)."""
    return _by_candidate(cache, seed=1, field="qwk_oof")


def _by_candidate(cache: str, seed: int, field: str) -> dict:
    """``(engine, candidate, objective) -> {set: figure}``; the large study's default cells (the same
    configuration, its cache key shared) count as the candidate ``default``."""
    out: dict = defaultdict(dict)
    for c in _cells(cache):
        if c["seed"] != seed or c["engine"] not in ENGINES:
            continue
        if c["method"].startswith("cand_"):
            rest, obj = c["method"].split("__")
            cand = rest.removeprefix(f"cand_{c['engine']}_")
        elif c["method"] in OBJECTIVES:
            cand, obj = "default", c["method"]
        else:
            continue
        out[(c["engine"], cand, obj)][c["set"]] = c[field]["exact"]
    return out


def _options(objective: str) -> list[str]:
    """The variants that run ``objective``: itself, and for extended QWK its Gauss-Newton hessian."""
    return [objective, *(v for v, o in VARIANTS.items() if o[0] == f"objective={objective}")]


def regrets(scores: dict, engine: str, objective: str, sets) -> dict[tuple[str, str], float]:
    """Mean regret over ``sets`` of every (candidate, variant) of ``engine`` that runs ``objective``: on each set
    the best option's out-of-fold QWK minus this option's (options with a missing set are left out)."""
    opts = [(c, v) for (e, c, v) in scores if e == engine and v in _options(objective)]
    best = {s: max(scores[(engine, c, v)].get(s, float("-inf")) for c, v in opts) for s in sets}
    out = {}
    for c, v in opts:
        got = scores[(engine, c, v)]
        if all(s in got for s in sets):
            out[(c, v)] = sum(best[s] - got[s] for s in sets) / len(sets)
    return out


def select(cache: str, margin: float) -> dict:
    """The choice on all sets and on every four of them (leave-one-set-out): per engine the candidate with the
    least regret over every objective (each with its configured variant), and per objective the (candidate,
    variant) of least regret of its own, used instead where it lowers the objective's regret by more than
    ``margin``."""
    scores = _scores(cache)

    def pick(sets):
        out = {}
        for e in ENGINES:
            per = {o: regrets(scores, e, o, sets) for o in OBJECTIVES}
            names = set.intersection(*({c for (c, v) in per[o] if v == o} for o in OBJECTIVES))
            shared = min(sorted(names), key=lambda c: sum(per[o][(c, o)] for o in OBJECTIVES))
            out[e] = {"shared": shared, "shared_regret": sum(per[o][(shared, o)] for o in OBJECTIVES) / len(OBJECTIVES),
                      "objectives": {}}
            for o in OBJECTIVES:
                own = min(sorted(per[o]), key=lambda cv: per[o][cv])
                use = own if per[o][(shared, o)] - per[o][own] > margin else (shared, o)
                out[e]["objectives"][o] = {"use": list(use), "own": list(own), "own_regret": per[o][own],
                                           "shared_regret": per[o][(shared, o)]}
        return out

    return {"all": pick(SETS), "held_out": {h: pick([s for s in SETS if s != h]) for h in SETS}}


def chosen_options(selection: dict) -> dict[str, set[tuple[str, str]]]:
    """Per engine every (candidate, variant) that a selection uses, on all sets or with one held out."""
    out: dict[str, set] = defaultdict(set)
    for pick in [selection["all"], *selection["held_out"].values()]:
        for e, v in pick.items():
            for o, w in v["objectives"].items():
                out[e].add(tuple(w["use"]))
    return out


def write_confirm(cands: dict[str, list[dict]], selection: dict, path: str, seeds: int = 5) -> None:
    """A study experiment that runs every chosen (candidate, variant) at the tuned study's seeds."""
    import yaml

    params = {e: {c["name"]: c["params"] for c in cs} for e, cs in cands.items()}
    methods = {}
    for e, opts in chosen_options(selection).items():
        for c, v in sorted(opts):
            choice = VARIANTS.get(v, [f"objective={v}"])
            methods[f"cand_{e}_{c}__{v}"] = {"overrides": [*choice, *(f"++engine.params.{k}={x}"
                                                                     for k, x in params[e][c].items())],
                                             "engines": [e], "decode": ["exact"]}
    doc = {"defaults": ["study_large", "_self_"], "run_name": "defaults_confirm",
           "study": {"seeds": seeds, "first_seed": 0, "engines": list(ENGINES), "only": list(methods),
                     "methods": methods,
                     "tuning": {"n_trials": 0, "variants": ["default"], "methods": None, "engines": None}}}
    with open(path, "w") as f:
        f.write("# @package _global_\n# Generated by benchmarks/defaults_loso.py confirm: the chosen defaults at the "
                "large study's five seeds.\n")
        yaml.safe_dump(doc, f, sort_keys=False, width=120)


def report(cache: str, selection: dict, tolerance: float = 0.003) -> list[dict]:
    """Per engine, objective and set: the test QWK (mean over the five seeds) of the defaults chosen with that set
    held out, of the defaults chosen on all five, of the configured defaults and of the tuned method, with the
    paired difference to tuned and whether it is within ``tolerance``."""
    import numpy as np
    from scipy import stats

    test = {seed: _by_candidate(cache, seed, "qwk") for seed in range(5)}
    tuned: dict = defaultdict(dict)
    for c in _cells(cache):
        if c["method"].endswith("_tuned") and c["engine"] in ENGINES:
            tuned[(c["engine"], c["method"].removesuffix("_tuned"), c["set"])][c["seed"]] = c["qwk"]["exact"]

    def series(e, c, v, s):
        return np.array([test[k].get((e, c, v), {}).get(s, np.nan) for k in range(5)])

    rows = []
    for e in ENGINES:
        for o in OBJECTIVES:
            for s in SETS:
                t = np.array([tuned[(e, o, s)].get(k, np.nan) for k in range(5)])
                held = selection["held_out"][s][e]["objectives"][o]["use"]
                final = selection["all"][e]["objectives"][o]["use"]
                h, f, d = series(e, *held, s), series(e, *final, s), series(e, "default", o, s)
                diff = h - t
                ok = ~np.isnan(diff)
                p = float(stats.ttest_rel(h[ok], t[ok]).pvalue) if ok.sum() > 1 else float("nan")
                rows.append({"engine": e, "objective": o, "set": s, "held_out_choice": "+".join(held),
                             "final_choice": "+".join(final), "held_out": float(np.nanmean(h)),
                             "final": float(np.nanmean(f)), "default": float(np.nanmean(d)),
                             "tuned": float(np.nanmean(t)), "held_out_minus_tuned": float(np.nanmean(diff)),
                             "p": p, "seeds": int(ok.sum()),
                             "within": bool(np.nanmean(diff) >= -tolerance)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="step", required=True)
    c = sub.add_parser("candidates")
    c.add_argument("--cache", required=True)
    c.add_argument("--out", required=True)
    s = sub.add_parser("select")
    s.add_argument("--cache", required=True)
    s.add_argument("--own-margin", type=float, default=0.002)
    s.add_argument("--json", required=True)
    f = sub.add_parser("confirm")
    f.add_argument("--cache", required=True)
    f.add_argument("--selection", required=True)
    f.add_argument("--out", required=True)
    r = sub.add_parser("report")
    r.add_argument("--cache", required=True)
    r.add_argument("--selection", required=True)
    r.add_argument("--json", required=True)
    args = ap.parse_args()
    if args.step == "candidates":
        cands = candidates(args.cache)
        write_experiment(cands, args.out)
        with open(os.path.splitext(args.out)[0] + ".json", "w") as fh:
            json.dump(cands, fh, indent=1)
        print(f"{sum(len(v) for v in cands.values())} candidates -> {args.out}")
    elif args.step == "select":
        out = select(args.cache, args.own_margin)
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
        json.dump(out["all"], sys.stdout, indent=1)
    elif args.step == "confirm":
        write_confirm(candidates(args.cache), json.load(open(args.selection)), args.out)
        print(f"-> {args.out}")
    else:
        rows = report(args.cache, json.load(open(args.selection)))
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
        print("| engine | objective | set | chosen without the set | its test QWK | tuned | − tuned | within 0.003 |")
        print("|---|---|---|---|---:|---:|---:|---|")
        for x in rows:
            print(f"| {x['engine']} | {x['objective']} | {x['set']} | {x['held_out_choice']} | {x['held_out']:.4f} | "
                  f"{x['tuned']:.4f} | {x['held_out_minus_tuned']:+.4f} | {'yes' if x['within'] else 'no'} |")


if __name__ == "__main__":
    main()
