"""Where the end of a time budget goes: the blend of a finished ``experiment=auto`` directory fitted, written, read
back and logged to MLflow again, each step timed, on a copy (the directory itself is not touched).

    python benchmarks/auto_finish.py outputs/auto_plan/insteval-0/auto-300/out          # one directory
    python benchmarks/auto_finish.py outputs/auto_plan/*-0/auto-300/out --json benchmarks/results/auto_finish.json

The steps are the ones ``qwkboost.autoblend.finish.finish`` takes, through the same functions: the pool
(``qwkboost.autoblend.ranking.diverse_pool`` of the finished candidates, at most 15), ``read_members``, the greedy
``blend`` with exact cut points, ``write_blend`` (members' pipelines copied and checked), ``load_pipeline`` (the
blend read back, as the result), and ``log_blend_contents`` into a fresh SQLite MLflow store (files, pipeline
artifacts, the pyfunc model). Beside each directory's figures: the megabytes of the pipeline written, and the
reserve the budget's rule (``qwkboost.autoblend.costs.reserve``'s per-megabyte part, :data:`SECONDS_PER_MB_TRACKED` and
:data:`READ_SECONDS_PER_MB` by engine, plus its fixed seconds; the blend's own seconds not included) would keep for
that pool.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from qwkboost.autoblend import costs  # noqa: E402
from qwkboost.autoblend.ranking import diverse_pool  # noqa: E402
from qwkboost.autoblend.state import CandidateRecord  # noqa: E402


def finish(src: Path) -> dict:
    import mlflow

    from qwkboost.blending import blend, read_members, write_blend
    from qwkboost.blending.fit import log_blend_contents
    from qwkboost.tracking.loading import load_pipeline

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copytree(src, work / "out", symlinks=True,
                        ignore=shutil.ignore_patterns("mlartifacts", "mlflow.db*", "tuning.db"))
        state = json.loads((work / "out" / "auto.json").read_text())
        done = [(n, CandidateRecord.from_dict(r)) for n, r in state["candidates"].items()
                if r.get("status") == "finished"]
        pool = diverse_pool(done, 15)
        t = {}
        t0 = time.perf_counter()
        members = [replace(m, name=n) for m, (n, _) in
                   zip(read_members([work / "out" / r.dir for _, r in pool]), pool)]
        t["read_members"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = blend(members, method="greedy", thresholds="exact")
        t["blend"] = time.perf_counter() - t0
        new = work / "new"
        new.mkdir()
        t0 = time.perf_counter()
        write_blend(result, new)
        t["write_blend"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        pipe = load_pipeline(new / "pipeline")
        t["load_pipeline"] = time.perf_counter() - t0
        mlflow.set_tracking_uri(f"sqlite:///{work}/mlflow.db")
        exp = mlflow.create_experiment("finish", artifact_location=str(work / "art"))
        with mlflow.start_run(experiment_id=exp):
            t0 = time.perf_counter()
            log_blend_contents(result, new, log_pyfunc=True, pipe=pipe, settings_as_tags=True)
            t["mlflow"] = time.perf_counter() - t0
        mlflow.set_tracking_uri(None)
        written = sum(f.stat().st_size for f in (new / "pipeline").rglob("*") if f.is_file()) / 1e6
    read = costs.READ_SECONDS_PER_MB
    pooled = sum((r.pipeline_mb or 0.0) * (costs.SECONDS_PER_MB_TRACKED + read[r.engine]) for _, r in pool)
    return {"dir": str(src), "pool": len(pool), "blended": int(sum(w > 0 for w in result.weights)),
            "pool_mb": round(sum(r.pipeline_mb or 0.0 for _, r in pool), 1), "written_mb": round(written, 1),
            **{k: round(v, 2) for k, v in t.items()}, "after_blend": round(sum(t.values()) - t["blend"], 2),
            "reserve_without_blend": round(costs.WRITE_SECONDS + costs.PYFUNC_SECONDS + pooled, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", help="finished experiment=auto output directories")
    ap.add_argument("--json", help="append the rows here")
    args = ap.parse_args()
    rows = []
    for d in args.dirs:
        rows.append(finish(Path(d)))
        print(json.dumps(rows[-1]), flush=True)
    if args.json:
        old = json.load(open(args.json)) if os.path.exists(args.json) else []
        with open(args.json, "w") as f:
            json.dump(old + rows, f, indent=1)
    print("\n| directory | pool (blended) | MB pooled / written | read | blend | write | read back | MLflow | "
          "after the blend | reserve's part for it |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['dir']} | {r['pool']} ({r['blended']}) | {r['pool_mb']:.0f} / {r['written_mb']:.0f} | "
              f"{r['read_members']:.1f} | {r['blend']:.1f} | {r['write_blend']:.1f} | {r['load_pipeline']:.1f} | "
              f"{r['mlflow']:.1f} | {r['after_blend']:.1f} | "
              f"{'-' if r['reserve_without_blend'] is None else format(r['reserve_without_blend'], '.1f')} |")


if __name__ == "__main__":
    main()
