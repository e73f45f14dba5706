r"""Global sums for objectives whose rows meet, as the engines whose Dask workers all-reduce use them
(:func:`qwkboost.engines.engine.for_workers`, :func:`qwkboost.engines.xgboost.xgboost_allreduce`); this module
gives their names where they were first imported from, with XGBoost's all-reduce as the default.
"""

from __future__ import annotations

from qwkboost.engines.engine import for_workers as _for_workers
from qwkboost.engines.xgboost import xgboost_allreduce

__all__ = ["xgboost_allreduce", "for_workers"]


def for_workers(objective, allreduce=xgboost_allreduce):
    """:func:`qwkboost.engines.engine.for_workers`, on XGBoost's all-reduce unless another is given."""
    return _for_workers(objective, allreduce)
