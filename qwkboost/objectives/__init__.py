"""Objective registry: ``get``, ``register`` and ``available``.

Register your own objective in a few lines; it then runs on every engine::

    import numpy as np
    from qwkboost.objectives import Objective, register

    @register("pseudo_huber")
    class PseudoHuber(Objective):
        def __init__(self, delta=1.0):
            self.delta = delta

        def grad_hess(self, y, score):
            r = score - y
            s = 1.0 + (r / self.delta) ** 2
            return r / np.sqrt(s), s ** -1.5
"""

from __future__ import annotations

import inspect
from typing import Callable

from qwkboost.objectives.base import Objective
from qwkboost.objectives.extended_qwk import ExtendedQWK
from qwkboost.objectives.squared_error import SquaredError

__all__ = ["Objective", "get", "register", "available", "resolve", "ExtendedQWK", "SquaredError"]

_REGISTRY: dict[str, type[Objective]] = {}


def register(name: str, cls: type[Objective] | None = None, *, overwrite: bool = False) -> Callable:
    """Register an :class:`Objective` subclass under ``name``.

    Usable as ``register("name", Cls)`` or as the decorator ``@register("name")``.

    Raises
    ------
    ValueError
        If ``name`` is taken (pass ``overwrite=True`` to replace it) or ``cls``
        is not an :class:`Objective` subclass.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string; got {name!r}")

    def deco(c: type[Objective]) -> type[Objective]:
        if not (inspect.isclass(c) and issubclass(c, Objective)):
            raise ValueError(f"register({name!r}) needs a subclass of qwkboost.objectives.Objective; got {c!r}")
        if name in _REGISTRY and _REGISTRY[name] is not c and not overwrite:
            raise ValueError(f"objective {name!r} is already registered; pass overwrite=True to replace it")
        c.name = name
        _REGISTRY[name] = c
        return c

    return deco if cls is None else deco(cls)


def available() -> list[str]:
    """Names of the registered objectives, sorted."""
    return sorted(_REGISTRY)


def get(name: str, **params) -> Objective:
    """A new, unfitted objective by registry name.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the choices) or an unknown parameter.
    """
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ValueError(f"unknown objective {name!r}; available objectives: {', '.join(available())}")
    cls = _REGISTRY[name]
    valid = [k for k in inspect.signature(cls.__init__).parameters if k != "self"]
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise ValueError(f"objective {name!r} got unknown parameter(s) {unknown}; valid parameters: {valid or 'none'}")
    return cls(**params)


def resolve(objective: str | Objective, **params) -> Objective:
    """Accept a registry name or an :class:`Objective` instance; return an unfitted objective."""
    if isinstance(objective, Objective):
        if params:
            raise ValueError("objective_params are only accepted with an objective name, not an instance")
        return objective.clone()
    if isinstance(objective, str):
        return get(objective, **params)
    raise ValueError(f"objective must be a registered name or an Objective instance; got {type(objective).__name__}")


register("squared_error", SquaredError)
register("extended_qwk", ExtendedQWK)
