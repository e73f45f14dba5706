"""Package faces that import a submodule only when one of its names is first used (PEP 562)."""

from __future__ import annotations

import importlib
from typing import Callable

__all__ = ["attach", "moved_error", "moved_names"]


def moved_error(old: str, new: str) -> ImportError:
    """The error for a name that moved: ``old`` (``"qwkboost.evaluation.cross_validate"``) is now ``new``."""
    return ImportError(f"{old} moved to {new}: import it from there (docs/development.md shows where each stage "
                       "lives)")


def moved_names(module: str, moved: dict[str, str]) -> Callable:
    """A module's ``__getattr__`` for names it no longer offers: ``moved`` maps each to where it went."""
    def __getattr__(name: str):
        if name in moved:
            raise moved_error(f"{module}.{name}", moved[name])
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


def attach(package: str, names: dict[str, str], moved: dict[str, str] | None = None
           ) -> tuple[Callable, Callable, list[str]]:
    """``__getattr__``, ``__dir__`` and ``__all__`` for a package that offers ``names``.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    names : dict
        Public name -> the submodule (relative to ``package``, or absolute when it starts with ``qwkboost``)
        that defines it; a name mapped to ``""`` is the submodule of that name itself.
    moved : dict, optional
        Names the package no longer offers -> where they went: asking for one raises an ``ImportError`` (also
        under ``from package import name``) that says so.
    """
    moved = moved or {}

    def __getattr__(name: str):
        if name in moved:
            raise moved_error(f"{package}.{name}", moved[name])
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
