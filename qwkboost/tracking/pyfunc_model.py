"""The code MLflow loads for a qwkboost pyfunc model ("models from code": nothing is pickled)."""

import mlflow

from qwkboost.tracking.serving import PipelineModel

mlflow.models.set_model(PipelineModel())
