"""A run's pipeline as an MLflow ``pyfunc`` model: ``mlflow models serve`` and the model registry take it.

Every run logs its :class:`~qwkboost.tracking.pipeline.FittedPipeline` as a model named for what it is
(``lightgbm-squared_error``, ``blend``: :func:`~qwkboost.tracking.vocabulary.model_name`), tagged as its run
(``kind``, ``engine``, ``objective``) and linked to the run's final metrics (``oof_qwk``, ``test_qwk``, ...), with a
signature (the feature columns and their types) and an input example (five training rows, categories as text).
The model answers a table of features with two columns: ``class`` (on the labels' own scale; absent for a
regression target) and ``score`` (the fold models' mean). The run prints the model's address::

    MLFLOW_TRACKING_URI=sqlite:///$PWD/mlflow.db \
        mlflow models serve -m models:/<model id> --env-manager local --host 127.0.0.1 --port 5001
    curl -s 127.0.0.1:5001/invocations -H 'Content-Type: application/json' \\
         -d '{"dataframe_split": {"columns": ["f1", "city"], "data": [[0.3, "Paris"]]}}'
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import warnings
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Mapping

import mlflow
import numpy as np
import pandas as pd
from mlflow.entities import LoggedModelOutput, Metric
from mlflow.models import Model, infer_signature

from qwkboost.tracking.outputs import CLASS, SCORE
from qwkboost.tracking.vocabulary import MODEL_TAGS, SERIES, model_name

try:
    from mlflow.pyfunc import PythonModel
except ImportError:  # pragma: no cover - mlflow is a dependency; keep the module importable without it
    PythonModel = object

__all__ = ["PipelineModel", "log_pyfunc", "log_member_models", "example_frame", "MODEL_NAME"]

#: MLflow's description tag, of a run and of a logged model.
NOTE = "mlflow.note.content"

#: The name every run's model had before models were named for what they are (``runs:/<run id>/model``).
MODEL_NAME = "model"


class PipelineModel(PythonModel):
    """MLflow's view of a :class:`~qwkboost.tracking.pipeline.FittedPipeline` (artifact ``pipeline``).

    Loading imports no module a model file names: a custom objective must be registered in the serving process,
    or its module allowed with ``mlflow.pyfunc.load_model(uri, model_config={"trusted_modules": ["mypkg"]})``.
    The model itself is code, though: it carries qwkboost's source (``code_paths``) and MLflow runs its
    ``pyfunc_model.py`` to load it, by MLflow's design, so loading a pyfunc model from an untrusted store runs that
    store's code. Read a run from elsewhere through its ``pipeline`` artifact
    (:func:`~qwkboost.tracking.loading.load_run`), which imports nothing its files name.
    """

    def load_context(self, context):
        from qwkboost.tracking.loading import load_pipeline  # slow to import: scipy

        config = getattr(context, "model_config", None) or {}
        self.pipeline = load_pipeline(context.artifacts["pipeline"], config.get("trusted_modules"))

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        if not isinstance(model_input, pd.DataFrame):
            model_input = pd.DataFrame(model_input)
        return frame(self.pipeline, model_input)


def frame(pipeline, X, name: str = "X"):
    """``class`` and ``score`` of every row of ``X``, as a DataFrame: the class as the user's label (a word
    given in ``data.classes``, or a whole number on the labels' own scale). ``name``: what messages call ``X``."""

    score = pipeline.predict_score(X, name)
    out = {}
    if pipeline.is_ordinal:
        cls = np.asarray(pipeline.classify(score))
        if cls.dtype.kind == "f" and np.all(cls == np.round(cls)):
            cls = cls.astype(np.int64)
        out[CLASS] = cls
    out[SCORE] = score
    return pd.DataFrame(out)


def _requirements() -> list[str]:

    reqs = []
    for pkg in ("numpy", "pandas", "scipy", "scikit-learn", "xgboost", "lightgbm", "catboost", "mlflow"):
        try:
            reqs.append(f"{pkg}=={version(pkg)}")
        except PackageNotFoundError:
            pass
    return reqs


def log_pyfunc(pipeline_dir: str | Path, input_example, trusted_modules=None, pipe=None, *,
               name: str = MODEL_NAME, step: int = 0) -> str:
    """Log the pipeline in ``pipeline_dir`` as the active run's pyfunc model ``name``; return the model's id
    (``models:/<id>`` serves it).

    The model carries the run's tags :data:`~qwkboost.tracking.vocabulary.MODEL_TAGS` and its parameters, and is
    linked to the run's metrics logged at ``step``, as MLflow links them: log the final figures at ``step``
    before the model (a learning curve's rounds are steps 1, 2, ...; a resumed run's figures a later step), never
    a curve's first point. The qwkboost package travels with it (``code_paths``), and the requirements
    are the installed versions (named here: inferring them would load the model
    in a subprocess). ``trusted_modules``: as :func:`qwkboost.load_model` takes it, to read the pipeline here;
    ``pipe``: the pipeline already read (its signature is inferred from it), so it is not read again.
    """
    from qwkboost.tracking.loading import load_pipeline  # slow to import: scipy

    pipe = load_pipeline(pipeline_dir, trusted_modules) if pipe is None else pipe
    example = input_example.copy()
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings(), \
            _env(MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR="false"):
        package = Path(tmp) / "qwkboost"              # the package's sources, without caches
        shutil.copytree(Path(__file__).resolve().parents[1], package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        # classes are whole numbers by design; MLflow's hint about integer columns concerns inputs
        warnings.filterwarnings("ignore", message=".*integer column", category=UserWarning)
        warnings.filterwarnings("ignore", message=".*type hints to the `predict` method", category=UserWarning)
        warnings.filterwarnings("ignore", message="Operation with range is deprecated")
        # the pipeline's answer on the example, here, is the check that it serves: MLflow's own check would read
        # the whole pipeline once more (14 s of a 40 s finish for 351 MB of fold models, InstEval at 300 s)
        signature = infer_signature(example, frame(pipe, example))
        # mlflow.pyfunc.log_model is this call, less the last two keywords: it cannot skip MLflow's check
        run_tags = mlflow.MlflowClient().get_run(mlflow.active_run().info.run_id).data.tags
        info = Model.log(artifact_path=None, name=model_name(name), flavor=_Pyfunc, step=int(step),
                         # the run's tags that say what it is, and its description (the model page shows it)
                         tags={k: run_tags[k] for k in (*MODEL_TAGS, NOTE) if k in run_tags},
                         python_model=str(package / "tracking" / "pyfunc_model.py"),
                         artifacts={"pipeline": str(pipeline_dir)}, signature=signature, input_example=example,
                         code_paths=[str(package)], pip_requirements=_requirements(),
                         # a key MLflow lets load_model(model_config=...) set (none trusted by default)
                         model_config={"trusted_modules": []},
                         flavor_name="pyfunc.ModelFromCode", validate_serving_input=False)
    return info.model_id


def log_member_models(members: Mapping[str, tuple[str, float]], served_by: str | None) -> dict[str, str]:
    """A logged model for each member of a blend, in the member's own run: ``members`` maps a member's name to its
    MLflow run id and its weight; ``served_by``: the id of the blend's model, which holds the member's fold models.

    Each is an MLflow *external* model (``mlflow.create_external_model``): its name, the run's tags
    (:data:`~qwkboost.tracking.vocabulary.MODEL_TAGS`) and parameters, ``blend_weight`` and ``served_by`` tags, and
    the run's final figures (step 0: ``oof_qwk``, ``nested_oof_qwk``, ``test_qwk``, ...) linked, so that the Models
    tab ranks the blend and its members in one table; its files are not copied again (they are in the blend's
    model, and in the member's directory). A member whose run already has a model (a resumed budget) gets its
    tags updated. Returns ``{name: model id}``.
    """
    client = mlflow.MlflowClient()
    out = {}
    for name, (run_id, weight) in members.items():
        run = client.get_run(run_id)
        tags = {**{k: run.data.tags[k] for k in MODEL_TAGS if k in run.data.tags}, "blend_weight": f"{weight:.4f}",
                **({} if served_by is None else {"served_by": f"models:/{served_by}"})}
        known = client.search_logged_models([run.info.experiment_id], filter_string=f"source_run_id = '{run_id}'")
        if known:
            model_id = max(known, key=lambda m: m.creation_timestamp or 0).model_id
            client.set_logged_model_tags(model_id, tags)
            out[name] = model_id
            continue
        model_id = mlflow.create_external_model(name=model_name(name), source_run_id=run_id, tags=tags,
                                                params=dict(run.data.params), model_type="qwkboost",
                                                experiment_id=run.info.experiment_id).model_id
        # the run's final figures, as MLflow links a model's: the same points again, now naming the model
        final = [Metric(m.key, m.value, m.timestamp, m.step, run_id=run_id, model_id=model_id)
                 for key in run.data.metrics if not key.startswith(SERIES)
                 for m in client.get_metric_history(run_id, key) if m.step == 0]
        client.log_batch(run_id, metrics=final)
        client.log_outputs(run_id, [LoggedModelOutput(model_id, step=0)])
        out[name] = model_id
    return out


class _Pyfunc:
    """MLflow's ``pyfunc`` flavor as ``Model.log`` calls it, with its ``validate_serving_input`` keyword taken
    here: ``mlflow.pyfunc.save_model`` refuses a keyword it does not know."""

    __name__ = "mlflow.pyfunc"

    @staticmethod
    def save_model(validate_serving_input: bool = True, **kwargs):
        return mlflow.pyfunc.save_model(**kwargs)


@contextlib.contextmanager
def _env(**values):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def example_frame(schemas) -> pd.DataFrame:
    """Two rows holding every column of ``schemas`` (0 for numbers, the first category for categories):
    an input example for a model whose members read different columns."""
    parts = [s.decode(np.zeros((2, s.n_features))) for s in schemas]
    frame_ = pd.concat(parts, axis=1)
    return frame_.loc[:, ~frame_.columns.duplicated()]
