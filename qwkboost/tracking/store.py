"""The MLflow store: where runs go, creating and checking it, and cleaning up after killed runs.

The default store is ``sqlite:///<project>/mlflow.db`` (absolute, so every
working directory writes to the same store) with artifacts in
``<project>/mlartifacts``. ``MLFLOW_TRACKING_URI`` or ``tracking.uri`` points
elsewhere, e.g. ``http://127.0.0.1:5000`` for an ``mlflow server``.

SQLite is shared by parallel launcher workers, so the store is created in the
main process before any worker starts, connections wait on a lock (busy
timeout) instead of failing, and writes are retried on ``database is locked``.

A tracking server is checked before anything trains (:func:`check_reachable`).
MLflow's HTTP client retries a failed request for about four minutes, so a
command whose server dies would hang; for ``http(s)://`` URIs qwkboost bounds
the retries (:data:`HTTP_DEFAULTS`, unless set in the environment), and once
the server no longer answers it stops calling it and fails with
:class:`TrackingServerLost`, naming the server. The runs it could not end
stay RUNNING there; once the server is back, the next command that logs to
the same experiment on this host marks them KILLED (:func:`reap_dead_runs`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import Iterator, Mapping

from filelock import FileLock

from qwkboost.exceptions import ConfigError, config_errors
from qwkboost.tracking.interrupt import is_alive
from qwkboost.tracking.vocabulary import HEADLINE

log = logging.getLogger(__name__)

__all__ = ["PROJECT_ROOT", "SQLITE_TIMEOUT_S", "EXPERIMENT_KIND", "EXPERIMENT_TAGS", "LOCKED", "SAME_ROW_INSERTED", "RUNS_VIEW", "RUNS_VIEW_TAG", "runs_view", "ensure_runs_view", "PROCESS_TAG", "HTTP_DEFAULTS", "VERSIONED", "default_tracking_uri", "resolve_tracking_uri", "check_sqlite_path", "check_database_driver", "retry", "store_lock", "CONCURRENT_MIGRATION", "prepare_store", "unreachable", "check_reachable", "cannot_reach", "bound_http_retries", "TrackingServerLost", "server_lost", "without_retries", "setup", "reap_dead_runs", "mark_killed", "STOPPED_TAG"]

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SQLITE_TIMEOUT_S = 120
#: The MLflow UI opens an experiment tagged so on its runs, not on the GenAI traces page.
EXPERIMENT_KIND = "mlflow.experimentKind"
EXPERIMENT_TAGS = {EXPERIMENT_KIND: "custom_model_development"}
#: The runs table's starting view, as MLflow's UI shares a view (its "Share" button): an experiment tag
#: ``mlflow.sharedViewState.<key>`` holding the view as JSON, opened by a link with ``viewStateShareKey=<key>``
#: (:func:`~qwkboost.tracking.runs.ui_link`).
RUNS_VIEW = "qwkboost"
RUNS_VIEW_TAG = f"mlflow.sharedViewState.{RUNS_VIEW}"


def runs_view() -> str:
    """The starting view's JSON (the runs table's state as MLflow's UI shares it).

    The table: the headline columns (:data:`~qwkboost.tracking.vocabulary.HEADLINE`) then the ``kind``, ``engine``
    and ``objective`` tags and the dataset, sorted by out-of-fold QWK, best first. The chart view: a section
    ``QWK`` first, with ``oof_qwk`` by run, ``nested_oof_qwk`` against ``seconds`` (its axes fit the figures, where a
    bar starts at 0) and the objective and engine against ``nested_oof_qwk`` (parallel coordinates), over the first
    20 runs; the chart MLflow draws for every other metric below it, in its section ``Model metrics``, closed.
    """
    columns = ([f"metrics.`{k}`" for k in HEADLINE] + [f"tags.`{k}`" for k in ("kind", "engine", "objective")]
               + ["attributes.`Dataset`"])
    card = {"runsCountToCompare": 20, "metricSectionId": "qwkboost-qwk", "deleted": False, "isGenerated": False}
    charts = [{**card, "uuid": "qwkboost-oof_qwk", "type": "BAR", "metricKey": "oof_qwk", "displayName": "oof_qwk"},
              {**card, "uuid": "qwkboost-qwk-seconds", "type": "SCATTER", "xaxis": {"key": "seconds", "type": "METRIC"},
               "yaxis": {"key": "nested_oof_qwk", "type": "METRIC"}},
              {**card, "uuid": "qwkboost-parallel", "type": "PARALLEL", "selectedParams": ["objective.name", "engine.name"],
               "selectedMetrics": ["nested_oof_qwk"], "showAllRuns": False}]
    section = {"isReordered": False, "deleted": False}
    sections = [{**section, "uuid": "qwkboost-qwk", "name": "QWK", "display": True, "isGenerated": False},
                {**section, "uuid": "qwkboost-model-metrics", "name": "Model metrics", "display": False,
                 "isGenerated": True}]
    return json.dumps({"orderByKey": "metrics.`oof_qwk`", "orderByAsc": False, "selectedColumns": columns,
                       "columnOrder": columns, "compareRunCharts": charts, "compareRunSections": sections,
                       "isAccordionReordered": True, "runsHiddenMode": "FIRST_20_RUNS"}, separators=(",", ":"))


def ensure_runs_view(client, experiment_id: str, tags: Mapping[str, str] | None = None) -> None:
    """Tag experiment ``experiment_id`` with the starting view (:data:`RUNS_VIEW_TAG`) unless it holds it;
    ``tags``: the experiment's tags, when already read."""
    view = runs_view()
    tags = retry(client.get_experiment, experiment_id).tags if tags is None else tags
    if tags.get(RUNS_VIEW_TAG) != view:
        retry(client.set_experiment_tag, experiment_id, RUNS_VIEW_TAG, view)
#: ``host:pid:start`` of the process that owns a run (see :mod:`qwkboost.tracking.interrupt`).
PROCESS_TAG = "qwkboost.process"
#: The tag that says why a run was stopped (Ctrl-C, SIGTERM, a lost worker).
STOPPED_TAG = "qwkboost.stopped"
#: MLflow's HTTP client settings that qwkboost sets for an ``http(s)://`` tracking URI when the environment does
#: not. MLflow's own defaults (7 retries, backoff factor 2, 120 s timeout) wait about four minutes on every request
#: to a server that died, and a command makes several; these give up after about 15 s (retries after 0, 2, 4 and
#: 8 s) and still ride out a server restart of a few seconds.
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "4", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                 "MLFLOW_HTTP_REQUEST_TIMEOUT": "60"}
VERSIONED = ("qwkboost", "numpy", "scipy", "pandas", "scikit-learn", "xgboost", "lightgbm", "optuna",
             "mlflow", "hydra-core", "omegaconf", "matplotlib")


def default_tracking_uri() -> str:
    """``sqlite:///<project>/mlflow.db`` with a busy timeout."""
    return f"sqlite:///{PROJECT_ROOT / 'mlflow.db'}?timeout={SQLITE_TIMEOUT_S}"


def resolve_tracking_uri(uri: str | None) -> str:
    """Config value, else ``$MLFLOW_TRACKING_URI``, else :func:`default_tracking_uri`.

    Raises
    ------
    ValueError
        For a bare path or ``file:`` URI: the file store is rejected by current MLflow.
    """
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri()
    if uri.startswith("file:") or "://" not in uri and not uri.startswith("databricks"):
        raise ValueError(
            f"tracking.uri={uri!r} is a file store, which current MLflow rejects; use "
            f"'sqlite:///ABSOLUTE/PATH/mlflow.db' or an 'http://host:port' tracking server")
    if uri.startswith("sqlite:"):
        check_sqlite_path(uri, "tracking.uri")
        if "timeout=" not in uri:
            uri += ("&" if "?" in uri else "?") + f"timeout={SQLITE_TIMEOUT_S}"
    elif not uri.startswith(("http://", "https://", "databricks")):
        check_database_driver(uri, "tracking.uri")
    return uri


def check_sqlite_path(uri: str, key: str) -> Path:
    """The file of a ``sqlite:////absolute/path.db`` URI, checked: absolute, in a directory (or a new one).

    A relative path (``sqlite:///mlflow.db``, three slashes) would put the
    store wherever each command happens to run.

    Raises
    ------
    ValueError
        Naming ``key`` and, for a relative path, the URI with four slashes.
    """
    if not uri.startswith("sqlite:///"):
        raise ValueError(f"{key}={uri!r} is not an SQLite URI of a file; use sqlite:////absolute/path.db")
    path = Path(uri[len("sqlite:///"):].split("?")[0])
    if not path.is_absolute():
        raise ValueError(f"{key}={uri!r} is a path relative to the working directory ({path}); write the absolute "
                         f"path with four slashes, e.g. sqlite:///{Path.cwd() / path}")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"{key}={uri!r}: {parent} is a file, so the database cannot be created below it")
            break
    if path.is_dir():
        raise ValueError(f"{key}={uri!r}: {path} is a directory; name the database file, e.g. {path / 'mlflow.db'}")
    return path


def check_database_driver(uri: str, key: str) -> None:
    """Refuse a database URL whose SQLAlchemy dialect or Python driver is not installed."""
    from sqlalchemy.engine import make_url  # slow to import: sqlalchemy
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError  # slow to import: sqlalchemy

    try:
        make_url(uri).get_dialect().import_dbapi()
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        raise ValueError(f"{key}={uri!r} is not a database URL qwkboost can use ({exc})") from None
    except ImportError as exc:
        raise ValueError(f"{key}={uri!r} needs a database driver that is not installed ({exc}); install it "
                         "(e.g. pip install psycopg2-binary for postgresql)") from None


#: SQLite's lock, which the next try usually finds released.
LOCKED = ("database is locked",)
#: What SQLite and PostgreSQL say when another process inserted the same unique row first: the next try finds it.
SAME_ROW_INSERTED = ("UNIQUE constraint failed", "duplicate key value violates unique constraint")


def retry(fn, *args, attempts: int = 8, transient: tuple[str, ...] = LOCKED, **kwargs):
    """Call ``fn``, retrying with backoff while the store's error says one of ``transient`` (by default SQLite's
    lock)."""
    for i in range(attempts):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # MlflowException wraps OperationalError and IntegrityError
            if not any(s in str(exc) for s in transient) or i == attempts - 1:
                raise
            time.sleep(0.2 * 2 ** i)


def _sqlite_path(uri: str) -> Path | None:
    if not uri.startswith("sqlite:///"):
        return None
    return Path(uri[len("sqlite:///"):].split("?")[0])


@contextlib.contextmanager
def store_lock(path: Path, timeout: float = 600.0) -> Iterator[None]:
    """An exclusive lock beside ``path`` (``<path>.lock``), shared by every qwkboost process."""

    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock", timeout=timeout):
        yield


def _drop_leftover_migration_tables(db: Path) -> None:
    """Drop ``_alembic_tmp_*`` tables a migration killed half-way leaves behind (they block every later one)."""

    if not db.exists():
        return
    con = sqlite3.connect(db, timeout=SQLITE_TIMEOUT_S)
    try:
        names = [r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name GLOB '_alembic_tmp_*'")]
        for name in names:
            con.execute(f'DROP TABLE "{name}"')
        con.commit()
    finally:
        con.close()


#: What SQLAlchemy and alembic say when two processes create and migrate one SQLite store at once.
CONCURRENT_MIGRATION = ("Online migration expected to match one row", "already exists", "database is locked",
                        "no such table")


def prepare_store(uri: str) -> None:
    """Create and migrate an SQLite store once, under a lock, before anything else touches it.

    Several commands started together on a new ``mlflow.db`` would otherwise
    each run MLflow's schema migrations at the same time, and fail or leave
    the store unusable. The first one creates it; the others wait, then find
    it ready. A store left half-migrated by a killed process is repaired.
    """
    import mlflow  # slow to import: mlflow

    db = _sqlite_path(uri)
    if db is None:
        return
    with store_lock(db):
        _drop_leftover_migration_tables(db)
        for attempt in range(6):
            try:
                retry(mlflow.MlflowClient(uri).search_experiments, max_results=1)
                return
            except mlflow.exceptions.MlflowException as exc:   # e.g. a store of an older MLflow: its own advice
                raise ConfigError(f"tracking.uri={uri.split('?')[0]}: {str(exc).splitlines()[0]}") from None
            except Exception as exc:
                # another MLflow client (an `mlflow ui`, a script) created the store at the same moment, outside
                # qwkboost's lock: its migration and ours collided; once it is done the store opens
                if attempt == 5 or not any(m in str(exc) for m in CONCURRENT_MIGRATION):
                    raise
                time.sleep(0.5 * (attempt + 1))
                _drop_leftover_migration_tables(db)


def _is_http(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def unreachable(uri: str, timeout: float = 5.0) -> str | None:
    """Why the HTTP tracking server at ``uri`` does not answer its ``/health`` endpoint, or ``None`` if it does.

    Always ``None`` for a store that is not an ``http(s)://`` server.
    """
    if not _is_http(uri):
        return None
    import requests  # slow to import: requests

    try:
        r = requests.get(uri.rstrip("/") + "/health", timeout=timeout)
    except requests.RequestException as exc:
        return type(exc).__name__ + (": connection refused" if "refused" in str(exc).lower() else "")
    return None if r.status_code == 200 else f"HTTP {r.status_code}"


def check_reachable(uri: str, timeout: float = 5.0) -> None:
    """Fail within seconds if an HTTP tracking server does not answer.

    Raises
    ------
    ConfigError
        Naming the URI and what to do.
    """
    reason = unreachable(uri, timeout)
    if reason is not None:
        raise cannot_reach(uri, reason)


def cannot_reach(uri: str, reason: str) -> ConfigError:
    return ConfigError(
        f"the MLflow tracking server at tracking.uri={uri} cannot be reached ({reason}); start it "
        f"(e.g. mlflow server --host 127.0.0.1 --port 5000), or leave tracking.uri and MLFLOW_TRACKING_URI "
        f"unset to log to the local sqlite store")


def bound_http_retries(uri: str) -> None:
    """For an ``http(s)://`` tracking URI, set :data:`HTTP_DEFAULTS` in ``os.environ`` where the user has not.

    Child processes (launcher workers) inherit them.
    """
    if _is_http(uri):
        for name, value in HTTP_DEFAULTS.items():
            os.environ.setdefault(name, value)


class TrackingServerLost(ConfigError):
    """The HTTP tracking server stopped answering while a command was logging to it."""


def server_lost(uri: str, reason: str, what: str) -> TrackingServerLost:
    """The error for a server that went away while ``what`` (e.g. ``"run 'x' (id)"``) was logging to it."""
    return TrackingServerLost(
        f"the MLflow tracking server at tracking.uri={uri} went away ({reason}) while {what} was logging to it; "
        "what it had logged is kept, and a run that could not be ended stays RUNNING there until the next "
        "qwkboost command logging to the same experiment on this host (once the server is back) marks it KILLED. "
        "Restart the server and run the command again")


@contextlib.contextmanager
def without_retries() -> Iterator[None]:
    """MLflow HTTP calls inside the block are tried once, with a 5 s timeout (for calls that may fail).

    MLflow reads these variables on every request; they are process-wide while the block runs.
    """
    saved = {k: os.environ.get(k) for k in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT")}
    os.environ.update({"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def setup(uri: str | None, experiment_name: str) -> str:
    """Point MLflow at the store and return the experiment id (created if missing).

    Call in the main process before launching parallel jobs, so the schema and
    the experiment exist before any worker touches the store. A new
    experiment is tagged as model training, so the MLflow UI opens on its runs, and every experiment holds the
    runs table's starting view (:data:`RUNS_VIEW_TAG`).

    Raises
    ------
    ConfigError
        For a URI that cannot be used, or a tracking server that does not answer (within seconds).
    """
    import mlflow  # slow to import: mlflow


    with config_errors():
        uri = resolve_tracking_uri(uri)
        if not isinstance(experiment_name, str) or not experiment_name.strip():
            raise ValueError(f"tracking.experiment_name must be a non-empty name; got {experiment_name!r}")
    bound_http_retries(uri)
    check_reachable(uri)
    prepare_store(uri)
    mlflow.set_tracking_uri(uri)
    client = mlflow.MlflowClient(uri)
    db = _sqlite_path(uri)
    with store_lock(db) if db is not None else contextlib.nullcontext():
        exp = retry(client.get_experiment_by_name, experiment_name)
        if exp is None:
            artifact_location = None
            if db is not None:
                # artifacts beside the database, not in whatever directory the command ran from
                artifact_location = (db.resolve().parent / "mlartifacts").as_uri()
            try:
                exp_id = retry(client.create_experiment, experiment_name, artifact_location=artifact_location,
                               tags={**EXPERIMENT_TAGS, RUNS_VIEW_TAG: runs_view()})
            except Exception:
                exp = client.get_experiment_by_name(experiment_name)  # created by a concurrent process
                if exp is None:
                    raise
                exp_id = exp.experiment_id
        else:
            exp_id = exp.experiment_id
            if exp.tags.get(EXPERIMENT_KIND) is None:
                retry(client.set_experiment_tag, exp_id, EXPERIMENT_KIND, EXPERIMENT_TAGS[EXPERIMENT_KIND])
            ensure_runs_view(client, exp_id, exp.tags)      # an experiment made before, or by another tool
    reap_dead_runs(exp_id, client)
    return exp_id


def reap_dead_runs(experiment_id: str, client=None) -> list[str]:
    """Mark KILLED the RUNNING runs whose process on this host is gone (e.g. after ``kill -9``).

    Returns the ids of the runs it ended.
    """
    import mlflow  # slow to import: mlflow

    client = client or mlflow.MlflowClient()
    ended = []
    runs = retry(client.search_runs, [experiment_id], "attributes.status = 'RUNNING'", max_results=1000)
    for r in runs:
        tag = r.data.tags.get(PROCESS_TAG)
        if tag and is_alive(tag) is False:
            mark_killed(client, r.info.run_id)
            ended.append(r.info.run_id)
    return ended


def mark_killed(client, run_id: str, why: str | None = None) -> None:
    """End the run ``run_id`` KILLED from another process than its own (which was killed, or lost with its
    machine or Dask worker), tagged ``qwkboost.stopped`` with ``why`` if given: the one place that does it."""
    if why is not None:
        retry(client.set_tag, run_id, STOPPED_TAG, why)
    retry(client.set_terminated, run_id, "KILLED")
