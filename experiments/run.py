"""Run one configuration, a sweep (-m), or the QWK table (experiment=qwk_table).

    python experiments/run.py engine=lightgbm objective=squared_error
    python experiments/run.py -m engine=xgboost,lightgbm objective=squared_error,extended_qwk
    python experiments/run.py -m hydra/launcher=joblib engine=xgboost,lightgbm
    python experiments/run.py experiment=qwk_table
    python experiments/run.py experiment=auto auto.time_limit=600 data=csv data.path=train.csv data.target=y

A single run returns ``optimized_metric`` (an out-of-fold result, never a test-set
figure) for Hydra sweepers; the table and a time budget (experiment=auto) return nothing.
"""

from __future__ import annotations

# first, before the slow imports: Ctrl-C or SIGTERM from here on is one line, never a traceback
from qwkboost.tracking.interrupt import main_guard, report_config_errors, stop_quietly

if __name__ == "__main__":
    stop_quietly("experiments/run.py")

import os
import sys
from pathlib import Path

# joblib's launcher workers, killed on Ctrl-C, leave semaphores that its resource tracker (a child
# process, started later) would report at exit; that cleanup is expected, not worth a warning
os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [
    os.environ.get("PYTHONWARNINGS"), "ignore:resource_tracker:UserWarning"]))

import hydra
from omegaconf import DictConfig

from qwkboost.commands import run_command
from qwkboost.exceptions import config_errors
from qwkboost.validation import check_command_line

CONFIG = Path(__file__).resolve().parents[1] / "conf" / "config.yaml"


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    with report_config_errors():
        return run_command(cfg)


if __name__ == "__main__":
    with main_guard("experiments/run.py"):
        with config_errors():       # before Hydra: one line for what it would answer with a traceback
            check_command_line(sys.argv[1:], CONFIG)
        main()
