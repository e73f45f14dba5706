"""How honest the nested out-of-fold estimate is: on random labels and on the five packaged large sets, with each
fold's early stopping on the fold it scores (``cv.early_stopping_on=valid``) and on an inner slice of its training
rows (``inner``).

    nice -n 15 python benchmarks/noise_estimate.py --json benchmarks/results/noise_estimate.json  # as in RESULTS.md
    nice -n 15 python benchmarks/noise_estimate.py --draws 0 --sets happiness gss_vocab chem97 --settings valid \
        --real-candidates lightgbm/ordinal_logit lightgbm/multiclass --section class_objectives \
        --json benchmarks/results/noise_estimate.json                          # the class objectives, part (c)
    nice -n 15 python benchmarks/noise_estimate.py --quick --json /tmp/noise_quick.json --workdir /tmp/nq  # smoke
    python benchmarks/noise_estimate.py --json benchmarks/results/noise_estimate.json --report-only   # the tables

(a) Random labels: ``--draws`` data sets of 3,000 training and 5,000 held-out rows, 8 features that look like a
table's (normal, uniform, skewed, integer-coded and a noisy copy of another column) and labels drawn uniformly
from 4 classes, independent of everything. (b) The five packaged large sets (``qwkboost.data.packaged``, their
fixed train/test split, every training row).

Per data set and setting, each candidate (``--candidates``, default LightGBM and XGBoost times squared error and
extended QWK) is cross-validated by :func:`qwkboost.cross_validate` with the configuration ``qb.auto`` gives it
(:func:`qwkboost.autoblend.api.candidate_config`: conf/'s engine and objective defaults, 5 stratified folds, seed
0), and the candidates are blended as auto's last step does (:func:`qwkboost.blending.blend`, ``greedy``, exact
cut points). The candidates are run directly, not through ``qb.auto`` with a time limit, so that every draw and
setting blends the same candidates and the figures repeat exactly. Reported: the blend's and every candidate's
nested out-of-fold QWK (selection and cut points fitted without each fold), its test QWK (the submission's, on
rows no model saw), and their difference. The third setting, ``other_folds``, is derived from the ``valid`` runs
without training again: their out-of-fold scores read at the rounds the other folds kept
(:func:`oof_at_other_rounds`, bit for bit what ``cross_validate(..., early_stopping_on="other_folds")`` returns),
then blended, cut and scored on the test rows as the other two. One thread per engine (``n_jobs=1``); every
(data set, setting, candidate) is cached in ``--workdir``, so the same command resumes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from machine import machine  # noqa: E402

SETS = ("diamonds", "chem97", "insteval", "gss_vocab", "happiness")
CANDIDATES = ("lightgbm/squared_error", "xgboost/squared_error", "lightgbm/extended_qwk", "xgboost/extended_qwk")
#: Further candidates the report knows (the class objectives, measured on some sets with ``--settings valid``).
OTHER_CANDIDATES = ("lightgbm/ordinal_logit", "lightgbm/multiclass")
SETTINGS = ("valid", "inner")
N_CLASSES = 4


def noise_data(draw: int, n_train: int = 3000, n_test: int = 5000):
    """Features that look informative and labels that are not: ``(X, y, X_test, y_test)``, seeded by ``draw``."""
    rng = np.random.default_rng(10_000 + draw)
    n = n_train + n_test
    base = rng.normal(size=n)
    X = np.column_stack([
        base, rng.normal(size=n), rng.uniform(0, 100, n), rng.lognormal(0, 1, n),
        rng.integers(0, 10, n), rng.integers(1, 6, n), rng.poisson(3, n), base + rng.normal(0, 0.5, n)])
    y = rng.integers(0, N_CLASSES, n).astype(float)
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def run_candidate(name: str, X, y, X_test, setting: str, schema=None, quick: bool = False):
    """One candidate's ``cross_validate``, configured as ``qb.auto`` configures it."""
    from qwkboost.autoblend.api import candidate_config
    from qwkboost.cv.crossval import cross_validate

    engine, objective = name.split("/")
    cfg = candidate_config(engine, objective)
    eng, obj = cfg["engine"], cfg["objective"]
    return cross_validate(
        X, y, X_test, engine=engine, objective=objective, params=dict(eng.get("params") or {}),
        objective_params=dict(obj.get("params") or {}),
        num_boost_round=300 if quick else int(eng["num_boost_round"]),
        early_stopping_rounds=20 if quick else eng.get("early_stopping_rounds"),
        early_stopping_min_delta=eng.get("early_stopping_min_delta"), n_splits=cfg["cv"]["n_splits"],
        stratified=True, seed=cfg["seed"], progress=False, n_jobs=1, schema=schema, early_stopping_on=setting)


def cached(work: str, key: str, make) -> dict:
    """``make()``'s arrays, kept in ``work/key.npz``."""
    path = os.path.join(work, key.replace("/", "-") + ".npz")
    if os.path.exists(path):
        with np.load(path) as f:
            return {k: f[k] for k in f.files}
    cv, seconds, X = make()
    out = {"oof": cv.oof, "test": cv.test, "fold_of": cv.fold_of, "best_iterations": np.array(cv.best_iterations),
           "seconds": np.array(seconds), "oof_others": oof_at_other_rounds(cv, X)}
    os.makedirs(work, exist_ok=True)
    np.savez(path, **out)
    return out


def oof_at_other_rounds(cv, X) -> np.ndarray:
    """Each fold's out-of-fold scores read at the median of the rounds the other folds of its repeat kept (at
    most the rounds it trained): the fold's own labels no longer choose its rounds, the models stay as they are."""
    from qwkboost.data.features import EncodedFeatures

    out = np.zeros((cv.repeats, len(cv.oof)))
    best = np.array(cv.best_iterations)
    k = len(cv.models) // cv.repeats
    for i, (m, (_, va)) in enumerate(zip(cv.models, cv.folds)):
        r, j = divmod(i, k)
        others = np.delete(best[r * k:(r + 1) * k], j)
        rounds = int(min(max(round(float(np.median(others))), 1), m.num_rounds))
        out[r, va] = m.objective.decode(m.predict_raw(EncodedFeatures(X[va], cv.schema), num_iteration=rounds))
    return out.mean(axis=0)


def one(label: str, X, y, X_test, y_test, setting: str, candidates, work: str, schema=None,
        quick: bool = False) -> dict:
    """Every candidate on one data set and setting, and their blend: the figures of one JSON row."""
    from qwkboost.blending import blend
    from qwkboost.blending.members import Member
    from qwkboost.cv.crossval import CVResult

    members, others, rounds, seconds = [], [], {}, {}
    for name in candidates:
        def make(name=name):
            t = time.perf_counter()
            cv = run_candidate(name, X, y, X_test, setting, schema, quick)
            return cv, time.perf_counter() - t, X

        arr = cached(work, f"{label}-{setting}-{name}{'-quick' if quick else ''}", make)
        cv = CVResult(arr["oof"], arr["test"], [], [], 0.0, fold_of=arr["fold_of"])
        members.append(Member.from_cv(name, cv, y, y_test=y_test))
        if setting == "valid":
            others.append(Member.from_cv(name, CVResult(arr["oof_others"], arr["test"], [], [], 0.0,
                                                        fold_of=arr["fold_of"]), y, y_test=y_test))
        rounds[name] = float(np.mean(arr["best_iterations"]))
        seconds[name] = float(arr["seconds"])
    if len(members) > 1:
        res = blend(members, method="greedy", thresholds="exact")
        own = {row["member"]: row for row in res.member_table.to_dict("records")}
        fig = {"nested_oof_qwk": res.metrics["nested_oof_qwk"], "oof_qwk": res.metrics["oof_qwk"],
               "test_qwk": res.metrics["test_qwk"],
               "weights": {m.name: float(w) for m, w in zip(res.members, res.weights)}}
    else:                           # one candidate: its own run's figures (a blend needs two members)
        own = {members[0].name: single(members[0])}
        fig = dict(own[members[0].name])
    keys = ("nested_oof_qwk", "oof_qwk", "test_qwk")
    cands = {name: {**{k: float(own[name][k]) for k in keys}, "best_iteration_mean": rounds[name],
                    "seconds": seconds[name]} for name in candidates}
    if others:      # the same runs with out-of-fold scores read at the other folds' rounds: estimate and submission
        res = blend(others, method="greedy", thresholds="exact").metrics if len(others) > 1 else single(others[0])
        fig["nested_oof_qwk_other_rounds"], fig["test_qwk_other_rounds"] = res["nested_oof_qwk"], res["test_qwk"]
        for m in others:
            res = single(m)
            cands[m.name]["nested_oof_qwk_other_rounds"] = res["nested_oof_qwk"]
            cands[m.name]["test_qwk_other_rounds"] = res["test_qwk"]
    return {"data": label, "setting": setting, "blend": fig, "candidates": cands}


def single(m) -> dict:
    """One member's figures as a run reports them: exact cut points on its out-of-fold scores, in-sample and
    nested (fitted without each fold), and on the test rows."""
    from qwkboost.data.dataset import class_range
    from qwkboost.evaluation.metrics import qwk
    from qwkboost.evaluation.thresholds import apply_thresholds, fit_thresholds, nested_classes

    classes = class_range(m.y)
    lo, k = float(classes[0]), classes.size
    y, yt = (m.y - lo).astype(np.int64), (m.y_test - lo).astype(np.int64)
    cuts = fit_thresholds("exact", m.oof - lo, y, n_classes=k)
    return {"nested_oof_qwk": qwk(y, nested_classes("exact", m.oof - lo, y, m.folds[0], n_classes=k), n_classes=k),
            "oof_qwk": qwk(y, apply_thresholds(m.oof - lo, cuts), n_classes=k),
            "test_qwk": qwk(yt, apply_thresholds(m.test - lo, cuts), n_classes=k)}


def _stats(values) -> str:
    v = np.asarray(values, dtype=float)
    sd = float(np.std(v, ddof=1)) if v.size > 1 else float("nan")
    return f"{v.mean():+.4f} (SD {sd:.4f}, SE {sd / np.sqrt(v.size):.4f})"


def _settings(row: dict, name: str) -> dict:
    """One member's (or the blend's) figures in a ``valid`` row and, derived from it, ``other_folds``'s."""
    f = row["blend"] if name == "blend" else row["candidates"].get(name)
    if f is None:
        return {}
    out = {row["setting"]: f}
    if "nested_oof_qwk_other_rounds" in f:
        out["other_folds"] = {"nested_oof_qwk": f["nested_oof_qwk_other_rounds"],
                              "test_qwk": f["test_qwk_other_rounds"]}
    return out


def report(doc: dict) -> None:
    """The tables RESULTS.md shows, from the JSON (``other_folds``: the ``valid`` runs' out-of-fold scores read at
    the other folds' rounds, which is what ``cv.early_stopping_on=other_folds`` computes)."""
    rows = doc["rows"]
    settings = ("valid", "inner", "other_folds")
    noise = [r for r in rows if r["data"].startswith("noise")]
    real = [r for r in rows if not r["data"].startswith("noise")]
    if noise:
        draws = sorted({r["data"] for r in noise})
        print(f"\n(a) random labels, {len(draws)} draws: nested OOF QWK minus test QWK, mean (SD, SE); mean nested; "
              "mean test; mean rounds kept")
        print("| who | cv.early_stopping_on | nested − test | nested | test | rounds |\n|---|---|---|---:|---:|---:|")
        names = ["blend", *sorted({c for r in noise for c in r["candidates"]}, key=CANDIDATES.index)]
        for name in names:
            for setting in settings:
                f = [x[setting] for r in noise for x in [_settings(r, name)] if setting in x]
                if not f:
                    continue
                nested = [x["nested_oof_qwk"] for x in f]
                test = [x["test_qwk"] for x in f]
                rnd = f"{np.mean([x['best_iteration_mean'] for x in f]):.0f}" if "best_iteration_mean" in f[0] else ""
                print(f"| {name} | {setting} | {_stats(np.subtract(nested, test))} | {np.mean(nested):.4f} | "
                      f"{np.mean(test):.4f} | {rnd} |")
    if real:
        print("\n(b) packaged large sets: nested OOF QWK, test QWK (the submission's), and each against valid's")
        real_table(real, settings)
    if doc.get("class_objectives"):
        print("\n(c) the class objectives on three sets (LightGBM, valid and other_folds; --sets happiness gss_vocab "
              "chem97 --real-candidates lightgbm/ordinal_logit lightgbm/multiclass --settings valid)")
        real_table(doc["class_objectives"], settings)


def real_table(real: list, settings) -> None:
    """Part (b)'s table and its summary lines."""
    if real:
        print("| set | who | cv.early_stopping_on | nested | test | nested − test | nested − valid's | test − valid's "
              "|\n|---|---|---|---:|---:|---:|---:|---:|")
        deltas: dict = {}
        for s in [x for x in SETS if any(r["data"] == x for r in real)]:
            by = [r for r in real if r["data"] == s]
            names = ["blend", *[c for c in CANDIDATES + OTHER_CANDIDATES if c in by[0]["candidates"]]]
            for name in names:
                f = {k: v for r in by for k, v in _settings(r, name).items()}
                for setting in [x for x in settings if x in f]:
                    g, v = f[setting], f.get("valid")
                    dn = "" if v is None or setting == "valid" else f"{g['nested_oof_qwk'] - v['nested_oof_qwk']:+.4f}"
                    dt = "" if v is None or setting == "valid" else f"{g['test_qwk'] - v['test_qwk']:+.4f}"
                    if dt:
                        deltas.setdefault((name, setting), []).append((g["test_qwk"] - v["test_qwk"],
                                                                       g["nested_oof_qwk"] - v["nested_oof_qwk"]))
                    print(f"| {s} | {name} | {setting} | {g['nested_oof_qwk']:.4f} | {g['test_qwk']:.4f} | "
                          f"{g['nested_oof_qwk'] - g['test_qwk']:+.4f} | {dn} | {dt} |")
        for (name, setting), d in deltas.items():
            t, n = np.array(d).T
            print(f"{name}, {setting} against valid over {len(d)} sets: test QWK mean {t.mean():+.4f} "
                  f"[{t.min():+.4f}, {t.max():+.4f}], nested mean {n.mean():+.4f} [{n.min():+.4f}, {n.max():+.4f}]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=40, help="random-label data sets")
    ap.add_argument("--sets", nargs="*", default=list(SETS), help="packaged large sets (none: --sets)")
    ap.add_argument("--candidates", nargs="*", default=list(CANDIDATES))
    ap.add_argument("--real-candidates", nargs="*", default=list(CANDIDATES[:2]),
                    help="the candidates on the large sets (default: LightGBM and XGBoost with squared error)")
    ap.add_argument("--settings", nargs="*", default=list(SETTINGS))
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: 2 draws, 300 rounds at most, patience 20, happiness only, two candidates")
    ap.add_argument("--workdir", default=os.path.join("outputs", "noise_estimate"))
    ap.add_argument("--json", required=True)
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--section", default="rows", help="the JSON's key for these rows (class_objectives: part (c))")
    args = ap.parse_args()
    if args.quick:
        args.draws, args.sets, args.candidates = 2, ["happiness"], list(CANDIDATES[:2])
    doc = json.load(open(args.json)) if os.path.exists(args.json) else {"machine": machine(), "rows": []}
    doc.setdefault(args.section, [])
    if not args.report_only:
        print(json.dumps(doc["machine"]), flush=True)

        def keep(row):
            rows = doc[args.section]
            doc[args.section] = [r for r in rows if (r["data"], r["setting"]) != (row["data"], row["setting"])]
            doc[args.section].append(row)
            with open(args.json, "w") as f:
                json.dump(doc, f, indent=1)
            print(f"{row['data']} {row['setting']}: blend nested {row['blend']['nested_oof_qwk']:.4f} test "
                  f"{row['blend']['test_qwk']:.4f}", flush=True)

        for draw in range(args.draws):
            X, y, Xt, yt = noise_data(draw)
            for setting in args.settings:
                keep(one(f"noise{draw}", X, y, Xt, yt, setting, args.candidates, args.workdir, quick=args.quick))
        from qwkboost.data.packaged import load

        for name in args.sets:
            ds = load(name)
            for setting in args.settings:
                keep(one(name, ds.X_train, ds.y_train, ds.X_test, ds.y_test, setting,
                         args.real_candidates, args.workdir, ds.schema, args.quick))
    report(doc)


if __name__ == "__main__":
    main()
