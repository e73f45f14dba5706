"""Ending cleanly however a command is stopped: Ctrl-C, SIGTERM, or ``kill -9`` found later.

* SIGTERM (``kill``, a job scheduler, a CI timeout) raises :class:`Terminated`,
  a :class:`KeyboardInterrupt`, so every ``with tracking.run(...)`` block ends
  its MLflow run KILLED on the way out, as Ctrl-C does.
* :func:`main_guard` turns either into one line on stderr and the shell's exit
  status (130, or 143 for SIGTERM) instead of a traceback.
* :func:`stop_quietly`, an entry point's first statement, does the same before
  ``main_guard`` is entered (during the heavy imports) and after it ends (at
  exit), when no run is open: the process ends at once.
* A process killed with SIGKILL cannot clean up. Its runs carry a
  :func:`process_tag`; the next command on the same host finds runs whose
  process is gone (:func:`is_alive`) and marks them KILLED.

This module imports the standard library alone, so that an entry point can start with it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
from typing import Iterator

from qwkboost.exceptions import ClusterLost, ConfigError

__all__ = ["Terminated", "install_sigterm", "stop_quietly", "main_guard", "report_config_errors", "process_tag",
           "is_alive", "interrupted", "held_stops", "stop_mark", "raise_if_swallowed"]

_STATE = {"interrupted": False, "what": None, "received": []}


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when the process receives SIGTERM."""


#: Loggers whose reports after a stop are that stop's echo, with a traceback: SQLAlchemy's pool reports the cursor or
#: connection a Ctrl-C interrupted while it was being closed ("Error closing cursor", seen in a study's store); Tornado
#: reports the callback with which Dask's ``sync`` cancels a call a Ctrl-C interrupted before it began (a ``NameError``
#: on its unset ``future``, seen with a cluster).
_ECHOES = ("sqlalchemy.pool", "tornado.application")


def _received(signum: int) -> None:
    _STATE["received"].append(signum)
    for name in _ECHOES:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def _on_sigterm(signum, frame):
    _received(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)   # a second SIGTERM ends the process at once
    raise Terminated()


def _on_sigint(signum, frame):
    """Python's own Ctrl-C (a :class:`KeyboardInterrupt`), remembered: one raised where Python cannot pass it on
    (a finalizer, a weakref's callback) is then acted on where the command ends (:func:`raise_if_swallowed`)."""
    _received(signal.SIGINT)
    raise KeyboardInterrupt


def stop_mark() -> int:
    """How many stops (Ctrl-C, SIGTERM) qwkboost's handlers have received so far: a mark for
    :func:`raise_if_swallowed`."""
    return len(_STATE["received"])


def raise_if_swallowed(since: int = 0) -> None:
    """Raise the stop (:class:`KeyboardInterrupt`, or :class:`Terminated` for SIGTERM) received since the mark
    ``since`` (:func:`stop_mark`) that never reached the caller, which would have acted on it: Python drops an
    exception raised inside a finalizer or a weakref's callback (printing "Exception ignored in"), which is where a
    signal that lands while objects are freed is raised. The work then ends as stopped rather than as if nothing had
    happened."""
    received = _STATE["received"][since:]
    if received:
        raise Terminated() if received[-1] == signal.SIGTERM else KeyboardInterrupt()


def _unraisable(hook):
    """A ``sys.unraisablehook`` that leaves out a stop Python could not raise (it is acted on later: see
    :func:`raise_if_swallowed`), or the exit a second stop asks for while an exit handler runs (the process is ending
    with its status already), and hands everything else to ``hook``."""
    def unraisable(info):
        if info.exc_type is not None and issubclass(info.exc_type, (KeyboardInterrupt, SystemExit)):
            return
        hook(info)
    unraisable.qwkboost = True
    return unraisable


def install_sigterm() -> None:
    """Make SIGTERM raise :class:`Terminated` in the main thread."""
    signal.signal(signal.SIGTERM, _on_sigterm)


@contextlib.contextmanager
def held_stops(all_of_them: bool = False) -> Iterator[None]:
    """Ctrl-C and SIGTERM held while a few steps that must not be cut in half run (files swapped into place, a run
    ended), then acted on as they would have been: the first one received reaches its handler as the block ends (a
    :class:`KeyboardInterrupt`, :class:`Terminated`, or the end of the process where SIGTERM is not handled). A
    second one is not held: it acts at once (a step that hangs, a store that does not answer, can still be stopped),
    unless ``all_of_them`` (steps of milliseconds: renames that swap files into place).

    Python runs signal handlers in the main thread, so the handlers are swapped there; elsewhere it holds nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def hold(signum, frame):
        if not got or all_of_them:
            got.append(signum)
            return
        restore()                       # a second stop is not held: it acts at once, as it would have
        act(signum)

    def restore():
        for s, handler in old.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)

    def act(signum):
        handler = old[signum]
        if callable(handler):
            handler(signum, None)
        elif handler == signal.SIG_DFL:
            os.kill(os.getpid(), signum)

    for s, handler in old.items():
        if handler is not signal.SIG_IGN:
            signal.signal(s, hold)
    try:
        yield
    finally:
        restore()
        if got:
            act(got[0])


def interrupted() -> bool:
    """Whether :func:`main_guard` has caught Ctrl-C or SIGTERM in this process."""
    return _STATE["interrupted"]


def _stopped(what: str, term: bool, note: str) -> None:
    print(f"\n{what}: {'terminated (SIGTERM)' if term else 'interrupted (Ctrl-C)'}{note}", file=sys.stderr)


def _exit_at_once(signum, frame):
    """Ctrl-C or SIGTERM while :func:`stop_quietly` holds: one line (once) and the exit status, as ``SystemExit``,
    which unwinds an import without a traceback."""
    term = signum == signal.SIGTERM
    if term:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)   # a second SIGTERM ends the process at once
    if not _STATE["interrupted"]:
        _STATE["interrupted"] = True
        what, note = _STATE["what"]
        _stopped(what, term, note)
    sys.exit(143 if term else 130)


def _hold_quietly(what: str, note: str) -> None:
    _STATE["what"] = (what, note)
    if signal.getsignal(signal.SIGINT) in (signal.default_int_handler, _on_sigint):     # not where it is ignored
        signal.signal(signal.SIGINT, _exit_at_once)
    signal.signal(signal.SIGTERM, _exit_at_once)


def stop_quietly(what: str) -> None:
    """An entry point's first statement: from here, Ctrl-C or SIGTERM ends the process with one line on stderr and
    exit status 130 (143 for SIGTERM), no traceback, until :func:`main_guard` is entered (the imports between
    open no run, so there is nothing to end); :func:`main_guard` returns the process to this when it ends.

    Parameters
    ----------
    what : str
        The command, as the line names it (``experiments/run.py``).
    """
    _hold_quietly(what, " while starting; nothing had run")


@contextlib.contextmanager
def main_guard(what: str = "qwkboost", tracked: bool = True) -> Iterator[None]:
    """Around an entry point's ``main()``: SIGTERM handled, and one line instead of a traceback.

    Ctrl-C and SIGTERM raise :class:`KeyboardInterrupt` inside (so that open runs end KILLED), then end the
    process with exit status 130 or 143; a :class:`~qwkboost.exceptions.ConfigError` ends it with its message
    and exit status 2. Afterwards, until the process exits, :func:`stop_quietly` holds.

    Parameters
    ----------
    what : str
        The command, as the line names it.
    tracked : bool
        Whether the command logs MLflow runs (the line then says they are marked KILLED).
    """
    install_sigterm()
    if signal.getsignal(signal.SIGINT) in (_exit_at_once, signal.default_int_handler):
        signal.signal(signal.SIGINT, _on_sigint)
    if not getattr(sys.unraisablehook, "qwkboost", False):
        sys.unraisablehook = _unraisable(sys.unraisablehook)
    mark = stop_mark()
    try:
        yield
        dropped = _STATE["received"][mark:]
        if dropped:     # a stop Python dropped in a finalizer: the command went on to its end
            _STATE["interrupted"] = True
            _hold_quietly(what, "")
            _stopped(what, dropped[-1] == signal.SIGTERM, " as it ended; what it wrote is complete")
            sys.exit(143 if dropped[-1] == signal.SIGTERM else 130)
    except KeyboardInterrupt as exc:
        _STATE["interrupted"] = True
        _hold_quietly(what, "")         # a second stop while this line is written ends the process the same way
        term = isinstance(exc, Terminated)
        _stopped(what, term, "; its MLflow runs are marked KILLED" if tracked else "")
        sys.exit(143 if term else 130)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except ClusterLost as exc:      # a plain run's Dask cluster went away: one line, not a traceback
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    finally:
        _hold_quietly(what, " while exiting")


@contextlib.contextmanager
def report_config_errors() -> Iterator[None]:
    """Inside a Hydra task: a :class:`~qwkboost.config.ConfigError` ends the command with its message
    alone on stderr (exit status 2), not a traceback. In a multirun it ends the whole sweep the same
    way (its parent MLflow run ends FAILED at exit); a sweep's jobs are checked before the first
    starts (:func:`qwkboost.runs.sweep.check_jobs`), so this is rarely reached there.
    """

    try:
        yield
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def process_tag(pid: int | None = None) -> str:
    """``host:pid:start`` of this (or ``pid``'s) process."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_time(pid) or '?'}"


def is_alive(tag: str) -> bool | None:
    """Whether the process named by :func:`process_tag` still runs; ``None`` if it ran on another host."""
    try:
        host, pid_s, start = tag.rsplit(":", 2)
        pid = int(pid_s)
    except ValueError:
        return None
    if host != socket.gethostname():
        return None
    now = _start_time(pid)
    if now is not None:
        return start in ("?", now)
    if os.path.isdir("/proc"):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
