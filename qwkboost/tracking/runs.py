"""MLflow runs: started and always ended (FINISHED, FAILED or KILLED), what each run logs, names and links.

A run is tagged with its process, so that a later command can mark it KILLED
if the process was killed outright (:func:`qwkboost.tracking.store.reap_dead_runs`).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import logging
import os
import platform
import re
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Iterator, Mapping

from qwkboost.exceptions import RunStopped
from qwkboost.tracking.interrupt import held_stops, process_tag
from qwkboost.tracking.store import (
    LOCKED,
    PROCESS_TAG,
    RUNS_VIEW,
    SAME_ROW_INSERTED,
    STOPPED_TAG,
    VERSIONED,
    bound_http_retries,
    cannot_reach,
    check_reachable,
    resolve_tracking_uri,
    retry,
    server_lost,
    unreachable,
    without_retries,
)

log = logging.getLogger(__name__)

__all__ = ["run", "download_run_artifacts", "download_pipeline", "fetch_pipeline", "flatten", "library_versions", "version_tags", "log_datasets", "log_params", "log_metrics", "log_curves", "log_dict", "log_figure", "log_file", "log_artifacts", "log_text", "set_tags", "MAX_RUN_NAME", "run_name", "fit_run_name", "ui_link", "run_link", "safe_name", "tmpdir", "command_line", "resolve_and_set"]


@contextlib.contextmanager
def run(experiment_id: str, run_name: str, parent_run_id: str | None = None,
        tags: Mapping[str, str] | None = None, run_id: str | None = None) -> Iterator[Any]:
    """An MLflow run that is always ended: FINISHED on success, FAILED on error, KILLED on Ctrl-C or SIGTERM. A
    :class:`~qwkboost.exceptions.RunStopped` ends it KILLED with the reason, but a pruned trial's
    (``qwkboost.trial_state=PRUNED``) FINISHED with the tag ``pruned=true``: it did what it was asked.

    The run is tagged with its process (:data:`PROCESS_TAG`), so that a later
    command can mark it KILLED if the process was killed outright (:func:`reap_dead_runs`).
    With ``run_id``, that existing run is continued (a resumed study) instead of a new one started.

    Any run left active in this process (a reused launcher worker) is ended
    first, so nothing leaks from one job into the next.

    Raises
    ------
    TrackingServerLost
        If an HTTP tracking server stops answering: raised instead of the
        error of the failed MLflow call (a Ctrl-C or SIGTERM still propagates).
    """
    import mlflow  # slow to import: mlflow

    while mlflow.active_run() is not None and parent_run_id != mlflow.active_run().info.run_id:
        mlflow.end_run("KILLED")
    nested = parent_run_id is not None and mlflow.active_run() is not None
    tags = {PROCESS_TAG: process_tag(), **(tags or {})}
    try:
        if run_id is not None:
            active = retry(mlflow.start_run, run_id=run_id)
            retry(mlflow.MlflowClient().update_run, run_id, "RUNNING")
            mlflow.set_tags(tags)
        else:
            active = retry(mlflow.start_run, experiment_id=experiment_id, run_name=run_name,
                            parent_run_id=None if nested else parent_run_id, nested=nested, tags=tags)
    except Exception as exc:
        _raise_if_lost(exc, f"run {run_name!r}")
        raise
    status = "FAILED"
    try:
        yield active
        status = "FINISHED"
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    except RunStopped as stop:       # stopped on purpose: a pruned trial FINISHED (tagged pruned), else KILLED
        pruned = stop.tags.get("qwkboost.trial_state") == "PRUNED"
        status = "FINISHED" if pruned else "KILLED"
        retry(mlflow.set_tags, {STOPPED_TAG: str(stop), **stop.tags, **({"pruned": "true"} if pruned else {})})
        raise
    finally:
        with held_stops():      # a second Ctrl-C as the run ends waits for it: never a run left RUNNING
            _end_run(active.info.run_id, run_name, status, sys.exc_info()[1])


def _raise_if_lost(error: BaseException | None, what: str) -> None:
    """Raise :class:`TrackingServerLost` from ``error`` if the HTTP tracking server no longer answers."""
    import mlflow  # slow to import: mlflow

    uri = mlflow.get_tracking_uri()
    reason = unreachable(uri)
    if reason is not None:
        raise server_lost(uri, reason, what) from error


def _end_run(run_id: str, run_name: str, status: str, error: BaseException | None) -> None:
    """End the run ``status`` in the store and pop it from MLflow's stack of active runs.

    The status goes first, with retries: :func:`mlflow.end_run` pops the run
    before writing, so a lock there would leave it RUNNING. Its own write of
    the same status is then redundant, so it is made without retries and
    may fail. If the run failed and the tracking server no longer answers,
    nothing is written: each call would only wait on MLflow's HTTP retries.
    """
    import mlflow  # slow to import: mlflow

    uri = mlflow.get_tracking_uri()
    cause = error
    reason = unreachable(uri) if error is not None else None
    if reason is None:
        try:
            retry(mlflow.MlflowClient().set_terminated, run_id, status)
        except Exception as exc:
            reason = unreachable(uri)
            if reason is None:
                raise
            cause = error or exc
    if mlflow.active_run() is not None and mlflow.active_run().info.run_id == run_id:
        with without_retries(), contextlib.suppress(Exception):
            mlflow.end_run(status)
    if reason is not None:
        lost = server_lost(uri, reason, f"run {run_name!r} ({run_id})")
        if isinstance(error, KeyboardInterrupt):    # the interrupt goes on; the run stays RUNNING
            log.warning("%s", lost)
            return
        raise lost from cause


def _known_run(run_id: str, uri: str):
    """An MLflow client of the store at ``uri`` (reachable, its HTTP retries bounded) and run ``run_id`` in it.

    Raises
    ------
    ValueError
        If the store does not know the run.
    """
    import mlflow  # slow to import: mlflow
    from mlflow.exceptions import MlflowException  # slow to import: mlflow

    bound_http_retries(uri)
    check_reachable(uri)
    client = mlflow.MlflowClient(uri)
    try:
        return client, client.get_run(run_id)
    except MlflowException:
        raise ValueError(f"run={run_id!r} is neither a directory nor a run in the MLflow store {uri.split('?')[0]} "
                         "(give a run's output directory, or its run id with the store's tracking.uri)") from None


def download_run_artifacts(run_id: str, artifact_path: str, uri: str, dst: str | os.PathLike) -> Path:
    """Download ``artifact_path`` of run ``run_id`` from the store at ``uri`` into ``dst``.

    Raises
    ------
    ValueError
        If the store does not know the run, or the run has no such artifact.
    """
    from mlflow.exceptions import MlflowException  # slow to import: mlflow

    client, _ = _known_run(run_id, uri)
    try:
        out = client.download_artifacts(run_id, artifact_path, str(dst))
    except (MlflowException, OSError) as exc:
        raise ValueError(f"run {run_id} has no {artifact_path!r} artifact ({type(exc).__name__}); runs made before "
                         "qwkboost logged pipelines cannot be loaded this way") from None
    return Path(out)


def download_pipeline(run_id: str, uri: str, dst: str | os.PathLike) -> Path:
    """Download run ``run_id``'s pipeline into ``dst``: its ``pipeline`` artifact where it logged one (runs that
    log no servable model, and runs logged by earlier versions), else the ``artifacts/pipeline`` folder of the model
    it logged (the newest, when a resumed run logged several): MLflow holds a run's fold models once.

    Raises
    ------
    ValueError
        If the store does not know the run, or it logged neither.
    """
    from mlflow.exceptions import MlflowException  # slow to import: mlflow

    client, run = _known_run(run_id, uri)
    try:
        out = fetch_pipeline(client, run, dst, uri)
    except (MlflowException, OSError) as exc:
        raise ValueError(f"run {run_id}: its pipeline cannot be downloaded ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0][:200]})") from None
    if out is None:
        raise ValueError(f"run {run_id} has no 'pipeline' artifact and no logged model; runs made before qwkboost "
                         "logged pipelines cannot be loaded this way")
    return out


def fetch_pipeline(client, run, dst: str | os.PathLike, uri: str) -> Path | None:
    """:func:`download_pipeline`'s download with an MLflow ``client`` and a run already found; ``None`` when the
    run logged no pipeline (MLflow's errors pass through)."""
    import mlflow  # slow to import: mlflow

    run_id = run.info.run_id
    if any(a.path == "pipeline" for a in client.list_artifacts(run_id)):
        return Path(client.download_artifacts(run_id, "pipeline", str(dst)))
    # the run's servable models (named for what they are; ``model`` before): not an external record of a blend's
    # member, whose files are in the blend's model
    models = [m for m in client.search_logged_models([run.info.experiment_id],
                                                     filter_string=f"source_run_id = '{run_id}'")
              if m.tags.get("mlflow.model.isExternal") != "true"]
    if not models:
        return None
    newest = max(models, key=lambda m: m.creation_timestamp or 0)
    return Path(mlflow.artifacts.download_artifacts(artifact_uri=newest.artifact_location.rstrip("/") +
                                                    "/artifacts/pipeline", dst_path=str(dst), tracking_uri=uri))


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


def version_tags() -> dict[str, str]:
    """The versions a result depends on as one tag, ``versions`` (``python=3.11.7 platform=... numpy=2.4.6 ...``):
    one line of the run's tags, searchable (``tags.versions LIKE '%xgboost=3.2.0%'``)."""
    return {"versions": " ".join(f"{k}={v}" for k, v in library_versions().items())}


def log_datasets(fp, data: Mapping[str, Any]) -> None:
    """The training and test rows as the active run's MLflow datasets (``mlflow.log_input``, contexts ``training``
    and ``testing``): named by their files (``data.path``, ``data.test_path``) or the set (``quartiles train``),
    sourced from the file or from qwkboost's code, and digested by qwkboost's own fingerprint of the rows read
    (:class:`~qwkboost.data.fingerprint.DataFingerprint`: the first 16 hex digits), so that the UI's Dataset column
    tells runs on the same rows from runs on other rows."""
    import mlflow  # slow to import: mlflow
    from mlflow.data.code_dataset_source import CodeDatasetSource  # slow to import: mlflow
    from mlflow.data.dataset_source_registry import resolve_dataset_source  # slow to import: mlflow
    from mlflow.data.meta_dataset import MetaDataset  # slow to import: mlflow

    name = str(data.get("name") or "data")
    for context, key, digest, rows in (("training", "path", fp.train, fp.train_rows),
                                       ("testing", "test_path", fp.test, fp.test_rows)):
        if not rows:
            continue
        path = data.get(key) if isinstance(data.get(key), str) else None
        if path:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                source = resolve_dataset_source(os.path.abspath(path))
            label = Path(path).name
        else:
            source = CodeDatasetSource({"qwkboost.data": name})
            label = f"{name} {'train' if context == 'training' else 'test'}"
        # runs logging the same rows at once (a study's trials, auto's candidates and its parent) race to insert
        # the one dataset record: the loser finds it there when it tries again
        retry(mlflow.log_input, MetaDataset(source, name=label, digest=digest[:16]), context=context,
              transient=LOCKED + SAME_ROW_INSERTED)


def log_params(params: Mapping[str, Any]) -> None:
    """Log flattened params in one batch call (values cut to MLflow's 6000 characters)."""
    import mlflow  # slow to import: mlflow
    from mlflow.entities import Param  # slow to import: mlflow

    flat = flatten(params)
    batch = [Param(k, str(v)[:6000]) for k, v in flat.items()]
    client = mlflow.MlflowClient()
    run_id = mlflow.active_run().info.run_id
    for i in range(0, len(batch), 100):
        retry(client.log_batch, run_id, params=batch[i:i + 100])


def log_metrics(metrics: Mapping[str, float], step: int | None = None) -> None:
    """Log final metrics in one call."""
    import mlflow  # slow to import: mlflow

    retry(mlflow.log_metrics, {k: float(v) for k, v in metrics.items()}, step=step)


def log_curves(curves: Mapping[str, list[float]]) -> None:
    """Log per-round curves, ``{"train_kappa": [...], ...}``, as step-indexed metrics in batches: round ``i`` (from
    1, as the engines count their rounds) is step ``i``, so that step 0 holds only a run's final figures, the ones
    its logged model is linked to (:func:`~qwkboost.tracking.serving.log_pyfunc`)."""
    import mlflow  # slow to import: mlflow
    from mlflow.entities import Metric  # slow to import: mlflow

    client = mlflow.MlflowClient()
    run_id = mlflow.active_run().info.run_id
    ts = int(time.time() * 1000)
    batch = [Metric(k, float(v), ts, step) for k, vals in curves.items() for step, v in enumerate(vals, 1)]
    for i in range(0, len(batch), 1000):
        retry(client.log_batch, run_id, metrics=batch[i:i + 1000])


def log_dict(obj: Any, artifact_file: str) -> None:
    import mlflow  # slow to import: mlflow

    retry(mlflow.log_dict, obj, artifact_file)


def log_figure(fig, artifact_file: str) -> None:
    import matplotlib.pyplot as plt  # slow to import: matplotlib.pyplot
    import mlflow  # slow to import: mlflow

    retry(mlflow.log_figure, fig, artifact_file)
    plt.close(fig)


def log_file(path: str | os.PathLike, artifact_path: str | None = None) -> None:
    import mlflow  # slow to import: mlflow

    retry(mlflow.log_artifact, str(path), artifact_path)


def log_artifacts(local_dir: str | os.PathLike, artifact_path: str | None = None) -> None:
    import mlflow  # slow to import: mlflow

    retry(mlflow.log_artifacts, str(local_dir), artifact_path)


def log_text(text: str, artifact_file: str) -> None:
    import mlflow  # slow to import: mlflow

    retry(mlflow.log_text, text, artifact_file)


def set_tags(tags: Mapping[str, Any]) -> None:
    import mlflow  # slow to import: mlflow

    retry(mlflow.set_tags, {k: str(v) for k, v in tags.items()})


#: Overrides that never go into a run name (where runs are stored, how Hydra runs).
_UNNAMED = ("tracking.", "hydra.", "hydra/", "run_name", "n_jobs", "experiment")
MAX_RUN_NAME = 200


def run_name(engine: str, objective: str, overrides: list[str], varying: list[str] | None = None) -> str:
    """``"{engine}/{objective}"`` plus the overrides that tell this run from its neighbours.

    In a multirun (``varying`` given) those are the swept keys; for a single
    run, every override but the engine, objective, tracking and Hydra ones.
    """
    keep = []
    for o in overrides:
        key = o.split("=", 1)[0].lstrip("+~")
        if key in ("engine", "objective") or key.startswith(_UNNAMED):
            continue
        if varying is not None and key not in varying:
            continue
        keep.append(o.lstrip("+~"))
    name = " ".join([f"{engine}/{objective}", *keep])
    return fit_run_name(name)


def fit_run_name(name: str) -> str:
    """``name`` cut to :data:`MAX_RUN_NAME` characters, an ellipsis marking the cut."""
    return name if len(name) <= MAX_RUN_NAME else name[:MAX_RUN_NAME - 1] + "…"


def ui_link(base: str, experiment_id: str | None = None, run_id: str | None = None) -> str:
    """A link into MLflow's UI that opens on runs (``workflowType=machine_learning``), not on GenAI pages; an
    experiment's link opens its runs table in qwkboost's starting view (:data:`~qwkboost.tracking.store.RUNS_VIEW`:
    the headline columns, best out-of-fold QWK first).

    MLflow 3's UI reads the workflow from the link or from what was last
    clicked in that browser; the experiment tag alone does not switch it.
    """
    path, view = "#/experiments", ""
    if experiment_id is not None:
        path += f"/{experiment_id}" + (f"/runs/{run_id}" if run_id else "/runs")
        view = "" if run_id else f"viewStateShareKey={RUNS_VIEW}&"
    return f"{base.rstrip('/')}/{path}?{view}workflowType=machine_learning"


def run_link(experiment_id: str, run_id: str | None = None) -> str:
    """Where to see a run: on its tracking server, or on ``make mlflow-ui`` for a local store."""
    import mlflow  # slow to import: mlflow

    uri = mlflow.get_tracking_uri()
    base = uri if uri.startswith(("http://", "https://")) else "http://127.0.0.1:5000"
    link = ui_link(base, experiment_id, run_id)
    return link if base == uri else f"{link} (after make mlflow-ui)"


def safe_name(name: str) -> str:
    """``name`` as one file-name component: no separators, no ``..``, no control characters."""

    out = re.sub(r"[^\w.=,+-]+", "_", str(name)).strip("._") or "run"
    return out[:120]


def tmpdir() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="qwkboost-")


def command_line() -> str:
    return " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])


def resolve_and_set(uri: str | None, sweep_run_id: str | None = None) -> str:
    """Point MLflow at the store without touching experiments (for launcher workers).

    Parameters
    ----------
    uri : str or None
        ``tracking.uri``.
    sweep_run_id : str, optional
        The parent run of the sweep this job belongs to: the server answered
        when the sweep started, so one that no longer does went away.

    Raises
    ------
    ConfigError
        For a tracking server that does not answer, :class:`TrackingServerLost` in a sweep.
    """
    import mlflow  # slow to import: mlflow

    uri = resolve_tracking_uri(uri)
    bound_http_retries(uri)
    reason = unreachable(uri)
    if reason is not None:
        raise cannot_reach(uri, reason) if sweep_run_id is None else \
            server_lost(uri, reason, f"the sweep (parent run {sweep_run_id})")
    mlflow.set_tracking_uri(uri)
    return uri
