"""The one command (``experiments/run.py experiment=auto``) and ``experiments/tune.py`` at their edges, as a new
user and an attacker would meet them, on a 2,000-row CSV with 4 classes: every case's outcome classified.

    .venv/bin/python benchmarks/edge_sweep.py                      # every case: about an hour on 2 cores
    .venv/bin/python benchmarks/edge_sweep.py --only folder memory # the cases whose name holds "folder" or "memory"
    .venv/bin/python benchmarks/edge_sweep.py --quick              # the short cases only (refusals, mostly)
    .venv/bin/python benchmarks/edge_sweep.py --list               # the cases and what good means in each

Each case runs the commands as a user types them (a fresh process, ``CI=true``, the working directory its own
folder, an MLflow store of its own: ``tracking.uri=sqlite:///<case>/mlflow.db``), stops them with Ctrl-C (SIGINT to
the process group, as a terminal does) or SIGTERM (to the process, as ``kill`` does) when a log line shows the
moment, kills Dask workers and schedulers, damages or replaces files between a run and its resume, and reads what
was left: exit status, stderr, the output folder, ``auto.json``, the MLflow store, the Optuna storage, the processes
still running.

Verdicts, worst first:

* ``raw``: a ``Traceback`` (or an Optuna "Trial N failed because of the following error") on stdout or stderr, an
  exit status of 1 (or a signal's), an error longer than a line, or a refusal that came after training began.
* ``lost``: a result the user paid for is gone: candidates finished but no ``submission.csv``/``leaderboard.csv``
  (or a truncated one), or the user's own files deleted or overwritten.
* ``silent``: a stale or wasted answer without a word: a resumed study that restarted at 0 trials, a default
  candidate run again after a resume, a study on other data reused, a MLflow run left RUNNING, processes left
  running 10 s after the command ended, a bad setting accepted, a Ctrl-C ignored (exit 0 long after it), a lost
  worker or scheduler that no line of qwkboost's mentions.
* ``hang``: the case's timeout passed (its processes are killed).
* ``missed``: the moment a case waits for never came (the command ended first): nothing was tested.
* ``refused``: exit status 2, stderr's last line ``error: ...``, no traceback, and no ``candidates/`` made.
* ``good``: what the docs promise there (each case says what that is: ``--list``).
* ``skipped``: a package or a start-up step the case needs is missing.

``expect`` lists the verdicts that are right for a case (``refused`` where a refusal is the promise); ``ok`` says
whether it got one. After the fix this sweep is for, the run must report 0 raw, 0 lost, 0 silent (and 0 hang,
ideally every case ``ok``).

Nothing is written outside the work folder: every command gets ``tracking.uri`` and ``hydra.run.dir`` there (with
``tracking.uri=null`` MLflow would write ``<project>/mlflow.db``), except ``tune-default-storage``, whose point is
where a study goes without ``tune.storage``: a ``<project>/optuna.db`` it creates is removed again.

Output: one line per case as it ends; ``--out`` (``benchmarks/results/edge_sweep.json``: every case's verdict,
seconds, exit status, detail, commands and the tail of its stderr, plus the machine) and a markdown table beside
it (``edge_sweep.md``: counts by verdict and group, then every case). The data and each case's folder are kept
with ``--keep``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))                    # machine.py and edge_cases/, from any working directory

from edge_cases import CASES, PY, ROOT, Case, Ctx, V, write_data  # noqa: E402
from machine import machine  # noqa: E402


# ------------------------------------------------------------------------------------------------------- driver

def _have(need: str) -> bool:
    if need == "dask":
        return importlib.util.find_spec("distributed") is not None and (Path(PY).parent / "dask").exists()
    return importlib.util.find_spec(need) is not None


def run_case(cs: Case, work: Path, data: Path, scale: float) -> dict:
    folder = work / "cases" / cs.name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    c = Ctx(folder, data, scale)
    t0 = time.monotonic()
    missing = [n for n in cs.needs if not _have(n)]
    if missing:
        v = V("skipped", f"needs {', '.join(missing)}")
    else:
        try:
            v = cs.fn(c)
        except Exception as exc:                          # the sweep's own step failed: say so, go on
            v = V("skipped", f"the case's setup failed: {type(exc).__name__}: {exc}"[:300])
    last = c.runs[-1] if c.runs else None
    return {"case": cs.name, "group": cs.group, "verdict": v["verdict"], "ok": v["verdict"] in cs.expect,
            "expect": list(cs.expect), "seconds": round(time.monotonic() - t0, 1),
            "exit": v["exit"] if v.get("exit") is not None else (last.rc if last else None),
            "detail": v.get("detail", ""), "good": cs.good,
            "commands": [" ".join(shlex.quote(a) for a in r.argv[1:]).replace(str(ROOT) + "/", "")[:600]
                         for r in c.runs],
            "stderr_tail": (last.err[-1500:] if last else ""), "folder": str(folder)}


VERDICTS = ["raw", "lost", "silent", "hang", "missed", "skipped", "refused", "good"]


def write_report(path: Path, rows: list[dict], meta: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({**meta, "counts": counts, "not_ok": sum(not r["ok"] for r in rows), "cases": rows},
                              indent=1))
    os.replace(tmp, path)
    groups = sorted({r["group"] for r in rows})
    md = ["# Edge sweep: the one command and tune.py at their edges", "",
          (f"`{meta['command']}`, {meta['started']}, {meta['machine'].get('cpu')} ({meta['machine'].get('nproc')} "
           f"cores), {meta['seconds']:.0f} s. Verdicts: see `benchmarks/edge_sweep.py`. "
           f"{sum(r['ok'] for r in rows)} of {len(rows)} cases as expected."), "",
          "| group | " + " | ".join(VERDICTS) + " |", "|---|" + "---:|" * len(VERDICTS)]
    for g in groups + ["all"]:
        sel = [r for r in rows if g in ("all", r["group"])]
        md.append(f"| {g} | " + " | ".join(str(sum(r['verdict'] == v for r in sel) or "") for v in VERDICTS) + " |")
    md += ["", "| case | group | verdict | ok | expected | s | exit | detail |", "|---|---|---|---|---|---:|---:|---|"]
    for r in rows:
        detail = r["detail"].replace("|", "\\|").replace("\n", " ")[:300]
        md.append(f"| {r['case']} | {r['group']} | **{r['verdict']}** | {'yes' if r['ok'] else 'NO'} | "
                  f"{'/'.join(r['expect'])} | {r['seconds']:.0f} | {r['exit']} | {detail} |")
    path.with_suffix(".md").write_text("\n".join(md) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", help="run the cases whose name holds any of these substrings")
    ap.add_argument("--quick", action="store_true", help="only the short cases (refusals, folders)")
    ap.add_argument("--jobs", type=int, default=1, help="cases side by side (1: timings as a user sees them)")
    ap.add_argument("--out", default=str(HERE / "results" / "edge_sweep.json"))
    ap.add_argument("--work", help="the work folder (default: a new temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (data and every case's folder)")
    ap.add_argument("--timeout-scale", type=float, default=1.0, help="multiply every timeout (a slow machine)")
    ap.add_argument("--list", action="store_true", help="list the cases and what good means in each, then exit")
    args = ap.parse_args()

    chosen = [cs for cs in CASES if (not args.only or any(s in cs.name for s in args.only))
              and (not args.quick or cs.quick)]
    if args.list:
        for cs in chosen:
            print(f"{cs.name:42s} [{cs.group}; expect {'/'.join(cs.expect)}] {cs.good}")
        print(f"{len(chosen)} cases")
        return
    if not chosen:
        sys.exit(f"no case matches {args.only}")
    work = Path(args.work or tempfile.mkdtemp(prefix="edge_sweep_")).resolve()
    data = work / "data"
    if not (data / "train.csv").exists():
        write_data(data)
    meta = {"command": " ".join(["python", "benchmarks/edge_sweep.py", *sys.argv[1:]]),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": machine(), "work": str(work)}
    print(f"{len(chosen)} case(s); work folder {work}", flush=True)
    t0 = time.monotonic()
    rows: list[dict] = []
    lock = threading.Lock()

    def one(cs):
        row = run_case(cs, work, data, args.timeout_scale)
        with lock:
            rows.append(row)
            rows.sort(key=lambda r: [c.name for c in chosen].index(r["case"]))
            print(f"[{len(rows)}/{len(chosen)}] {row['case']:42s} {row['verdict']:8s}{'' if row['ok'] else '!'} "
                  f"{row['seconds']:5.0f} s  exit {row['exit']}  {row['detail'][:150]}", flush=True)
            write_report(Path(args.out), rows, {**meta, "seconds": time.monotonic() - t0})

    try:
        if args.jobs == 1:
            for cs in chosen:
                one(cs)
        else:
            with ThreadPoolExecutor(args.jobs) as pool:
                list(pool.map(one, chosen))
    finally:
        if not args.keep and not args.work:
            shutil.rmtree(work, ignore_errors=True)
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    print("  ".join(f"{v} {n}" for v, n in counts.items() if n), f"; {sum(not r['ok'] for r in rows)} not as "
          f"expected; {args.out}", flush=True)


if __name__ == "__main__":
    main()
