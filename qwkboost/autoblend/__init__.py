"""A time budget: the one command that returns the best blend (``experiment=auto``, :func:`qwkboost.auto`).

Candidates (engine x objective) are cross-validated in the order of expected gain per second
(:mod:`~qwkboost.autoblend.candidates`), the most promising one is tuned while time remains
(:mod:`~qwkboost.autoblend.tuning`), and everything that finished is blended by ensemble selection with its nested
estimate (:mod:`~qwkboost.autoblend.driver`), within ``time_limit`` (:mod:`~qwkboost.autoblend.budget`), resumable
(:mod:`~qwkboost.autoblend.state`), in this process or side by side on a Dask cluster's workers
(:mod:`~qwkboost.autoblend.executor`, :mod:`~qwkboost.autoblend.cluster`). It is a driver beside :mod:`qwkboost.runs`: it calls runs, tuning and blending,
and none of them calls it.
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
    "CostModel": "candidates",
    "plan": "candidates",
    "auto_command": "command",
    "DaskExecutor": "cluster",
    "LocalExecutor": "executor",
})
