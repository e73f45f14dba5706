"""The engines qwkboost trains on, by name (imported when first asked for)."""

from __future__ import annotations

import importlib

from qwkboost.engines.base import Engine

__all__ = ["ENGINES", "get_engine"]

#: name -> "module:class" of every :class:`~qwkboost.engines.base.Engine`
ENGINES = {
    "xgboost": "qwkboost.engines.xgboost:XGBoostEngine",
    "lightgbm": "qwkboost.engines.lightgbm:LightGBMEngine",
    "native": "qwkboost.engines.native:NativeEngine",
    "catboost": "qwkboost.engines.catboost:CatBoostEngine",
}
_INSTANCES: dict[str, Engine] = {}


def get_engine(engine: str) -> Engine:
    """The :class:`~qwkboost.engines.base.Engine` named ``engine``.

    Raises
    ------
    ValueError
        For an unknown name; the message lists the choices.
    """
    if not isinstance(engine, str) or engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; available engines: {', '.join(ENGINES)}")
    if engine not in _INSTANCES:
        module, cls = ENGINES[engine].split(":")
        _INSTANCES[engine] = getattr(importlib.import_module(module), cls)()
    return _INSTANCES[engine]
