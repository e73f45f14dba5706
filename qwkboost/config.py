"""Checks on a composed experiment config, run before any data is loaded or model trained.

Every message names the config key, e.g. ``engine.params.learning_rate``, so
the user can fix the command line at once.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping

from qwkboost.engines import ENGINES
from qwkboost.objectives import available as available_objectives
from qwkboost.objectives import get as get_objective

__all__ = ["check_config", "check_tune", "ConfigError", "config_errors", "DATA_SOURCES", "THRESHOLD_METHODS",
           "TUNE_METRICS"]


class ConfigError(ValueError):
    """A bad configuration or input found before training: the entry points print its message alone."""


@contextlib.contextmanager
def config_errors() -> Iterator[None]:
    """Turn a :class:`ValueError` raised inside the block into a :class:`ConfigError` (same message)."""
    try:
        yield
    except ConfigError:
        raise
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


DATA_SOURCES = ("quartiles", "chisq", "csv")
THRESHOLD_METHODS = ("round", "exact", "nelder_mead", "distribution")
_RATE_KEYS = ("learning_rate", "eta")


def _positive_int(value: Any, key: str, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{key} must be an integer >= {minimum}; got {value!r}")


def check_config(cfg: Mapping) -> None:
    """Raise :class:`ValueError` for the first invalid value in ``cfg``.

    Covers the engine and objective names, learning rate, round counts, CV
    folds, threshold method and data source, and for ``data=csv`` that the
    path is set and exists. Column checks need the file and happen when it is
    read (:func:`qwkboost.data.from_file`), still before any training.
    """
    engine = cfg["engine"]
    if engine.get("name") not in ENGINES:
        raise ValueError(f"engine.name={engine.get('name')!r} is unknown; choose one of: {', '.join(ENGINES)} "
                         f"(e.g. engine=lightgbm)")
    params = engine.get("params") or {}
    for key in _RATE_KEYS:
        if key in params and params[key] is not None:
            lr = params[key]
            if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
                raise ValueError(f"engine.params.{key} must be a number > 0; got {lr!r}")
    base_score = params.get("base_score")
    if base_score is not None and (isinstance(base_score, bool) or not isinstance(base_score, (int, float))):
        raise ValueError(f"engine.params.base_score must be a number or null; got {base_score!r}")
    seed = cfg.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0; got {seed!r}")
    n_jobs = cfg.get("n_jobs")
    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0):
        raise ValueError(f"n_jobs must be a non-zero integer or null (every core); got {n_jobs!r}")
    _positive_int(engine.get("num_boost_round"), "engine.num_boost_round")
    if engine.get("early_stopping_rounds") is not None:
        _positive_int(engine["early_stopping_rounds"], "engine.early_stopping_rounds")
    objective = cfg["objective"]
    if objective.get("name") not in available_objectives():
        raise ValueError(f"objective.name={objective.get('name')!r} is unknown; choose one of: "
                         f"{', '.join(available_objectives())}")
    try:
        get_objective(objective["name"], **(objective.get("params") or {}))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"objective.params: {exc}") from None
    _positive_int(cfg["cv"].get("n_splits"), "cv.n_splits", minimum=2)
    method = cfg["thresholds"].get("method")
    if method not in THRESHOLD_METHODS:
        raise ValueError(f"thresholds.method={method!r} is unknown; choose one of: {', '.join(THRESHOLD_METHODS)}")
    data = cfg["data"]
    if data.get("name") not in DATA_SOURCES:
        raise ValueError(f"data.name={data.get('name')!r} is unknown; choose one of: {', '.join(DATA_SOURCES)}")
    if not is_ordinal(data) and get_objective(objective["name"], **(objective.get("params") or {})).ordinal:
        raise ValueError(f"objective={objective['name']} needs ordinal labels, but data={data['name']} is a "
                         "regression target; use objective=squared_error")
    if data["name"] == "quartiles":
        for key in ("n_train", "n_test"):
            _positive_int(data.get(key), f"data.{key}", minimum=2)
    if data["name"] == "csv":
        from pathlib import Path

        for key in ("path", "target"):
            if not data.get(key):
                raise ValueError(f"data.{key} is not set; e.g. data=csv data.path=train.csv data.target=label")
        if not Path(data["path"]).exists():
            raise ValueError(f"data.path={data['path']!r} does not exist")
        if data.get("test_path") and not Path(data["test_path"]).exists():
            raise ValueError(f"data.test_path={data['test_path']!r} does not exist")
    table = cfg.get("table")
    if table:
        for e in table.get("engines", []):
            if e not in ENGINES:
                raise ValueError(f"table.engines has unknown engine {e!r}; choose from: {', '.join(ENGINES)}")
        for o in table.get("objectives", []):
            if o not in available_objectives():
                raise ValueError(f"table.objectives has unknown objective {o!r}; choose from: "
                                 f"{', '.join(available_objectives())}")


def is_ordinal(data: Mapping) -> bool:
    """Whether the configured data has ordinal labels (QWK, thresholds) or a regression target."""
    return data.get("name") == "quartiles" or (data.get("name") == "csv" and bool(data.get("ordinal", True)))


#: Out-of-fold results a study may select on (test-set figures would leak), and their direction.
TUNE_METRICS = {"qwk_thresholds_oof": "maximize", "qwk_round_oof": "maximize", "kappa_tilde_oof": "maximize",
                "rmse_oof": "minimize"}


def check_tune(cfg: Mapping) -> None:
    """Check ``cfg.tune`` against the data before any trial runs.

    Raises
    ------
    ValueError
        For a metric that is not an out-of-fold result, a QWK metric on a
        regression target, or a direction that contradicts the metric.
    """
    t = cfg["tune"]
    metric = t.get("metric")
    if metric not in TUNE_METRICS:
        hint = " (test-set figures would leak into the model choice)" if metric and f"{metric}_oof" in TUNE_METRICS \
            else ""
        raise ValueError(f"tune.metric={metric!r} is not an out-of-fold result{hint}; choose one of: "
                         f"{', '.join(TUNE_METRICS)}")
    data = cfg["data"]
    if metric != "rmse_oof" and not is_ordinal(data):
        raise ValueError(f"tune.metric={metric!r} needs ordinal labels, but data={data['name']} is a regression "
                         "target; use tune.metric=rmse_oof tune.direction=minimize")
    if t.get("direction") != TUNE_METRICS[metric]:
        raise ValueError(f"tune.direction={t.get('direction')!r} contradicts tune.metric={metric!r}; "
                         f"use tune.direction={TUNE_METRICS[metric]}")
