"""Members from an MLflow store: a run's predictions (and its pipeline) downloaded, or each finished child's of a
parent run, into a temporary directory that lives as long as the members read from it.

:class:`Downloads` is that directory: made only when a run is downloaded, removed when nothing refers to it any
more (a member read from it holds it, so a blend can copy the members' pipelines while it has them) and at the
latest when the process ends, so no ``qwkboost-blend-*`` folder is left behind.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qwkboost import tracking
from qwkboost.blending.errors import BlendInputError

__all__ = ["Found", "Downloads", "from_run_id"]

log = logging.getLogger(__name__)


class Downloads:
    """A temporary directory (``path``) for the runs one read downloads; removed with this object, or when the
    process ends."""

    def __init__(self):
        self.path = Path(tempfile.mkdtemp(prefix="qwkboost-blend-"))
        self._remove = weakref.finalize(self, shutil.rmtree, str(self.path), ignore_errors=True)

    def remove(self) -> None:
        """Remove the directory now."""
        self._remove()


@dataclass
class Found:
    """A member found but not read yet: a directory of prediction files, and the MLflow run it came from."""

    path: Path
    source: str | None = None
    run: Any = None


def from_run_id(run_id: str, uri: str, tmp: Path) -> list[Found]:
    import mlflow  # slow to import: mlflow
    from mlflow.exceptions import MlflowException  # slow to import: mlflow


    client = mlflow.MlflowClient(uri)
    try:
        run = client.get_run(run_id)
    except MlflowException:
        raise BlendInputError(f"run {run_id} is not a run of the MLflow store {uri.split('?')[0]}; give its "
                              "tracking.uri, or a run's output directory") from None
    children = tracking.retry(client.search_runs, [run.info.experiment_id],
                               f"tags.mlflow.parentRunId = '{run_id}'", max_results=10_000,
                               order_by=["attributes.start_time ASC"])
    if not children:
        return [_download(client, run, tmp, uri)]
    done = [c for c in children if c.info.status == "FINISHED"]
    skipped = [c.info.run_name for c in children if c.info.status != "FINISHED"]
    if skipped:
        log.warning("run %s: %d child run(s) did not finish and are left out: %s", run_id, len(skipped),
                    ", ".join(skipped))
    out = []
    for c in done:
        try:
            out.append(_download(client, c, tmp, uri))
        except BlendInputError as exc:
            if "logged no predictions" not in str(exc):
                raise
            log.info("run %s: child %s has no predictions (a parent of its own?), left out", run_id,
                     c.info.run_name)
    if not out:
        raise BlendInputError(f"run {run_id} has {len(children)} child run(s) but none finished with predictions")
    return out


def _download(client, run, tmp: Path, uri: str) -> Found:
    from mlflow.exceptions import MlflowException  # slow to import: mlflow

    run_id = run.info.run_id
    d = tmp / run_id
    d.mkdir(parents=True, exist_ok=True)
    names = {a.path for a in client.list_artifacts(run_id, "predictions")}
    if "predictions/oof.parquet" not in names:
        raise BlendInputError(f"run {run_id} ({run.info.run_name}) logged no predictions (predictions/oof.parquet)")
    try:
        client.download_artifacts(run_id, "predictions", str(d))
        tracking.fetch_pipeline(client, run, d / "predictions", uri)
    except (MlflowException, OSError) as exc:
        raise BlendInputError(f"run {run_id}: its predictions cannot be downloaded ({type(exc).__name__})") from None
    return Found(d / "predictions", f"run:{run_id}", run)
