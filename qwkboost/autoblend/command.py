"""``python experiments/run.py experiment=auto``: a time budget from a composed Hydra config."""

from __future__ import annotations

import logging

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from qwkboost import tracking
from qwkboost.autoblend.budget import Budget
from qwkboost.autoblend.candidates import runnable_configs
from qwkboost.autoblend.dask_executor import DaskExecutor, check_local_room
from qwkboost.autoblend.driver import AutoResult, AutoRun
from qwkboost.autoblend.ranking import plan
from qwkboost.autoblend.settings import AutoSettings
from qwkboost.config import check_config, is_ordinal, side_by_side
from qwkboost.data.fingerprint import data_names
from qwkboost.distributed.connection import connect
from qwkboost.exceptions import config_errors
from qwkboost.runs.command import compose_choices
from qwkboost.runs.experiment import load_dataset
from qwkboost.tracking.writing import hydra_entries

__all__ = ["auto_command"]

log = logging.getLogger("qwkboost.autoblend")


def auto_command(cfg: DictConfig) -> AutoResult:
    """What ``experiments/run.py`` does with ``experiment=auto``: check every candidate's config and the data, then
    run the budget in Hydra's output directory (the same ``hydra.run.dir`` again resumes it).

    The clock starts here: composing the candidates' configs and reading the data count in ``auto.time_limit``.

    Raises
    ------
    ConfigError
        For bad settings or data, before any training; in a multirun (the budget is one command).
    """

    hc = HydraConfig.get()
    container = OmegaConf.to_container(cfg, resolve=True)
    with config_errors():
        settings = AutoSettings.from_config(container["auto"])
        budget = Budget(settings.time_limit)
        if hc.mode == RunMode.MULTIRUN:
            raise ValueError("experiment=auto runs its candidates itself, within one time budget; run it without -m")
        # on a cluster the budget places each candidate, whole on one worker or across the workers' rows
        # (qwkboost.autoblend.placement): its own config names no cluster
        container, spec = side_by_side(container, placed=True)
        check_config(container)
        if not is_ordinal(container["data"]):
            raise ValueError(f"experiment=auto blends for QWK and needs ordinal labels; data={container['data']['name']} "
                             "is a regression target (data.ordinal=false)")
        pairs = plan(settings.engines, settings.objectives)
        composed = compose_choices([[f"engine={c.engine}", f"objective={c.objective}"] for c in pairs])
        composed = [side_by_side(rc, placed=True)[0] for rc in composed]
        for rc in composed:
            check_config(rc)
        # an unreachable tracking server stops the command before the data is read
        tracking.check_reachable(tracking.resolve_tracking_uri(container["tracking"]["uri"]))
        ds = load_dataset(container["data"], int(container.get("seed", 0)), container["cv"].get("group"))
        configs = runnable_configs({c.pair: rc for c, rc in zip(pairs, composed)}, ds)
    experiment_id = tracking.setup(cfg.tracking.uri, cfg.tracking.experiment_name)
    args = dict(budget=budget, command=tracking.command_line(), data_names=data_names(container["data"]),
                hydra=hydra_entries(hc))
    run = AutoRun(settings, configs, ds, hc.runtime.output_dir, experiment_id, cfg.run_name or "auto", **args)
    if spec is None:
        return run.run()
    import mlflow  # slow to import: mlflow

    run.check_directory()       # a directory of other data or settings is refused before a cluster starts
    check_local_room(spec, configs, ds)     # and workers too small for any candidate
    with connect(spec) as client:
        executor = DaskExecutor(client, ds, budget, hc.runtime.output_dir, mlflow.get_tracking_uri(),
                                spec.parallel)
        executor.check_room(configs)
        slots = executor.slots
        log.info("auto: candidates run on the Dask cluster at %s, %s", spec.address or "127.0.0.1 (LocalCluster)",
                 f"each fold's rows across its {slots} workers where the engine can (cluster.parallel=rows)"
                 if spec.parallel == "rows" else f"{slots} at once (one per worker)")
        return run.run(executor)
