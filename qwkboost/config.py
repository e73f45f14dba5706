"""Checks on a composed experiment config, run before any data is loaded or model trained.

Every message names the config key, e.g. ``engine.params.learning_rate``, so
the user can fix the command line at once. :func:`config_hash` is the one hash of what in a config changes a
result, which names a budget's candidates and the tuning studies.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from pathlib import Path as _P
from typing import Any, Mapping

from qwkboost.callback import check_min_delta
from qwkboost.cv.inner import EARLY_STOPPING_ON
from qwkboost.data.labels import ClassLabels
from qwkboost.data.sources import SOURCE_CHECKS, SOURCE_KEYS, SOURCES, dataset_path
from qwkboost.distributed.training import ClusterSpec, check_dask_objective, dask_engines, dask_support
from qwkboost.engines import ENGINES, check_engine_params
from qwkboost.evaluation.thresholds import METHODS
from qwkboost.exceptions import ConfigError, EngineUnavailable, config_errors
from qwkboost.objectives import available as available_objectives
from qwkboost.objectives import get as get_objective
from qwkboost.objectives import import_objective
from qwkboost.validation import (
    SEED_MAX,
    check_bool,
    check_int,
    check_mapping,
    check_real,
)

__all__ = ["check_config", "check_tune", "apply_protocol", "ConfigError", "config_errors", "THRESHOLD_METHODS",
           "TUNE_METRICS", "config_hash", "hashed_part", "UNHASHED", "UNHASHED_INSIDE"]


def register_resolvers() -> None:
    """Config interpolations of qwkboost: ``${dataset:era.csv}``, the path of a shipped data set."""
    from omegaconf import OmegaConf  # slow to import: omegaconf


    if not OmegaConf.has_resolver("dataset"):
        OmegaConf.register_new_resolver("dataset", dataset_path)


register_resolvers()


#: the threshold methods (one list, :data:`qwkboost.evaluation.thresholds.METHODS`)
THRESHOLD_METHODS = METHODS
_RATE_KEYS = ("learning_rate", "eta")

#: The settings of each config group; a key outside these (e.g. ``+cv.n_split=3``) is refused, not ignored.
GROUP_KEYS = {
    "cv": ("n_splits", "stratified", "shuffle", "group", "repeats", "early_stopping_on"),
    "thresholds": ("method",),
    "tracking": ("uri", "experiment_name", "log_models", "log_pyfunc", "explain", "explain_rows"),
    "engine": ("name", "num_boost_round", "early_stopping_rounds", "early_stopping_min_delta", "params",
               "search_space"),
    "objective": ("name", "params", "_target_"),
    "table": ("engines", "objectives"),
    "protocol": ("engine", "objective", "training"),
    "cluster": ("name", "address", "n_workers", "threads_per_worker", "memory_limit", "parallel"),
    "tune": ("n_trials", "study_name", "storage", "metric", "direction", "heartbeat_interval", "grace_period",
             "max_retry", "pruner", "sampler", "rerun_repeats"),
}
TOP_KEYS = ("data", "engine", "objective", "cv", "thresholds", "tracking", "seed", "n_jobs", "run_name", "table", "study",
            "tune", "optimized_metric", "cluster", "auto", "protocol", "hydra")


def _positive_int(value: Any, key: str, minimum: int = 1) -> None:
    check_int(value, key, minimum)


def _known_keys(group: Mapping, allowed, where: str) -> None:
    unknown = sorted(set(group) - set(allowed))
    if unknown:
        raise ValueError(f"{where} has no setting(s) {unknown}; its settings are: {', '.join(allowed)}")


def objective_ref(objective) -> str:
    """What names an objective config's class: its ``_target_`` import path, else its registry ``name``."""
    return objective.get("_target_") or objective["name"]


def _check_cluster(cfg: Mapping) -> None:
    """A Dask cluster trains on engines with a Dask interface only (:attr:`qwkboost.engines.base.Engine.dask`),
    and takes early stopping where their workers score the whole validation fold."""
    spec = ClusterSpec.from_config(cfg.get("cluster"))
    if spec is None:
        return
    if spec.parallel == "runs":
        raise ValueError("cluster.parallel=runs runs experiment=auto's candidates or tune.py's trials side by side, one "
                         "per worker; a single run trains its folds' rows across the workers: cluster.parallel=rows "
                         "(or leave it unset)")
    engine = cfg["engine"]
    if engine.get("name") not in dask_engines():
        raise ValueError(f"engine={engine.get('name')} has no Dask interface; with cluster=... use "
                         + " or ".join(f"engine={n}" for n in dask_engines()) + f" (engine={engine.get('name')} "
                         "trains on one machine)")
    if engine.get("early_stopping_rounds") is not None and not dask_support(engine["name"]).allreduce:
        raise ValueError(f"engine={engine['name']} on a cluster: {engine['name']}.dask scores the validation fold on "
                         "each worker's own rows, so it cannot stop early on the fold's metric; set "
                         "engine.early_stopping_rounds=null (and engine.num_boost_round), or use "
                         + " or ".join(f"engine={n}" for n in dask_engines(allreduce=True)))


def side_by_side(cfg: Mapping, placed: bool = False) -> tuple[dict, ClusterSpec | None]:
    """``cfg`` without its ``cluster`` group, and that cluster, when whole runs go side by side on its workers, one
    per worker (``cluster.parallel=runs``, the default of ``experiment=auto`` and ``tune.py``): each such run trains
    on one machine, so its config names no cluster. Else ``cfg`` as given and ``None`` (no cluster, or
    ``cluster.parallel=rows``: one run's folds across the workers). ``placed``: a budget, which places each
    candidate itself (:mod:`qwkboost.autoblend.placement`): the cluster is taken out with either value."""
    spec = ClusterSpec.from_config(cfg.get("cluster"))
    if spec is None or (spec.parallel == "rows" and not placed):
        return dict(cfg), None
    return {k: v for k, v in cfg.items() if k != "cluster"}, spec


def check_config(cfg: Mapping) -> None:
    """Raise :class:`ValueError` for the first invalid value in ``cfg``.

    Every group's keys are checked against its settings (a misspelled key
    added with ``+`` is refused, not ignored), and every value against its
    type and range: engine and objective names, learning rate, round counts,
    CV folds and flags, threshold method, data source and its settings,
    tracking, seed and threads, the table's lists. For ``data=csv`` the path
    must be set and exist; column checks need the file and happen when it is
    read (:func:`qwkboost.data.files.from_file`), still before any training.
    """

    _known_keys(cfg, TOP_KEYS, "the config")
    for group, allowed in GROUP_KEYS.items():
        if cfg.get(group) is not None:
            if not isinstance(cfg[group], Mapping):
                raise ValueError(f"{group} must be a group of settings; got {cfg[group]!r}")
            _known_keys(cfg[group], allowed, group)
    engine = cfg["engine"]
    if engine.get("name") not in ENGINES:
        raise ValueError(f"engine.name={engine.get('name')!r} is unknown; choose one of: {', '.join(ENGINES)} "
                         f"(e.g. engine=lightgbm)")
    params = check_mapping(engine.get("params"), "engine.params")
    for key in _RATE_KEYS:
        if key in params and params[key] is not None:
            lr = params[key]
            if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
                raise ValueError(f"engine.params.{key} must be a number > 0; got {lr!r}")
    base_score = params.get("base_score")
    if base_score is not None and (isinstance(base_score, bool) or not isinstance(base_score, (int, float))):
        raise ValueError(f"engine.params.base_score must be a number or null; got {base_score!r}")
    try:        # what needs no data (names qwkboost sets, settings that write files), before the data is read
        check_engine_params(engine["name"], params, None)
    except EngineUnavailable:
        raise
    except ValueError as exc:
        raise ValueError(f"engine.params ({engine['name']}): {exc}") from None
    _check_cluster(cfg)
    n_splits = check_int(cfg["cv"].get("n_splits"), "cv.n_splits", 2)
    repeats = check_int(cfg["cv"].get("repeats", 1), "cv.repeats", 1)
    check_int(cfg.get("seed", 0), "seed", 0, SEED_MAX - n_splits * repeats)
    if repeats > 1 and cfg["cv"].get("shuffle", True) is False:
        raise ValueError(f"cv.repeats={repeats} with cv.shuffle=false repeats one split {repeats} times; set "
                         "cv.shuffle=true")
    if cfg["cv"].get("early_stopping_on", "valid") not in EARLY_STOPPING_ON:
        raise ValueError(f"cv.early_stopping_on={cfg['cv']['early_stopping_on']!r} is unknown; choose one of: "
                         f"{', '.join(EARLY_STOPPING_ON)}")
    group = cfg["cv"].get("group")
    if group is not None:
        if not isinstance(group, str) or not group.strip():
            raise ValueError(f"cv.group must be a column name or null; got {group!r}")
        if cfg["data"].get("name") not in ("csv", "packaged"):
            raise ValueError(f"cv.group={group!r} names an entity column, but data={cfg['data'].get('name')} is "
                             "generated and has none; cv.group needs a file (data=csv) or a packaged set")
    n_jobs = cfg.get("n_jobs")
    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0):
        raise ValueError(f"n_jobs must be a non-zero integer or null (the cores that are free); got {n_jobs!r}")
    if cfg.get("run_name") is not None and (not isinstance(cfg["run_name"], str) or not cfg["run_name"].strip()):
        raise ValueError(f"run_name must be a non-empty string or null; got {cfg['run_name']!r}")
    _positive_int(engine.get("num_boost_round"), "engine.num_boost_round")
    if engine.get("early_stopping_rounds") is not None:
        _positive_int(engine["early_stopping_rounds"], "engine.early_stopping_rounds")
    if engine.get("early_stopping_min_delta") is not None:
        check_min_delta(engine["early_stopping_min_delta"], "engine.early_stopping_min_delta")
        if engine.get("early_stopping_rounds") is None:
            raise ValueError("engine.early_stopping_min_delta needs engine.early_stopping_rounds (it says what "
                             "counts as an improvement for early stopping); set it, or "
                             "engine.early_stopping_min_delta=null")
    objective = cfg["objective"]
    target = objective.get("_target_")
    if target is not None:
        if not isinstance(target, str) or not target.strip() or target == "???":
            raise ValueError("objective._target_ must be the import path of your Objective class, e.g. "
                             "objective._target_=mypkg.losses.PseudoHuber")
        import_objective(target)             # imports the user's module now, naming it if it fails
    elif objective.get("name") not in available_objectives():
        raise ValueError(f"objective.name={objective.get('name')!r} is unknown; choose one of: "
                         f"{', '.join(available_objectives())}, or objective=custom objective._target_=pkg.module.Class")
    try:
        obj = get_objective(objective_ref(objective), **check_mapping(objective.get("params"), "objective.params"))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"objective.params: {exc}") from None
    if ClusterSpec.from_config(cfg.get("cluster")) is not None:
        check_dask_objective(engine["name"], obj)     # what the engine's workers would get wrong, in one line
    for key in ("stratified", "shuffle"):
        if key in cfg["cv"]:
            check_bool(cfg["cv"][key], f"cv.{key}")
    method = cfg["thresholds"].get("method")
    if method not in THRESHOLD_METHODS:
        raise ValueError(f"thresholds.method={method!r} is unknown; choose one of: {', '.join(THRESHOLD_METHODS)}")
    tracking = cfg.get("tracking") or {}
    if "experiment_name" in tracking:
        name = tracking["experiment_name"]
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"tracking.experiment_name must be a non-empty name; got {name!r}")
    for key in ("log_models", "log_pyfunc", "explain"):
        if key in tracking:
            check_bool(tracking[key], f"tracking.{key}")
    if tracking.get("explain_rows") is not None:
        check_int(tracking["explain_rows"], "tracking.explain_rows", 1)
    if tracking.get("uri") is not None and not isinstance(tracking["uri"], str):
        raise ValueError(f"tracking.uri must be a URI string or null; got {tracking['uri']!r}")
    data = cfg["data"]
    if data.get("name") not in SOURCES:
        raise ValueError(f"data.name={data.get('name')!r} is unknown; choose one of: {', '.join(SOURCES)}")
    _known_keys(data, SOURCE_KEYS[data["name"]], f"data={data['name']}")
    if data["name"] in SOURCE_CHECKS:
        SOURCE_CHECKS[data["name"]](**{k: v for k, v in data.items() if k not in ("name", "_target_")})
    else:

        for key in ("path", "target"):
            if not data.get(key):
                raise ValueError(f"data.{key} is not set; e.g. data=csv data.path=train.csv data.target=label")
            if not isinstance(data[key], str):
                raise ValueError(f"data.{key} must be a string; got {data[key]!r}")
        if not Path(data["path"]).exists():
            raise ValueError(f"data.path={data['path']!r} does not exist")
        if data.get("test_path") and not Path(data["test_path"]).exists():
            raise ValueError(f"data.test_path={data['test_path']!r} does not exist")
        if "ordinal" in data:
            check_bool(data["ordinal"], "data.ordinal")
        if data.get("classes") is not None:

            ClassLabels.of(data["classes"], "data.classes")
            if not data.get("ordinal", True):
                raise ValueError("data.classes orders ordinal labels; it cannot be set with data.ordinal=false")
        if not data.get("test_path"):
            check_real(data.get("test_size", 0.2), "data.test_size", 0.0, 1.0, lo_open=True, hi_open=True)
    if not is_ordinal(data) and get_objective(objective_ref(objective), **(objective.get("params") or {})).ordinal:
        raise ValueError(f"objective={objective['name']} needs ordinal labels, but data={data['name']} is a "
                         "regression target; use objective=squared_error")
    metric = cfg.get("optimized_metric")
    if metric is not None and metric not in TUNE_METRICS:
        hint = " (a test-set figure would leak into the model choice)" if f"{metric}_oof" in TUNE_METRICS else ""
        raise ValueError(f"optimized_metric={metric!r} is not an out-of-fold result{hint}; choose one of: "
                         f"{', '.join(TUNE_METRICS)}")
    if metric is not None and metric != "rmse_oof" and not is_ordinal(data):
        raise ValueError(f"optimized_metric={metric!r} needs ordinal labels; use optimized_metric=rmse_oof")
    table = cfg.get("table")
    if table:
        # table rows are config choices (objective=<file in conf/objective>), not registry names

        choices = sorted(p.stem for p in (_P(__file__).resolve().parents[1] / "conf" / "objective").glob("*.yaml"))
        for key, known in (("engines", list(ENGINES)), ("objectives", choices or available_objectives())):
            items = table.get(key)
            if not isinstance(items, (list, tuple)) or not items:
                raise ValueError(f"table.{key} must be a non-empty list, e.g. table.{key}=[{known[0]},{known[1]}]; "
                                 f"got {items!r}")
            for v in items:
                if v not in known:
                    raise ValueError(f"table.{key} has unknown {key[:-1]} {v!r}; choose from: {', '.join(known)}")


def apply_protocol(cfg: dict, overrides=()) -> dict:
    """``cfg`` with its engine's and objective's parameters, and its rounds and early stopping (``training``), those
    of ``cfg["protocol"]`` (``conf/protocol/``, a fixed protocol such as the DSB2019 article's, whatever the
    defaults say), then each parameter or setting that
    ``overrides`` (the command line's, a study method's) sets put back as set. Without a protocol, or for an engine or
    objective it does not name, ``cfg`` as it is."""
    proto = cfg.get("protocol")
    if not proto:
        return cfg
    keys = [o.split("=", 1)[0].lstrip("+~") for o in overrides]
    for key, value in (proto.get("training") or {}).items():      # rounds and early stopping, on every engine
        if f"engine.{key}" not in keys:
            cfg["engine"][key] = value
    for group in ("engine", "objective"):
        fixed = (proto.get(group) or {}).get(cfg[group].get("name"))
        if fixed is None:
            continue
        mine = {k.split(".", 2)[2].split(".")[0] for k in keys if k.startswith(f"{group}.params.")}
        given = cfg[group].get("params") or {}
        cfg[group]["params"] = {**fixed, **{k: given[k] for k in mine if k in given}}
    return cfg


def optimized_metric(cfg: Mapping) -> str:
    """The out-of-fold result a run returns to a Hydra sweeper (``optimized_metric``).

    Default: ``qwk_thresholds_oof``, or ``rmse_oof`` for a regression target.
    """
    metric = cfg.get("optimized_metric")
    if metric is None:
        return "qwk_thresholds_oof" if is_ordinal(cfg["data"]) else "rmse_oof"
    return metric


def is_ordinal(data: Mapping) -> bool:
    """Whether the configured data has ordinal labels (QWK, thresholds) or a regression target."""
    return data.get("name") in ("quartiles", "latent_classes", "packaged") or (
        data.get("name") == "csv" and bool(data.get("ordinal", True)))


#: Out-of-fold results a study may select on (test-set figures would leak), and their direction.
TUNE_METRICS = {"qwk_thresholds_oof": "maximize", "qwk_round_oof": "maximize", "kappa_tilde_oof": "maximize",
                "rmse_oof": "minimize"}


def check_tune(cfg: Mapping) -> None:
    """Check ``cfg.tune`` against the data before any trial runs.

    Raises
    ------
    ValueError
        For a metric that is not an out-of-fold result, a QWK metric on a
        regression target, or a direction that contradicts the metric.
    """
    t = cfg["tune"]
    check_int(t.get("n_trials"), "tune.n_trials", 1)
    check_int(t.get("heartbeat_interval", 10), "tune.heartbeat_interval", 1)
    check_int(t.get("grace_period", 30), "tune.grace_period", 1)
    check_int(t.get("max_retry", 2), "tune.max_retry", 0)
    if t.get("rerun_repeats") is not None:
        check_int(t["rerun_repeats"], "tune.rerun_repeats", 0)

    for key in ("study_name", "storage"):
        if t.get(key) is not None and (not isinstance(t[key], str) or not t[key].strip()):
            raise ValueError(f"tune.{key} must be a non-empty string or null; got {t[key]!r}")
    metric = t.get("metric")
    if metric not in TUNE_METRICS:
        hint = " (test-set figures would leak into the model choice)" if metric and f"{metric}_oof" in TUNE_METRICS \
            else ""
        raise ValueError(f"tune.metric={metric!r} is not an out-of-fold result{hint}; choose one of: "
                         f"{', '.join(TUNE_METRICS)}")
    data = cfg["data"]
    if metric != "rmse_oof" and not is_ordinal(data):
        raise ValueError(f"tune.metric={metric!r} needs ordinal labels, but data={data['name']} is a regression "
                         "target; use tune.metric=rmse_oof tune.direction=minimize")
    if t.get("direction") != TUNE_METRICS[metric]:
        raise ValueError(f"tune.direction={t.get('direction')!r} contradicts tune.metric={metric!r}; "
                         f"use tune.direction={TUNE_METRICS[metric]}")


#: Config keys that never change a run's result: where it is logged, its threads, the budget's settings, and where it
#: runs (``cluster``: one machine or a Dask cluster's workers), so a run moves between them and keeps its hash.
UNHASHED = ("tracking", "run_name", "n_jobs", "hydra", "auto", "cluster")
#: Keys inside a config group left out too: the search space, which a run draws its parameters from but does not run.
UNHASHED_INSIDE: Mapping[str, tuple[str, ...]] = {"engine": ("search_space",)}


def hashed_part(cfg: Mapping[str, Any], unhashed: tuple[str, ...] = UNHASHED,
                inside: Mapping[str, tuple[str, ...]] = UNHASHED_INSIDE) -> dict:
    """What of ``cfg`` :func:`config_hash` hashes: ``cfg`` without the top-level keys ``unhashed`` and, in each group
    ``inside`` names, without the keys it lists."""
    kept = {k: v for k, v in cfg.items() if k not in unhashed}
    for group, keys in inside.items():
        if isinstance(kept.get(group), Mapping):
            kept[group] = {k: v for k, v in kept[group].items() if k not in keys}
    return kept


def config_hash(cfg: Mapping[str, Any], unhashed: tuple[str, ...] = UNHASHED,
                inside: Mapping[str, tuple[str, ...]] = UNHASHED_INSIDE) -> str:
    """A 12-hex-digit hash of what changes a result: the SHA-256 of :func:`hashed_part` as sorted JSON (a value
    JSON cannot hold as its ``str``).

    Parameters
    ----------
    cfg : mapping
        A resolved config.
    unhashed : tuple of str
        Top-level keys left out (:data:`UNHASHED`: a budget's candidates).
    inside : mapping
        Keys left out inside config groups (:data:`UNHASHED_INSIDE`).

    Examples
    --------
    >>> config_hash({"seed": 0, "tracking": {"uri": "a"}}) == config_hash({"seed": 0, "tracking": {"uri": "b"}})
    True
    """
    text = json.dumps(hashed_part(cfg, unhashed, inside), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]
