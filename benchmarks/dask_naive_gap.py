"""What a naive Dask port of extended QWK costs: per-worker sums against all-reduced sums.

    python benchmarks/dask_naive_gap.py                  # 3 data seeds x 3 partitionings, 200 rounds
    python benchmarks/dask_naive_gap.py --seeds 1 --rounds 50

Both Dask interfaces call a custom objective on each worker's rows only. ``qwkboost.distributed.training.train_dask``
all-reduces extended QWK's sums f, g and n over XGBoost's workers; a naive port forms them from the
worker's own rows, so each worker follows its own ratio. LightGBM's Dask interface offers no all-reduce
to the objective, which is why ``train_dask`` refuses extended QWK there; this script runs that naive
LightGBM port anyway, outside the library, to measure what it would cost.

The DSB2019 article's quartile data (40,000 training rows, 20,000 test rows) on a 2-worker
``LocalCluster``, trees of depth 5 (LightGBM: 31 leaves), learning rate 0.1, no early stopping. The
label statistics a, b and the initial score are fitted on every label in all variants; only the
per-round sums differ. Partitionings of the training rows over the two workers:

* ``shuffled``: rows in random order, so each worker's rows look like the whole;
* ``by_feature``: sorted by the first informative feature (data partitioned by time or region);
* ``by_label``: sorted by label, so one worker holds the low classes, the other the high ones.

Test QWK is of the scores rounded to the nearest class. The ``*_se`` columns train squared error (a per-row
objective, exact on lightgbm.dask) on the same partitionings: what LightGBM's distributed training changes by
itself, apart from the objective.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import machine  # noqa: E402

XGB = {"max_depth": 5, "learning_rate": 0.1}
LGB = {"num_leaves": 31, "learning_rate": 0.1, "verbosity": -1}


def naive_xgboost(client, X, y, rounds, seed):
    """xgboost.dask with extended QWK's sums from each worker's own rows."""
    from xgboost import dask as dxgb

    from qwkboost.engines.xgboost import _WorkerObjective
    from qwkboost.objectives import resolve

    obj = resolve("extended_qwk").fit(y.compute())         # a, b and F0 from every label, as train_dask does
    booster = dxgb.train(client, {**XGB, "tree_method": "hist", "base_score": obj.init_score_, "seed": seed,
                                  "disable_default_eval_metric": 1},
                         dxgb.DaskDMatrix(client, X, y), rounds, obj=_WorkerObjective(obj, 0.0))["booster"]
    return lambda Xt: booster.inplace_predict(Xt).astype(np.float64)


def naive_lightgbm(client, X, y, rounds, seed):
    """lightgbm.dask with extended QWK's sums from each worker's own rows (what train_dask refuses)."""
    import dask.array as da
    import lightgbm as lgb

    from qwkboost.engines.lightgbm import _WorkerObjective as _LightGBMObjective
    from qwkboost.objectives import resolve

    obj = resolve("extended_qwk").fit(y.compute())
    reg = lgb.DaskLGBMRegressor(client=client, objective=_LightGBMObjective(obj, 0.0), n_estimators=rounds,
                                random_state=seed, **LGB)
    reg.fit(X, y, init_score=da.full(y.shape[0], obj.init_score_, chunks=X.chunks[0]))
    booster = reg.to_local().booster_
    return lambda Xt: booster.predict(Xt, raw_score=True) + obj.init_score_


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()

    import qwkboost
    from qwkboost.distributed.training import ClusterSpec, as_dask, connect, train_dask
    from qwkboost.data.sources import quartiles
    from qwkboost.evaluation.metrics import qwk

    print(json.dumps(machine()))
    rows = []
    with connect(ClusterSpec(n_workers=2, threads_per_worker=1)) as client:
        for seed in range(args.seeds):
            ds = quartiles(n_train=40_000, n_test=20_000, seed=seed, test_seed=100 + seed)
            score = lambda p: qwk(ds.y_test, np.clip(np.round(p), 0, 3))
            lgb_params = {k: v for k, v in LGB.items() if k != "verbosity"}
            single = {e: score(qwkboost.train(ds.X_train, ds.y_train, engine=e, params=XGB if e == "xgboost" else
                                              lgb_params, num_boost_round=args.rounds, seed=seed,
                                              n_jobs=2).predict(ds.X_test))
                      for e in ("xgboost", "lightgbm")}
            single["lightgbm_se"] = score(qwkboost.train(ds.X_train, ds.y_train, engine="lightgbm",
                                                         objective="squared_error", params=lgb_params,
                                                         num_boost_round=args.rounds, seed=seed,
                                                         n_jobs=2).predict(ds.X_test))
            orders = {"shuffled": np.random.default_rng(seed).permutation(len(ds.y_train)),
                      "by_feature": np.argsort(ds.X_train[:, 0], kind="stable"),
                      "by_label": np.argsort(ds.y_train, kind="stable")}
            for name, order in orders.items():
                d = as_dask(ds.X_train[order], ds.y_train[order], n_partitions=2, client=client)
                exact = train_dask(client, d, engine="xgboost", params=XGB, num_boost_round=args.rounds, seed=seed)
                row = {"seed": seed, "partitioning": name, "single_xgboost": single["xgboost"],
                       "single_lightgbm": single["lightgbm"],
                       "dask_xgboost_allreduced": score(exact.predict(ds.X_test)),
                       "dask_xgboost_naive": score(naive_xgboost(client, d.X, d.y, args.rounds, seed)(ds.X_test)),
                       "dask_lightgbm_naive": score(naive_lightgbm(client, d.X, d.y, args.rounds, seed)(ds.X_test)),
                       # the same partitioning with a per-row objective: what lightgbm.dask itself changes
                       "single_lightgbm_se": single["lightgbm_se"],
                       "dask_lightgbm_se": score(train_dask(client, d, engine="lightgbm", objective="squared_error",
                                                            params=lgb_params, num_boost_round=args.rounds,
                                                            seed=seed).predict(ds.X_test))}
                rows.append(row)
                print(json.dumps(row), flush=True)
    import pandas as pd

    df = pd.DataFrame(rows)
    cols = ["single_xgboost", "dask_xgboost_allreduced", "dask_xgboost_naive", "single_lightgbm",
            "dask_lightgbm_naive", "single_lightgbm_se", "dask_lightgbm_se"]
    print("\nmean test QWK over seeds (sd)")
    mean, sd = df.groupby("partitioning")[cols].mean(), df.groupby("partitioning")[cols].std()
    print("| partitioning | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for part in ("shuffled", "by_feature", "by_label"):
        print(f"| {part} | " + " | ".join(f"{mean.loc[part, c]:.4f} ({sd.loc[part, c]:.4f})" for c in cols) + " |")


if __name__ == "__main__":
    main()
