"""Thread budgets, as :mod:`qwkboost.engines.threads` defines them (the engines use them, so they sit with the
engines); this module gives their names where they were first imported from."""

from qwkboost.engines.threads import available_cores, blas_single_thread, threads_per_job

__all__ = ["available_cores", "threads_per_job", "blas_single_thread"]
