"""The errors qwkboost raises on purpose, in a leaf module every stage can import without cycles."""

from __future__ import annotations

import contextlib
from typing import Iterator

__all__ = ["ConfigError", "config_errors"]


class ConfigError(ValueError):
    """A bad configuration or input found before training: the entry points print its message alone.

    A :class:`ValueError`, so code that catches bad input the scikit-learn way keeps working.
    """


@contextlib.contextmanager
def config_errors() -> Iterator[None]:
    """Turn a :class:`ValueError` raised inside the block into a :class:`ConfigError` (same message)."""
    try:
        yield
    except ConfigError:
        raise
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
