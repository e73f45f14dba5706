"""Loading what a run or a blend saved: from its output directory, its ``pipeline`` folder or its MLflow run id.

A run's ``pipeline.json`` names its format: a :class:`~qwkboost.tracking.pipeline.FittedPipeline`
(``qwkboost-pipeline``) or a :class:`~qwkboost.tracking.blend.FittedBlend` (``qwkboost-blend``), whose
members are run pipelines.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from qwkboost import tracking
from qwkboost.tracking.blend import BLEND_FORMAT, FittedBlend
from qwkboost.tracking.files import run_path
from qwkboost.tracking.pipeline import PIPELINE_FILE, FittedPipeline, read_pipeline_json

__all__ = ["load_pipeline", "load_run"]


def load_pipeline(path, trusted_modules=None) -> FittedPipeline | FittedBlend:
    """A pipeline directory: a run's :class:`FittedPipeline`, or a blend's
    :class:`~qwkboost.tracking.blend.FittedBlend` (by the format its ``pipeline.json`` names).
    ``trusted_modules``: as :func:`qwkboost.load_model` takes it."""
    d = Path(path)
    payload = read_pipeline_json(d, f"pipeline {str(d)!r}")
    fmt = payload.get("format") if isinstance(payload, dict) else None
    if fmt == BLEND_FORMAT:
        return FittedBlend.load(d, trusted_modules)
    return FittedPipeline.load(d, trusted_modules)


def load_run(run, tracking_uri: str | None = None, trusted_modules=None) -> FittedPipeline | FittedBlend:
    """The fitted pipeline of a run: from its output directory, or from MLflow by run id.

    Parameters
    ----------
    run : str or path
        A run's output directory (``outputs/<date>/<time>``, which holds ``pipeline/``),
        a ``pipeline`` directory itself, or an MLflow run id. A blend's output
        directory or run gives its :class:`~qwkboost.tracking.blend.FittedBlend`.
    tracking_uri : str, optional
        The MLflow store of a run id; default as in the experiments
        (``$MLFLOW_TRACKING_URI``, else the project's ``mlflow.db``).
    trusted_modules : list of str, optional
        Modules whose objectives may be imported by the import path a model file names; default none: a custom
        objective must be registered (or its module imported) first. See :func:`qwkboost.load_model`.

    Raises
    ------
    ValueError
        If ``run`` is neither a directory with a pipeline nor a run id the store knows,
        the run logged no pipeline, a file of it is malformed (named), or its objective is not registered.
    """
    p = Path(str(run))
    if p.is_dir():
        if os.path.lexists(p / "pipeline") and not os.path.lexists(p / PIPELINE_FILE):   # a run's output directory
            p = run_path(p, "pipeline", "folder", f"run {str(run)!r}", kind="dir")
        return load_pipeline(p, trusted_modules)
    if p.exists():
        raise ValueError(f"run={str(run)!r} is a file; give a run's output directory or an MLflow run id")

    uri = tracking.resolve_tracking_uri(tracking_uri)
    with tempfile.TemporaryDirectory(prefix="qwkboost-run-") as tmp:
        pipe = load_pipeline(tracking.download_pipeline(str(run), uri, tmp), trusted_modules)
    pipe.info.setdefault("run_id", str(run))
    return pipe
