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

import importlib
import inspect
import sys
import unicodedata
from typing import Callable

from qwkboost.objectives.base import Objective
from qwkboost.objectives.extended_qwk import ExtendedQWK
from qwkboost.objectives.multiclass import Multiclass
from qwkboost.objectives.ordinal_logit import OrdinalLogit
from qwkboost.objectives.soft_qwk import SoftQWK
from qwkboost.objectives.squared_error import SquaredError
from qwkboost.validation import shown

__all__ = ["Objective", "get", "register", "available", "resolve", "import_objective", "saved_objective",
           "check_trusted_modules", "import_path", "ExtendedQWK", "SquaredError", "Multiclass", "OrdinalLogit",
           "SoftQWK"]

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


def import_path(path, ascii_only: bool = False) -> tuple[str, str] | None:
    """``(module, attribute)`` of an import path ``"pkg.module.Class"`` or ``"pkg.module:Class"``, or ``None`` if
    it is not one exactly: dotted Python identifiers (each part ``str.isidentifier()``: no whitespace, no empty part,
    no leading or trailing dot), at most one ``:``, each part equal to its NFKC form (so that ``"ｊｓｏｎ"`` is not
    taken for ``"json"``) and, with ``ascii_only``, ASCII (so that no look-alike letter passes for another). The
    parts are returned as they are written: what is checked is what is imported."""
    if not isinstance(path, str) or path.count(":") > 1:
        return None
    module, _, attr = path.partition(":") if ":" in path else path.rpartition(".")
    ok = all(_dotted(x, ascii_only) for x in (module, attr))
    return (module, attr) if ok else None


def _dotted(text: str, ascii_only: bool) -> bool:
    """Whether ``text`` is Python identifiers joined by single dots, as written (see :func:`import_path`)."""
    return bool(text) and (text.isascii() or not ascii_only) and unicodedata.normalize("NFKC", text) == text \
        and all(part.isidentifier() for part in text.split("."))


def import_objective(path: str) -> type[Objective]:
    """The :class:`Objective` subclass at an import path, ``"pkg.module.Class"`` or ``"pkg.module:Class"``.

    Importing the module runs its ``@register`` decorators; a class that is not
    registered yet is registered under its ``name`` attribute if it sets one,
    else under ``path``. This is how a config names a user's objective
    (``objective=custom objective._target_=mypkg.losses.PseudoHuber``). The path must be exact
    (:func:`import_path`): the module imported is the one written.

    Raises
    ------
    ValueError
        If ``path`` is not an import path, the module cannot be imported (naming it), has no such class, or the
        class is not an Objective.
    """

    parts = import_path(path)
    if parts is None:
        raise ValueError(f"objective {_visible(path)}: give an import path 'package.module.Class' (or "
                         "'package.module:Class') of Python identifiers, without spaces")
    return _imported(path, *parts, hint="; install it or add its directory to PYTHONPATH")


def _imported(path: str, module: str, attr: str, hint: str = "") -> type[Objective]:
    """The class ``attr`` of module ``module`` (parts of ``path`` checked by :func:`import_path`), imported and
    registered; ``hint``: what to do when the module cannot be imported."""
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise ValueError(f"objective {_visible(path)}: module {module!r} cannot be imported ({type(exc).__name__}: "
                         f"{exc}){hint}") from None
    cls = mod
    for part in attr.split("."):
        cls = getattr(cls, part, None)
    if not (inspect.isclass(cls) and issubclass(cls, Objective)):
        raise ValueError(f"objective {_visible(path)}: {attr!r} in module {module!r} is not a subclass of "
                         "qwkboost.objectives.Objective")
    if _REGISTRY.get(cls.name) is not cls:
        own = "name" in cls.__dict__ and cls.name not in _REGISTRY
        register(cls.name if own else path, cls)
    return cls


def _visible(text, width: int = 120) -> str:
    """``text`` quoted as a message shows a name read from a file: every character not printable ASCII escaped
    (a tab as ``\\t``, a Cyrillic ``о`` as ``\\u043e``), cut at ``width`` characters."""
    shown_ = ascii(text) if isinstance(text, str) else shown(text)
    return shown_ if len(shown_) <= width else shown_[:width - 3] + "..."


def check_trusted_modules(trusted_modules, key: str = "trusted_modules") -> tuple[str, ...]:
    """``trusted_modules`` checked: ``None``, a module name, or a list of them (``"mypkg"`` trusts ``mypkg`` and
    every module under it).

    Raises
    ------
    ValueError
        Naming ``key``.
    """
    if trusted_modules is None:
        return ()
    names = [trusted_modules] if isinstance(trusted_modules, str) else trusted_modules
    if not isinstance(names, (list, tuple)) or not all(isinstance(m, str) for m in names):
        raise ValueError(f"{key} must list module names, e.g. {key}=[mypkg.losses]; got {shown(trusted_modules)}")
    bad = next((m for m in names if not _dotted(m, ascii_only=True)), None)
    if bad is not None:     # compared exactly with the module a file names: a space or a look-alike would never match
        raise ValueError(f"{key} must list module names exactly as imported (Python identifiers in ASCII joined by "
                         f"'.', no spaces), e.g. {key}=[mypkg.losses]; got {_visible(bad)}")
    return tuple(names)


def saved_objective(name: str, path, trusted_modules=(), where: str = "the file") -> str:
    """The registry entry of an objective a model file names: its ``name``, or its class's import ``path``.

    A file names its objective's class by import path, but loading it imports no module the file names (a file
    from elsewhere could name any module on the path, one in the working directory included): the objective must
    be registered in this process, or its module already imported (which runs no code again), or the module
    allowed in ``trusted_modules`` (a module, or a package and everything under it).

    Raises
    ------
    ValueError
        Naming the objective, the module and how to register or allow it.
    """
    if name in _REGISTRY:
        return name
    if isinstance(path, str) and path in _REGISTRY:
        return path
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"{where}: its objective {name!r} is not registered in this process, and the file names "
                         "no class for it; register it (qwkboost.objectives.register) before loading")
    parts = import_path(path, ascii_only=True)
    if parts is None:      # checked before anything is imported; what passes is imported as it is written
        raise ValueError(f"{where}: its objective's class {_visible(path)} ('objective.class') is not an import path "
                         "of Python identifiers in ASCII ('package.module:Class', no spaces, no empty part), so "
                         "nothing is imported by it; the file was edited or is not a qwkboost model")
    module, attr = parts
    trusted = any(module == m or module.startswith(m + ".") for m in trusted_modules)
    if module not in sys.modules and not trusted:
        raise ValueError(f"{where}: its objective {_visible(name)} (class {path}) is not registered in "
                         "this process, and qwkboost imports no module a model file names: import the module that "
                         f"defines it (or register it) before loading, or allow it with trusted_modules=[{module}]")
    try:
        cls = _imported(path, module, attr)     # the same strings that were checked: no PYTHONPATH advice for a file
    except ValueError as exc:
        raise ValueError(f"{where}: its objective {_visible(name)} is not registered in this process; {exc}") from None
    return name if _REGISTRY.get(name) is cls else next(k for k, c in _REGISTRY.items() if c is cls)


def get(name: str, **params) -> Objective:
    """A new, unfitted objective by registry name, or by import path (:func:`import_objective`).

    Raises
    ------
    ValueError
        For an unknown name (the message lists the choices) or an unknown parameter.
    """
    if isinstance(name, str) and name not in _REGISTRY and ("." in name or ":" in name):
        cls = import_objective(name)
    elif not isinstance(name, str) or name not in _REGISTRY:
        raise ValueError(f"unknown objective {name!r}; available objectives: {', '.join(available())} (or an import "
                         "path such as mypkg.losses.PseudoHuber)")
    else:
        cls = _REGISTRY[name]
    valid = [k for k in inspect.signature(cls.__init__).parameters if k not in ("self", "args", "kwargs")]
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
register("multiclass", Multiclass)
register("ordinal_logit", OrdinalLogit)
register("soft_qwk", SoftQWK)
