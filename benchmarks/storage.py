"""Bytes on disk a command leaves, and how long a blend takes to load and serve: this checkout against a baseline
checkout (issue 58).

Each job runs as a user types it, in a folder of its own that it writes everything into (its outputs, the MLflow
store ``mlflow.db`` and the artifacts beside it):

- ``run``: ``experiments/run.py experiment=qwk_table`` (``make run``);
- ``multirun``: ``run.py -m engine=lightgbm,xgboost objective=squared_error,extended_qwk data=<set>``, then
  ``blend.py`` over the multirun;
- ``auto``: ``run.py experiment=auto auto.time_limit=<budget> data=<set>``.

Bytes count each file once however many names it has (a hard link is one file, as ``du`` counts it), split into
the run directory (outputs) and the MLflow store. ``fold_binary`` is the sum of the distinct fold models' boosters
in their engine's own format (the ``booster.*`` member of each compact model file, uncompressed; a model stored
twice is counted once): what the goal "at most 1.5 times the fold models' own binary size" is measured against.
For a blend's output the load and one prediction of 1,000 test rows are timed (best of five, in a fresh process
each).

    python benchmarks/storage.py --jobs run multirun auto --sets insteval movielens --budgets 60 300 \\
        --cpus 0 --json outputs/storage/after.json --workdir outputs/storage/after
    python benchmarks/storage.py ... --root /tmp/qwkboost-before --cpus 1 --json outputs/storage/before.json \\
        --workdir outputs/storage/before

Two checkouts are compared side by side each on one CPU (``--cpus``), at the same time: a time limit decides
what a run holds, so both should have the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from auto_budget import ROOT, baseline_env, data_args, git_commit, taskset  # noqa: E402
from machine import machine  # noqa: E402

LOAD = """
import sys, time
import pandas as pd
t0 = time.perf_counter()
import qwkboost as qb
pipe = qb.load_run(sys.argv[1])
t1 = time.perf_counter()
X = (pd.read_parquet if sys.argv[2].endswith(".parquet") else pd.read_csv)(sys.argv[2]).head(1000)
t2 = time.perf_counter()
pipe.predict(X)
t3 = time.perf_counter()
print(t1 - t0, t3 - t2)
"""


def disk_bytes(paths) -> int:
    """Bytes of the regular files under ``paths``, each file (inode) once."""
    seen, total = set(), 0
    for root in paths:
        root = Path(root)
        if not root.exists():
            continue
        for p in ([root] if root.is_file() else root.rglob("*")):
            st = p.lstat()
            if p.is_file() and not p.is_symlink() and (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def fold_binary(paths) -> tuple[int, int]:
    """(bytes, count) of the distinct fold models' boosters in their engine's format, under ``paths``: compact
    files' ``booster.*`` members, deduplicated by their checksum; a JSON model file's booster text counts as is."""
    seen, total = set(), 0
    for root in paths:
        for p in Path(root).rglob("fold_*"):
            if not p.is_file():
                continue
            if p.suffix == ".zip":
                with zipfile.ZipFile(p) as zf:
                    head = json.loads(zf.read("model.json"))
                    size = sum(i.file_size for i in zf.infolist() if i.filename.startswith("booster."))
            else:
                head = json.loads(p.read_text())
                size = len((head.get("booster") or "").encode())
            key = head.get("booster_sha256") or str(p)
            if key not in seen:
                seen.add(key)
                total += size
    return total, len(seen)


def model_bytes(paths) -> int:
    """Bytes of the distinct fold model files under ``paths`` (each inode once): what the models cost on disk."""
    files = [p for root in paths if Path(root).exists() for p in Path(root).rglob("fold_*") if p.is_file()]
    return disk_bytes(files)


def run(cmd, log, cwd, env) -> float:
    t0 = time.perf_counter()
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=cwd, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}); see {log}")
    return time.perf_counter() - t0


def measure(d: Path, outputs: list[Path]) -> dict:
    store = [d / "mlflow.db", d / "mlartifacts", d / "mlruns"]
    b, n = fold_binary(outputs + [s for s in store if s.is_dir()])
    run_bytes, store_bytes = disk_bytes(outputs), disk_bytes(store)
    return {"run_bytes": run_bytes, "store_bytes": store_bytes, "total_bytes": disk_bytes(outputs + store),
            "model_bytes": model_bytes(outputs + store), "fold_binary": b, "fold_models": n}


def job_dir(work: Path, row: dict) -> tuple[Path, list[Path]]:
    """The folder of a row's job and its output folders."""
    if row["job"] == "run":
        return work / "run", [work / "run" / "out", work / "run" / "multirun"]
    if row["job"] == "multirun":
        d = work / f"multirun-{row['set']}"
        return d, [d / "multirun", d / "blend"]
    d = work / f"auto-{row['set']}-{row['budget']:g}"
    return d, [d / "out"]


def load_time(root: str, run_dir: Path, test_file: str, env, cpus, repeats: int = 5) -> dict:
    took = []
    for _ in range(repeats):
        out = subprocess.run([*taskset(cpus), sys.executable, "-c", LOAD, str(run_dir), test_file], capture_output=True,
                             text=True, env=env, cwd=root)
        if out.returncode != 0:
            return {"load_error": out.stderr.strip().splitlines()[-1][:300]}
        took.append([float(x) for x in out.stdout.split()])
    return {"load_seconds": min(t[0] for t in took), "predict_seconds": min(t[1] for t in took)}


def convert(src: Path, dst: Path) -> dict:
    """A copy of pipeline folder ``src`` (a run's or a blend's, its folds ``fold_<k>.json``) with every fold model
    saved again in the compact form (``fold_<k>.zip``) and the ``pipeline.json`` files naming them; the seconds
    that writing every fold model took in each form."""
    import shutil

    import qwkboost as qb

    shutil.copytree(src, dst)
    took = {"json": 0.0, "compact": 0.0}
    for meta in dst.rglob("pipeline.json"):
        payload = json.loads(meta.read_text())
        if payload.get("format") != "qwkboost-pipeline":
            continue
        names = []
        for name in payload["models"]:
            if name.endswith(".zip"):
                raise SystemExit(f"{meta}: its folds are compact already; --formats takes a JSON pipeline's run")
            new = Path(name).with_suffix(".zip").name
            model = qb.load_model(meta.parent / name)
            t0 = time.perf_counter()
            model.save(meta.parent / name)                   # the JSON form again: its writing time
            t1 = time.perf_counter()
            model.save(meta.parent / new)
            took["json"] += t1 - t0
            took["compact"] += time.perf_counter() - t1
            (meta.parent / name).unlink()
            names.append(new)
        meta.write_text(json.dumps({**payload, "models": names}, indent=1))
    return took


def formats(out: Path, test_file: str, cpus, work: Path) -> dict:
    """The same blend (``out``'s pipeline, JSON folds) loaded and used as JSON and as compact files, by this
    checkout, each in fresh processes: what the format alone changes."""
    import shutil

    d = work / f"formats-{out.parent.name}"
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(out / "pipeline", d / "json" / "pipeline")
    took = convert(out / "pipeline", d / "compact" / "pipeline")
    row = {"job": "formats", "of": str(out), "json_write_seconds": took["json"], "compact_write_seconds": took["compact"]}
    for kind in ("json", "compact"):
        row[f"{kind}_bytes"] = disk_bytes([d / kind])
        row.update({f"{kind}_{k}": v for k, v in load_time(ROOT, d / kind, test_file, dict(os.environ), cpus).items()})
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", nargs="+", default=["run", "multirun", "auto"], choices=["run", "multirun", "auto"])
    ap.add_argument("--sets", nargs="+", default=["insteval", "movielens"])
    ap.add_argument("--budgets", nargs="+", type=float, default=[60, 300])
    ap.add_argument("--multirun-set", default="diamonds")
    ap.add_argument("--root", default=ROOT, help="the checkout that runs (default: this one)")
    ap.add_argument("--cpus", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--remeasure", action="store_true", help="measure the bytes of --json's rows again, running nothing")
    ap.add_argument("--formats", nargs="+", metavar="SET:AUTO_OUT",
                    help="time loading and predicting the blend of these auto output folders (a baseline's, JSON "
                         "folds) as JSON and as compact files, with this checkout; runs nothing else")
    args = ap.parse_args()
    if args.formats:
        from qwkboost.data.packaged import materialise

        rows = json.load(open(args.json)) if os.path.exists(args.json) else []
        for item in args.formats:
            name, out = item.split(":", 1)
            rows.append({"commit": git_commit(ROOT), "cpus": args.cpus,
                         **formats(Path(out), str(materialise(name)[1]), args.cpus, Path(args.workdir).resolve())})
            print(json.dumps(rows[-1]), flush=True)
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
        return
    if args.remeasure:
        rows = json.load(open(args.json))
        for row in rows:
            row.update(measure(*job_dir(Path(args.workdir).resolve(), row)))
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
        return
    root = os.path.abspath(args.root)
    work = Path(args.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    baseline = root != ROOT
    env = baseline_env(root, str(work)) if baseline else dict(os.environ)
    rows = json.load(open(args.json)) if os.path.exists(args.json) else []
    base = {"commit": git_commit(root), "root": root, "cpus": args.cpus, "machine": machine()}
    py = [*taskset(args.cpus), sys.executable]

    def keep(row):
        rows.append({**base, **row})
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
        print(json.dumps({k: v for k, v in row.items() if k != "machine"}), flush=True)

    def data(name):
        return data_args(root, name, None, str(work)) if baseline else [f"data={name}"]

    if "run" in args.jobs:
        d = work / "run"
        d.mkdir(exist_ok=True)
        wall = run([*py, f"{root}/experiments/run.py", "experiment=qwk_table", f"tracking.uri=sqlite:///{d}/mlflow.db",
                    f"hydra.run.dir={d}/out", f"hydra.sweep.dir={d}/multirun"], d / "log.txt", root, env)
        keep({"job": "run", "wall_seconds": wall, **measure(d, [d / "out", d / "multirun"])})
    if "multirun" in args.jobs:
        d = work / f"multirun-{args.multirun_set}"
        d.mkdir(exist_ok=True)
        wall = run([*py, f"{root}/experiments/run.py", "-m", "engine=lightgbm,xgboost",
                    "objective=squared_error,extended_qwk", *data(args.multirun_set), f"seed={args.seed}",
                    f"tracking.uri=sqlite:///{d}/mlflow.db", f"hydra.sweep.dir={d}/multirun"], d / "log.txt", root, env)
        wall += run([*py, f"{root}/experiments/blend.py", f"runs=[{d}/multirun]", f"tracking.uri=sqlite:///{d}/mlflow.db",
                     f"hydra.run.dir={d}/blend"], d / "log.txt", root, env)
        keep({"job": "multirun", "set": args.multirun_set, "wall_seconds": wall,
              **measure(d, [d / "multirun", d / "blend"])})
    if "auto" in args.jobs:
        for name in args.sets:
            for budget in args.budgets:
                d = work / f"auto-{name}-{budget:g}"
                d.mkdir(exist_ok=True)
                wall = run([*py, f"{root}/experiments/run.py", "experiment=auto", f"auto.time_limit={budget:g}",
                            *data(name), f"seed={args.seed}", f"tracking.uri=sqlite:///{d}/mlflow.db",
                            f"hydra.run.dir={d}/out"], d / "log.txt", root, env)
                row = {"job": "auto", "set": name, "budget": budget, "wall_seconds": wall,
                       **measure(d, [d / "out"])}
                from qwkboost.data.packaged import materialise      # this checkout's files: the same rows for both

                test_file = str(materialise(name)[1])
                row.update(load_time(root, d / "out", test_file, env, args.cpus))
                keep(row)


if __name__ == "__main__":
    main()
