"""Hydra callback: one parent MLflow run per multirun, with every job a child of it.

The parent is created in the main process before the launcher starts any job
(so the SQLite store and the experiment exist before parallel workers touch
them) and its id is written to ``<sweep dir>/mlflow_parent.json`` for the jobs
to read, with what the jobs need to know about the sweep: which overrides vary
(they go into each job's run name) and how many jobs run side by side (each
gets its share of the cores).

At the end the parent logs the sweep's summary table and ends FINISHED when
every child finished, FAILED otherwise. If the sweep is interrupted (Ctrl-C,
SIGTERM) or crashes, the parent and every child still RUNNING are ended at
interpreter exit, KILLED or FAILED: launcher workers may be killed before they
can end their own runs.

Before any job runs, every job is checked as a single run is (its settings, its
data and columns): bad input stops the sweep with one line naming the setting.
A tracking server that does not answer when the sweep starts stops it before
any job runs. One that goes away during the sweep stops it with one line (the
job that was logging names the server); at exit the runs it could not end are
named, and they stay RUNNING until the next command that logs to the
experiment marks them KILLED.
"""

from __future__ import annotations

import atexit
import json
import logging
import math
import sys
import time
from pathlib import Path
from typing import Any

import hydra
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from qwkboost import tracking
from qwkboost.exceptions import ConfigError, config_errors
from qwkboost.tracking.interrupt import interrupted

__all__ = ["MLflowSweepParent", "PARENT_FILE", "read_parent", "sweep_shape", "SUMMARY_METRICS", "check_jobs",
           "job_overrides"]

log = logging.getLogger(__name__)

PARENT_FILE = "mlflow_parent.json"
#: Columns of the sweep summary, when the children logged them.
SUMMARY_METRICS = ("oof_qwk", "nested_oof_qwk", "test_qwk", "oof_qwk_rounded", "test_qwk_rounded", "oof_rmse",
                   "test_rmse", "best_iteration_mean", "seconds")


def read_parent(sweep_dir: str | Path) -> dict | None:
    """``{"run_id", "experiment_id", "varying", "n_jobs", "parallel"}`` written by the callback, or ``None``."""
    p = Path(sweep_dir) / PARENT_FILE
    return json.loads(p.read_text()) if p.exists() else None


def sweep_shape(overrides: list[str]) -> tuple[list[str], int]:
    """The keys a sweep varies and its number of jobs, from its command-line overrides."""

    varying, n = [], 1
    for o in OverridesParser.create().parse_overrides(overrides):
        if o.is_sweep_override():
            varying.append(o.key_or_group)
            n *= max(1, len(list(o.sweep_string_iterator())))
    return varying, n


def _parallel_jobs(config: DictConfig, n_jobs: int) -> int:
    """How many jobs the launcher runs at once (1 unless it is the joblib launcher)."""
    launcher = config.hydra.get("launcher") or {}
    if "joblib" not in str(launcher.get("_target_", "")):
        return 1
    from qwkboost.engines.threads import available_cores  # slow to import: scipy

    k = launcher.get("n_jobs", -1)
    k = available_cores() if k is None or k < 0 else int(k)
    return max(1, min(k, n_jobs))


def job_overrides(config: DictConfig) -> list[list[str]] | None:
    """The overrides of every job of a sweep, as Hydra's basic sweeper will launch them; ``None`` for another
    sweeper (whose jobs are not known in advance)."""

    sweeper = str((config.hydra.get("sweeper") or {}).get("_target_", ""))
    if not sweeper.endswith("BasicSweeper"):
        return None
    parsed = OverridesParser.create().parse_overrides(list(config.hydra.overrides.task))
    return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def check_jobs(config: DictConfig) -> None:
    """Check every job of a sweep as a single run is checked before it trains: its settings, its data file and
    its columns, the engine's parameters against the data. The data of jobs that share it is read once.

    Raises
    ------
    ConfigError
        The first job's problem, naming the setting (and the job, when the sweep varies it).
    """

    from qwkboost.config import check_config  # slow to import: scipy
    from qwkboost.runs.experiment import check_against_data, load_dataset  # slow to import: matplotlib, scipy

    jobs = job_overrides(config)
    if not jobs:
        return

    varying, _ = sweep_shape(list(config.hydra.overrides.task))
    loaded: dict[str, Any] = {}
    for i, job in enumerate(jobs):
        shown = " ".join(o for o in job if o.split("=", 1)[0].lstrip("+~") in varying)
        try:
            composed = hydra.compose(config_name=config.hydra.job.config_name, overrides=job)
        except HydraException:
            return          # an override that does not compose: Hydra says so itself when the job starts
        try:
            with config_errors():
                cfg = OmegaConf.to_container(composed, resolve=True)
                check_config(cfg)
                if cfg.get("table") or cfg.get("study"):
                    continue        # their rows are checked when they start, before any training
                seed, group = int(cfg.get("seed", 0)), cfg["cv"].get("group")
                key = json.dumps([cfg["data"], seed, group], sort_keys=True, default=str)
                if key not in loaded:
                    loaded[key] = load_dataset(cfg["data"], seed, group)
                check_against_data(cfg, loaded[key])
        except ConfigError as exc:
            # the same line as a single run; the job named when earlier ones passed (the problem is its own)
            raise ConfigError(f"{exc} (job {i}: {shown})" if i and shown else str(exc)) from None


class MLflowSweepParent(Callback):
    """Creates and ends the parent run of a Hydra multirun."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.uri: str | None = None
        self.experiment_name: str | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        import mlflow  # slow to import: mlflow

        try:
            check_jobs(config)
        except ConfigError as exc:
            # one line for the whole sweep, before any job starts (Hydra would print a traceback per job)
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)
        if config.get("tracking") is None or config.get("table"):
            return
        try:
            experiment_id = tracking.setup(config.tracking.uri, config.tracking.experiment_name)
        except ConfigError as exc:
            # Hydra would only warn about an error raised here and launch every job regardless
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)
        self.uri = mlflow.get_tracking_uri()
        self.experiment_name = config.tracking.experiment_name
        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        overrides = list(config.hydra.overrides.task)
        varying, n_jobs = sweep_shape(overrides)
        parallel = _parallel_jobs(config, n_jobs)
        swept = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") in varying]
        name = f"sweep {' '.join(swept) or sweep_dir.name}"
        run = mlflow.MlflowClient(self.uri).create_run(
            experiment_id,
            run_name=tracking.fit_run_name(name),
            tags={"kind": "sweep", "sweep.dir": str(sweep_dir.resolve()), "sweep.overrides": " ".join(overrides),
                  "sweep.varying": " ".join(varying), "command": tracking.command_line(),
                  tracking.PROCESS_TAG: tracking.process_tag()})
        self.run_id = run.info.run_id
        (sweep_dir / PARENT_FILE).write_text(json.dumps({
            "run_id": self.run_id, "experiment_id": experiment_id, "varying": varying, "n_jobs": n_jobs,
            "parallel": parallel}))
        atexit.register(self._abort)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.run_id is None:
            return
        import mlflow  # slow to import: mlflow

        if self._server_gone():
            sys.exit(1)     # the jobs are logged, but the sweep's parent could not be ended
        client = mlflow.MlflowClient(self.uri)
        children = self._children(client)
        ok = children and all(c.info.status == "FINISHED" for c in children)
        try:
            self._log_summary(client, children, Path(config.hydra.sweep.dir))
        finally:
            self._end("FINISHED" if ok else "FAILED")

    def _children(self, client) -> list:
        exp = client.get_run(self.run_id).info.experiment_id
        return client.search_runs([exp], f"tags.mlflow.parentRunId = '{self.run_id}'", max_results=10_000)

    def _log_summary(self, client, children: list, sweep_dir: Path) -> None:
        """``sweep_summary.csv`` and ``.md``: one row per job, its status and its headline metrics."""
        import pandas as pd  # slow to import: pandas

        rows = []
        for c in sorted(children, key=lambda r: r.info.start_time or 0):
            row = {"run": c.info.run_name, "status": c.info.status}
            row.update({m: c.data.metrics[m] for m in SUMMARY_METRICS if m in c.data.metrics})
            rows.append(row)
        if not rows:
            return
        df = pd.DataFrame(rows)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        csv, md = sweep_dir / "sweep_summary.csv", sweep_dir / "sweep_summary.md"
        df.to_csv(csv, index=False)
        md.write_text(_markdown(df))
        for f in (csv, md):
            client.log_artifact(self.run_id, str(f))
        # the best job's headline, under the same names: one sorted column ranks the parent beside its jobs
        if "oof_qwk" in df and df["oof_qwk"].notna().any():
            top = df.loc[df["oof_qwk"].idxmax()]
            for m in ("oof_qwk", "nested_oof_qwk", "test_qwk"):
                if m in df and top[m] == top[m]:
                    client.log_metric(self.run_id, m, float(top[m]))
            client.set_tag(self.run_id, "sweep.best_run", str(top["run"]))
        start = client.get_run(self.run_id).info.start_time
        if start:
            client.log_metric(self.run_id, "seconds", time.time() - start / 1000)
        client.set_tag(self.run_id, "mlflow.note.content", f"{len(df)} jobs\n\n{md.read_text()}")
        log.info("sweep summary (%s):\n%s", csv, md.read_text())
        exp = client.get_run(self.run_id).info.experiment_id
        log.info("MLflow run (the sweep's parent): %s", tracking.run_link(exp, self.run_id))

    def _abort(self) -> None:
        """At exit without ``on_multirun_end``: end the parent and any child left RUNNING."""
        if self.run_id is None or self._server_gone():
            return
        import mlflow  # slow to import: mlflow

        status = "KILLED" if interrupted() else "FAILED"
        try:
            client = mlflow.MlflowClient(self.uri)
            for c in self._children(client):
                if c.info.status == "RUNNING":
                    client.set_terminated(c.info.run_id, status)
        finally:
            self._end(status)

    def _server_gone(self) -> bool:
        """Whether the tracking server went away; if so, say which runs it keeps RUNNING, and forget the parent.

        Every call to a dead server would wait on MLflow's HTTP retries, so none is made.
        """
        reason = tracking.unreachable(self.uri)
        if reason is None:
            return False
        print(f"error: the MLflow tracking server at tracking.uri={self.uri} went away ({reason}) during the sweep; "
              f"the sweep's parent run {self.run_id} and any of its child runs that had not ended stay RUNNING "
              f"there: once the server is back, the next qwkboost command logging to experiment "
              f"{self.experiment_name!r} on this host marks them KILLED (finished runs are kept)",
              file=sys.stderr)
        self.run_id = None
        return True

    def _end(self, status: str) -> None:
        if self.run_id is None:
            return
        import mlflow  # slow to import: mlflow

        client = mlflow.MlflowClient(self.uri)
        if client.get_run(self.run_id).info.status == "RUNNING":
            client.set_terminated(self.run_id, status)
        self.run_id = None


def _markdown(df) -> str:
    def fmt(col, v):
        if isinstance(v, float):
            return "" if math.isnan(v) else f"{v:.1f}" if col in ("best_iteration_mean", "fit_seconds") else f"{v:.4f}"
        return str(v)

    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(fmt(c, v) for c, v in zip(df.columns, r)) + " |" for r in df.itertuples(index=False)]
    return "\n".join(lines) + "\n"
