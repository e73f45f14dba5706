"""Small end-to-end demo: squared error vs extended QWK on XGBoost and LightGBM, the DSB2019 article's data.

    python experiments/demo.py [--rows 100000]
"""

from __future__ import annotations

# first, before the slow imports: Ctrl-C or SIGTERM from here on is one line, never a traceback
from qwkboost.tracking.interrupt import main_guard, stop_quietly

if __name__ == "__main__":
    stop_quietly("experiments/demo.py")

import argparse
import time

import numpy as np
from rich.console import Console
from rich.table import Table

import qwkboost as qb
from qwkboost.data.sources import quartiles

PARAMS = {"xgboost": {"max_depth": 5, "learning_rate": 0.1}, "lightgbm": {"learning_rate": 0.1}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000, help="training rows (test rows are the same number)")
    args = ap.parse_args()
    ds = quartiles(n_train=args.rows, n_test=args.rows)
    rs = np.random.RandomState(0)
    idx = rs.permutation(len(ds.y_train))
    cut = int(0.8 * len(idx))
    tr, va = idx[:cut], idx[cut:]
    table = Table(title=f"test QWK, rounded predictions ({args.rows:,} rows, the DSB2019 article's data)")
    for col in ("engine", "objective", "rounds", "QWK", "seconds"):
        table.add_column(col, justify="right" if col in ("rounds", "QWK", "seconds") else "left")
    for engine in ("xgboost", "lightgbm"):
        for objective in ("squared_error", "extended_qwk"):
            t0 = time.perf_counter()
            model = qb.train(ds.X_train[tr], ds.y_train[tr], engine=engine, objective=objective,
                             params=PARAMS[engine], num_boost_round=3000,
                             eval_set=(ds.X_train[va], ds.y_train[va]), early_stopping_rounds=100)
            pred = np.clip(np.rint(model.predict(ds.X_test)), 0, 3)
            table.add_row(engine, objective, str(model.best_iteration),
                          f"{qb.qwk(ds.y_test, pred):.4f}", f"{time.perf_counter() - t0:.1f}")
    Console().print(table)


if __name__ == "__main__":
    with main_guard("experiments/demo.py", tracked=False):
        main()
