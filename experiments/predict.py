"""Predict new rows with a finished run's pipeline: fold models averaged, cut points, classes.

    python experiments/predict.py run=outputs/2026-11-23/10-00-00 data.path=test.csv
    python experiments/predict.py run=<MLflow run id> data.path=test.parquet out=preds/

Writes ``submission.csv`` (id, class on the labels' own scale) and
``predictions.parquet`` (id, score, class) and prints where.
"""

from __future__ import annotations

# first, before the slow imports: Ctrl-C or SIGTERM from here on is one line, never a traceback
from qwkboost.tracking.interrupt import main_guard, report_config_errors, stop_quietly

if __name__ == "__main__":
    stop_quietly("experiments/predict.py")

import logging
import sys
from pathlib import Path

import hydra
import numpy as np
import pandas as pd
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from qwkboost.data.files import read_table
from qwkboost.exceptions import ConfigError, config_errors
from qwkboost.objectives import check_trusted_modules
from qwkboost.tracking.loading import load_run
from qwkboost.tracking.outputs import CLASS, SCORE, OutputColumns, write_predictions
from qwkboost.tracking.serving import frame
from qwkboost.validation import check_command_line, check_writable_dir

log = logging.getLogger("qwkboost")
CONFIG = Path(__file__).resolve().parents[1] / "conf" / "predict.yaml"


def predict_file(run: str, path: str, out: str | Path, id_column: str | None = None,
                 tracking_uri: str | None = None, trusted_modules=None) -> Path:
    """Score the table at ``path`` with run ``run``; write the two files into ``out`` and return the CSV's path.

    The files follow the column rule of :mod:`qwkboost.tracking.outputs`: the id column keeps its name, and
    ``score`` and ``class`` give way to it. ``trusted_modules``: the modules whose objectives the run's model
    files may import (:func:`qwkboost.load_model`)."""
    pipe = load_run(run, tracking_uri, trusted_modules)
    df = read_table(path, "data.path")
    id_name = id_column or pipe.id_name
    if id_column and id_column not in df.columns:
        raise ValueError(f"data.id={id_column!r} is not a column of data.path={path!r}")
    has_id = bool(id_name) and id_name in df.columns
    ids = df[id_name].to_numpy() if has_id else np.arange(len(df))
    res = frame(pipe, df, f"data.path={path!r}")
    # the run's own columns keep their names here too (its label, entity and weight), as in its own files
    columns = OutputColumns.resolve({"id": id_name if has_id else None}, list(res.columns),
                                    getattr(pipe, "labels", None), reserved=pipe.user_columns)
    table = res.rename(columns=columns.own)
    table.insert(0, columns["id"], ids)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_predictions(table, out / "predictions.parquet", columns)
    target = pipe.target or "label"
    sub = pd.DataFrame({columns["id"]: ids, target: res[CLASS] if CLASS in res else res[SCORE]})
    sub.to_csv(out / "submission.csv", index=False)
    return out / "submission.csv"


@hydra.main(version_base="1.3", config_path="../conf", config_name="predict")
def main(cfg: DictConfig) -> None:
    with report_config_errors():
        c = OmegaConf.to_container(cfg, resolve=False)
        with config_errors():
            unknown = sorted(set(c) - {"run", "data", "out", "tracking", "trusted_modules", "hydra"}) + \
                sorted(f"data.{k}" for k in set(c.get("data") or {}) - {"path", "id"})
            if unknown:
                raise ConfigError(f"unknown setting(s) {unknown}; predict takes run, data.path, data.id, out, "
                                  "tracking.uri and trusted_modules")
            for key, hint in (("run", "a run's output directory or its MLflow run id"),
                              ("data.path", "the CSV or Parquet file to predict")):
                if OmegaConf.is_missing(cfg, key) or OmegaConf.select(cfg, key) in (None, ""):
                    raise ConfigError(f"{key} is not set; give {key}=<{hint}>")
            out = cfg.out or HydraConfig.get().runtime.output_dir
            if cfg.out:
                check_writable_dir(cfg.out, "out")
            written = predict_file(str(cfg.run), str(cfg.data.path), out, cfg.data.id, cfg.tracking.uri,
                                   check_trusted_modules(c.get("trusted_modules")))
    log.info("predictions of %s: %s (and predictions.parquet beside it)", cfg.run, written)


if __name__ == "__main__":
    with main_guard("experiments/predict.py"):
        with config_errors():       # before Hydra: one line for what it would answer with a traceback
            check_command_line(sys.argv[1:], CONFIG)
        main()
