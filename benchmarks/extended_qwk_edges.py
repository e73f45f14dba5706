"""Extended QWK at the label-range edges: outward drift, and early stopping on clipped scores.

    .venv/bin/python benchmarks/extended_qwk_edges.py [--rounds 1500] [--rows 100000]

The DSB2019 article's data and protocol (XGBoost, learning_rate 0.1, max_depth 5), an 80/20
train/validation split, a fixed number of rounds (no early stopping) so the
whole trajectory is seen. Per round it records, on validation:

* the highest and lowest raw score, and the share of rows beyond [0, 3];
* kappa-tilde of clipped and of unclipped scores, and where each peaks.
"""

from __future__ import annotations

import argparse
import json
import platform

import numpy as np

import qwkboost as qb
from qwkboost.data.sources import quartiles
from qwkboost.evaluation.metrics import extended_qwk, qwk


def per_tree_scores(model, X):
    """Cumulative validation scores after every round, shape (rounds, n)."""
    import xgboost as xgb

    d = xgb.DMatrix(X)
    f0 = model.init_score
    out = np.empty((model.num_rounds, X.shape[0]))
    acc = np.full(X.shape[0], f0)
    for t in range(model.num_rounds):
        acc = acc + (model.booster.predict(d, iteration_range=(t, t + 1), output_margin=True) - f0)
        out[t] = acc
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=1500)
    ap.add_argument("--rows", type=int, default=100_000)
    args = ap.parse_args()
    ds = quartiles(n_train=args.rows, n_test=args.rows)
    idx = np.random.RandomState(0).permutation(args.rows)
    cut = int(0.8 * args.rows)
    tr, va = idx[:cut], idx[cut:]
    Xv, yv = ds.X_train[va], ds.y_train[va]
    report = {"rows": args.rows, "rounds": args.rounds, "machine": platform.processor() or platform.machine()}
    for clip in ("range", "hold"):
        m = qb.train(ds.X_train[tr], ds.y_train[tr], "xgboost", "extended_qwk", objective_params={"clip": clip},
                     params={"max_depth": 5, "learning_rate": 0.1}, num_boost_round=args.rounds)
        S = per_tree_scores(m, Xv)
        k_clip = np.array([extended_qwk(yv, np.clip(s, 0, 3)) for s in S])
        k_raw = np.array([extended_qwk(yv, s) for s in S])
        b_clip, b_raw = int(k_clip.argmax()) + 1, int(k_raw.argmax()) + 1
        test_at = {}
        for name, b in (("clipped", b_clip), ("unclipped", b_raw)):
            p = np.clip(np.rint(m.predict(ds.X_test, num_iteration=b)), 0, 3)
            test_at[name] = round(qwk(ds.y_test, p), 4)
        checkpoints = [r for r in (100, 250, 500, 1000, args.rounds) if r <= args.rounds]
        report[clip] = {
            "max_score": {r: round(float(S[r - 1].max()), 3) for r in checkpoints},
            "min_score": {r: round(float(S[r - 1].min()), 3) for r in checkpoints},
            "share_beyond_range": {r: round(float(((S[r - 1] > 3) | (S[r - 1] < 0)).mean()), 4) for r in checkpoints},
            "best_round_clipped_metric": b_clip,
            "best_round_unclipped_metric": b_raw,
            "rounds_too_early": b_clip - b_raw,
            "test_qwk_rounded_at_best": test_at,
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
