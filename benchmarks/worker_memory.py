"""What one auto candidate needs in memory on a Dask worker, relative to its data, per engine, on packaged sets.

For each (data set, engine) a fresh Python process composes the candidate's config as ``experiment=auto`` does
(``experiment=auto data=<set> engine=<engine> objective=squared_error n_jobs=1``, then the protocol and without a
cluster, as :func:`qwkboost.autoblend.command.auto_command` composes each candidate), imports the four engines'
libraries (as on a worker that has run any candidate) and loads the data with
:func:`~qwkboost.runs.experiment.load_dataset`. Its resident memory then (psutil RSS) is the baseline. The
candidate is cross-validated with :func:`~qwkboost.runs.experiment.run_experiment` (5 folds, one thread, its files
written to a temporary directory, no MLflow), and the peak resident memory read (``ru_maxrss``; the kernel's
high-water mark is reset after loading, so the peak is that of training). Reported per run::

    factor = (peak RSS - baseline RSS) / bytes of the training features (ds.X_train)

the memory a candidate adds to a worker per byte of its training features. On small sets the engines' fixed
buffers weigh in this ratio too: compare it with ``benchmarks/candidate_memory.py``'s fit, which separates them.
The test features' bytes are recorded as well (:func:`qwkboost.autoblend.placement.data_bytes` counts both).

Run::

    python benchmarks/worker_memory.py --sets diamonds insteval insteval:20000 movielens movielens:30000 \\
        --json benchmarks/results/worker_memory.json

A set written ``SET:ROWS`` keeps a stratified sample of ROWS training rows (``data.n_train``): for a run too slow
in full, or to see whether the factor grows with the rows. The rows used are recorded. Each run is written to
``--json`` as it ends, and runs already there are kept: the same command resumes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONF = HERE.parent / "conf"
sys.path.insert(0, str(HERE))

from machine import machine  # noqa: E402

ENGINES = ("xgboost", "lightgbm", "catboost", "native")
SETS = ("diamonds", "insteval")


def candidate(data: str, engine: str, n_train: int | None) -> tuple[dict, list[str]]:
    """The candidate's resolved config, composed as ``experiment=auto`` composes each candidate, and its overrides."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from qwkboost.config import apply_protocol, side_by_side

    overrides = ["experiment=auto", f"data={data}", f"engine={engine}", "objective=squared_error", "n_jobs=1"]
    if n_train is not None:
        overrides.append(f"data.n_train={n_train}")
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = OmegaConf.to_container(compose("config", overrides), resolve=True)
    common = [o for o in overrides if not o.startswith(("engine=", "objective="))]     # as compose_choices passes them
    return side_by_side(apply_protocol(cfg, common), placed=True)[0], overrides


def feature_bytes(X) -> int:
    """In-memory bytes of a feature table: a DataFrame's deep memory usage, else the array's."""
    if X is None:
        return 0
    if hasattr(X, "memory_usage"):
        return int(X.memory_usage(deep=True).sum())
    return int(X.nbytes)


def one(data: str, engine: str, n_train: int | None) -> dict:
    """In this process: one candidate's memory (called in a fresh process by :func:`main`)."""
    import psutil

    import catboost  # noqa: F401 - every engine's library in the baseline, as on a worker
    import lightgbm  # noqa: F401
    import xgboost  # noqa: F401
    from qwkboost.runs.experiment import load_dataset, run_experiment

    cfg, overrides = candidate(data, engine, n_train)
    ds = load_dataset(cfg["data"], int(cfg.get("seed", 0)), cfg["cv"].get("group"))
    baseline = psutil.Process().memory_info().rss
    try:        # reset the high-water mark (Linux >= 4.0): the peak is then training's, not loading's
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        reset = True
    except OSError:
        reset = False
    t, cpu = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory() as out:      # its files written, as a candidate writes them
        row = run_experiment(cfg, None, dataset=ds, progress=False, output_dir=out)
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu     # CPU time: unaffected by other load
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024      # KiB on Linux
    nbytes = feature_bytes(ds.X_train)
    return {"data": data, "engine": engine, "n_train": n_train, "rows": int(ds.X_train.shape[0]),
            "columns": int(ds.X_train.shape[1]), "feature_bytes": nbytes,
            "test_feature_bytes": feature_bytes(ds.X_test),
            "baseline_rss_bytes": int(baseline), "peak_rss_bytes": int(peak), "extra_bytes": int(peak - baseline),
            "factor": round((peak - baseline) / nbytes, 2), "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1),
            "best_iteration_mean": round(float(row["best_iteration_mean"]), 1), "n_folds": int(cfg["cv"]["n_splits"]),
            "peak_reset": reset, "overrides": overrides}


def commit() -> str | None:
    """The repository's commit (with ``+dirty`` when files differ from it), or ``None`` outside a git tree."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=HERE, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=HERE,
                               capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", nargs="+", default=list(SETS), metavar="SET[:ROWS]",
                    help="packaged sets (conf/data/<set>.yaml), each optionally with a training-row sample")
    ap.add_argument("--engines", nargs="+", default=list(ENGINES))
    ap.add_argument("--json", default="benchmarks/results/worker_memory.json")
    ap.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        data, engine, n = a.one
        print(json.dumps(one(data, engine, None if n == "all" else int(n))))
        return
    path = Path(a.json)
    done = json.loads(path.read_text())["runs"] if path.exists() else []
    record = {"command": "python " + " ".join(sys.argv),
              "machine": {"platform": platform.platform(), "commit": commit(), **machine()}}
    runs = []
    for spec in a.sets:
        data, _, n = spec.partition(":")
        for engine in a.engines:
            key = (data, engine, int(n) if n else None)
            old = [r for r in done if (r["data"], r["engine"], r.get("n_train")) == key]
            if old:         # measured by an earlier, interrupted run of this command
                runs.append(old[0])
                continue
            out = subprocess.run([sys.executable, __file__, "--one", data, engine, n or "all"],
                                 capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
            if out.returncode:
                sys.exit(f"{data} {engine} failed:\n{out.stderr[-3000:]}")
            runs.append({**json.loads(out.stdout.strip().splitlines()[-1]), "commit": record["machine"]["commit"]})
            r = runs[-1]
            print(f"{data:10s} {engine:9s} {r['rows']:7d} rows  {r['feature_bytes'] / 2**20:7.1f} MiB  "
                  f"+{r['extra_bytes'] / 2**20:7.1f} MiB  factor {r['factor']:6.2f}  {r['seconds']:6.1f} s", flush=True)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({**record, "runs": [*runs, *(d for d in done if d not in runs)]}, indent=2))
    top = {e: max(r["factor"] for r in runs if r["engine"] == e) for e in a.engines}
    path.write_text(json.dumps({**record, "max_factor": top, "runs": runs}, indent=2) + "\n")
    for engine, f in top.items():
        print(f"{engine:9s} max factor {f:.2f}")


if __name__ == "__main__":
    main()
