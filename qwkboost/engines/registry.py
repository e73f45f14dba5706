"""The engines qwkboost trains on, by name (imported when first asked for)."""

from __future__ import annotations

import importlib

from qwkboost.engines.base import Engine
from qwkboost.exceptions import EngineUnavailable

__all__ = ["ENGINES", "LIBRARIES", "get_engine"]

#: name -> "module:class" of every :class:`~qwkboost.engines.base.Engine`
ENGINES = {
    "xgboost": "qwkboost.engines.xgboost:XGBoostEngine",
    "lightgbm": "qwkboost.engines.lightgbm:LightGBMEngine",
    "native": "qwkboost.engines.native:NativeEngine",
    "catboost": "qwkboost.engines.catboost:CatBoostEngine",
}
#: name -> the library the engine trains with (``None``: NumPy alone), imported before the engine is first used
LIBRARIES = {"xgboost": "xgboost", "lightgbm": "lightgbm", "native": None, "catboost": "catboost"}
_INSTANCES: dict[str, Engine] = {}


def get_engine(engine: str) -> Engine:
    """The :class:`~qwkboost.engines.base.Engine` named ``engine``.

    Raises
    ------
    ValueError
        For an unknown name; the message lists the choices.
    EngineUnavailable
        When its library cannot be imported (not installed, or broken): one line naming the engine, the library
        and what to do.
    """
    if not isinstance(engine, str) or engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; available engines: {', '.join(ENGINES)}")
    if engine not in _INSTANCES:
        module, cls = ENGINES[engine].split(":")
        library = LIBRARIES.get(engine)
        try:
            if library is not None:
                importlib.import_module(library)    # here, so that a missing one fails before any work
            _INSTANCES[engine] = getattr(importlib.import_module(module), cls)()
        except (ImportError, OSError) as exc:      # OSError: a shared library that does not load
            others = [e for e in ENGINES if e != engine]
            raise EngineUnavailable(engine, (
                f"engine={engine} cannot be used: {library or module} cannot be imported "
                f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else '-'}); install it "
                f"(pip install {library}), or choose another engine= (experiment=auto leaves it out unless "
                f"auto.engines names it: e.g. auto.engines=[{','.join(others)}])" if library else
                f"engine={engine} cannot be used: {module} cannot be imported ({type(exc).__name__}: {exc}); "
                "choose another engine=")) from exc
    return _INSTANCES[engine]
