"""Hydra callback: one parent MLflow run per multirun, with every job a child of it.

The parent is created in the main process before the launcher starts any job
(so the SQLite store and the experiment exist before parallel workers touch
them) and its id is written to ``<sweep dir>/mlflow_parent.json`` for the jobs
to read. It ends FINISHED when every child finished, FAILED otherwise, and
FAILED at interpreter exit if the sweep itself crashed.
"""

from __future__ import annotations

import atexit
import json
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from qwkboost import tracking

__all__ = ["MLflowSweepParent", "PARENT_FILE", "read_parent"]

PARENT_FILE = "mlflow_parent.json"


def read_parent(sweep_dir: str | Path) -> dict | None:
    """``{"run_id": ..., "experiment_id": ...}`` written by the callback, or ``None``."""
    p = Path(sweep_dir) / PARENT_FILE
    return json.loads(p.read_text()) if p.exists() else None


class MLflowSweepParent(Callback):
    """Creates and ends the parent run of a Hydra multirun."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.uri: str | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        import mlflow

        if config.get("tracking") is None or config.get("table"):
            return
        experiment_id = tracking.setup(config.tracking.uri, config.tracking.experiment_name)
        self.uri = mlflow.get_tracking_uri()
        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        overrides = list(config.hydra.overrides.task)
        run = mlflow.MlflowClient(self.uri).create_run(
            experiment_id, run_name=f"sweep {sweep_dir.name}",
            tags={"sweep.dir": str(sweep_dir.resolve()), "sweep.overrides": " ".join(overrides),
                  "command": tracking.command_line()})
        self.run_id = run.info.run_id
        (sweep_dir / PARENT_FILE).write_text(json.dumps({"run_id": self.run_id, "experiment_id": experiment_id}))
        atexit.register(self._end, "FAILED")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.run_id is None:
            return
        import mlflow

        client = mlflow.MlflowClient(self.uri)
        children = client.search_runs([client.get_run(self.run_id).info.experiment_id],
                                      f"tags.mlflow.parentRunId = '{self.run_id}'")
        ok = children and all(c.info.status == "FINISHED" for c in children)
        self._end("FINISHED" if ok else "FAILED")

    def _end(self, status: str) -> None:
        if self.run_id is None:
            return
        import mlflow

        client = mlflow.MlflowClient(self.uri)
        if client.get_run(self.run_id).info.status == "RUNNING":
            client.set_terminated(self.run_id, status)
        self.run_id = None
