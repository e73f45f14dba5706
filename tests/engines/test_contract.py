"""The engine contract: every engine is an Engine, callbacks see every round and can stop training."""

import subprocess
import sys

import numpy as np
import pytest

import qwkboost as qb
from qwkboost.callback import EarlyStopException, EarlyStopping
from qwkboost.distributed.training import dask_engines
from qwkboost.engines import ENGINES, Engine, get_engine
from qwkboost.engines.base import DaskSupport
from qwkboost.engines.catboost_losses import declares_rows
from qwkboost.engines.engine import learning_rate
from qwkboost.objectives import ExtendedQWK, Multiclass, Objective, SquaredError

ENGINE_NAMES = list(ENGINES)


@pytest.mark.parametrize("name", ENGINE_NAMES)
def test_every_engine_implements_the_contract(name):
    engine = get_engine(name)
    assert isinstance(engine, Engine) and engine.name == name
    assert engine.thread_params
    assert engine.default_learning_rate > 0 and isinstance(engine.checks_gradients, bool)
    assert engine.dask is None or (isinstance(engine.dask, DaskSupport) and callable(engine.dask.train))


def test_what_the_stages_ask_is_on_the_engines():
    """The facts the stages once looked up by engine name: the library's own learning rate (the default of
    early stopping's ``min_delta``), who checks the objective's outputs, and the Dask interfaces."""
    assert {n: get_engine(n).default_learning_rate for n in ENGINE_NAMES} == \
        {"xgboost": 0.3, "lightgbm": 0.1, "native": 0.3, "catboost": 0.03}
    assert learning_rate("lightgbm", {}) == 0.1 and learning_rate("catboost", {"eta": 0.2}) == 0.2
    assert [n for n in ENGINE_NAMES if get_engine(n).checks_gradients] == ["native"]
    assert [n for n in ENGINE_NAMES if get_engine(n).scores_while_training] == ["lightgbm"]
    assert all(callable(getattr(get_engine(n), "predict_span", None)) == (n == "lightgbm") for n in ENGINE_NAMES)
    assert dask_engines() == ("xgboost", "lightgbm") and dask_engines(allreduce=True) == ("xgboost",)
    assert get_engine("lightgbm").dask.max_outputs == 1 and get_engine("xgboost").dask.max_outputs is None


def test_an_engine_that_checks_nothing_itself_gets_finite_outputs_checked():
    class Inf(SquaredError):
        def grad_hess(self, y, score, sample_weight=None):
            return np.full_like(score, np.inf), np.ones_like(score)

    X = np.random.default_rng(0).normal(size=(200, 3))
    y = np.arange(200) % 4
    for name in ("xgboost", "native"):
        with pytest.raises(ValueError, match="non-finite gradients"):
            qb.train(X, y, name, Inf(), num_boost_round=3)


def test_each_engine_checks_the_rows_it_cannot_train_on():
    X = np.random.RandomState(0).rand(30, 5)
    with pytest.raises(ValueError, match="lightgbm can split no feature of these 30 training rows"):
        get_engine("lightgbm").check_data(X, {})
    for name in ENGINE_NAMES:
        get_engine(name).check_data(np.random.default_rng(1).normal(size=(500, 3)), {})


@pytest.mark.parametrize("objective, needs", [(SquaredError, "rows"), (ExtendedQWK, "sums"), (Multiclass, None)])
def test_every_engine_reads_gradient_needs_alike(objective, needs):
    """One reading of ``gradient_needs``: what the objective's classes say, ``None`` when none says; CatBoost
    computes a block alone only for "rows", a cluster all-reduces only "sums"."""
    class Sub(objective):
        pass

    assert Sub.gradient_needs == needs and Objective.gradient_needs is None
    assert declares_rows(Sub()) == (needs == "rows")


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
    from qwkboost.callback import CallbackEnv

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
