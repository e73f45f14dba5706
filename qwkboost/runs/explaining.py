"""``experiments/explain.py``: explain a finished run or blend after the fact, and log it to its MLflow run.

The rows explained are a file the user names (``data.path``), or else the run's own training rows, rebuilt from
the run's config (``.hydra/config.yaml`` in its output directory, ``config.yaml`` in its MLflow run; a blend's
first member's); at most ``rows`` of them, drawn with ``seed``. The files are those of
:mod:`qwkboost.explanations.report`, written to the command's output directory and logged under
``explanations/`` in the run's (or the blend's) MLflow run when one is known.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from qwkboost import tracking
from qwkboost.data.files import read_table
from qwkboost.explanations.report import write_report

__all__ = ["explain_run", "run_config"]

log = logging.getLogger(__name__)


def _config_of_source(source: str, uri: str | None) -> dict | None:
    """The resolved config of a run given as a directory or ``run:<id>`` / a run id, or ``None``."""
    from omegaconf import OmegaConf  # slow to import: omegaconf

    import qwkboost.config  # noqa: F401 - registers the ${dataset:...} resolver; deferred: scipy, slow to import

    p = Path(source)
    if p.is_dir():
        for cand in (p / ".hydra" / "config.yaml", p.parent / ".hydra" / "config.yaml"):
            if cand.is_file():
                cfg = OmegaConf.to_container(OmegaConf.load(cand), resolve=True)
                return cfg if isinstance(cfg, dict) and "data" in cfg else None    # a blend's has no data
        return None
    run_id = source.split(":", 1)[1] if source.startswith("run:") else source

    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = tracking.download_run_artifacts(run_id, "config.yaml", tracking.resolve_tracking_uri(uri), tmp)
        except ValueError:
            return None
        cfg = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
        return cfg if isinstance(cfg, dict) and "data" in cfg else None


def run_config(run: str, pipe, uri: str | None) -> dict | None:
    """The config a run (or a blend's first member) was made with, or ``None`` when it cannot be found."""
    cfg = _config_of_source(str(run), uri)
    if cfg is None and getattr(pipe, "members", None) is not None:
        for source in (pipe.info.get("sources") or []):
            cfg = _config_of_source(str(source), uri)
            if cfg is not None:
                break
    return cfg


def explain_run(run: str, out, data_path: str | None = None, id_column: str | None = None, rows: int | None = 2000,
                seed: int = 0, tracking_uri: str | None = None, log_to_run: bool = True,
                trusted_modules=None, pictures: bool = True) -> dict[str, Any]:
    """Explain run (or blend) ``run`` on ``data_path``'s rows or its own training rows; write the report to
    ``out`` and log it to the run's MLflow run. ``trusted_modules``: the modules whose objectives the run's model
    files may import (:func:`qwkboost.load_model`); ``pictures=False``: the tables only.

    Returns
    -------
    dict
        ``explanation``, ``files``, ``run_id`` (the MLflow run logged to, or ``None``) and ``rows`` explained.

    Raises
    ------
    ValueError
        For a run that cannot be loaded, a file that cannot be read, or a run whose data cannot be found when
        no ``data_path`` is given (naming ``data.path``).
    """
    from qwkboost.explanations.explanation import explain, sample_rows  # slow to import: scipy
    from qwkboost.tracking.loading import load_run  # slow to import: scipy

    pipe = load_run(run, tracking_uri, trusted_modules)
    if data_path:
        frame = read_table(data_path, "data.path")
        id_name = id_column or pipe.id_name
        if id_column and id_column not in frame.columns:
            raise ValueError(f"data.id={id_column!r} is not a column of data.path={data_path!r}")
        frame, pos = sample_rows(frame, rows, seed)
        ids = frame[id_name].to_numpy() if id_name and id_name in frame.columns else pos
        id_name = id_name if id_name and id_name in frame.columns else None        # the rows' positions
    else:
        cfg = run_config(run, pipe, tracking_uri)
        if cfg is None:
            raise ValueError(f"run={run!r}: its config is not found (no .hydra/config.yaml, no logged config.yaml); "
                             "give the rows to explain with data.path=<CSV or Parquet>")
        from qwkboost.runs.experiment import load_dataset  # slow to import: matplotlib, scipy

        ds = load_dataset(cfg["data"], int(cfg.get("seed", 0)), cfg.get("cv", {}).get("group"))
        _, pos = sample_rows(np.empty((len(ds.y_train), 0)), rows, seed)
        frame = ds.schema.decode(ds.X_train[pos])
        ids = ds.ids_train[pos] if ds.ids_train is not None else pos
        id_name = ds.id_name
    exp = explain(pipe, frame, max_rows=None, name=f"data.path={data_path!r}" if data_path else "the run's rows")
    # the run's label, entity and weight keep their names here too, as in its prediction files
    files = write_report(exp, out, ids, id_name, pictures, pipe.user_columns)
    run_id = pipe.info.get("run_id") or (str(run) if not Path(str(run)).exists() else None)
    logged = None
    if log_to_run and run_id:
        import mlflow  # slow to import: mlflow


        uri = tracking.resolve_tracking_uri(tracking_uri)
        client = mlflow.MlflowClient(uri)
        try:
            client.get_run(run_id)
        except Exception:  # noqa: BLE001 - a run not in this store: the files stay on disk
            log.warning("run %s is not in the MLflow store %s; the explanations stay in %s", run_id, uri, out)
        else:
            for f in files:
                client.log_artifact(run_id, str(f), "explanations")
            logged = run_id
    return {"explanation": exp, "files": files, "run_id": logged, "rows": len(frame)}
