"""What one auto candidate needs in memory on a Dask worker, by engine: the figures behind
:data:`qwkboost.autoblend.placement.MEMORY` (whether a candidate's data fits one worker).

Each (engine, rows) pair runs in a fresh process: the libraries are imported and the data loaded, then the default
squared-error candidate is cross-validated and its files written (5 folds, one thread, as on a one-thread worker)
and the peak resident memory is read (``ru_maxrss``). On synthetic data of 5 numeric columns (the quartiles
source with 10 features, 5 of them visible) at two row counts, the extra memory over the process
before training is fitted as ``extra = intercept + per_byte * feature_bytes``: ``per_byte`` is what each byte of
features costs (the engine's copies of the rows, per-row gradients and scores), the intercept what does not grow
with the rows (trees, buffers). The process before training (Python and the libraries) is reported too.

Run::

    python benchmarks/candidate_memory.py --rows 50000 200000 --json benchmarks/results/candidate_memory.json
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENGINES = ("xgboost", "lightgbm", "catboost", "native")


def one(engine: str, rows: int) -> dict:
    """In this process: the candidate's peak memory (called in a fresh process by :func:`main`)."""
    import psutil

    import catboost  # noqa: F401 - every library in the baseline, as on a worker that ran any candidate
    import lightgbm  # noqa: F401
    import xgboost  # noqa: F401
    from qwkboost.autoblend.api import candidate_config
    from qwkboost.runs.experiment import load_dataset, run_experiment

    data = {"name": "quartiles", "n_train": rows, "n_test": 2000, "seed": 0, "test_seed": 1, "n_features": 10,
            "n_visible": 5, "n_classes": 4}
    cfg = candidate_config(engine, "squared_error", n_splits=5, n_jobs=1, data=data)
    cfg["tracking"] = {"log_models": False, "log_pyfunc": False, "explain": False}
    ds = load_dataset(data, 0)
    before = psutil.Process().memory_info().rss
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:      # its files written, as a candidate writes them
        run_experiment(cfg, None, dataset=ds, progress=False, output_dir=out)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"engine": engine, "rows": rows, "features": ds.X_train.shape[1],
            "feature_bytes": int(ds.X_train.nbytes + ds.X_test.nbytes), "before_bytes": before,
            "peak_bytes": peak, "extra_bytes": peak - before, "seconds": round(time.perf_counter() - t, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engines", nargs="+", default=list(ENGINES))
    ap.add_argument("--rows", nargs="+", type=int, default=[50_000, 200_000])
    ap.add_argument("--json", default="benchmarks/results/candidate_memory.json")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one[0], int(a.one[1]))))
        return
    runs = []
    for rows in a.rows:
        for engine in a.engines:
            out = subprocess.run([sys.executable, __file__, "--one", engine, str(rows)], capture_output=True,
                                 text=True, check=True)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(runs[-1], flush=True)
    fits = {}
    for engine in a.engines:
        pts = sorted((r["feature_bytes"], r["extra_bytes"]) for r in runs if r["engine"] == engine)
        (x0, y0), (x1, y1) = pts[0], pts[-1]
        per_byte = (y1 - y0) / (x1 - x0)
        fits[engine] = {"per_byte": round(per_byte, 2), "intercept_mb": round((y0 - per_byte * x0) / 2**20, 1)}
    import catboost
    import lightgbm
    import numpy
    import xgboost

    record = {"command": "python " + " ".join(sys.argv), "machine": f"{platform.platform()}, Python "
              f"{platform.python_version()}", "versions": {m.__name__: m.__version__ for m in
                                                          (xgboost, lightgbm, catboost, numpy)},
              "runs": runs, "fits": fits}
    Path(a.json).write_text(json.dumps(record, indent=2))
    for engine, f in fits.items():
        print(f"{engine:9s} {f['per_byte']:6.2f} bytes per feature byte + {f['intercept_mb']:6.1f} MB")


if __name__ == "__main__":
    main()
