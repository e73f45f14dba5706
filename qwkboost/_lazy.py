"""Package faces that import a submodule only when one of its names is first used (PEP 562)."""

from __future__ import annotations

import importlib
from typing import Callable


def attach(package: str, names: dict[str, str]) -> tuple[Callable, Callable, list[str]]:
    """``__getattr__``, ``__dir__`` and ``__all__`` for a package that offers ``names``.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    names : dict
        Public name -> the submodule (relative to ``package``, or absolute when it starts with ``qwkboost``)
        that defines it; a name mapped to ``""`` is the submodule of that name itself.
    """
    def __getattr__(name: str):
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        where = names[name]
        if where == "":
            value = importlib.import_module(f"{package}.{name}")
        else:
            module = importlib.import_module(where if where.startswith("qwkboost") else f"{package}.{where}")
            value = getattr(module, name)
        return value

    def __dir__() -> list[str]:
        return sorted(names)

    return __getattr__, __dir__, list(names)
