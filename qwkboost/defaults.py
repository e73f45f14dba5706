"""The project's defaults, defined once in ``conf/`` and read alike by the Hydra commands and the Python API.

* The default engine and objective: the ``engine`` and ``objective`` entries of ``conf/config.yaml``'s defaults
  list (what ``python experiments/run.py`` uses when neither is given).
* Each engine's parameters, rounds and early stopping: ``conf/engine/<engine>.yaml``.
* Each objective's parameters: ``conf/objective/<objective>.yaml``.
* An objective's own adjustment of an engine's defaults, where the shared ones are unfair to it:
  ``conf/objective_engine/<objective>_<engine>.yaml`` (engine parameters, objective parameters or both), applied on
  top of both and below anything the user sets (``conf/config.yaml`` composes it as the optional group
  ``objective_engine``).

``conf/`` is installed as the package ``qwkboost.conf``, so a wheel reads the same files as a clone. Why each
default is what it is: ``docs/guide/defaults.md`` (the leave-one-set-out evidence).
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import yaml

__all__ = ["default_engine", "default_objective", "engine_config", "objective_config", "engine_params",
           "objective_params", "objective_engine_params"]


@functools.lru_cache(maxsize=None)
def _read(*parts: str) -> dict:

    node = resources.files("qwkboost.conf").joinpath(*parts)
    if not node.is_file():
        return {}
    return yaml.safe_load(node.read_text()) or {}


def _default_choice(group: str) -> str:
    for entry in _read("config.yaml").get("defaults", []):
        if isinstance(entry, dict) and group in entry:
            return str(entry[group])
    raise RuntimeError(f"conf/config.yaml names no default {group}")


def default_engine() -> str:
    """The engine a run uses when none is named (``conf/config.yaml``)."""
    return _default_choice("engine")


def default_objective() -> str:
    """The objective a run uses when none is named (``conf/config.yaml``)."""
    return _default_choice("objective")


def engine_config(engine: str) -> dict:
    """``conf/engine/<engine>.yaml``: ``params``, ``num_boost_round``, ``early_stopping_rounds``,
    ``search_space``, ...; an engine without a file (a user's) has none."""
    return dict(_read("engine", f"{engine}.yaml"))


def objective_config(objective: str) -> dict:
    """``conf/objective/<objective>.yaml``: ``name`` and ``params``."""
    return dict(_read("objective", f"{objective}.yaml"))


def _adjustment(objective: str, engine: str, group: str) -> dict:
    node = _read("objective_engine", f"{objective}_{engine}.yaml").get(group) or {}
    return dict(node.get("params") or {})


def objective_engine_params(objective: str, engine: str) -> dict:
    """What ``objective`` changes in ``engine``'s parameters (``conf/objective_engine/<objective>_<engine>.yaml``);
    empty for most pairs and for objectives that are not registered names."""
    return _adjustment(objective, engine, "engine")


def engine_params(engine: str, objective: Any = None) -> dict[str, Any]:
    """The parameters ``engine`` trains with by default: the engine's (``conf/engine/<engine>.yaml``), then the
    adjustments of ``objective`` (a registered name) for that engine. ``None`` values are left out (they mean
    "the objective's own", e.g. XGBoost's ``base_score``)."""
    params = dict(engine_config(engine).get("params") or {})
    if isinstance(objective, str):
        params.update(objective_engine_params(objective, engine))
    return {k: v for k, v in params.items() if v is not None}


def objective_params(objective: str, engine: str | None = None) -> dict[str, Any]:
    """The parameters ``objective`` (a registered name) trains with by default: ``conf/objective/<objective>.yaml``,
    then its adjustments for ``engine`` (extended QWK's Gauss-Newton hessian on XGBoost). ``None`` values stay
    (they mean "from the training labels", e.g. extended QWK's ``a`` and ``b``)."""
    params = dict(objective_config(objective).get("params") or {})
    if engine is not None:
        params.update(_adjustment(objective, engine, "objective"))
    return params
