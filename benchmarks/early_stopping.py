"""Early stopping with and without ``min_delta``: rounds, time and test QWK of extended QWK, fold by fold.

    python benchmarks/early_stopping.py                                  # every dataset and engine below
    python benchmarks/early_stopping.py --datasets repeated --engines xgboost --deltas 0,1e-4,1e-3
    python benchmarks/early_stopping.py --measure 0,default              # real runs with each setting, timed

Datasets (``--datasets``):

``article``
    The DSB2019 article's quartile data at its sizes (100,000 training and 100,000 test rows, 4 classes),
    as ``make run`` trains it.
``imbalanced``
    ``latent_classes`` with 5 classes in proportions 35/30/20/12/3 %, 40,000 training and 20,000 test rows.
``repeated``
    The same classes, 20,000 drawn rows each written twice (40,000 rows, as in a file that holds some rows
    more than once), 20,000 test rows. K-fold CV then puts a row in a training fold and its copy in the
    validation fold.

Every run is the article's protocol (``qwkboost.cross_validate``: 5 stratified folds, learning rate 0.1
(``--learning-rate``), depth 5 on XGBoost and native, ``--rounds`` at most, early stopping after 100 rounds)
with ``extended_qwk`` (``engine.early_stopping_min_delta`` is ``early_stopping_min_delta`` here). Seed ``s``
(``--seeds``: 0, 1, ...) draws the data and the folds; seed 0 is the article's own draw. With more than one
seed, the means over seeds and each setting's difference from the first, paired by seed, are reported.

Without ``--measure``, each dataset and engine is trained once with ``min_delta = 0`` and every other
``--deltas`` value is replayed on its validation curves: a larger ``min_delta`` only ever stops sooner (it
counts a subset of the improvements: each round that gains more than it is a new best), and trees do not
depend on when training stops, so each fold's stopping round, best round and predictions under
``min_delta`` follow exactly from the run with 0 (test
scores from the fold models cut at that best round; time as the fold's seconds times its share of the
rounds). With ``--measure``, each listed setting is trained for real (``default``: the objective's own) and
its wall time measured. Reported: the folds' stopping rounds, total rounds, fit seconds, and test QWK of the
rounded mean test score and with exact cut points fitted on the out-of-fold scores (the table's
``qwk_round`` and ``qwk_thresholds``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from machine import machine  # noqa: E402

PROPORTIONS = [0.35, 0.30, 0.20, 0.12, 0.03]


def dataset(name: str, seed: int = 0):
    """``(X_train, y_train, X_test, y_test)`` of a named dataset (module docstring), drawn with ``seed``
    (test rows with ``seed + 1``; seed 0 is the article's own draw)."""
    from qwkboost.data.sources import latent_classes, quartiles

    if name == "article":
        ds = quartiles(n_train=100_000, n_test=100_000, seed=seed, test_seed=seed + 1)
        return ds.X_train, ds.y_train, ds.X_test, ds.y_test
    if name == "imbalanced":
        ds = latent_classes(n_train=40_000, n_test=20_000, n_classes=5, proportions=PROPORTIONS, seed=seed,
                            test_seed=seed + 1)
        return ds.X_train, ds.y_train, ds.X_test, ds.y_test
    if name == "repeated":
        ds = latent_classes(n_train=20_000, n_test=20_000, n_classes=5, proportions=PROPORTIONS, seed=seed,
                            test_seed=seed + 1)
        return np.repeat(ds.X_train, 2, axis=0), np.repeat(ds.y_train, 2), ds.X_test, ds.y_test
    raise ValueError(f"unknown dataset {name!r}")


def replay(curve, delta: float, rounds: int, higher_is_better: bool = True) -> tuple[int, int]:
    """(rounds trained, best round), both 1-based, of :class:`qwkboost.callback.EarlyStopping` with
    ``min_delta = delta`` on the per-round validation ``curve``."""
    from qwkboost.callback import CallbackEnv, EarlyStopException, EarlyStopping

    stopper = EarlyStopping(rounds, "m", higher_is_better, min_delta=delta)
    for i, v in enumerate(curve):
        try:
            stopper(CallbackEnv(i, {"valid": {"m": float(v)}}))
        except EarlyStopException as stop:
            return i + 1, stop.best_iteration + 1
    return len(curve), stopper.best_iteration + 1


def scores(cv, X, y, X_test, y_test, best: list[int]) -> dict:
    """Test QWK of the fold models cut at ``best`` rounds: rounded (cut points halfway between classes, as the
    table's ``qwk_round``), and with exact cut points fitted on the out-of-fold scores."""
    from qwkboost.evaluation.metrics import qwk
    from qwkboost.evaluation.thresholds import apply_thresholds, fit_exact

    lo, k = float(np.min(y)), int(np.max(y) - np.min(y)) + 1
    oof = np.zeros(len(y))
    test = np.zeros(len(y_test))
    for m, (_, va), b in zip(cv.models, cv.folds, best):
        oof[va] = m.predict(X[va], num_iteration=b)
        test += m.predict(X_test, num_iteration=b) / len(cv.models)
    yi, yt = (y - lo).astype(int), (y_test - lo).astype(int)
    halfway = np.arange(k - 1) + 0.5
    cuts = fit_exact(oof - lo, yi, n_classes=k)
    return {"qwk_round": qwk(yt, apply_thresholds(test - lo, halfway)),
            "qwk_thresholds": qwk(yt, apply_thresholds(test - lo, cuts))}


def run(name: str, engine: str, delta, args, seed: int = 0) -> dict:
    """One cross-validation of extended QWK with ``early_stopping_min_delta=delta`` (``None``: the default)."""
    import qwkboost as qb

    X, y, Xt, yt = dataset(name, seed)
    params = {"learning_rate": args.learning_rate, **({} if engine == "lightgbm" else {"max_depth": 5})}
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the duplicate-rows warning of the "repeated" data
        cv = qb.cross_validate(X, y, Xt, engine=engine, objective="extended_qwk", params=params,
                               num_boost_round=args.rounds, early_stopping_rounds=100, seed=seed, progress=False,
                               n_jobs=args.threads, early_stopping_min_delta=delta)
    wall = time.perf_counter() - t0
    return {"cv": cv, "X": X, "y": y, "Xt": Xt, "yt": yt, "wall": wall}


def row(name, engine, setting, stops, bests, seconds, sc, seed=0) -> dict:
    return {"dataset": name, "engine": engine, "min_delta": setting, "seed": seed, "stops": stops, "best": bests,
            "rounds": int(sum(stops)), "seconds": round(float(seconds), 1), **{k: round(v, 4) for k, v in sc.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="article,imbalanced,repeated")
    ap.add_argument("--engines", default="xgboost,lightgbm,native")
    ap.add_argument("--deltas", default="0,1e-5,1e-4,5e-4,1e-3")
    ap.add_argument("--measure", metavar="SETTINGS", help="train each of these for real, e.g. 0,default")
    ap.add_argument("--rounds", type=int, default=10_000)
    ap.add_argument("--learning-rate", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=1, help="data draws (and CV seeds); more than one: paired means")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    m0 = machine()
    rows = []
    for seed in range(args.seeds):
        for name in args.datasets.split(","):
            for engine in args.engines.split(","):
                rows += measured(name, engine, args, seed) if args.measure else replayed(name, engine, args, seed)
    how = "trained with each setting" if args.measure else "min_delta = 0 trained, the others replayed"
    print(f"## extended QWK, learning rate {args.learning_rate}, early stopping 100 ({how}; {args.threads} engine "
          "threads)\n")
    if args.seeds == 1:
        print("| data | engine | min_delta | rounds per fold | best rounds | total rounds | fit s | test QWK rounded "
              "| test QWK thresholds |")
        print("|---|---|---:|---|---|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {r['dataset']} | {r['engine']} | {r['min_delta']} | {', '.join(map(str, r['stops']))} | "
                  f"{', '.join(map(str, r['best']))} | {r['rounds']:,} | {r['seconds']:.1f} | "
                  f"{r['qwk_round']:.4f} | {r['qwk_thresholds']:.4f} |")
    else:
        summary(rows, args)
    print(f"\nmachine: {json.dumps({**m0, 'loadavg_end': os.getloadavg()})}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "machine": m0, "rows": rows}, f, indent=1)


def measured(name, engine, args, seed) -> list[dict]:
    out = []
    for setting in args.measure.split(","):
        r = run(name, engine, None if setting == "default" else float(setting), args, seed)
        cv = r["cv"]
        stops, bests = [m.num_rounds for m in cv.models], cv.best_iterations
        out.append(row(name, engine, setting, stops, bests, r["wall"],
                       scores(cv, r["X"], r["y"], r["Xt"], r["yt"], bests), seed))
        print(json.dumps(out[-1]), file=sys.stderr, flush=True)
    return out


def replayed(name, engine, args, seed) -> list[dict]:
    r = run(name, engine, 0.0, args, seed)
    cv = r["cv"]
    out = []
    for setting in args.deltas.split(","):
        rb = [replay(m.evals_result["valid"]["kappa"], float(setting), 100) for m in cv.models]
        stops, bests = [s for s, _ in rb], [b for _, b in rb]
        seconds = sum(t * s / m.num_rounds for t, s, m in zip(cv.fold_seconds, stops, cv.models))
        out.append(row(name, engine, setting, stops, bests, seconds,
                       scores(cv, r["X"], r["y"], r["Xt"], r["yt"], bests), seed))
        print(json.dumps(out[-1]), file=sys.stderr, flush=True)
    return out


def summary(rows: list[dict], args) -> None:
    """Means over the seeds, and each setting's paired difference from the first (95 % t interval)."""
    from qwkboost.evaluation.stats import paired_comparison

    print(f"Means over {args.seeds} seeds; differences paired by seed against min_delta = "
          f"{rows[0]['min_delta']}.\n")
    print("| data | engine | min_delta | rounds | largest fold | fit s | test QWK rounded | difference "
          "| test QWK thresholds | difference |")
    print("|---|---|---:|---:|---:|---:|---:|---|---:|---|")
    keys = list(dict.fromkeys((r["dataset"], r["engine"], r["min_delta"]) for r in rows))
    for d, e, m in keys:
        sel = [r for r in rows if (r["dataset"], r["engine"], r["min_delta"]) == (d, e, m)]
        base = [r for r in rows if (r["dataset"], r["engine"], r["min_delta"]) == (d, e, rows[0]["min_delta"])]
        cells = []
        for met in ("qwk_round", "qwk_thresholds"):
            c = paired_comparison([r[met] for r in sel], [r[met] for r in base])
            cells += [f"{np.mean([r[met] for r in sel]):.4f}",
                      f"{c.diff.mean:+.4f} [{c.diff.low:+.4f}, {c.diff.high:+.4f}]"]
        print(f"| {d} | {e} | {m} | {np.mean([r['rounds'] for r in sel]):,.0f} | "
              f"{max(max(r['stops']) for r in sel):,} | {np.mean([r['seconds'] for r in sel]):.1f} | "
              + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
