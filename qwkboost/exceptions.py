"""The errors qwkboost raises on purpose, in a leaf module every stage can import without cycles."""

from __future__ import annotations

import contextlib
from typing import Iterator

__all__ = ["ConfigError", "config_errors", "EngineUnavailable", "RunStopped", "ClusterLost"]


class ConfigError(ValueError):
    """A bad configuration or input found before training: the entry points print its message alone.

    A :class:`ValueError`, so code that catches bad input the scikit-learn way keeps working.
    """


@contextlib.contextmanager
def config_errors() -> Iterator[None]:
    """Turn a :class:`ValueError` raised inside the block into a :class:`ConfigError` (same message)."""
    try:
        yield
    except ConfigError:
        raise
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


class EngineUnavailable(ConfigError):
    """An engine whose library cannot be imported (not installed, or broken): its message names the engine, the
    library and what to do. ``experiment=auto`` leaves such an engine out when ``auto.engines`` is not given.

    Parameters
    ----------
    engine : str
        The engine's name (``catboost``).
    message : str
    """

    def __init__(self, engine: str, message: str):
        super().__init__(message)
        self.engine = engine


class RunStopped(Exception):
    """Raised to stop a run on purpose before it finishes (a pruned Optuna trial, a time limit): its MLflow run ends
    with ``tags`` (the reason), not FAILED: FINISHED and tagged ``pruned`` for a pruned trial, else KILLED. Nothing
    after the stop (cut points, outputs) is made.

    Parameters
    ----------
    reason : str
    tags : dict, optional
        Set on the run as it ends, e.g. ``{"qwkboost.trial_state": "PRUNED"}``.
    """

    def __init__(self, reason: str, tags: dict | None = None):
        super().__init__(reason)
        self.tags = dict(tags or {})


class ClusterLost(RuntimeError):
    """A Dask cluster went away under the work it ran: its scheduler (``scheduler=True``: the client lost it, and
    nothing more runs there), or the workers a job trained on (killed, out of memory, restarted by their nanny).

    Parameters
    ----------
    reason : str
    scheduler : bool, default False
    """

    def __init__(self, reason: str, scheduler: bool = False):
        super().__init__(reason)
        self.scheduler = scheduler
