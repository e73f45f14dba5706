"""The one scheduling loop of a time budget, for this process and a Dask cluster alike.

Jobs come from *sources* in priority order: the default candidates (:class:`~qwkboost.autoblend.schedule.Defaults`,
with their screens), then the tuning trials (:class:`~qwkboost.autoblend.tuning.Tuning`). Whenever the executor
has a free slot, the first source that is not exhausted is asked for its next job; a later source is asked only
once every earlier one is. The executor's :meth:`~qwkboost.autoblend.executor.Executor.submit` returns a handle,
and the loop takes each outcome as it completes, records it (:func:`~qwkboost.autoblend.jobs.end`) and hands it
back to the source that started it. This process is a cluster of one slot
(:class:`~qwkboost.autoblend.executor.LocalExecutor`): the loop never asks where a job runs.

Ctrl-C or SIGTERM and a lost Dask scheduler are handled here, once: every running job is stopped (or, the
scheduler gone, taken back as lost), recorded and handed back to its source, and the exception goes on to the
driver, which blends what finished.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol, Sequence

from qwkboost.autoblend import jobs
from qwkboost.autoblend.jobs import Started
from qwkboost.autoblend.state import CandidateRecord
from qwkboost.exceptions import ClusterLost

if TYPE_CHECKING:
    from qwkboost.autoblend.context import Context
    from qwkboost.autoblend.executor import Outcome

__all__ = ["Source", "run_loop", "ENDED", "STOPPED", "LOST"]

log = logging.getLogger("qwkboost.autoblend")

#: How a job came back to its source: it ended by itself; the budget was stopped; its scheduler was lost.
ENDED, STOPPED, LOST = "ended", "stopped", "lost"


class Source(Protocol):
    """Where the loop's jobs come from."""

    @property
    def exhausted(self) -> bool:
        """Whether it will give no more jobs (the loop then asks the next source)."""

    def next(self, ctx: Context, running: Sequence[str]) -> Started | None:
        """Its next job to start now, or ``None`` when it has none now (it waits for a running job's outcome, or it
        is exhausted). ``running``: the names of the jobs in flight."""

    def ended(self, ctx: Context, started: Started, outcome: Outcome | None, rec: CandidateRecord | None,
              how: str) -> None:
        """One of its jobs came back (``rec``: its record, ``None`` if it stopped), ``how`` it did (:data:`ENDED`,
        :data:`STOPPED`, :data:`LOST`); ``outcome`` is ``None`` for a job an error or a stop in this process ended
        without one."""


def run_loop(ctx: Context, sources: Sequence[Source]) -> None:
    """Run the jobs of ``sources`` on ``ctx.executor`` until none is left to start and none runs (module
    docstring).

    Raises
    ------
    KeyboardInterrupt, ClusterLost
        After every running job was recorded and handed back to its source.
    """
    executor = ctx.executor
    running: dict[str, tuple[Source, Started]] = {}

    def back(outcome: Outcome, how: str) -> None:
        source, started = running.pop(outcome.name)
        try:
            rec = jobs.end(ctx, started, outcome)
        except BaseException:       # its record could not be written: its source still learns it ended
            source.ended(ctx, started, None, None, STOPPED)
            raise
        source.ended(ctx, started, outcome, rec, how)

    try:
        while True:
            while executor.free > 0:
                picked = _next(ctx, sources, list(running))
                if picked is None:
                    break
                source, started = picked
                running[executor.submit(started.job)] = (source, started)
            if not running:
                return
            back(executor.next_outcome(), ENDED)
    except KeyboardInterrupt:
        for outcome in executor.stop():
            back(outcome, STOPPED)
        _without_outcome(ctx, running, STOPPED)
        raise
    except ClusterLost:         # the scheduler is gone: what ran there is lost, what finished is kept
        for outcome in executor.abandon():
            back(outcome, LOST)
        _without_outcome(ctx, running, LOST)
        raise
    except BaseException:
        _without_outcome(ctx, running, STOPPED)
        raise


def _next(ctx: Context, sources: Sequence[Source], running: list[str]) -> tuple[Source, Started] | None:
    """The first source not exhausted, and its next job; ``None`` when it has none now."""
    for source in sources:
        if source.exhausted:
            continue
        started = source.next(ctx, running)
        if started is not None:
            return source, started
        if not source.exhausted:        # it waits for an outcome: a later source does not jump ahead of it
            return None
    return None


def _without_outcome(ctx: Context, running: dict, how: str) -> None:
    """Hand back the jobs an error or a stop in this process ended without an outcome (the job that ran here)."""
    for source, started in list(running.values()):
        source.ended(ctx, started, None, None, how)
    running.clear()
