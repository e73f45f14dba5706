"""Training through the engines' own Dask interfaces, as :mod:`qwkboost.distributed.training` defines it; this
module gives its names where they were first imported from."""

from qwkboost.distributed.training import (
    DASK_ENGINES,
    ClusterSpec,
    DaskData,
    as_dask,
    check_dask_categorical,
    check_dask_objective,
    connect,
    dask_engines,
    dask_support,
    predict_dask,
    read_parquet,
    train_dask,
)

__all__ = ["ClusterSpec", "connect", "DaskData", "read_parquet", "train_dask", "predict_dask", "dask_engines",
           "dask_support", "check_dask_objective", "check_dask_categorical", "DASK_ENGINES", "as_dask"]
