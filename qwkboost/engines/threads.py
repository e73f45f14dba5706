"""How many threads the engines use, and keeping NumPy's BLAS out of their way (``qwkboost.distributed.parallel``
gives the same names).

Three rules, measured on a 2-core machine (``benchmarks/api_speed.py`` and
``benchmarks/threads_shared.py``, figures in ``benchmarks/RESULTS.md``):

* **BLAS runs on one thread while an engine trains.** The objective's and the
  metric's dot products are small; multi-threaded OpenBLAS wakes threads that
  fight the engine's OpenMP threads for the cores (LightGBM went from about
  1 ms to 34 ms per round). :func:`blas_single_thread` wraps every training call.
* **By default an engine takes the cores that are free when training starts**
  (:func:`engine_threads`, the one place the default is decided): the cores this
  process may use (:func:`available_cores`) less those other processes' runnable
  tasks hold (:func:`free_cores`), never fewer than one. OpenMP threads
  spin-wait at every barrier; with one more thread than free cores, a round waits
  for a thread the scheduler has set aside. Beside one busy process on 2 cores,
  two LightGBM or XGBoost threads took 3-8x the time of one (worst on short
  rounds), while on a quiet machine the free cores are every core, as before. An explicit
  ``n_jobs`` or engine thread parameter is used as given.
* **Jobs side by side share the cores** (:func:`threads_per_job`): Hydra's joblib
  launcher gives each of its jobs its share; two engines that each spin two
  OpenMP threads on two cores were 30-100x slower than with one thread each.

OpenMP's wait policy is left alone (``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT``: a
user's own setting applies as the OpenMP runtime reads it): sleeping instead of
spinning made a quiet run 1.6-4x slower (``benchmarks/threads_shared.py``).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from typing import Iterator

from threadpoolctl import threadpool_limits

__all__ = ["available_cores", "free_cores", "engine_threads", "set_threads", "threads_per_job",
           "blas_single_thread"]

#: Linux's count of runnable tasks, machine-wide: the 4th field of ``/proc/loadavg`` is ``running/total``.
LOADAVG = "/proc/loadavg"
#: How often :func:`free_cores` reads the count, and how far apart: the fewest seen is kept, so that a task that
#: runs for an instant (a shell command, a kernel thread) does not take a core away.
SAMPLES, SAMPLE_GAP = 3, 0.001


def available_cores() -> int:
    """CPU cores this process may use (affinity and cgroup quota aware; at least 1)."""
    from joblib import cpu_count  # joblib: 0.1 s to import, for one call

    return max(1, int(cpu_count(only_physical_cores=False)))


def _running_here() -> int:
    """This process's threads that are running or runnable now (state ``R`` in ``/proc/self/task/*/stat``)."""
    n = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:             # the thread ended meanwhile
            continue
        n += stat[stat.rindex(")") + 2:].startswith("R")   # the state follows the command name in parentheses
    return n


def others_running() -> int | None:
    """Runnable tasks of other processes, machine-wide, now: ``/proc/loadavg``'s running count less this
    process's own running threads (the reader among them); ``None`` where Linux's ``/proc`` is missing."""
    try:
        with open(LOADAVG) as f:
            running = int(f.read().split()[3].split("/")[0])
        return max(0, running - _running_here())
    except (OSError, ValueError, IndexError):
        return None


def free_cores() -> int:
    """Cores free for this process now: :func:`available_cores` less the cores other processes' runnable tasks
    hold, at least 1.

    The runnable tasks are counted machine-wide (:func:`others_running`, the fewest of :data:`SAMPLES` readings);
    when affinity or a cgroup quota gives this process part of the machine, they are taken to spread evenly, so
    its cores lose their share (``others * cores / online``, halves rounded up). Without ``/proc`` (macOS, Windows):
    :func:`available_cores`.
    """
    cores = available_cores()
    seen = []
    for i in range(SAMPLES):
        if i:
            time.sleep(SAMPLE_GAP)
        n = others_running()
        if n is None:
            return cores
        seen.append(n)
    online = max(cores, os.cpu_count() or cores)
    return max(1, cores - math.floor(min(seen) * cores / online + 0.5))      # halves round up


def engine_threads(n_jobs: int | None) -> int:
    """An engine's thread count for ``n_jobs``: ``None`` or negative, the cores free now (:func:`free_cores`,
    read as training starts); else ``n_jobs`` as given.

    The one place the default is decided: :func:`qwkboost.train` calls it once per training, and every engine
    sets the result under its own parameter name with :func:`set_threads`.
    """
    return free_cores() if n_jobs is None or n_jobs < 0 else int(n_jobs)


def set_threads(params: dict, names, key: str, n_threads: int) -> dict:
    """``params`` with ``key`` set to ``n_threads``, unless the user named a thread count under any of ``names``
    (the engine's :attr:`~qwkboost.engines.base.Engine.thread_params`): that one is used as given."""
    if any(k in params for k in names):
        return params
    return {**params, key: int(n_threads)}


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
