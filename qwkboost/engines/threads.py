"""How many threads the engines use, and keeping NumPy's BLAS out of their way (``qwkboost.distributed.parallel``
gives the same names).

Two rules, both measured on a 2-core machine (``benchmarks/api_speed.py``,
figures in ``benchmarks/RESULTS.md``):

* **BLAS runs on one thread while an engine trains.** The objective's and the
  metric's dot products are small; multi-threaded OpenBLAS wakes threads that
  fight the engine's OpenMP threads for the cores (LightGBM went from about
  1 ms to 34 ms per round). :func:`blas_single_thread` wraps every training call.
* **Engines use the cores this process may use** (:func:`available_cores`,
  which honours CPU affinity and cgroup quotas). When jobs run side by side
  (Hydra's joblib launcher), each gets its share: two engines that each spin
  two OpenMP threads on two cores were 30-100x slower than with one thread each.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from threadpoolctl import threadpool_limits

__all__ = ["available_cores", "threads_per_job", "blas_single_thread"]


def available_cores() -> int:
    """CPU cores this process may use (affinity and cgroup quota aware; at least 1)."""
    from joblib import cpu_count  # joblib: 0.1 s to import, for one call

    return max(1, int(cpu_count(only_physical_cores=False)))


def threads_per_job(n_jobs: int | None) -> int:
    """Engine threads for each of ``n_jobs`` jobs sharing this machine (``None``/``-1``: one per core)."""
    cores = available_cores()
    if n_jobs is None or n_jobs < 0:
        n_jobs = cores
    return max(1, cores // max(1, int(n_jobs)))


@contextlib.contextmanager
def blas_single_thread() -> Iterator[None]:
    """Limit NumPy's BLAS (OpenBLAS, MKL) to one thread inside the block."""
    with threadpool_limits(1, user_api="blas"):
        yield
