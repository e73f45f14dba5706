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


def choose(scores: dict, engine: str, objectives, sets) -> tuple[str, float]:
    """The candidate of ``engine`` with the least mean regret over ``objectives`` and ``sets``: on each (set,
    objective) the best candidate's out-of-fold QWK minus this one's."""
    names = sorted({c for (e, c, _) in scores if e == engine})
    best = {(s, o): max(scores[(engine, c, o)].get(s, float("-inf")) for c in names) for s in sets for o in objectives}
    regret = {}
    for c in names:
        r = [best[(s, o)] - scores[(engine, c, o)][s] for s in sets for o in objectives
             if s in scores.get((engine, c, o), {})]
        if len(r) == len(sets) * len(objectives):
            regret[c] = sum(r) / len(r)
    c = min(regret, key=lambda k: (regret[k], k))
    return c, regret[c]


def select(cache: str, margin: float) -> dict:
    """The choice on all sets and on every four of them: per engine a shared candidate, and per objective its
    own where it lowers the objective's regret by more than ``margin``."""
    scores = _scores(cache)

    def pick(sets):
        out = {}
        for e in ENGINES:
            shared, shared_regret = choose(scores, e, OBJECTIVES, sets)
            out[e] = {"shared": shared, "shared_regret": shared_regret, "objectives": {}}
            for o in OBJECTIVES:
                own, own_regret = choose(scores, e, (o,), sets)
                _, at_shared = None, sum(max(scores[(e, c, o)][s] for c in {k[1] for k in scores if k[0] == e})
                                         - scores[(e, shared, o)][s] for s in sets) / len(sets)
                use = own if at_shared - own_regret > margin else shared
                out[e]["objectives"][o] = {"use": use, "own": own, "own_regret": own_regret,
                                           "shared_regret": at_shared}
        return out

    return {"all": pick(SETS), "held_out": {h: pick([s for s in SETS if s != h]) for h in SETS}}


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
    args = ap.parse_args()
    if args.step == "candidates":
        cands = candidates(args.cache)
        write_experiment(cands, args.out)
        with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
            json.dump(cands, f, indent=1)
        print(f"{sum(len(v) for v in cands.values())} candidates -> {args.out}")
    else:
        out = select(args.cache, args.own_margin)
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
        json.dump(out["all"], sys.stdout, indent=1)


if __name__ == "__main__":
    main()
