"""One name per quantity in MLflow, for every kind of run: a single run, a sweep's parent and its jobs, a blend,
auto's parent and candidates, a study's parent and its trials.

A metric's name says where it was measured, then what: ``oof_`` on the out-of-fold scores of the training rows,
``nested_oof_`` the same with the cut points (and a blend's weights) fitted without each fold, ``test_`` on the
labelled test rows. The headline columns (:data:`HEADLINE`) are on every run that has them, so that one sorted
column of the MLflow UI ranks runs of every kind; a parent (a sweep, a study) carries its best child's.

A run's own files keep the names its evaluation gives them (``result.json``, ``metrics.json``: ``qwk_thresholds_oof``
...); :func:`run_metrics` is the one place they are translated.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

__all__ = ["HEADLINE", "RUN_METRICS", "MODEL_TAGS", "SERIES", "run_metrics", "metric_name", "member_keys", "model_name"]

#: The columns that rank every run: out-of-fold QWK with cut points, its nested estimate, test QWK where the test
#: rows have labels, and the run's seconds.
HEADLINE = ("oof_qwk", "nested_oof_qwk", "test_qwk", "seconds")

#: The run's tags a logged model carries too, so that the Models tab filters and groups them as the runs table does.
MODEL_TAGS = ("kind", "engine", "objective", "candidate")

#: The prefixes of the series a run logs by step (learning curves by round, fold scores by fold; steps from 1):
#: step 0 holds only final figures.
SERIES = ("train_", "valid_", "fold_")

#: A run's evaluation (:func:`qwkboost.runs.experiment.evaluate`) as MLflow names it; names not listed pass as they
#: are (``cut_optimism``, ``fit_seconds``, ``best_iteration_mean``, ...).
RUN_METRICS = {
    "qwk_thresholds_oof": "oof_qwk",
    "qwk_thresholds_oof_nested": "nested_oof_qwk",
    "qwk_thresholds": "test_qwk",
    "qwk_round_oof": "oof_qwk_rounded",
    "qwk_round": "test_qwk_rounded",
    "kappa_tilde_oof": "oof_kappa_tilde",
    "kappa_tilde": "test_kappa_tilde",
    "rmse_oof": "oof_rmse",
    "rmse": "test_rmse",
    "qwk_thresholds_oof_repeat_mean": "oof_qwk_repeat_mean",
    "qwk_thresholds_oof_repeat_sd": "oof_qwk_repeat_sd",
}


def metric_name(key: str) -> str:
    """The MLflow name of an evaluation's key ``key`` (:data:`RUN_METRICS`)."""
    return RUN_METRICS.get(key, key)


def run_metrics(metrics: Mapping[str, float]) -> dict[str, float]:
    """A run's evaluation ``metrics`` under their MLflow names."""
    return {metric_name(k): v for k, v in metrics.items()}


def member_keys(names: Sequence[str]) -> list[str]:
    """A blend's members as parts of metric names (``weight.<member>``, ``member.<member>.oof_qwk``): each member's
    own name with ``/`` made ``-`` (the UI's charts read ``/`` as a section: ``weight.lightgbm-squared_error``, as
    auto names its candidates) and what MLflow refuses in a metric name (``=``, ``:``, ...) made ``_``, a repeated
    name numbered (``_2``), so that a column means the same member in every blend."""
    out, seen = [], {}
    for name in names:
        key = re.sub(r"[^\w\-. ]+", "_", str(name).replace("/", "-")).strip() or "member"
        seen[key] = seen.get(key, 0) + 1
        out.append(key if seen[key] == 1 else f"{key}_{seen[key]}")
    return out


def model_name(what: str) -> str:
    """The name of a logged model for ``what`` it is (``lightgbm/squared_error`` -> ``lightgbm-squared_error``,
    ``native/squared_error lr0.344`` -> ``native-squared_error lr0_344``): MLflow refuses ``/ : . %`` and quotes in
    a model's name, and a model's name is the last part of its ``runs:/<run id>/<name>`` address."""
    out = re.sub(r"[:.%\"']+", "_", str(what).replace("/", "-")).strip(" _-")
    return out or "model"
