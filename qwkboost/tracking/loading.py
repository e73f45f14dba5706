"""Loading what a run or a blend saved: from its output directory, its ``pipeline`` folder or its MLflow run id.

A run's ``pipeline.json`` names its format: a :class:`~qwkboost.tracking.pipeline.FittedPipeline`
(``qwkboost-pipeline``) or a :class:`~qwkboost.blending.FittedBlend` (``qwkboost-blend``), whose
members are run pipelines.
"""

from __future__ import annotations

import json
from pathlib import Path

from qwkboost.blending.pipeline import BLEND_FORMAT, FittedBlend
from qwkboost.tracking.pipeline import PIPELINE_FILE, FittedPipeline

__all__ = ["load_pipeline", "load_run"]


def load_pipeline(path) -> FittedPipeline | FittedBlend:
    """A pipeline directory: a run's :class:`FittedPipeline`, or a blend's
    :class:`~qwkboost.blending.FittedBlend` (by the format its ``pipeline.json`` names)."""
    d = Path(path)
    try:
        fmt = json.loads((d / PIPELINE_FILE).read_text()).get("format")
    except (OSError, ValueError, AttributeError):
        fmt = None
    if fmt == BLEND_FORMAT:
        return FittedBlend.load(d)
    return FittedPipeline.load(d)


def load_run(run, tracking_uri: str | None = None) -> FittedPipeline | FittedBlend:
    """The fitted pipeline of a run: from its output directory, or from MLflow by run id.

    Parameters
    ----------
    run : str or path
        A run's output directory (``outputs/<date>/<time>``, which holds ``pipeline/``),
        a ``pipeline`` directory itself, or an MLflow run id. A blend's output
        directory or run gives its :class:`~qwkboost.blending.FittedBlend`.
    tracking_uri : str, optional
        The MLflow store of a run id; default as in the experiments
        (``$MLFLOW_TRACKING_URI``, else the project's ``mlflow.db``).

    Raises
    ------
    ValueError
        If ``run`` is neither a directory with a pipeline nor a run id the store knows,
        or the run logged no pipeline.
    """
    p = Path(str(run))
    if p.is_dir():
        return load_pipeline(p / "pipeline" if (p / "pipeline" / PIPELINE_FILE).is_file() else p)
    if p.exists():
        raise ValueError(f"run={str(run)!r} is a file; give a run's output directory or an MLflow run id")
    import tempfile

    from qwkboost import tracking

    uri = tracking.resolve_tracking_uri(tracking_uri)
    with tempfile.TemporaryDirectory(prefix="qwkboost-run-") as tmp:
        pipe = load_pipeline(tracking.download_run_artifacts(str(run), "pipeline", uri, tmp))
    pipe.info.setdefault("run_id", str(run))
    return pipe
