r"""Training beyond one process: global sums for objectives whose rows meet.

A distributed engine calls the custom objective on each worker's own rows. For
an objective whose gradient needs sums over *every* row (``gradient_needs ==
"sums"``; extended QWK's :math:`f = \tfrac12\sum (\hat y - y)^2` and
:math:`g = \tfrac12\sum((\hat y - a)^2 + b)`), each worker would otherwise
optimise its own objective. Instead the worker's partial sums are all-reduced
(summed over the workers) before the gradient is formed, so every row's
gradient equals the one-process gradient; the label statistics (``a``, ``b``,
the label range, the initial score) are fitted once on the whole training set
and shipped with the objective.

XGBoost exposes its collective all-reduce to code running inside its workers
(:func:`xgboost.collective.allreduce`), which is what :func:`xgboost_allreduce`
wraps.
"""

from __future__ import annotations

import numpy as np

__all__ = ["xgboost_allreduce", "for_workers"]


def xgboost_allreduce(values: np.ndarray) -> np.ndarray:
    """Sum ``values`` over XGBoost's workers (inside a ``CommunicatorContext``, e.g. an ``xgboost.dask`` task)."""
    from xgboost import collective

    return collective.allreduce(np.ascontiguousarray(values, dtype=np.float64), collective.Op.SUM)


def for_workers(objective, allreduce=xgboost_allreduce):
    """A copy of a fitted ``objective`` that forms its gradient from sums over all workers.

    Raises
    ------
    ValueError
        For an objective whose gradient needs sums over every row but does not
        take them through :meth:`~qwkboost.objectives.Objective.global_sums`:
        trained on each worker's rows alone it would silently optimise something else.
    """
    import copy

    if objective.gradient_needs == "sums" and not objective.allreduce_ready:
        raise ValueError(f"objective {objective.name!r} needs sums over every training row for its gradient, which "
                         "qwkboost does not all-reduce across workers for it; distributed training would optimise a "
                         "different objective on each worker. Train it on one machine")
    out = copy.copy(objective)
    if objective.gradient_needs == "sums":
        out.allreduce = allreduce
    return out
