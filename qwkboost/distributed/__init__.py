"""Beyond one process: a Dask cluster and a client on it (:mod:`~qwkboost.distributed.connection`), whole runs as
tasks one per worker (:mod:`~qwkboost.distributed.tasks`: what the budget's candidates run through,
:mod:`qwkboost.autoblend.dask_executor`), one run's rows trained through xgboost.dask / lightgbm.dask
(:mod:`~qwkboost.distributed.training`), the all-reduce helpers, and thread budgets for parallel jobs.
"""

from qwkboost._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    # cluster
    "ClusterSpec": "connection",
    "connect": "connection",
    "WorkerPool": "tasks",
    "DaskData": "training",
    "read_parquet": "training",
    "train_dask": "training",
    "predict_dask": "training",
    "DASK_ENGINES": "training",
    # allreduce
    "xgboost_allreduce": "allreduce",
    "for_workers": "allreduce",
    # thread budgets (kept with the engines, which use them)
    "available_cores": "qwkboost.engines.threads",
    "threads_per_job": "qwkboost.engines.threads",
    "blas_single_thread": "qwkboost.engines.threads",
    "training": "",
    "cluster": "",
    "connection": "",
    "tasks": "",
    "allreduce": "",
    "parallel": "",
})
