"""Where a study lives: its RDB storage opened (and created under a lock), and trials a killed process left."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib.util
import logging
import os
import re
import shlex
import sqlite3
import stat
import warnings
from pathlib import Path
from typing import Any, Iterator, Mapping

import optuna
from optuna.storages import RDBStorage

from qwkboost import tracking
from qwkboost.tracking.interrupt import is_alive

__all__ = ["default_storage", "shown_url", "check_study_file", "open_storage", "quiet_experimental",
           "quiet_stopped_trials", "fail_dead_trials", "kill_orphan_runs", "clean_dead_trials", "on_the_scheduler",
           "scheduler_url", "write_back", "load_storage", "SCHEDULER_SCHEME"]

#: PostgreSQL advisory-lock key under which the first worker creates Optuna's tables.
_PG_LOCK_KEY = int.from_bytes(hashlib.sha256(b"qwkboost.tuning.schema").digest()[:8], "big", signed=True)


def default_storage() -> str:
    """``tune.storage`` when it is not set: ``optuna.db`` in the working directory (where ``optuna-dashboard
    sqlite:///optuna.db`` finds it)."""
    return f"sqlite:///{Path.cwd() / 'optuna.db'}"


def shown_url(url: str) -> str:
    """``url`` with its password masked, fit for messages, logs and MLflow."""
    return re.sub(r"(://[^/:@?]*:)[^/@?]*@", r"\1***@", url)


def _with_installed_driver(url: str) -> str:
    """A ``postgresql://`` URL, which names no driver, with the PostgreSQL driver that is installed.

    SQLAlchemy 2.0 reads it as psycopg2 and 2.1 as psycopg (version 3); the
    ``cluster`` extra installs psycopg2. A URL naming its driver is left as is.
    """

    from sqlalchemy.engine import make_url  # slow to import: sqlalchemy

    parsed = make_url(url)
    if parsed.drivername != "postgresql":
        return url
    for driver in ("psycopg2", "psycopg"):
        if importlib.util.find_spec(driver) is not None:
            return parsed.set(drivername=f"postgresql+{driver}").render_as_string(hide_password=False)
    return url


def check_study_file(path, where: str) -> None:
    """Refuse an SQLite study file that SQLite cannot read whole (a damaged page, a truncated copy, another
    kind of file), before any work: a file that is not there yet is fine (it is made on first use).

    ``PRAGMA quick_check`` reads every page, so a file damaged where the first queries do not look is found
    too; a file another process holds locked is left to the storage, which waits for it.

    Parameters
    ----------
    path : str or Path
        The database file (``<output dir>/tuning.db``, or the file of a ``sqlite:///`` ``tune.storage``).
    where : str
        What names it in the message (``tune.storage='sqlite:////.../optuna.db'``, ``auto's tuning study``).

    Raises
    ------
    ValueError
        One line naming the file, what is wrong and what to do: move it away to start afresh.
    """
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    todo = f"move it away (e.g. mv {shlex.quote(str(path))} {shlex.quote(str(path) + '.damaged')}) to start afresh"
    if not stat.S_ISREG(mode):
        raise ValueError(f"{where}: {path} is not a database file (it is not a regular file); {todo}")
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=60)
        try:
            found = con.execute("PRAGMA quick_check").fetchall()
        finally:
            con.close()
    except sqlite3.OperationalError:        # locked by a writer, unreadable, ...: the storage says what it is
        return
    except sqlite3.DatabaseError as exc:   # not a database, or damaged where SQLite looks first
        raise ValueError(f"{where}: {path} is damaged ({exc}); {todo}") from None
    if found != [("ok",)]:
        first = str(found[0][0]).splitlines()[0] if found else "no answer"
        raise ValueError(f"{where}: {path} is damaged (SQLite's check: {first}); {todo}")


@contextlib.contextmanager
def _schema_lock(url: str, parsed) -> Iterator[None]:
    """Hold a lock across processes while Optuna creates its tables on first use.

    Workers started together on an empty database would otherwise race in
    Optuna's ``CREATE TABLE`` and version stamp; on PostgreSQL the loser fails
    with a duplicate key in ``pg_type``. SQLite takes a file lock beside the
    database, PostgreSQL an advisory lock; other servers take none.
    """
    if parsed.drivername.startswith("sqlite"):
        with tracking.store_lock(tracking.check_sqlite_path(url, "tune.storage")):
            yield
        return
    if parsed.get_backend_name() != "postgresql":
        yield
        return
    import sqlalchemy  # slow to import: sqlalchemy
    from sqlalchemy.pool import NullPool  # slow to import: sqlalchemy

    engine = sqlalchemy.create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            # a session lock: it outlives the transaction and ends with the connection at the latest
            conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:key)"), {"key": _PG_LOCK_KEY})
            try:
                yield
            finally:
                conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:key)"), {"key": _PG_LOCK_KEY})
    finally:
        engine.dispose()


def open_storage(url: str, t: Mapping[str, Any]):
    """Open (and on first use create, under a lock across processes) the study storage.

    Parameters
    ----------
    url : str
        ``tune.storage``: an SQLAlchemy URL. ``postgresql://`` without a driver
        uses the installed one (psycopg2, else psycopg).
    t : mapping
        The ``tune`` settings: ``heartbeat_interval``, ``grace_period``, ``max_retry``.

    Raises
    ------
    ValueError
        Naming ``tune.storage`` (its password masked): a URL SQLAlchemy cannot
        read, a driver that is not installed, or a database that cannot be
        opened, e.g. a server that refuses the connection.
    """
    from sqlalchemy.engine import make_url  # slow to import: sqlalchemy

    # slow to import: sqlalchemy
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError

    shown = shown_url(url)
    try:
        url = _with_installed_driver(url)
        parsed = make_url(url)
        parsed.get_dialect()
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        raise ValueError(f"tune.storage={shown!r} is not a database URL qwkboost can use ({exc}); use e.g. "
                         "sqlite:////absolute/path/optuna.db or postgresql://user@host:5432/dbname") from None
    sqlite = parsed.drivername.startswith("sqlite")
    kwargs = {"connect_args": {"timeout": 60}} if sqlite else {}
    if parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
        kwargs = {"connect_args": {"connect_timeout": 10}}     # libpq would wait minutes for a silent host
    if sqlite:
        check_study_file(tracking.check_sqlite_path(url, "tune.storage"), f"tune.storage={shown!r}")
    else:
        try:
            tracking.check_database_driver(url, "tune.storage")
        except ValueError as exc:
            raise ValueError(str(exc).replace(url, shown_url(url))) from None
    try:
        with _schema_lock(url, parsed), quiet_experimental():
            retry = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None) \
                or optuna.storages.RetryFailedTrialCallback
            return RDBStorage(url, heartbeat_interval=int(t.get("heartbeat_interval", 10)),
                              grace_period=int(t.get("grace_period", 30)),
                              heartbeat_stale_trial_callback=retry(max_retry=int(t.get("max_retry", 2))),
                              engine_kwargs=kwargs)
    except ImportError as exc:
        raise ValueError(f"tune.storage={shown!r} needs a database driver that is not installed ({exc})") from None
    except Exception as exc:
        if type(exc).__module__.startswith(("sqlalchemy", "optuna", "sqlite3")):
            # a server that cannot be reached or refuses the login (not, say, an incompatible schema)
            hint = "" if sqlite or not isinstance(exc, OperationalError) else (
                "; check that the server runs and accepts connections there, and the host, port, user, password "
                "and database name")
            raise ValueError(f"tune.storage={shown!r} cannot be opened: {str(exc).splitlines()[0]}{hint}") from None
        raise


@contextlib.contextmanager
def quiet_experimental():
    """Optuna marks heartbeats experimental; qwkboost relies on them knowingly."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        yield


class _NotAStoppedTrial(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], KeyboardInterrupt))


#: The logger by which Optuna reports a failed trial (``optuna.study._optimize``), with its traceback.
_TRIAL_LOGGER = "optuna.study._optimize"


@contextlib.contextmanager
def quiet_stopped_trials():
    """Optuna reports a trial that Ctrl-C or SIGTERM ended as failed, with a traceback of some 45 lines, before the
    stop goes on; the command then says that it stopped in one line, so that report is left out (a trial's own
    error is still reported)."""
    quiet = _NotAStoppedTrial()
    logger = logging.getLogger(_TRIAL_LOGGER)
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


def fail_dead_trials(study) -> None:
    """Fail and retry the RUNNING trials whose process on this host is gone (after ``kill -9``).

    Optuna's heartbeat catches them only after ``grace_period``; a quick
    resume would otherwise leave them RUNNING for good.
    """
    storage = study._storage
    retry = storage.get_heartbeat_stale_trial_callback()
    for tr in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        tag = tr.user_attrs.get(tracking.PROCESS_TAG)
        if tag and is_alive(tag) is False:
            try:
                changed = storage.set_trial_state_values(tr._trial_id, state=optuna.trial.TrialState.FAIL)
            except optuna.exceptions.UpdateFinishedTrialError:
                continue
            if changed and retry is not None:
                retry(study, copy.deepcopy(storage.get_trial(tr._trial_id)))


def kill_orphan_runs(study, client) -> None:
    """Mark the MLflow runs of trials a killed process left behind as KILLED."""
    for tr in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.FAIL,)):
        run_id = tr.user_attrs.get("mlflow_run_id")
        if run_id and client.get_run(run_id).info.status == "RUNNING":
            tracking.mark_killed(client, run_id)


def clean_dead_trials(study, client=None) -> None:
    """The trials a killed process or a lost worker left RUNNING failed and retried (:func:`fail_dead_trials`, then
    Optuna's check of stale heartbeats) and, given an MLflow ``client``, their runs marked KILLED
    (:func:`kill_orphan_runs`)."""
    fail_dead_trials(study)
    with quiet_experimental():
        optuna.storages.fail_stale_trials(study)
    if client is not None:
        kill_orphan_runs(study, client)


#: The URL scheme of a study kept in a Dask scheduler's memory (:func:`on_the_scheduler`).
SCHEDULER_SCHEME = "dask-scheduler://"


def on_the_scheduler(study, client) -> optuna.Study | None:
    """A working copy of ``study`` in the memory of ``client``'s Dask scheduler
    (:class:`optuna_integration.DaskStorage`), which every worker reaches with no file and no database: its finished
    trials copied in, so the sampler and pruner see them; :func:`write_back` copies each new one to ``study``.

    Returns
    -------
    optuna.Study or None
        ``None`` when ``optuna-integration`` is not installed (the ``cluster`` extra installs it).
    """
    try:
        from optuna_integration import DaskStorage  # optional: optuna-integration
    except ImportError:
        return None
    name = f"qwkboost-{study.study_name}-{os.getpid()}-{id(study)}"
    with quiet_experimental():
        work = optuna.create_study(storage=DaskStorage(name=name, client=client), study_name=study.study_name,
                                   direction=study.direction, sampler=study.sampler, pruner=study.pruner)
    work.add_trials([t for t in study.get_trials(deepcopy=False) if t.state.is_finished()])
    work.set_user_attr("qwkboost.storage", SCHEDULER_SCHEME + name)
    return work


def scheduler_url(work) -> str:
    """The URL by which a worker opens ``work`` (:func:`on_the_scheduler`; :func:`load_storage`)."""
    return work.user_attrs["qwkboost.storage"]


def write_back(work, trial_id: int, study, state=None) -> None:
    """Copy ``work``'s finished trial ``trial_id`` into ``study`` (the record kept on disk); with ``state``, in that
    state (a trial whose worker was lost, still RUNNING on the scheduler, copied as FAIL)."""
    trial = work._storage.get_trial(trial_id)
    if state is not None:
        trial = optuna.trial.create_trial(state=state, params=trial.params, distributions=trial.distributions,
                                          user_attrs=trial.user_attrs, system_attrs=trial.system_attrs,
                                          intermediate_values=trial.intermediate_values)
    study.add_trial(trial)


def load_storage(url: str):
    """The storage of ``url``: a study on the Dask scheduler (:data:`SCHEDULER_SCHEME`, opened from a worker) or
    an RDB URL as given."""
    if not url.startswith(SCHEDULER_SCHEME):
        return url
    from optuna_integration import DaskStorage  # optional: optuna-integration

    with quiet_experimental():
        return DaskStorage(name=url[len(SCHEDULER_SCHEME):])
