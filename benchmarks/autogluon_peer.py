"""AutoGluon's TabularPredictor on one prepared train/test pair, scored by QWK: the peer of the large study.

Runs in its own environment (AutoGluon 1.6 pins pandas < 3; qwkboost runs on pandas 3):

    python3 -m venv .venv-autogluon
    .venv-autogluon/bin/pip install "autogluon.tabular[lightgbm,catboost,xgboost]==1.6.3"
    .venv-autogluon/bin/python benchmarks/autogluon_peer.py --train train.parquet --test test.parquet \\
        --target cut --classes Fair Good "Very Good" Premium Ideal --time-limit 600 --seed 0 --json out.json

``eval_metric="quadratic_kappa"`` (AutoGluon's QWK), ``presets="best_quality"`` (bagged and stacked, what
AutoGluon recommends for competitions) unless ``--presets`` says otherwise, ``--seed`` as the bagged models'
``model_random_seed``, the models of the extras installed above (LightGBM, CatBoost, XGBoost, random forests, extra trees,
k-nearest neighbours; its neural networks need PyTorch, which is not installed here). The labels are ranked
(``--classes`` lowest first, else sorted numbers) and predicted as classes; the test QWK is scikit-learn's
``cohen_kappa_score(weights="quadratic")``, the same figure qwkboost reports.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--classes", nargs="*", help="the labels lowest first (words); default: sorted numbers")
    ap.add_argument("--time-limit", type=float, required=True, help="seconds for fit (AutoGluon's time_limit)")
    ap.add_argument("--presets", default="best_quality")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-train", type=int, help="a stratified sample of the training rows")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()

    import numpy as np
    import pandas as pd
    from autogluon.tabular import TabularPredictor
    from sklearn.metrics import cohen_kappa_score
    from sklearn.model_selection import train_test_split

    read = pd.read_parquet if args.train.endswith(".parquet") else pd.read_csv
    train, test = read(args.train), read(args.test)
    order = list(args.classes) if args.classes else sorted(pd.concat([train, test])[args.target].unique())
    rank = {str(v): k for k, v in enumerate(order)}
    train[args.target] = train[args.target].astype(str).map(rank)
    test[args.target] = test[args.target].astype(str).map(rank)
    if train[args.target].isna().any() or test[args.target].isna().any():
        raise SystemExit(f"--classes {order} does not cover the labels of {args.target!r}")
    if args.n_train:
        keep, _ = train_test_split(np.arange(len(train)), train_size=args.n_train, stratify=train[args.target],
                                   random_state=args.seed)
        train = train.iloc[np.sort(keep)]
    workdir = args.workdir or os.path.join(os.path.dirname(os.path.abspath(args.json)), "autogluon-models")
    t0 = time.perf_counter()
    predictor = TabularPredictor(label=args.target, problem_type="multiclass", eval_metric="quadratic_kappa",
                                 path=workdir, verbosity=1).fit(
        train, time_limit=args.time_limit, presets=args.presets, ag_args_ensemble={"model_random_seed": args.seed})
    fit_seconds = time.perf_counter() - t0
    pred = predictor.predict(test.drop(columns=[args.target]))
    total = time.perf_counter() - t0
    qwk = cohen_kappa_score(test[args.target].to_numpy(), pred.to_numpy(), weights="quadratic")
    board = predictor.leaderboard(silent=True)
    out = {"test_qwk": float(qwk), "fit_seconds": fit_seconds, "seconds": total, "time_limit": args.time_limit,
           "presets": args.presets, "seed": args.seed, "n_train": int(len(train)), "n_test": int(len(test)),
           "best_model": str(board.iloc[0]["model"]), "models": board["model"].astype(str).tolist(),
           "val_qwk_best": float(board.iloc[0]["score_val"])}
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
