"""What ``experiments/run.py`` does with a composed config: the dispatcher above the stages it starts.

``experiment=auto`` is a time budget (:func:`qwkboost.autoblend.command.auto_command`), ``experiment=study`` a
study (:func:`qwkboost.study.command.study_command`), and anything else the QWK table or one run (a sweep's job
too: :func:`qwkboost.runs.command.experiment_command`). It sits above all three, so that none of them imports
another to reach it. ``experiments/tune.py`` runs :func:`qwkboost.runs.command.tune_command`.

The scripts are thin ``@hydra.main`` wrappers, so tests and notebooks run the same code in-process on a config
composed with Hydra's compose API (``tests/conftest.py``'s ``run_in_process``).
"""

from __future__ import annotations

from omegaconf import DictConfig

from qwkboost.autoblend.command import auto_command
from qwkboost.runs.command import experiment_command, tune_command
from qwkboost.study.command import study_command

__all__ = ["run_command", "tune_command"]


def run_command(cfg: DictConfig) -> float | None:
    """What ``experiments/run.py`` does with its composed config: a time budget, a study, the QWK table, or one run.

    Needs Hydra's state (:class:`~hydra.core.hydra_config.HydraConfig`, and an initialised config search path for
    the per-row, per-cell and per-candidate configs): inside ``@hydra.main``, or in a test after
    ``hydra.initialize_config_dir`` and ``HydraConfig().set_config`` on a config composed with
    ``return_hydra_config=True``.

    Returns
    -------
    float or None
        A single run's ``optimized_metric`` (an out-of-fold result) for Hydra sweepers; ``None`` otherwise.

    Raises
    ------
    ConfigError
        For bad settings or data, before any training.
    """
    if cfg.get("auto"):
        auto_command(cfg)
        return None
    if cfg.get("study"):
        study_command(cfg)
        return None
    return experiment_command(cfg)
