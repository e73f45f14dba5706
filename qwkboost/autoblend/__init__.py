"""A time budget: the one command that returns the best blend (``experiment=auto``, :func:`qwkboost.auto`).

Candidates (engine x objective) are cross-validated in the order of expected gain per second
(:mod:`~qwkboost.autoblend.ranking`, at costs from :mod:`~qwkboost.autoblend.costs`), the most promising one is
tuned while time remains (:mod:`~qwkboost.autoblend.tuning`), all of it by one loop
(:mod:`~qwkboost.autoblend.loop`) that asks one module whether each fits (:mod:`~qwkboost.autoblend.fit`), and
everything that finished is blended by ensemble selection with its nested estimate
(:mod:`~qwkboost.autoblend.finish`), within ``time_limit`` (:mod:`~qwkboost.autoblend.budget`), resumable
(:mod:`~qwkboost.autoblend.state`), in this process or side by side on a Dask cluster's workers
(:mod:`~qwkboost.autoblend.executor`, :mod:`~qwkboost.autoblend.dask_executor`). It is a driver beside
:mod:`qwkboost.runs`: it calls runs, tuning and blending, and none of them calls it.
"""

from qwkboost._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    "auto": "api",
    "candidate_config": "api",
    "AutoResult": "finish",
    "AutoRun": "driver",
    "AutoSettings": "settings",
    "Budget": "budget",
    "TimeGuard": "budget",
    "Candidate": "candidates",
    "CostModel": "costs",
    "plan": "ranking",
    "Context": "context",
    "auto_command": "command",
    "DaskExecutor": "dask_executor",
    "LocalExecutor": "executor",
})
