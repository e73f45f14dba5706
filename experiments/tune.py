"""Tune engine parameters with Optuna; every trial is a child MLflow run.

    python experiments/tune.py engine=lightgbm tune.n_trials=30
    python experiments/tune.py engine=xgboost tune.storage=postgresql://user@host/optuna   # parallel workers

``tune.n_trials`` is the study's total: the same command again resumes a killed
study, or prints the best trial of a finished one with the command that runs it.
"""

from __future__ import annotations

# first, before the slow imports: Ctrl-C or SIGTERM from here on is one line, never a traceback
from qwkboost.tracking.interrupt import main_guard, report_config_errors, stop_quietly

if __name__ == "__main__":
    stop_quietly("experiments/tune.py")

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from qwkboost.commands import tune_command
from qwkboost.exceptions import config_errors
from qwkboost.validation import check_command_line

CONFIG = Path(__file__).resolve().parents[1] / "conf" / "tune.yaml"


@hydra.main(version_base="1.3", config_path="../conf", config_name="tune")
def main(cfg: DictConfig) -> float:
    with report_config_errors():
        study = tune_command(cfg)
    return study.best_value if study.best_trials else float("nan")


if __name__ == "__main__":
    with main_guard("experiments/tune.py"):
        with config_errors():       # before Hydra: one line for what it would answer with a traceback
            check_command_line(sys.argv[1:], CONFIG)
        main()
