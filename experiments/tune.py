"""Tune engine parameters with Optuna; every trial is a child MLflow run.

    python experiments/tune.py engine=lightgbm tune.n_trials=30
    python experiments/tune.py engine=xgboost tune.storage=postgresql://user@host/optuna   # parallel workers

``tune.n_trials`` is the study's total: the same command again resumes a killed
study, or prints the best trial of a finished one with the command that runs it.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from qwkboost.commands import tune_command
from qwkboost.tracking.interrupt import main_guard, report_config_errors


@hydra.main(version_base="1.3", config_path="../conf", config_name="tune")
def main(cfg: DictConfig) -> float:
    with report_config_errors():
        study = tune_command(cfg)
    return study.best_value if study.best_trials else float("nan")


if __name__ == "__main__":
    with main_guard("experiments/tune.py"):
        main()
