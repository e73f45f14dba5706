"""Tune engine parameters with Optuna; every trial is a child MLflow run.

    python experiments/tune.py engine=lightgbm tune.n_trials=30
    python experiments/tune.py engine=xgboost tune.storage=postgresql://user@host/optuna   # parallel workers

Run it again with the same study name to resume a killed or finished study.
"""

from __future__ import annotations

import os

# OpenMP threads that sleep instead of spinning: XGBoost and LightGBM stay fast when parallel
# launcher jobs share the cores (measured 38x for LightGBM under load). Set before they are imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import hydra
from omegaconf import DictConfig, OmegaConf

from qwkboost.config import check_config
from qwkboost.tuning import tune


@hydra.main(version_base="1.3", config_path="../conf", config_name="tune")
def main(cfg: DictConfig) -> float:
    container = OmegaConf.to_container(cfg, resolve=True)
    check_config(container)
    study = tune(container)
    return study.best_value


if __name__ == "__main__":
    main()
