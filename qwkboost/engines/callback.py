"""The callback protocol, as :mod:`qwkboost.callback` defines it (below the engines, since the native booster
runs it too); this module gives its names where they were first imported from."""

from qwkboost.callback import (
    CallbackEnv,
    EarlyStopException,
    EarlyStopping,
    RoundFunction,
    check_min_delta,
    run_callbacks,
)

__all__ = ["CallbackEnv", "EarlyStopException", "EarlyStopping", "RoundFunction", "run_callbacks", "check_min_delta"]
