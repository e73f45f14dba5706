"""Run one configuration, a sweep (-m), or the QWK table (experiment=qwk_table).

    python experiments/run.py engine=lightgbm objective=squared_error
    python experiments/run.py -m engine=xgboost,lightgbm objective=squared_error,extended_qwk
    python experiments/run.py -m hydra/launcher=joblib engine=xgboost,lightgbm
    python experiments/run.py experiment=qwk_table

A single run returns ``optimized_metric`` (an out-of-fold result, never a test-set
figure) for Hydra sweepers; the table returns nothing.
"""

from __future__ import annotations

import logging
import os

# joblib's launcher workers, killed on Ctrl-C, leave semaphores that its resource tracker (a child
# process, started later) would report at exit; that cleanup is expected, not worth a warning
os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [
    os.environ.get("PYTHONWARNINGS"), "ignore:resource_tracker:UserWarning"]))

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from qwkboost import tracking
from qwkboost.config import check_config, config_errors, optimized_metric
from qwkboost.runs.experiment import run_experiment
from qwkboost.tracking.interrupt import main_guard, report_config_errors
from qwkboost.distributed.parallel import threads_per_job
from qwkboost.runs.sweep import read_parent
from qwkboost.runs.table import run_table

log = logging.getLogger("qwkboost")


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _has(cfg: DictConfig, key: str) -> bool:
    """Whether ``cfg`` has ``key``, also when its value is still missing (``???``)."""
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent, default=None) if parent else cfg
    return isinstance(node, DictConfig) and leaf in node.keys()


def row_configs(cfg: DictConfig) -> list[dict]:
    """Compose one config per table row, keeping the user's other overrides.

    An override inside the engine or objective group (``objective.params.clip=hold``)
    applies to the rows whose group has that key and is skipped, with a log line,
    for the others: squared error has no ``clip``, LightGBM no ``max_depth``.
    """
    hc = HydraConfig.get()
    keep = [o for o in hc.overrides.task if _key(o) not in ("engine", "objective")]
    grouped = [o for o in keep if _key(o).startswith(("engine.", "objective."))]
    common = [o for o in keep if o not in grouped]
    rows = []
    for engine in cfg.table.engines:
        for objective in cfg.table.objectives:
            choice = [f"engine={engine}", f"objective={objective}"]
            base = hydra.compose(config_name=hc.job.config_name, overrides=[*common, *choice])
            fits = []
            for o in grouped:
                if o.startswith("+") or _has(base, _key(o)):
                    fits.append(o)
                else:
                    log.info("row %s/%s: %s does not apply (no such key), skipped", engine, objective, o)
            rc = hydra.compose(config_name=hc.job.config_name, overrides=[*common, *fits, *choice])
            rows.append(OmegaConf.to_container(rc, resolve=True))
    return rows


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    with report_config_errors():
        return _main(cfg)


def study_cells(cfg: DictConfig):
    """The study's spec and cells: each (regime, engine, method) composed with the user's other overrides."""
    from qwkboost.study import StudySpec, build_cells

    hc = HydraConfig.get()
    spec = StudySpec.from_config(OmegaConf.to_container(cfg.study, resolve=True))
    keep = [o for o in hc.overrides.task if _key(o) not in ("data", "engine", "objective")
            and not _key(o).startswith("study.")]

    def compose(overrides):
        rc = hydra.compose(config_name=hc.job.config_name, overrides=[*keep, *overrides])
        return OmegaConf.to_container(rc, resolve=True)

    return spec, build_cells(spec, compose)


def _main(cfg: DictConfig) -> float | None:
    hc = HydraConfig.get()
    out_dir = hc.runtime.output_dir
    container = OmegaConf.to_container(cfg, resolve=True)
    if cfg.study:
        from qwkboost.study import check_cells, run_study

        with config_errors():
            check_config(container)
            spec, cells = study_cells(cfg)
            for rc in [c.config for c in cells if c.method.peer is None and not c.method.is_blend
                       and c.seed == spec.first_seed]:
                check_config(rc)
            check_cells(cells)
        experiment_id = tracking.setup(cfg.tracking.uri, cfg.tracking.experiment_name)
        run_study(spec, cells, experiment_id, out_dir, command=tracking.command_line(),
                  run_name=cfg.run_name or "study")
        return None
    if cfg.table:
        with config_errors():
            check_config(container)
            rows = row_configs(cfg)
            for rc in rows:
                check_config(rc)
        experiment_id = tracking.setup(cfg.tracking.uri, cfg.tracking.experiment_name)
        run_table(rows, experiment_id, out_dir, name=cfg.run_name or "qwk_table", table_cfg=container["table"])
        return None
    with config_errors():
        check_config(container)
    parent = read_parent(hc.sweep.dir) if hc.mode == RunMode.MULTIRUN else None
    if parent:   # a multirun job: the store and experiment were set up by the sweep's main process
        tracking.resolve_and_set(cfg.tracking.uri, sweep_run_id=parent["run_id"])
        experiment_id = parent["experiment_id"]
        if container.get("n_jobs") is None and parent.get("parallel", 1) > 1:
            container["n_jobs"] = threads_per_job(parent["parallel"])   # jobs side by side share the cores
    else:
        experiment_id = tracking.setup(cfg.tracking.uri, cfg.tracking.experiment_name)
    name = cfg.run_name or tracking.run_name(cfg.engine.name, cfg.objective.name, list(hc.overrides.task),
                                             parent["varying"] if parent else None)
    row = run_experiment(container, experiment_id, parent_run_id=parent and parent["run_id"],
                         output_dir=out_dir, run_name=name)
    return float(row[optimized_metric(container)])


if __name__ == "__main__":
    with main_guard("experiments/run.py"):
        main()
