"""Tune engine parameters with Optuna; every trial is a child MLflow run.

    python experiments/tune.py engine=lightgbm tune.n_trials=30
    python experiments/tune.py engine=xgboost tune.storage=postgresql://user@host/optuna   # parallel workers

``tune.n_trials`` is the study's total: the same command again resumes a killed
study, or prints the best trial of a finished one with the command that runs it.
"""

from __future__ import annotations

import logging

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from qwkboost import tracking
from qwkboost.config import check_config, config_errors
from qwkboost.tracking.interrupt import main_guard, report_config_errors
from qwkboost.runs.tuning import best_overrides, tune

log = logging.getLogger("qwkboost")


@hydra.main(version_base="1.3", config_path="../conf", config_name="tune")
def main(cfg: DictConfig) -> float:
    with report_config_errors():
        container = OmegaConf.to_container(cfg, resolve=True)
        with config_errors():
            check_config(container)
            # an unreachable tracking server stops the command before the Optuna study is opened or created
            tracking.check_reachable(tracking.resolve_tracking_uri(container["tracking"]["uri"]))
        study = tune(container)
    if not study.best_trials:
        return float("nan")
    keep = [o for o in HydraConfig.get().overrides.task
            if not o.lstrip("+~").startswith(("tune.", "engine.params.", "hydra"))]
    log.info("run the best trial with:\n  python experiments/run.py %s",
             " ".join([*keep, best_overrides(study.best_trial.params)]))
    return study.best_value


if __name__ == "__main__":
    with main_guard("experiments/tune.py"):
        main()
