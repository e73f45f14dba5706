"""qwkboost's objectives on CatBoost per boosting round, beside CatBoost's built-in RMSE, in fresh processes.

    python benchmarks/catboost_speed.py                 # 80,000 x 5 rows, a 20,000-row eval set, 60 rounds, 3 repeats
    python benchmarks/catboost_speed.py --repeats 1 --rows 20000
    python benchmarks/catboost_speed.py --multiclass      # why soft_qwk (K outputs, no built-in loss) is refused

The DSB2019 article's quartile data, one training fold of 80,000 rows and an eval set of 20,000 rows scored
every round (as cross-validation does), CatBoost's symmetric trees of depth 6, learning rate 0.1, 2 threads.
``builtin_rmse`` is ``catboost.CatBoost`` with ``loss_function=RMSE`` and the settings qwkboost fixes
(``boosting_type=Plain``, one leaf step, no backtracking, every round scored), without qwkboost;
``builtin_rmse_defaults`` is the same with CatBoost's own defaults; ``builtin_multiclass`` is CatBoost's
``MultiClass`` (K = 4) with qwkboost's fixed settings, the peer of qwkboost's ``multiclass``. ``python_loss`` is
the floor of a NumPy loss: RMSE written as the smallest ``calc_ders_range`` (one NumPy expression a block) with
CatBoost's built-in RMSE metric; ``python_loss_and_metric`` adds the smallest Python ``eval_metric`` (as
qwkboost scores every round). ``compiled_loss`` is the compiled floor: the smallest loss CatBoost compiles with
numba itself (a plain loop over the block's rows whose body never reads ``self``), with CatBoost's RMSE metric;
``compiled_loss_and_metric`` adds the smallest Python metric, as every qwkboost run has. The other rows are
``qwkboost.train(..., engine="catboost")`` from a plain ``import qwkboost``; ``extended_qwk_lookup`` is extended
QWK through the lookup path (a subclass of ``ExtendedQWK``, as a user's own objective would take), the path every
objective with sums took before the compiled kernels. Every run is a fresh process; a run's figure is its wall
time per round over rounds 6..60 (from the after-iteration callback); configurations are interleaved and each is
repeated, a configuration's figure being the median of its repeats. The ratio is against ``builtin_rmse`` of the
same repeat (``multiclass``: against ``builtin_multiclass``); the last column is against the compiled floor
(``compiled_loss_and_metric``) of the same repeat.

``--parts`` times, in this process on one thread, what the compiled-kernel objectives add to the floor: the
objectives' own metric on the training rows and round state in NumPy (what every engine computes once a round),
extended QWK's one compiled pass that replaces them on CatBoost, and each kernel per row on blocks of 500 rows
(the call included), beside numba's scalar exponential alone.

``--multiclass`` times instead what a Python loss with several scores per row costs: CatBoost calls its
``calc_ders_multi`` once per row (a softmax written as plainly as CatBoost's documentation shows it, then the same
loop with a body that never reads ``self``, which CatBoost compiles with numba), against its built-in
``MultiClass``, on 80,000 rows and K = 5, two iterations, setup included.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from machine import machine  # noqa: E402

CONFIGS = ("builtin_rmse", "builtin_rmse_defaults", "builtin_multiclass", "python_loss", "python_loss_and_metric",
           "compiled_loss", "compiled_loss_and_metric", "squared_error", "multiclass", "extended_qwk",
           "extended_qwk_lookup", "ordinal_logit")
#: Each configuration's peer for the ratio (else builtin_rmse).
PEER = {"multiclass": "builtin_multiclass"}
#: The compiled floor: what any loss CatBoost calls from Python costs, with a metric scored every round.
FLOOR = "compiled_loss_and_metric"

CHILD = r"""
import json, sys, time, warnings
import numpy as np
config, rows, rounds, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
from qwkboost.data.sources import quartiles
ds = quartiles(n_train=rows + rows // 4, n_test=10)
X, y = ds.X_train[:rows], ds.y_train[:rows]
Xv, yv = ds.X_train[rows:], ds.y_train[rows:]
stamps = []
if config.startswith(("builtin", "python", "compiled")):
    import catboost
    warnings.filterwarnings("ignore")
    class Tick:
        def after_iteration(self, info):
            stamps.append((time.perf_counter(), time.process_time()))
            return True
    class Loss:
        no_jit = True                   # CatBoost would compile it (numba is installed): this is the NumPy floor
        def calc_ders_range(self, a, t, w):
            return np.column_stack([t - a, np.full(len(a), -1.0)])
    class Compiled:                     # its body never names its first argument: CatBoost compiles it with numba
        def calc_ders_range(self, approxes, targets, weights):
            out = np.empty((approxes.shape[0], 2))
            for i in range(approxes.shape[0]):
                out[i, 0] = targets[i] - approxes[i]
                out[i, 1] = -1.0
            return out
    class Metric:
        no_jit = True
        def is_max_optimal(self):
            return False
        def evaluate(self, approxes, target, weight):
            a = np.asarray(approxes[0])
            return float(np.mean((a - np.asarray(target)) ** 2)), 1.0
        def get_final_error(self, error, weight):
            return error
    fixed = {} if config.endswith("defaults") else dict(boosting_type="Plain", leaf_estimation_iterations=1,
             leaf_estimation_backtracking="No", metric_period=1)
    if config.startswith(("python", "compiled")):
        loss = {"loss_function": Loss() if config.startswith("python") else Compiled(), "boost_from_average": False}
        # a Python loss needs an eval_metric: CatBoost's own, or the smallest Python one
        loss["eval_metric"] = Metric() if config.endswith("and_metric") else "RMSE"
    else:
        loss = {"loss_function": "MultiClass" if config == "builtin_multiclass" else "RMSE"}
        if config == "builtin_multiclass":
            y, yv = y.astype(int), yv.astype(int)
    m = catboost.CatBoost(dict(iterations=rounds, learning_rate=0.1, depth=6, **loss,
                               thread_count=threads, random_seed=0, logging_level="Silent",
                               allow_writing_files=False, use_best_model=False, **fixed))
    m.fit(catboost.Pool(X, y), eval_set=catboost.Pool(Xv, yv), callbacks=[Tick()])
else:
    import qwkboost as qb
    objective = config
    if config == "extended_qwk_lookup":
        class Lookup(qb.objectives.ExtendedQWK):
            pass
        objective = Lookup()
    qb.train(X, y, "catboost", objective, {"learning_rate": 0.1, "depth": 6}, num_boost_round=rounds,
             eval_set=(Xv, yv), n_jobs=threads, callbacks=[lambda r, e: stamps.append((time.perf_counter(), time.process_time()))])
d = np.diff(np.array(stamps[5:]), axis=0)
print(json.dumps({"ms": float(np.median(d[:, 0]) * 1000), "cpu_ms": float(np.median(d[:, 1]) * 1000)}))
"""


def run(config: str, rows: int, rounds: int, threads: int) -> dict:
    # a file, not ``python -c``: CatBoost reads a loss's source (inspect.getsource) before it compiles it
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "child.py")
        with open(script, "w") as f:
            f.write(CHILD)
        out = subprocess.run([sys.executable, script, config, str(rows), str(rounds), str(threads)],
                             capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def multiclass(rows: int, threads: int) -> None:
    import time
    import warnings

    from catboost import CatBoost, Pool

    from qwkboost.data.sources import quartiles

    warnings.filterwarnings("ignore")
    ds = quartiles(n_train=rows, n_test=10, n_classes=5)

    class Softmax:
        def calc_ders_multi(self, approx, target, weight):
            a = np.asarray(approx)
            p = np.exp(a - a.max())
            p /= p.sum()
            t = np.zeros_like(p)
            t[int(target)] = 1.0
            return list(t - p), -np.diag(p)

    class Silent:
        def is_max_optimal(self):
            return False

        def evaluate(self, approxes, target, weight):
            return 0.0, 1.0

        def get_final_error(self, error, weight):
            return error

    class CompiledSoftmax:              # its body never names its first argument: CatBoost compiles it with numba
        def calc_ders_multi(self, approx, target, weight):
            k = approx.shape[0]
            p = np.exp(approx - approx.max())
            p /= p.sum()
            der = -p
            der[int(target)] += 1.0
            hess = np.empty((k, k))
            for i in range(k):
                for j in range(k):
                    hess[i, j] = p[i] * p[j]
                hess[i, i] -= p[i]
            return der, hess

    for name, loss in (("built-in MultiClass", "MultiClass"), ("Python calc_ders_multi", Softmax()),
                       ("compiled calc_ders_multi", CompiledSoftmax())):
        params = dict(iterations=2, learning_rate=0.1, depth=6, thread_count=threads, logging_level="Silent",
                      allow_writing_files=False, loss_function=loss, classes_count=5)
        if not isinstance(loss, str):
            params["eval_metric"] = Silent()
        t = time.perf_counter()
        CatBoost(params).fit(Pool(ds.X_train, ds.y_train))
        print(f"| {name} | {(time.perf_counter() - t) / 2:.2f} s per iteration |")


def parts(rows: int) -> None:
    import time

    from numba import njit

    from qwkboost.data.sources import quartiles
    from qwkboost.engines import catboost_kernels as kernels
    from qwkboost.engines.catboost_losses import KernelLoss, Rounds
    from qwkboost.engines.engine import EngineObjective
    from qwkboost.objectives import ExtendedQWK, OrdinalLogit

    def per_call(f, n=300):
        f()
        t = time.perf_counter()
        for _ in range(n):
            f()
        return (time.perf_counter() - t) / n

    @njit(cache=True)
    def exps(a, out):
        for i in range(a.size):
            out[i] = np.exp(a[i])

    ds = quartiles(n_train=rows, n_test=10)
    y = ds.y_train.astype(np.float64)
    rs = np.random.default_rng(0)
    print(f"| part ({rows:,} rows, one thread) | ms a round | ns a row |\n|---|---:|---:|")
    for objective in (ExtendedQWK(), OrdinalLogit()):
        objective.fit(y)
        seen = EngineObjective(objective)
        rounds = Rounds(seen, y, None, None)
        rounds.new_round(rs.normal(scale=0.5, size=y.size))
        score = rounds.f0 + rounds.approx
        numpy_round = per_call(lambda: (seen.metric(y, score), seen.round_state(y, score)))
        print(f"| {objective.name}: its metric on the training rows and round state, NumPy | "
              f"{numpy_round * 1e3:.2f} | {numpy_round / rows * 1e9:.1f} |")
        loss = KernelLoss(rounds)
        if loss.one_pass is not None:
            one = per_call(lambda: loss._prepare())
            print(f"| {objective.name}: the same in one compiled pass (with the round's fingerprint) | "
                  f"{one * 1e3:.2f} | {one / rows * 1e9:.1f} |")
        args = loss.prepare()
        blocks = [(rounds.approx[i:i + 500], rounds.labels32[i:i + 500]) for i in range(0, rows, 500)]

        def every_block():
            for a, t in blocks:
                loss.kernel(a, t, kernels.EMPTY_WEIGHTS, *args, np.empty((a.size, 2)))

        k = per_call(every_block, 30)
        print(f"| {objective.name}: its kernel on every row once, blocks of 500 (two passes a round) | "
              f"{k * 1e3:.2f} | {k / rows * 1e9:.1f} |")
    out = np.empty(rows)
    e = per_call(lambda: exps(rounds.approx, out))
    print(f"| numba's scalar exponential alone (ordinal logit's kernel takes one a row) | {e * 1e3:.2f} | "
          f"{e / rows * 1e9:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=80_000)
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--multiclass", action="store_true", help="time a K-output Python loss instead")
    ap.add_argument("--parts", action="store_true", help="time what the compiled-kernel objectives add, in-process")
    args = ap.parse_args()
    print(json.dumps(machine()))
    if args.multiclass:
        multiclass(args.rows, args.threads)
        return
    if args.parts:
        parts(args.rows)
        return
    got: dict[str, dict[str, list[float]]] = {k: {c: [] for c in CONFIGS} for k in ("ms", "cpu_ms")}
    ratios: dict[str, dict[str, list[float]]] = {k: {c: [] for c in CONFIGS} for k in ("ms", "cpu_ms")}
    floor: dict[str, dict[str, list[float]]] = {k: {c: [] for c in CONFIGS} for k in ("ms", "cpu_ms")}
    for rep in range(args.repeats):
        order = CONFIGS if rep % 2 == 0 else CONFIGS[::-1]
        now = {c: run(c, args.rows, args.rounds, args.threads) for c in order}
        for k in ("ms", "cpu_ms"):
            for c in CONFIGS:
                got[k][c].append(now[c][k])
                ratios[k][c].append(now[c][k] / now[PEER.get(c, "builtin_rmse")][k])
                floor[k][c].append(now[c][k] / now[FLOOR][k])
        print(f"repeat {rep + 1} ({os.getloadavg()[0]:.1f} load): " +
              ", ".join(f"{c} {now[c]['ms']:.1f} ms ({now[c]['cpu_ms']:.1f} cpu)" for c in CONFIGS), flush=True)
    print(f"\n{args.rows:,} training rows x 5, {args.rows // 4:,} eval rows, depth 6, {args.threads} threads, "
          f"median of {args.repeats} repeats (ms per round; ratio to the peer, median of the repeats' ratios)")
    print("| configuration | ms / round | x peer | CPU ms / round | x peer (CPU) | peer | x compiled floor |\n"
          "|---|---:|---:|---:|---:|---|---:|")
    for c in CONFIGS:
        print(f"| {c} | {np.median(got['ms'][c]):.1f} | {np.median(ratios['ms'][c]):.2f} | "
              f"{np.median(got['cpu_ms'][c]):.1f} | {np.median(ratios['cpu_ms'][c]):.2f} | {PEER.get(c, 'builtin_rmse')} | "
              f"{np.median(floor['ms'][c]):.2f} |")


if __name__ == "__main__":
    main()
