"""``experiment=auto`` on a Dask cluster against one process, the cluster path's overhead per task, and a
simulation of 1 to 64 workers from measured candidate times.

    python benchmarks/auto_cluster.py compare --sets insteval diamonds --budgets 120 300 --twice \
        --json benchmarks/results/auto_cluster.json --workdir outputs/auto_cluster
    python benchmarks/auto_cluster.py compare --sets insteval diamonds --budgets 120 300 \
        --label cluster_tuning_beside --only cluster_tuning_beside --json benchmarks/results/auto_cluster.json
    python benchmarks/auto_cluster.py overhead --json benchmarks/results/auto_cluster.json
    python benchmarks/auto_cluster.py simulate --pool outputs/auto_plan --json benchmarks/results/auto_cluster.json
    python benchmarks/auto_cluster.py report --json benchmarks/results/auto_cluster.json

``compare``: per set and budget, ``python experiments/run.py experiment=auto auto.time_limit=<budget> data=<set>``
in a fresh process, once as it is (one process, the engines' threads on both cores) and once with
``cluster=local`` (a ``LocalCluster`` of 2 workers of one thread each, started by the command inside its
budget): finished candidates, tuning trials, nested out-of-fold and test QWK, the share of the budget used, and
every finished candidate's seconds (to compare a candidate's time on a one-thread worker with one process's).
With ``--twice``, one process also at twice each budget: the candidates the cluster finished against those one
process finished in twice the time.

``overhead``: on a 2-worker ``LocalCluster``, a candidate of 5 rounds on 600 rows run 20 times through
:class:`~qwkboost.autoblend.dask_executor.DaskExecutor` (submit, run, result) against its own seconds on the
worker: the rest is the cluster path's overhead per task. And each packaged set's dataset sent to the workers
once (``scatter``), timed.

``simulate``: from the candidates that one process finished at 900 s on each set (``--pool``, the runs of
``benchmarks/auto_budget.py``: their order, seconds and out-of-fold files), list scheduling on W one-thread
workers (W = 1 .. 64): each candidate starts on the first free worker, in the order one process ran them, and
takes its one-process seconds times the engine's measured one-thread factor (from ``compare``) plus the measured
overhead per task; those that end within the budget's working time (the limit less the reserve the run kept)
finish, and are blended as auto blends (greedy ensemble selection on the diverse pool of at most 15): finished
candidates, nested out-of-fold and test QWK against W. The pool is what 900 s of one process produced, so past
the point where every one of its candidates finishes more workers cannot show a gain here (a larger pool would
hold more tuning trials): the table says where that point is.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from auto_budget import auto  # noqa: E402
from machine import machine  # noqa: E402

WORKERS = (1, 2, 4, 8, 16, 32, 64)


def _rows(path: str) -> list[dict]:
    return json.load(open(path)) if os.path.exists(path) else []


def _keep(path: str, row: dict) -> None:
    rows = _rows(path)
    rows.append(row)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(rows, f, indent=1)
    os.replace(tmp, path)
    print(json.dumps(row)[:400], flush=True)


def _candidates(d: str) -> list[dict]:
    import pandas as pd

    board = pd.read_csv(f"{d}/out/leaderboard.csv")
    done = board[board.status == "finished"]
    cols = [c for c in ("candidate", "engine", "seconds", "started_at", "nested_oof_qwk", "worker") if c in done]
    return done[cols].to_dict("records")


def compare(args) -> None:
    for name in args.sets:
        for budget in args.budgets:
            runs = [("one_process", budget, []), (args.label, budget, ["cluster=local"])]
            if args.twice:          # one process given twice the time, against the cluster at this budget
                runs.append(("one_process", 2 * budget, []))
            runs = [r for r in runs if args.only is None or r[0] == args.only]
            for kind, limit, extra in runs:
                if any(r.get("kind") == kind and r["set"] == name and r["budget"] == limit
                       for r in _rows(args.json)):
                    continue
                row = auto(name, limit, args.seed, args.workdir, folder=f"auto-{kind}", extra=extra)
                d = os.path.join(args.workdir, f"{name}-{args.seed}", f"auto-{kind}-{limit:g}")
                _keep(args.json, {"kind": kind, **row, "candidates": _candidates(d), "machine": machine()})


def overhead(args) -> None:
    import copy

    from qwkboost.autoblend.budget import Budget
    from qwkboost.autoblend.executor import GuardSpec, Job
    from qwkboost.data.packaged import load
    from qwkboost.data.sources import quartiles
    from qwkboost.distributed.connection import ClusterSpec, connect
    from qwkboost.autoblend.dask_executor import DaskExecutor

    cfg = {"data": {"name": "quartiles"}, "engine": {"name": "lightgbm", "num_boost_round": 5,
                                                     "early_stopping_rounds": None, "params": {"num_threads": 1}},
           "objective": {"name": "squared_error"}, "cv": {"n_splits": 2, "stratified": True, "shuffle": True},
           "thresholds": {"method": "exact"}, "seed": 0,
           "tracking": {"log_models": False, "log_pyfunc": False, "explain": False}}
    ds = quartiles(n_train=600, n_test=200)
    work = os.path.abspath(os.path.join(args.workdir, "overhead"))
    os.makedirs(work, exist_ok=True)
    with connect(ClusterSpec(n_workers=2, threads_per_worker=1)) as client:
        t = time.perf_counter()
        executor = DaskExecutor(client, ds, Budget(3600), work)
        start = time.perf_counter() - t
        per_task, inside = [], []
        for i in range(args.repeats + 1):
            job = Job(f"tiny-{i}", copy.deepcopy(cfg), __import__("pathlib").Path(work) / f"tiny-{i}", GuardSpec(2))
            t = time.perf_counter()
            outcome = executor.run(job)
            if i:                       # the first warms the workers' imports
                per_task.append(time.perf_counter() - t)
                inside.append(outcome.seconds)
        scatter = {}
        for name in args.sets:
            data = load(name)
            t = time.perf_counter()
            client.scatter(data, broadcast=True, hash=False)
            scatter[name] = {"seconds": time.perf_counter() - t, "rows": int(data.X_train.shape[0])}
    over = [a - b for a, b in zip(per_task, inside)]
    _keep(args.json, {"kind": "overhead", "executor_start_seconds": start, "repeats": args.repeats,
                      "task_seconds_median": statistics.median(per_task),
                      "run_seconds_median": statistics.median(inside),
                      "overhead_seconds_median": statistics.median(over), "overhead_seconds_max": max(over),
                      "scatter": scatter, "machine": machine()})


def _factors(rows: list[dict]) -> dict[str, float]:
    """Per engine, the median of a candidate's seconds on a one-thread worker over one process's, same set,
    budget and candidate."""
    ratios: dict[str, list[float]] = {}
    for c in (r for r in rows if r.get("kind") == "cluster"):
        one = next((r for r in rows if r.get("kind") == "one_process" and r["set"] == c["set"]
                    and r["budget"] == c["budget"]), None)
        if one is None:
            continue
        base = {x["candidate"]: x for x in one["candidates"]}
        for x in c["candidates"]:
            if x["candidate"] in base and "-trial-" not in x["candidate"] and base[x["candidate"]]["seconds"] > 0:
                ratios.setdefault(x["engine"], []).append(x["seconds"] / base[x["candidate"]]["seconds"])
    return {e: statistics.median(v) for e, v in ratios.items()}


def simulate(args) -> None:
    import pandas as pd

    from qwkboost.autoblend.ranking import diverse_pool
    from qwkboost.autoblend.state import CandidateRecord
    from qwkboost.blending import blend, read_members

    rows = _rows(args.json)
    factors = _factors(rows)
    every = statistics.median(factors.values()) if factors else 1.0
    over = next((r["overhead_seconds_median"] for r in rows if r.get("kind") == "overhead"), 0.0)
    for name in args.sets:
        d = os.path.join(args.pool, f"{name}-0", "auto-900", "out")
        if not os.path.exists(f"{d}/auto.json"):
            print(f"{name}: no 900 s run in {d}", flush=True)
            continue
        record = json.load(open(f"{d}/auto.json"))
        reserve = float(record["sessions"][-1].get("reserve") or 0.0)
        board = pd.read_csv(f"{d}/leaderboard.csv")
        done = board[board.status == "finished"].sort_values("started_at")
        first_start = float(done["started_at"].min())       # reading the data and starting: as one process
        for budget in args.budgets:
            for w in WORKERS:
                if any(r.get("kind") == "simulated" and r["set"] == name and r["budget"] == budget
                       and r["workers"] == w for r in _rows(args.json)):
                    continue
                free = [first_start] * w
                finished = []
                for c in done.itertuples():
                    i = min(range(w), key=free.__getitem__)
                    end = free[i] + over + c.seconds * factors.get(c.engine, every)
                    if end <= budget - reserve:
                        free[i] = end
                        finished.append(c.candidate)
                recs = {n: CandidateRecord("finished", r.engine, r.objective,
                                           qwk_thresholds_oof_nested=r.nested_oof_qwk)
                        for r in done.itertuples() for n in [r.candidate] if n in finished}
                pool = diverse_pool(list(recs.items()), 15)
                if len(pool) > 1:
                    members = read_members([os.path.join(d, "candidates", n) for n, _ in pool])
                    result = blend(members, method="greedy")
                    nested, test = result.metrics["nested_oof_qwk"], result.metrics.get("test_qwk")
                elif pool:
                    one = done.set_index("candidate").loc[pool[0][0]]
                    nested, test = float(one.nested_oof_qwk), float(one.test_qwk)
                else:
                    nested = test = None
                _keep(args.json, {"kind": "simulated", "set": name, "budget": budget, "workers": w,
                                  "finished": len(finished), "pool": int(len(done)),
                                  "trials": sum("-trial-" in n for n in finished), "nested_oof_qwk": nested,
                                  "test_qwk": test, "overhead_seconds": over, "reserve_seconds": reserve,
                                  "factors": factors})


def report(args) -> None:
    rows = _rows(args.json)
    print("| set | budget | one process: finished (trials) | nested | test | used | 2 workers: finished (trials) | "
          "nested | test | used |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for c in (r for r in rows if r.get("kind") == "cluster"):
        o = next((r for r in rows if r.get("kind") == "one_process" and r["set"] == c["set"]
                  and r["budget"] == c["budget"]), None)
        if o is None:
            continue
        print(f"| {c['set']} | {c['budget']:g} s | {o['finished']} ({o['trials']}) | {o['nested_oof_qwk']:.4f} | "
              f"{o['test_qwk']:.4f} | {100 * o['budget_used']:.0f} % | {c['finished']} ({c['trials']}) | "
              f"{c['nested_oof_qwk']:.4f} | {c['test_qwk']:.4f} | {100 * c['budget_used']:.0f} % |")
    for c in (r for r in rows if r.get("kind") == "cluster"):
        o = next((r for r in rows if r.get("kind") == "one_process" and r["set"] == c["set"]
                  and r["budget"] == 2 * c["budget"]), None)
        if o is not None:
            same = {x["candidate"] for x in c["candidates"]} ^ {x["candidate"] for x in o["candidates"]}
            print(f"\n{c['set']}: 2 workers at {c['budget']:g} s finished {c['finished']}, one process at "
                  f"{o['budget']:g} s {o['finished']}; nested {c['nested_oof_qwk']:.4f} against "
                  f"{o['nested_oof_qwk']:.4f}; finished by one only: {sorted(same) or 'none'}")
    print("\none-thread factors (a candidate's seconds on a one-thread worker / one process's):", _factors(rows))
    for r in (r for r in rows if r.get("kind") == "overhead"):
        print(f"\noverhead per task: {r['overhead_seconds_median']:.3f} s median, {r['overhead_seconds_max']:.3f} s "
              f"max (a {r['run_seconds_median']:.2f} s run, {r['repeats']} tasks); executor start "
              f"{r['executor_start_seconds']:.2f} s; scatter: " +
              ", ".join(f"{k} {v['seconds']:.2f} s ({v['rows']} rows)" for k, v in r["scatter"].items()))
    sims = [r for r in rows if r.get("kind") == "simulated"]
    for budget in sorted({r["budget"] for r in sims}):
        print(f"\nsimulated at {budget:g} s: finished of the pool / nested out-of-fold QWK / test QWK")
        print("| set | pool | " + " | ".join(f"{w}" for w in WORKERS) + " |")
        print("|---|---|" + "---|" * len(WORKERS))
        for name in sorted({r["set"] for r in sims}):
            by = {r["workers"]: r for r in sims if r["set"] == name and r["budget"] == budget}
            if not by:
                continue
            cells = [f"{by[w]['finished']} / {by[w]['nested_oof_qwk']:.4f} / {by[w]['test_qwk']:.4f}"
                     if w in by and by[w]["nested_oof_qwk"] is not None else "-" for w in WORKERS]
            print(f"| {name} | {next(iter(by.values()))['pool']} | " + " | ".join(cells) + " |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["compare", "overhead", "simulate", "report"])
    p.add_argument("--sets", nargs="+", default=["insteval", "diamonds"])
    p.add_argument("--budgets", nargs="+", type=float, default=[120.0, 300.0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--twice", action="store_true", help="compare: one process at twice each budget too")
    p.add_argument("--label", default="cluster", help="compare: the kind of the cluster's rows (another code's runs "
                                                       "beside those already kept)")
    p.add_argument("--only", help="compare: only the runs of this kind")
    p.add_argument("--json", default="benchmarks/results/auto_cluster.json")
    p.add_argument("--workdir", default="outputs/auto_cluster")
    p.add_argument("--pool", default="outputs/auto_plan")
    args = p.parse_args()
    if args.what == "simulate" and args.sets == ["insteval", "diamonds"]:
        args.sets = ["diamonds", "chem97", "insteval", "gss_vocab", "happiness", "movielens"]
    {"compare": compare, "overhead": overhead, "simulate": simulate, "report": report}[args.what](args)


if __name__ == "__main__":
    main()
