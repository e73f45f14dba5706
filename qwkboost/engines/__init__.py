"""Engines: one ``train`` for every engine, one ``load_model`` for every saved model.

The stages meet at named objects: an engine is an
:class:`~qwkboost.engines.base.Engine` (:mod:`qwkboost.engines.registry` names
them), it sees the objective through :class:`~qwkboost.engines.engine.EngineObjective`,
the validation rows as an :class:`~qwkboost.engines.base.EvalSet`, its callbacks as
:mod:`qwkboost.callback`, and returns a :class:`~qwkboost.engines.base.FitResult`,
which :func:`~qwkboost.engines.engine.train` turns into a :class:`~qwkboost.engines.model.Model`
(as LightGBM's ``engine.py`` holds its ``train``). What the other stages ask of an engine (its default learning
rate, the rows it cannot train on, its Dask interface: :class:`~qwkboost.engines.base.DaskSupport`) is on its
class, so no stage names an engine.
"""

from qwkboost.engines.base import DaskSupport, Engine, EvalSet, FitResult
from qwkboost.engines.engine import (
           EngineObjective,
           check_engine_params,
           label_offset,
           train,
)
from qwkboost.engines.model import Model, load_model
from qwkboost.engines.registry import ENGINES, get_engine

__all__ = ["train", "load_model", "Model", "ENGINES", "get_engine", "check_engine_params", "label_offset",
           "EngineObjective", "Engine", "EvalSet", "FitResult", "DaskSupport"]
