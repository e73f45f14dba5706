"""Optuna search over engine parameters, stored in an RDB so a killed study resumes.

Each invocation is one parent MLflow run; each trial a child run. The study
lives in ``sqlite:///<project>/optuna.db`` by default (any SQLAlchemy URL for
parallel workers). Trials send heartbeats: a trial of a killed process is
failed once its heartbeat is older than ``grace_period`` and re-run with the
same parameters, and its MLflow run is marked KILLED.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Mapping

from qwkboost import tracking
from qwkboost.config import check_tune
from qwkboost.experiment import load_dataset, run_experiment

__all__ = ["default_storage", "suggest", "tune"]

log = logging.getLogger(__name__)

SPACE_TYPES = ("float", "int", "categorical")


def default_storage() -> str:
    return f"sqlite:///{tracking.PROJECT_ROOT / 'optuna.db'}"


def suggest(trial, space: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Draw one value per entry of ``engine.search_space``.

    Entries look like ``{type: float, low: 0.01, high: 0.3, log: true}``,
    ``{type: int, low: 3, high: 8}`` or ``{type: categorical, choices: [...]}``.

    Raises
    ------
    ValueError
        For an unknown type or missing bounds, naming the parameter.
    """
    out = {}
    for name, spec in space.items():
        kind = spec.get("type")
        if kind not in SPACE_TYPES:
            raise ValueError(f"engine.search_space.{name}.type={kind!r}; choose one of {SPACE_TYPES}")
        if kind == "categorical":
            out[name] = trial.suggest_categorical(name, list(spec["choices"]))
            continue
        if "low" not in spec or "high" not in spec:
            raise ValueError(f"engine.search_space.{name} needs low and high")
        if kind == "int":
            out[name] = trial.suggest_int(name, int(spec["low"]), int(spec["high"]), log=bool(spec.get("log", False)))
        else:
            out[name] = trial.suggest_float(name, float(spec["low"]), float(spec["high"]),
                                            log=bool(spec.get("log", False)))
    return out


def _storage(url: str, t: Mapping[str, Any]):
    import optuna
    from optuna.storages import RDBStorage, RetryFailedTrialCallback

    kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    return RDBStorage(url, heartbeat_interval=int(t.get("heartbeat_interval", 10)),
                      grace_period=int(t.get("grace_period", 30)),
                      failed_trial_callback=RetryFailedTrialCallback(max_retry=int(t.get("max_retry", 2))),
                      engine_kwargs=kwargs)


def _kill_orphan_runs(study, client) -> None:
    """Mark the MLflow runs of trials a killed process left behind as KILLED."""
    import optuna

    for tr in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.FAIL,)):
        run_id = tr.user_attrs.get("mlflow_run_id")
        if run_id and client.get_run(run_id).info.status == "RUNNING":
            client.set_terminated(run_id, "KILLED")


def tune(cfg: Mapping[str, Any]) -> Any:
    """Run (or resume) the study described by ``cfg.tune``; return the Optuna study.

    The study stops when it holds ``tune.n_trials`` completed trials, counting
    those of earlier, interrupted invocations.
    """
    import mlflow
    import optuna

    t = cfg["tune"]
    space = cfg["engine"].get("search_space") or {}
    if not space:
        raise ValueError(f"engine.search_space is empty for engine {cfg['engine']['name']!r}; nothing to tune")
    n_trials = t["n_trials"]
    if isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials < 1:
        raise ValueError(f"tune.n_trials must be a positive integer; got {n_trials!r}")
    check_tune(cfg)
    url = t.get("storage") or default_storage()
    study = optuna.create_study(study_name=t["study_name"], storage=_storage(url, t), direction=t["direction"],
                                sampler=optuna.samplers.TPESampler(seed=int(cfg.get("seed", 0))),
                                load_if_exists=True)
    experiment_id = tracking.setup(cfg["tracking"]["uri"], cfg["tracking"]["experiment_name"])
    client = mlflow.MlflowClient()
    optuna.storages.fail_stale_trials(study)
    _kill_orphan_runs(study, client)
    done = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))
    if done >= n_trials:
        log.info("study %r already has %d completed trials (tune.n_trials=%d); nothing to do",
                 t["study_name"], done, n_trials)
        return study
    ds = load_dataset(cfg["data"], int(cfg.get("seed", 0)))
    metric = t["metric"]

    def objective(trial) -> float:
        params = suggest(trial, space)
        trial_cfg = copy.deepcopy(dict(cfg))
        trial_cfg["engine"] = {**trial_cfg["engine"], "params": {**trial_cfg["engine"]["params"], **params}}
        trial_cfg.pop("tune", None)
        row = run_experiment(trial_cfg, experiment_id, parent_run_id=parent_id, run_name=f"trial {trial.number}",
                             dataset=ds, on_start=lambda run_id: trial.set_user_attr("mlflow_run_id", run_id))
        return row[metric]

    with tracking.run(experiment_id, f"tune {t['study_name']}",
                      tags={"optuna.study": t["study_name"], "optuna.storage": url.split("?")[0]}) as parent:
        parent_id = parent.info.run_id
        tracking.log_params({"tune": dict(t), "engine": {"name": cfg["engine"]["name"]},
                             "objective": dict(cfg["objective"]), "data": dict(cfg["data"])})
        study.optimize(objective, n_trials=n_trials - done, gc_after_trial=True)
        best = study.best_trial
        tracking.log_metrics({f"best_{metric}": best.value, "n_complete": float(len(
            study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))))})
        tracking.log_dict({"best_params": best.params, "best_value": best.value, "best_trial": best.number},
                          "best.json")
        tracking.set_tags({f"version.{k}": v for k, v in tracking.library_versions().items()})
    log.info("best %s=%.4f with %s (trial %d)", metric, best.value, best.params, best.number)
    return study
