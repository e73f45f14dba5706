"""The engine contract: every engine is an Engine, callbacks see every round and can stop training."""

import subprocess
import sys

import numpy as np
import pytest

import qwkboost as qb
from qwkboost.engines.callback import EarlyStopException, EarlyStopping
from qwkboost.engines import ENGINES, Engine, get_engine

ENGINE_NAMES = list(ENGINES)


@pytest.mark.parametrize("name", ENGINE_NAMES)
def test_every_engine_implements_the_contract(name):
    engine = get_engine(name)
    assert isinstance(engine, Engine) and engine.name == name
    assert engine.thread_params


def test_model_module_imports_alone():
    """engines/model.py and engines/__init__.py no longer import each other."""
    code = "import qwkboost.engines.model as m; print(m.Model.__name__)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() \
        == "Model"


@pytest.mark.parametrize("name", ENGINE_NAMES)
def test_a_user_callback_can_stop_training(name, small_quartiles):
    ds = small_quartiles

    def stop_at_seven(rnd, evals):
        if rnd == 7:
            raise EarlyStopException(best_iteration=4)

    m = qb.train(ds.X_train, ds.y_train, name, "squared_error", num_boost_round=100, callbacks=[stop_at_seven])
    assert m.num_rounds == 8 and m.best_iteration == 5
    np.testing.assert_array_equal(m.predict(ds.X_test), m.predict(ds.X_test, num_iteration=5))


def test_early_stopping_is_strict_and_counts_rounds_since_the_best():
    from qwkboost.engines.callback import CallbackEnv

    es = EarlyStopping(2, "kappa", higher_is_better=True)
    scores = [0.5, 0.6, 0.6, 0.55]          # a tie is not an improvement
    with pytest.raises(EarlyStopException) as stop:
        for i, s in enumerate(scores):
            es(CallbackEnv(i, {"valid": {"kappa": s}}))
    assert stop.value.best_iteration == 1 and es.best_score == 0.6
    es = EarlyStopping(3, "rmse", higher_is_better=False)
    for i, s in enumerate([3.0, 2.0, 2.5, 1.0, 1.5]):
        es(CallbackEnv(i, {"valid": {"rmse": s}}))
    assert es.best_iteration == 3
