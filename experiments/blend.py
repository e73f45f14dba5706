"""Blend runs into one submission: weights, cut points, and an honest (nested) estimate of its QWK.

    python experiments/blend.py runs=[outputs/2026-11-24/10-00-00,outputs/2026-11-24/10-05-00]
    python experiments/blend.py runs=[multirun/2026-11-24/11-00-00] method=rank_mean
    python experiments/blend.py runs=[<MLflow parent run id>] tracking.uri=sqlite:////abs/mlflow.db

Writes ``submission.csv``, ``predictions.parquet``, ``oof.parquet``, ``blend.json``,
``plots/blend.png`` and, when every member is a qwkboost run, ``pipeline/`` into
its output directory, and logs one MLflow run tagged with its members.
"""

from __future__ import annotations

# first, before the slow imports: Ctrl-C or SIGTERM from here on is one line, never a traceback
from qwkboost.tracking.interrupt import main_guard, report_config_errors, stop_quietly

if __name__ == "__main__":
    stop_quietly("experiments/blend.py")

import logging
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from qwkboost.blending import BLEND_METHODS, blend, log_blend, write_blend
from qwkboost.evaluation.thresholds import METHODS
from qwkboost.exceptions import ConfigError, config_errors
from qwkboost.objectives import check_trusted_modules
from qwkboost.tracking.writing import claim, hydra_entries
from qwkboost.validation import check_command_line

log = logging.getLogger("qwkboost")
CONFIG = Path(__file__).resolve().parents[1] / "conf" / "blend.yaml"

KEYS = ("runs", "method", "thresholds", "check_folds", "id", "target", "classes", "run_name", "tracking",
        "trusted_modules", "hydra")


def check(c: dict) -> None:
    """The blend's settings, before any member is read."""
    unknown = sorted(set(c) - set(KEYS))
    if unknown:
        raise ConfigError(f"unknown setting(s) {unknown}; blend takes {', '.join(k for k in KEYS if k != 'hydra')}")
    runs = c.get("runs")
    if isinstance(runs, str):
        runs = [runs]
    if not isinstance(runs, list) or not runs or not all(isinstance(r, (str, int)) and str(r) for r in runs):
        raise ConfigError(f"runs must list the runs to blend, e.g. runs=[outputs/A,outputs/B]; got {runs!r}")
    if c.get("method") not in BLEND_METHODS:
        raise ConfigError(f"method={c.get('method')!r} is unknown; choose one of: {', '.join(BLEND_METHODS)}")
    if c.get("thresholds") not in METHODS:
        raise ConfigError(f"thresholds={c.get('thresholds')!r} is unknown; choose one of: {', '.join(METHODS)}")
    if not isinstance(c.get("check_folds"), bool):
        raise ConfigError(f"check_folds must be true or false; got {c.get('check_folds')!r}")
    for key in ("id", "target", "run_name"):
        if c.get(key) is not None and (not isinstance(c[key], str) or not c[key]):
            raise ConfigError(f"{key} must be a name or null; got {c[key]!r}")
    if c.get("classes") is not None:
        from qwkboost.data.labels import ClassLabels

        ClassLabels.of(c["classes"], "classes")
    check_trusted_modules(c.get("trusted_modules"))


def _remember_run(out: str, run_id: str) -> None:
    """The blend's MLflow run id in its ``blend.json`` and its pipeline's info, for the commands that read the
    blend's directory later (``experiments/explain.py`` logs there)."""
    import json
    from pathlib import Path

    for path, key in ((Path(out) / "blend.json", None), (Path(out) / "pipeline" / "pipeline.json", "info")):
        if path.is_file():
            payload = json.loads(path.read_text())
            (payload.setdefault(key, {}) if key else payload)["run_id"] = run_id
            path.write_text(json.dumps(payload, indent=1))


@hydra.main(version_base="1.3", config_path="../conf", config_name="blend")
def main(cfg: DictConfig) -> None:
    from qwkboost import tracking

    with report_config_errors():
        if OmegaConf.is_missing(cfg, "runs"):
            raise ConfigError("runs is not set; e.g. python experiments/blend.py runs=[outputs/A,outputs/B]")
        c = OmegaConf.to_container(cfg, resolve=True)
        with config_errors():
            check(c)
            out = HydraConfig.get().runtime.output_dir
            # never a folder of the user's own files
            claim(out, "blend", "hydra.run.dir", hydra_entries(HydraConfig.get()))
            runs = c["runs"] if isinstance(c["runs"], list) else [c["runs"]]
            uri = tracking.resolve_tracking_uri(c["tracking"].get("uri"))
            result = blend([str(r) for r in runs], method=c["method"], thresholds=c["thresholds"],
                           check_folds=c["check_folds"], id=c.get("id"), target=c.get("target"), tracking_uri=uri,
                           classes=c.get("classes"), trusted_modules=c.get("trusted_modules"))
            experiment_id = tracking.setup(uri, c["tracking"]["experiment_name"])
            write_blend(result, out)        # reads the members' pipelines: a refused model file is one line
        print(result.member_table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
        m = result.metrics
        print(f"blend ({result.method}): OOF QWK {m['oof_qwk']:.4f} in-sample, {m['nested_oof_qwk']:.4f} nested "
              f"(the fit flatters it by {m['cut_optimism']:+.4f})"
              + (f"; test QWK {m['test_qwk']:.4f}" if "test_qwk" in m else ""))
        name = c.get("run_name") or "blend"
        run_id = log_blend(result, out, experiment_id, name[:tracking.MAX_RUN_NAME],
                           log_pyfunc=bool(c["tracking"].get("log_pyfunc", True)),
                           params={"check_folds": c["check_folds"]})
        _remember_run(out, run_id)
        log.info("submission: %s/submission.csv", out)
        log.info("MLflow run: %s", tracking.run_link(experiment_id, run_id))


if __name__ == "__main__":
    with main_guard("experiments/blend.py"):
        with config_errors():       # before Hydra: one line for what it would answer with a traceback
            check_command_line(sys.argv[1:], CONFIG)
        main()
