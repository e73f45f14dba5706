"""The machine a benchmark ran on, recorded beside its figures."""

from __future__ import annotations

import os
import platform


def machine() -> dict:
    """CPU, cores, Python, library versions, BLAS threads and the load average now."""
    import lightgbm
    import numpy
    import threadpoolctl
    import xgboost

    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    blas = [f"{i['internal_api']} {i.get('version')} ({i['num_threads']} threads)"
            for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    try:
        import catboost
        cb = catboost.__version__
    except ImportError:
        cb = None
    return {"nproc": os.cpu_count(), "cpu": cpu, "python": platform.python_version(), "numpy": numpy.__version__,
            "blas": blas, "lightgbm": lightgbm.__version__, "xgboost": xgboost.__version__, "catboost": cb,
            "loadavg": os.getloadavg()}
