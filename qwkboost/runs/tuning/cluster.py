"""``tune.py``'s trials side by side on a Dask cluster, as :mod:`qwkboost.runs.tuning.on_dask` defines them; this
module gives its name where it was first imported from."""

from qwkboost.runs.tuning.on_dask import optimize_on_cluster

__all__ = ["optimize_on_cluster"]
