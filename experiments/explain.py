"""Explain a finished run or blend: SHAP values, importances and the ordinal view, logged to its MLflow run.

    python experiments/explain.py run=outputs/2026-11-23/10-00-00
    python experiments/explain.py run=outputs/blend/2026-11-24/11-30-00 data.path=train.csv
    python experiments/explain.py run=<MLflow run id> rows=5000

Writes ``importance.csv``, ``importance.png``, ``summary.png``, ``shap_values.parquet`` and, for a score cut
into classes, ``rows.png`` and ``dependence.png`` into its output directory, and logs them under
``explanations/`` in the run's MLflow run.
"""

from __future__ import annotations

# first, before the slow imports: Ctrl-C or SIGTERM from here on is one line, never a traceback
from qwkboost.tracking.interrupt import main_guard, report_config_errors, stop_quietly

if __name__ == "__main__":
    stop_quietly("experiments/explain.py")

import logging
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from qwkboost.exceptions import ConfigError, config_errors
from qwkboost.validation import check_command_line

log = logging.getLogger("qwkboost")
CONFIG = Path(__file__).resolve().parents[1] / "conf" / "explain.yaml"

KEYS = ("run", "data", "rows", "seed", "log", "tracking", "trusted_modules", "hydra")


@hydra.main(version_base="1.3", config_path="../conf", config_name="explain")
def main(cfg: DictConfig) -> None:
    from qwkboost.objectives import check_trusted_modules
    from qwkboost.runs.explaining import explain_run

    with report_config_errors():
        c = OmegaConf.to_container(cfg, resolve=False)
        with config_errors():
            unknown = sorted(set(c) - set(KEYS)) + sorted(f"data.{k}" for k in set(c.get("data") or {}) - {"path", "id"})
            if unknown:
                raise ConfigError(f"unknown setting(s) {unknown}; explain takes run, data.path, data.id, rows, seed, "
                                  "log, tracking.uri and trusted_modules")
            if OmegaConf.is_missing(cfg, "run") or cfg.run in (None, ""):
                raise ConfigError("run is not set; give run=<a run's or a blend's output directory, or its MLflow run "
                                  "id>")
            rows = cfg.rows
            if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 1):
                raise ConfigError(f"rows must be a whole number >= 1 or null; got {rows!r}")
            out = HydraConfig.get().runtime.output_dir
            got = explain_run(str(cfg.run), out, cfg.data.path, cfg.data.id, rows, int(cfg.seed), cfg.tracking.uri,
                              bool(cfg.log), check_trusted_modules(c.get("trusted_modules")))
    imp = got["explanation"].importance()
    print(imp.head(15).to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    log.info("explained %d rows of %s: %s", got["rows"], cfg.run, out)
    if got["run_id"]:
        log.info("logged under explanations/ of MLflow run %s", got["run_id"])


if __name__ == "__main__":
    with main_guard("experiments/explain.py"):
        with config_errors():       # before Hydra: one line for what it would answer with a traceback
            check_command_line(sys.argv[1:], CONFIG)
        main()
