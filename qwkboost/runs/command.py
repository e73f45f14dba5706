"""The runs' commands: one configuration, a sweep's job or the QWK table (:func:`experiment_command`), and an
Optuna study (:func:`tune_command`, ``experiments/tune.py``).

``experiments/run.py`` reaches :func:`experiment_command` through :func:`qwkboost.commands.run_command`, the
dispatcher above the stages (a study and a time budget are stages above the runs). The scripts are thin
``@hydra.main`` wrappers, so tests and notebooks can run the same code in-process on a config composed with Hydra's
compose API (as lightning-hydra-template tests its ``train(cfg)``).
"""

from __future__ import annotations

import logging
import shlex
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from qwkboost import tracking
from qwkboost._lazy import moved_names
from qwkboost.config import apply_protocol, check_config, optimized_metric, side_by_side
from qwkboost.engines.threads import threads_per_job
from qwkboost.exceptions import config_errors
from qwkboost.runs.experiment import run_experiment
from qwkboost.runs.sweep import read_parent
from qwkboost.runs.table import run_table
from qwkboost.tracking.writing import claim, hydra_entries

log = logging.getLogger("qwkboost")

__all__ = ["experiment_command", "tune_command", "row_configs", "compose_choices", "override_key"]

#: the dispatcher and the study's cells moved up, above the runs
__getattr__ = moved_names(__name__, {"run_command": "qwkboost.commands.run_command",
                                     "study_cells": "qwkboost.study.command.study_cells"})


def override_key(override: str) -> str:
    """The key an override sets: ``+engine.params.max_depth=3`` -> ``engine.params.max_depth``."""
    return override.split("=", 1)[0].lstrip("+~")


def _has(cfg: DictConfig, key: str) -> bool:
    """Whether ``cfg`` has ``key``, also when its value is still missing (``???``)."""
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent, default=None) if parent else cfg
    return isinstance(node, DictConfig) and leaf in node.keys()


def compose_choices(choices, label=lambda choice: " ".join(choice)) -> list[dict]:
    """One resolved config per list of group choices (``["engine=xgboost", "objective=squared_error"]``), each
    composed with the user's other overrides, as the command line composes a single run.

    An override inside the engine or objective group (``objective.params.clip=hold``) applies to the choices
    whose group has that key and is skipped, with a log line, for the others: squared error has no ``clip``,
    LightGBM no ``max_depth``. Needs Hydra's state (:class:`~hydra.core.hydra_config.HydraConfig`).
    """
    hc = HydraConfig.get()
    keep = [o for o in hc.overrides.task if override_key(o) not in ("engine", "objective")]
    grouped = [o for o in keep if override_key(o).startswith(("engine.", "objective."))]
    common = [o for o in keep if o not in grouped]
    out = []
    for choice in choices:
        fits = []
        if grouped:     # a first composition tells which group overrides apply (each costs a few tenths of a second)
            base = hydra.compose(config_name=hc.job.config_name, overrides=[*common, *choice])
            for o in grouped:
                if o.startswith("+") or _has(base, override_key(o)):
                    fits.append(o)
                else:
                    log.info("%s: %s does not apply (no such key), skipped", label(choice), o)
        rc = hydra.compose(config_name=hc.job.config_name, overrides=[*common, *fits, *choice])
        out.append(apply_protocol(OmegaConf.to_container(rc, resolve=True), [*common, *fits]))
    return out


def row_configs(cfg: DictConfig) -> list[dict]:
    """Compose one config per table row (``table.engines`` x ``table.objectives``), keeping the user's other
    overrides (:func:`compose_choices`)."""
    pairs = [(e, o) for e in cfg.table.engines for o in cfg.table.objectives]
    return compose_choices([[f"engine={e}", f"objective={o}"] for e, o in pairs],
                           label=lambda choice: "row " + "/".join(c.split("=", 1)[1] for c in choice))


def experiment_command(cfg: DictConfig) -> float | None:
    """What ``experiments/run.py`` does with a composed config that is neither a study nor a time budget (those
    :func:`qwkboost.commands.run_command` hands to their stages): the QWK table, or one run.

    Needs Hydra's state (:class:`~hydra.core.hydra_config.HydraConfig`, and an initialised config
    search path for the table's per-row configs): inside ``@hydra.main``, or in a test
    after ``hydra.initialize_config_dir`` and ``HydraConfig().set_config`` on a config composed with
    ``return_hydra_config=True``.

    Returns
    -------
    float or None
        A single run's ``optimized_metric`` (an out-of-fold result) for Hydra sweepers; ``None`` for the table.

    Raises
    ------
    ConfigError
        For bad settings or data, before any training; for a study's or a time budget's config (run it with
        :func:`qwkboost.commands.run_command`).
    """
    hc = HydraConfig.get()
    out_dir = hc.runtime.output_dir
    container = apply_protocol(OmegaConf.to_container(cfg, resolve=True), hc.overrides.task)
    if cfg.get("study") or cfg.get("auto"):
        with config_errors():
            raise ValueError(f"experiment={'study' if cfg.get('study') else 'auto'} is a stage above the runs: run it "
                             "with qwkboost.commands.run_command (what experiments/run.py does)")
    # Hydra's folder, or one the user named: never a folder of the user's own files
    key = "hydra.sweep.dir" if hc.mode == RunMode.MULTIRUN else "hydra.run.dir"
    if cfg.table:
        with config_errors():
            check_config(container)
            rows = row_configs(cfg)
            for rc in rows:
                check_config(rc)
        claim(out_dir, "table", key, hydra_entries(hc))
        experiment_id = tracking.setup(cfg.tracking.uri, cfg.tracking.experiment_name)
        run_table(rows, experiment_id, out_dir, name=cfg.run_name or "qwk_table", table_cfg=container["table"])
        return None
    with config_errors():
        check_config(container)
    claim(out_dir, "run", key, hydra_entries(hc))
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


def _run_script() -> str:
    """``experiments/run.py`` as this working directory reaches it (the printed command runs where ``tune.py`` ran):
    beside the running ``tune.py``, else in the project; relative when it lies below the working directory."""
    here = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    script = here.with_name("run.py") if here is not None and here.name == "tune.py" else \
        tracking.PROJECT_ROOT / "experiments" / "run.py"
    try:
        return shlex.quote(str(script.relative_to(Path.cwd())))
    except ValueError:
        return shlex.quote(str(script))


def tune_command(cfg: DictConfig):
    """What ``experiments/tune.py`` does with its composed config: check it, then run or resume the Optuna study.

    Returns
    -------
    optuna.Study
        Finished; the command line that runs its best trial is logged.

    Raises
    ------
    ConfigError
        For bad settings, a bad search space or storage, or an unreachable tracking server, before any trial.
    """
    from qwkboost.runs.tuning import best_overrides, tune  # optuna: loaded for tuning only

    container = apply_protocol(OmegaConf.to_container(cfg, resolve=True), HydraConfig.get().overrides.task)
    with config_errors():
        check_config(side_by_side(container)[0])      # a trial run whole on a worker trains on one machine
        # an unreachable tracking server stops the command before the Optuna study is opened or created
        tracking.check_reachable(tracking.resolve_tracking_uri(container["tracking"]["uri"]))
    study = tune(container)
    if study.best_trials:
        # quoted for the shell, as the user had to type them (data.classes=[not too happy,...])
        # each trial trained whole on one machine (on a cluster, on one worker): so does the command that runs it
        keep = [shlex.quote(o) for o in HydraConfig.get().overrides.task
                if not o.lstrip("+~").startswith(("tune.", "engine.params.", "hydra", "cluster"))]
        log.info("run the best trial with:\n  python %s %s", _run_script(),
                 " ".join([*keep, best_overrides(study.best_trial.params)]))
    return study
