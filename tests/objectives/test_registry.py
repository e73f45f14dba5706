import numpy as np
import pytest

from qwkboost import objectives
from qwkboost.objectives import ExtendedQWK, Objective, available, get, register


def test_available_lists_shipped():
    assert {"squared_error", "extended_qwk"} <= set(available())


def test_get_builds_with_params():
    obj = get("extended_qwk", hessian="gauss_newton", clip="hold")
    assert isinstance(obj, ExtendedQWK)
    assert obj.get_params() == {"a": None, "b": None, "hessian": "gauss_newton", "clip": "hold"}


def test_unknown_objective_lists_choices():
    with pytest.raises(ValueError, match=r"unknown objective 'qwk2'.*extended_qwk.*squared_error"):
        get("qwk2")


def test_unknown_parameter_lists_valid():
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['alpha'\].*hessian"):
        get("extended_qwk", alpha=1)


def test_register_refuses_duplicates_and_non_objectives():
    with pytest.raises(ValueError, match="already registered"):
        register("squared_error", ExtendedQWK)
    with pytest.raises(ValueError, match="subclass of qwkboost.objectives.Objective"):
        register("bad", dict)


def test_state_round_trip():
    y = np.array([0, 1, 2, 3, 3.0])
    obj = get("extended_qwk").fit(y)
    fresh = get("extended_qwk").set_state(obj.get_state())
    s = np.array([0.1, 1.2, 2.5, 3.3, 2.0])
    np.testing.assert_array_equal(fresh.grad_hess(y, s)[0], obj.grad_hess(y, s)[0])


def test_user_objective_in_a_few_lines():
    @register("test_pseudo_huber", overwrite=True)
    class PseudoHuber(Objective):
        def __init__(self, delta=1.0):
            self.delta = delta

        def grad_hess(self, y, score):
            r = score - y
            s = 1.0 + (r / self.delta) ** 2
            return r / np.sqrt(s), s ** -1.5

    try:
        obj = get("test_pseudo_huber", delta=2.0).fit(np.arange(5.0))
        assert obj.init_score_ == 2.0
        assert obj.name == "test_pseudo_huber"
    finally:
        objectives._REGISTRY.pop("test_pseudo_huber")
