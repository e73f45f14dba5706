"""MLflow tracking: where runs go, what each run logs, and parent/child runs for sweeps.

The default store is ``sqlite:///<project>/mlflow.db`` (absolute, so every
working directory writes to the same store) with artifacts in
``<project>/mlartifacts``. ``MLFLOW_TRACKING_URI`` or ``tracking.uri`` points
elsewhere, e.g. ``http://127.0.0.1:5000`` for an ``mlflow server``.

SQLite is shared by parallel launcher workers, so the store is created in the
main process before any worker starts, connections wait on a lock (busy
timeout) instead of failing, and writes are retried on ``database is locked``.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Mapping

__all__ = [
    "PROJECT_ROOT",
    "default_tracking_uri",
    "resolve_tracking_uri",
    "setup",
    "run",
    "log_params",
    "log_metrics",
    "log_curves",
    "log_dict",
    "log_figure",
    "log_file",
    "library_versions",
    "flatten",
]

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SQLITE_TIMEOUT_S = 120
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
    if uri.startswith("sqlite:///") and "timeout=" not in uri:
        uri += ("&" if "?" in uri else "?") + f"timeout={SQLITE_TIMEOUT_S}"
    return uri


def _retry(fn, *args, attempts: int = 8, **kwargs):
    """Call ``fn``, retrying with backoff while SQLite reports a lock."""
    for i in range(attempts):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # MlflowException wraps OperationalError
            if "database is locked" not in str(exc) or i == attempts - 1:
                raise
            time.sleep(0.2 * 2 ** i)


def setup(uri: str | None, experiment_name: str) -> str:
    """Point MLflow at the store and return the experiment id (created if missing).

    Call in the main process before launching parallel jobs, so the schema and
    the experiment exist before any worker touches the store.
    """
    import mlflow

    uri = resolve_tracking_uri(uri)
    mlflow.set_tracking_uri(uri)
    client = mlflow.MlflowClient(uri)
    exp = _retry(client.get_experiment_by_name, experiment_name)
    if exp is not None:
        return exp.experiment_id
    artifact_location = None
    if uri.startswith("sqlite:///"):
        # artifacts beside the database, not in whatever directory the command ran from
        db = Path(uri[len("sqlite:///"):].split("?")[0])
        artifact_location = (db.resolve().parent / "mlartifacts").as_uri()
    try:
        return _retry(client.create_experiment, experiment_name, artifact_location=artifact_location)
    except Exception:
        exp = client.get_experiment_by_name(experiment_name)  # created by a concurrent process
        if exp is None:
            raise
        return exp.experiment_id


@contextlib.contextmanager
def run(experiment_id: str, run_name: str, parent_run_id: str | None = None,
        tags: Mapping[str, str] | None = None) -> Iterator[Any]:
    """An MLflow run that is always ended: FINISHED on success, FAILED on error, KILLED on Ctrl-C.

    Any run left active in this process (a reused launcher worker) is ended
    first, so nothing leaks from one job into the next.
    """
    import mlflow

    while mlflow.active_run() is not None and parent_run_id != mlflow.active_run().info.run_id:
        mlflow.end_run("KILLED")
    nested = parent_run_id is not None and mlflow.active_run() is not None
    active = _retry(mlflow.start_run, experiment_id=experiment_id, run_name=run_name,
                    parent_run_id=None if nested else parent_run_id, nested=nested, tags=dict(tags or {}))
    status = "FAILED"
    try:
        yield active
        status = "FINISHED"
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    finally:
        # status first, with retries: mlflow.end_run pops the run before writing, so a lock there
        # would leave it RUNNING; end_run then only pops the fluent stack
        _retry(mlflow.MlflowClient().set_terminated, active.info.run_id, status)
        if mlflow.active_run() is not None and mlflow.active_run().info.run_id == active.info.run_id:
            mlflow.end_run(status)


def flatten(d: Mapping, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists become JSON strings."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        elif isinstance(v, (list, tuple)):
            out[key] = json.dumps(list(v))
        else:
            out[key] = v
    return out


def library_versions() -> dict[str, str]:
    """Python, platform and the versions of every library a result depends on."""
    out = {"python": platform.python_version(), "platform": platform.platform()}
    for name in VERSIONED:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def log_params(params: Mapping[str, Any]) -> None:
    """Log flattened params in one batch call (values cut to MLflow's 6000 characters)."""
    import mlflow
    from mlflow.entities import Param

    flat = flatten(params)
    batch = [Param(k, str(v)[:6000]) for k, v in flat.items()]
    client = mlflow.MlflowClient()
    run_id = mlflow.active_run().info.run_id
    for i in range(0, len(batch), 100):
        _retry(client.log_batch, run_id, params=batch[i:i + 100])


def log_metrics(metrics: Mapping[str, float], step: int | None = None) -> None:
    """Log final metrics in one call."""
    import mlflow

    _retry(mlflow.log_metrics, {k: float(v) for k, v in metrics.items()}, step=step)


def log_curves(curves: Mapping[str, list[float]]) -> None:
    """Log per-round curves, ``{"train_kappa": [...], ...}``, as step-indexed metrics in batches."""
    import mlflow
    from mlflow.entities import Metric

    client = mlflow.MlflowClient()
    run_id = mlflow.active_run().info.run_id
    ts = int(time.time() * 1000)
    batch = [Metric(k, float(v), ts, step) for k, vals in curves.items() for step, v in enumerate(vals)]
    for i in range(0, len(batch), 1000):
        _retry(client.log_batch, run_id, metrics=batch[i:i + 1000])


def log_dict(obj: Any, artifact_file: str) -> None:
    import mlflow

    _retry(mlflow.log_dict, obj, artifact_file)


def log_figure(fig, artifact_file: str) -> None:
    import matplotlib.pyplot as plt
    import mlflow

    _retry(mlflow.log_figure, fig, artifact_file)
    plt.close(fig)


def log_file(path: str | os.PathLike, artifact_path: str | None = None) -> None:
    import mlflow

    _retry(mlflow.log_artifact, str(path), artifact_path)


def log_text(text: str, artifact_file: str) -> None:
    import mlflow

    _retry(mlflow.log_text, text, artifact_file)


def set_tags(tags: Mapping[str, Any]) -> None:
    import mlflow

    _retry(mlflow.set_tags, {k: str(v) for k, v in tags.items()})


def tmpdir() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="qwkboost-")


def command_line() -> str:
    return " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])


def resolve_and_set(uri: str | None) -> str:
    """Point MLflow at the store without touching experiments (for launcher workers)."""
    import mlflow

    uri = resolve_tracking_uri(uri)
    mlflow.set_tracking_uri(uri)
    return uri
