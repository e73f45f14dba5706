"""One set of defaults, defined once in conf/: the Hydra commands and the Python API read the same ones."""

import numpy as np
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import qwkboost as qb
from qwkboost import defaults
from conftest import CONF_DIR


def _composed(*overrides):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return OmegaConf.to_container(compose("config", list(overrides)), resolve=True)


def test_the_python_defaults_are_the_commands_defaults():
    cfg = _composed()
    assert (defaults.default_engine(), defaults.default_objective()) == (cfg["engine"]["name"],
                                                                       cfg["objective"]["name"])
    for engine in qb.engines.ENGINES:
        for objective in ("squared_error", "extended_qwk", "ordinal_logit", "multiclass"):
            c = _composed(f"engine={engine}", f"objective={objective}")
            want = {k: v for k, v in c["engine"]["params"].items() if v is not None}
            assert defaults.engine_params(engine, objective) == want, (engine, objective)
            assert defaults.objective_params(objective, engine) == c["objective"]["params"], (engine, objective)


def test_train_and_the_classifier_start_from_the_defaults():
    from qwkboost.data import quartiles

    ds = quartiles(n_train=600, n_test=10)
    m = qb.train(ds.X_train, ds.y_train, num_boost_round=5)
    assert (m.engine, m.objective.name) == (defaults.default_engine(), defaults.default_objective())
    same = qb.train(ds.X_train, ds.y_train, engine=m.engine, objective=m.objective.name,
                    params=defaults.engine_params(m.engine, m.objective.name), num_boost_round=5)
    np.testing.assert_array_equal(m.predict(ds.X_train), same.predict(ds.X_train))
    clf = qb.QWKClassifier(num_boost_round=5, n_splits=2).fit(ds.X_train, ds.y_train)
    assert clf.pipeline_.info["engine"] == defaults.default_engine()
    assert clf.pipeline_.info["objective"] == defaults.default_objective()


def test_a_wheel_holds_the_configs(tmp_path):
    """The configs ship as the package qwkboost.conf (read by qwkboost.defaults): what setuptools puts into a
    wheel (its build_py step, run from a copy of pyproject.toml's configuration) holds them."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(CONF_DIR).parent
    subprocess.run([sys.executable, "-c", "from setuptools import setup; setup()", "-q", "build_py", "--build-lib",
                    str(tmp_path / "lib")], cwd=root, check=True,
                   capture_output=True)
    built = tmp_path / "lib" / "qwkboost"
    for f in ("conf/config.yaml", "conf/engine/lightgbm.yaml", "conf/objective/squared_error.yaml", "defaults.py",
              "autoblend/driver.py"):
        assert (built / f).is_file(), f


def test_an_objective_s_own_adjustment_reaches_python_and_the_command_alike():
    """Extended QWK on XGBoost trains with its own depth and hessian (conf/objective_engine/), in a composed run
    and in qb.train; a parameter the user gives wins in both."""
    from qwkboost.data import quartiles

    c = _composed("engine=xgboost", "objective=extended_qwk")
    assert c["engine"]["params"]["max_depth"] == 6 and c["objective"]["params"]["hessian"] == "gauss_newton"
    ds = quartiles(n_train=600, n_test=10)
    m = qb.train(ds.X_train, ds.y_train, engine="xgboost", objective="extended_qwk", num_boost_round=3)
    assert m.objective.hessian == "gauss_newton"
    mine = qb.train(ds.X_train, ds.y_train, engine="xgboost", objective="extended_qwk", num_boost_round=3,
                    objective_params={"hessian": "constant"})
    assert mine.objective.hessian == "constant"
    assert _composed("engine=xgboost", "objective=extended_qwk", "engine.params.max_depth=3")["engine"]["params"][
        "max_depth"] == 3
