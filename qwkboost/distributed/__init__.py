"""Beyond one process: a Dask cluster for xgboost.dask / lightgbm.dask, the native engine's all-reduce
helpers, and thread budgets for parallel jobs.
"""

from qwkboost._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    # cluster
    "ClusterSpec": "cluster",
    "connect": "cluster",
    "DaskData": "cluster",
    "read_parquet": "cluster",
    "train_dask": "cluster",
    "predict_dask": "cluster",
    "DASK_ENGINES": "cluster",
    # allreduce
    "xgboost_allreduce": "allreduce",
    "for_workers": "allreduce",
    # thread budgets (kept with the engines, which use them)
    "available_cores": "qwkboost.engines.threads",
    "threads_per_job": "qwkboost.engines.threads",
    "blas_single_thread": "qwkboost.engines.threads",
    "cluster": "",
    "allreduce": "",
    "parallel": "",
})
