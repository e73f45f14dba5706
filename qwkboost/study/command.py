"""``python experiments/run.py experiment=study``: a study from a composed Hydra config (reached through
:func:`qwkboost.commands.run_command`)."""

from __future__ import annotations

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from qwkboost import tracking
from qwkboost.config import apply_protocol, check_config
from qwkboost.exceptions import config_errors
from qwkboost.runs.command import override_key
from qwkboost.study.cells import Cell, build_cells, check_cells
from qwkboost.study.runner import run_study
from qwkboost.study.spec import StudySpec
from qwkboost.tracking.writing import claim, hydra_entries

__all__ = ["study_command", "study_cells"]


def study_cells(cfg: DictConfig) -> tuple[StudySpec, list[Cell]]:
    """The study's spec and cells: each (regime, engine, method) composed with the user's other overrides."""
    hc = HydraConfig.get()
    spec = StudySpec.from_config(OmegaConf.to_container(cfg.study, resolve=True))
    keep = [o for o in hc.overrides.task if override_key(o) not in ("data", "engine", "objective")
            and not override_key(o).startswith("study.")]

    def compose(overrides):
        rc = hydra.compose(config_name=hc.job.config_name, overrides=[*keep, *overrides])
        return apply_protocol(OmegaConf.to_container(rc, resolve=True), [*keep, *overrides])

    return spec, build_cells(spec, compose)


def study_command(cfg: DictConfig) -> None:
    """What ``experiments/run.py`` does with ``experiment=study``: check the config and every cell's, then run the
    study (finished cells are reused) in Hydra's output directory.

    Needs Hydra's state (:class:`~hydra.core.hydra_config.HydraConfig`, and an initialised config search path for
    the cells' configs), as :func:`qwkboost.runs.command.experiment_command` does.

    Raises
    ------
    ConfigError
        For bad settings, before any training.
    """
    hc = HydraConfig.get()
    container = apply_protocol(OmegaConf.to_container(cfg, resolve=True), hc.overrides.task)
    with config_errors():
        check_config(container)
        spec, cells = study_cells(cfg)
        for rc in [c.config for c in cells if c.method.peer is None and not c.method.is_blend
                   and c.seed == spec.first_seed]:
            check_config(rc)
        check_cells(cells)
    # its report's folder: Hydra's, or one the user named, never a folder of the user's own files
    claim(hc.runtime.output_dir, "study", "hydra.run.dir", hydra_entries(hc))
    experiment_id = tracking.setup(cfg.tracking.uri, cfg.tracking.experiment_name)
    run_study(spec, cells, experiment_id, hc.runtime.output_dir, command=tracking.command_line(),
              run_name=cfg.run_name or "study")
