"""Threads that share: the default thread count beside one busy process, against one thread (issue 45).

    python benchmarks/threads_shared.py --quick        # under 5 minutes: 3 repeats, no PASSIVE rows, no CatBoost
    python benchmarks/threads_shared.py                # 5 repeats, every case and setting
    python benchmarks/threads_shared.py --json threads.json

Every measurement is a fresh Python process that does a plain ``import qwkboost`` and times one call, as a
user's script would; ``OMP_*``, ``GOMP_*`` and BLAS thread variables are removed from its environment, except
where a setting names one. Cases (data: :func:`qwkboost.data.sources.quartiles`, 10 features, 4 classes):

``lightgbm train`` / ``xgboost train``
    ``qwkboost.train`` on 60,000 rows, 150 rounds, the engine's defaults.
``lightgbm cv 2k`` / ``xgboost cv 2k``
    ``qwkboost.cross_validate`` on 2,000 rows, 5 folds with early stopping: short rounds, as an
    ``experiment=auto`` candidate on small data.
``catboost train``
    ``qwkboost.train`` on 20,000 rows, 150 rounds (CatBoost's own thread pool, not OpenMP).

Settings: ``default`` (``n_jobs=None``: what a user gets), ``every core`` (``n_jobs`` = the cores this process
may use, the default before issue 45), ``one thread`` (``n_jobs=1``, the reference), and ``every core,
OMP_WAIT_POLICY=PASSIVE`` (OpenMP threads sleep instead of spinning; OpenMP engines only).

Conditions: ``quiet``, and ``busy``: one ``python -c "while True: pass"`` pinned nowhere, started before the
case's settings run and stopped after. Each repeat runs every case quiet then busy, the settings interleaved in
each, so that a change in the machine's load reaches every setting alike. Reported: the median seconds, the
ratio busy / ``one thread`` busy (each a median over the repeats of the repeat's own ratio) (target: at most 1.3 for ``default``), quiet / ``every core`` quiet (target:
within 5 % for ``default``), the thread count the default chose (the busy process takes one core of two), and
``/proc/loadavg`` beside each measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from machine import machine  # noqa: E402

CASES = {"lightgbm train": ("lightgbm", "train", 60_000), "xgboost train": ("xgboost", "train", 60_000),
         "lightgbm cv 2k": ("lightgbm", "cv", 2_000), "xgboost cv 2k": ("xgboost", "cv", 2_000),
         "catboost train": ("catboost", "train", 20_000)}
QUICK_CASES = ("lightgbm train", "xgboost train", "lightgbm cv 2k")
SETTINGS = ("default", "every core", "one thread", "every core, OMP_WAIT_POLICY=PASSIVE")
QUICK_SETTINGS = SETTINGS[:3]
ROUNDS = 150
#: environment variables a measurement starts without (a setting may name one)
CLEARED = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS", "OMP_DYNAMIC", "OPENBLAS_NUM_THREADS",
           "MKL_NUM_THREADS", "LOKY_MAX_CPU_COUNT")


def _threads(engine: str, booster) -> int:
    """The thread count a trained booster was given."""
    if engine == "xgboost":
        return int(json.loads(booster.save_config())["learner"]["generic_param"]["nthread"])
    if engine == "lightgbm":
        return int(booster.params["num_threads"])
    return int(booster.get_params()["thread_count"])


def child(case: str, setting: str) -> dict:
    """One measurement in this fresh process: seconds of the call, and the threads the model was given."""
    import qwkboost as qb
    from qwkboost.data.sources import quartiles
    from qwkboost.engines.threads import available_cores

    engine, kind, n = CASES[case]
    ds = quartiles(n_train=n, n_test=100)
    n_jobs = {"default": None, "one thread": 1}.get(setting, available_cores())
    start = time.perf_counter()
    if kind == "train":
        model = qb.train(ds.X_train, ds.y_train, engine=engine, num_boost_round=ROUNDS, n_jobs=n_jobs)
    else:
        model = qb.cross_validate(ds.X_train, ds.y_train, engine=engine, n_splits=5, n_jobs=n_jobs,
                                  progress=False).models[0]
    seconds = time.perf_counter() - start
    return {"s": seconds, "threads": _threads(engine, model.booster)}


def _loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:4])


def run_one(case: str, setting: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    if "PASSIVE" in setting:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    load = _loadavg()
    r = subprocess.run([sys.executable, __file__, "--child", case, setting], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{case} / {setting} failed:\n{r.stderr[-2000:]}")
    return {**json.loads(r.stdout.strip().splitlines()[-1]), "loadavg": load}


def measure(cases, settings, repeats: int, save=None) -> dict:
    """``{case: {condition: {setting: [measurement, ...]}}}``, every case quiet then busy in each repeat;
    ``save(out)`` after each measurement."""
    out: dict = {c: {"quiet": {}, "busy": {}} for c in cases}
    for rep in range(repeats):
        for case in cases:
            rows = [s for s in settings if "PASSIVE" not in s or CASES[case][0] != "catboost"]
            rows = rows[rep % len(rows):] + rows[:rep % len(rows)]     # a different setting first each repeat
            for condition in ("quiet", "busy"):
                spin = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if condition == "busy" else None
                try:
                    if spin:
                        time.sleep(0.5)
                    for setting in rows:
                        m = run_one(case, setting)
                        out[case][condition].setdefault(setting, []).append(m)
                        if save:
                            save(out)
                        print(f"  repeat {rep + 1}/{repeats} {case:15s} {condition:5s} {setting:38s} {m['s']:7.2f} s "
                              f"threads {m['threads']}  loadavg {m['loadavg']}", flush=True)
                finally:
                    if spin:
                        spin.kill()
                        spin.wait()
    return out


def table(res: dict) -> str:
    """Median seconds, and the ratios as medians over the repeats of each repeat's own ratio (the runs compared
    ran minutes apart at most, so a change in the others' load reaches both)."""
    def med(ms):
        return statistics.median(m["s"] for m in ms)

    def ratio(ms, ref):
        return statistics.median(m["s"] / r["s"] for m, r in zip(ms, ref))

    lines = ["| case | setting | threads (quiet / busy) | quiet, s | busy, s | busy / one thread busy "
             "| quiet / every core quiet |", "|---|---|---|---:|---:|---:|---:|"]
    for case, d in res.items():
        for setting in d["quiet"]:
            q, b = d["quiet"][setting], d["busy"][setting]
            th = "/".join(sorted({str(m["threads"]) for m in q})) + " / " + \
                "/".join(sorted({str(m["threads"]) for m in b}))
            lines.append(f"| {case} | {setting} | {th} | {med(q):.2f} | {med(b):.2f} "
                         f"| {ratio(b, d['busy']['one thread']):.2f} | {ratio(q, d['quiet']['every core']):.2f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 repeats of 3 cases, no PASSIVE rows (under 5 minutes)")
    ap.add_argument("--repeats", type=int, help="runs of each case and setting (default: 3 quick, 5 full)")
    ap.add_argument("--cases", nargs="+", choices=list(CASES), help="these cases only")
    ap.add_argument("--json", help="also write every measurement to this file (after each one)")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    cases = args.cases or (QUICK_CASES if args.quick else tuple(CASES))
    settings = QUICK_SETTINGS if args.quick else SETTINGS
    repeats = args.repeats or (3 if args.quick else 5)
    info = machine()
    print("command:", " ".join([os.path.basename(sys.executable), *sys.argv]))
    print("machine:", json.dumps(info), flush=True)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))      # a stop still ends the busy process (finally)

    def save(res):
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"machine": info, "command": sys.argv, "results": res}, f, indent=1)

    res = measure(cases, settings, repeats, save)
    info["loadavg_end"] = os.getloadavg()
    print(f"\n## Seconds, median of {repeats} (a fresh process each); busy: one `python -c \"while True: pass\"`\n")
    print(table(res))
    print("\nloadavg at the start", info["loadavg"], "and at the end", info["loadavg_end"])
    save(res)


if __name__ == "__main__":
    main()
