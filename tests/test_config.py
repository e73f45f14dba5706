"""Configs composed with Hydra's compose API, and bad values rejected before any training."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from qwkboost.config import check_config
from qwkboost.runs.experiment import load_dataset

CONF = str(Path(__file__).resolve().parents[1] / "conf")


def cfg_for(*overrides, name="config"):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return OmegaConf.to_container(compose(config_name=name, overrides=list(overrides)), resolve=True)


def table_rows(conf: str, *overrides) -> list[dict]:
    """``experiments/run.py experiment=qwk_table <overrides>``'s rows, composed from the configs in ``conf`` as the
    command composes them (:func:`qwkboost.runs.command.row_configs`: each row with the command's overrides, then
    :func:`qwkboost.config.apply_protocol`)."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from qwkboost.runs.command import row_configs

    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["experiment=qwk_table", *overrides], return_hydra_config=True)
        with open_dict(cfg):
            cfg.hydra.job.config_name = "config"
        HydraConfig.instance().set_config(cfg)
        try:
            return row_configs(cfg)
        finally:
            HydraConfig.instance().cfg = None


#: Engine and objective defaults unlike the article's, as conf/engine/, conf/objective/ and conf/objective_engine/
#: may come to hold: the table's rows must not take them.
OTHER_DEFAULTS = {
    "engine/xgboost.yaml": {"learning_rate": 0.03, "max_depth": 8, "min_child_weight": 4.0},
    "engine/lightgbm.yaml": {"learning_rate": 0.03, "num_leaves": 63, "min_child_samples": 40},
    "engine/native.yaml": {"learning_rate": 0.03, "max_depth": 8, "reg_lambda": 5.0},
    "objective/extended_qwk.yaml": {"hessian": "gauss_newton", "clip": "hold"},
}


@pytest.mark.parametrize("defaults", ["shipped", "changed"])
def test_the_qwk_table_runs_the_articles_protocol(defaults, tmp_path):
    """The defaults are not the article's protocol; experiment=qwk_table runs under protocol=article, so each row
    carries the DSB2019 article's parameters whatever the engines' and objectives' defaults say: learning rate 0.1,
    XGBoost (and the native engine) at depth 5, LightGBM's other parameters its own, extended QWK with the constant
    hessian and scores clipped to the label range, on the article's data with 5-fold CV and exact cut points."""
    import shutil

    import yaml

    conf = Path(CONF)
    if defaults == "changed":
        conf = tmp_path / "conf"
        shutil.copytree(CONF, conf)
        for name, params in OTHER_DEFAULTS.items():
            node = yaml.safe_load((conf / name).read_text())
            node["params"].update(params)
            (conf / name).write_text(yaml.safe_dump(node))
        (conf / "objective_engine" / "extended_qwk_xgboost.yaml").write_text(
            "# @package engine\nparams: {max_depth: 3, subsample: 0.5}\n")
        with initialize_config_dir(config_dir=str(conf), version_base="1.3"):     # a run outside the table takes them
            plain = OmegaConf.to_container(compose("config", ["engine=xgboost", "objective=extended_qwk"]),
                                           resolve=True)
        assert plain["engine"]["params"]["max_depth"] == 3 and plain["engine"]["params"]["learning_rate"] == 0.03
        assert plain["objective"]["params"]["hessian"] == "gauss_newton"
    rows = {(r["engine"]["name"], r["objective"]["name"]): r for r in table_rows(conf)}
    assert list(rows) == [(e, o) for e in ("xgboost", "lightgbm", "native") for o in ("squared_error", "extended_qwk")]
    for (engine, objective), row in rows.items():
        params = row["engine"]["params"]
        assert params["learning_rate"] == 0.1, (engine, objective)
        if engine == "lightgbm":
            assert set(params) <= {"learning_rate", "deterministic", "force_row_wise"}, params
        else:
            assert params["max_depth"] == 5, (engine, objective)
            assert not {"min_child_weight", "reg_lambda", "subsample"} & set(params), params
        assert row["objective"]["params"] == ({"a": None, "b": None, "hessian": "constant", "clip": "range"}
                                              if objective == "extended_qwk" else {}), (engine, objective)
        assert row["data"] == {"_target_": "qwkboost.data.quartiles", "name": "quartiles", "n_train": 100000,
                               "n_test": 100000, "seed": 0, "test_seed": 1, "n_features": 10, "n_visible": 5,
                               "n_classes": 4}
        assert row["cv"]["n_splits"] == 5 and row["thresholds"]["method"] == "exact"
        check_config(row)
    # what the command line sets still applies, to the rows that have it
    (row,) = table_rows(conf, "table.engines=[xgboost]", "table.objectives=[extended_qwk]", "engine=xgboost",
                        "objective=extended_qwk", "objective.params.clip=hold", "engine.params.max_depth=4")
    assert row["objective"]["params"] == {"a": None, "b": None, "hessian": "constant", "clip": "hold"}
    assert row["engine"]["params"]["max_depth"] == 4 and row["engine"]["params"]["learning_rate"] == 0.1


@pytest.mark.parametrize("engine", ["xgboost", "lightgbm", "native"])
@pytest.mark.parametrize("objective", ["squared_error", "extended_qwk"])
def test_every_group_option_composes(engine, objective):
    cfg = cfg_for(f"engine={engine}", f"objective={objective}")
    assert cfg["engine"]["name"] == engine and cfg["objective"]["name"] == objective
    check_config(cfg)


@pytest.mark.parametrize("data", ["quartiles", "chisq"])
@pytest.mark.parametrize("thresholds", ["round", "optimized", "distribution"])
def test_data_and_threshold_groups(data, thresholds):
    objective = "objective=squared_error" if data == "chisq" else "objective=extended_qwk"
    check_config(cfg_for(f"data={data}", f"thresholds={thresholds}", objective))


def test_ordinal_objective_on_a_regression_target_is_refused():
    # extended QWK on a continuous target never early-stopped (9,999 of 10,000 rounds)
    with pytest.raises(ValueError, match="objective=extended_qwk needs ordinal labels, but data=chisq is a "
                                         "regression target; use objective=squared_error"):
        check_config(cfg_for("data=chisq", "objective=extended_qwk"))
    with pytest.raises(ValueError, match="needs ordinal labels"):
        check_config(cfg_for("data=csv", "data.ordinal=false", f"data.path={__file__}", "data.target=y",
                             "objective=extended_qwk"))


def test_qwk_table_experiment():
    cfg = cfg_for("experiment=qwk_table")
    assert cfg["table"]["engines"] == ["xgboost", "lightgbm", "native"]
    assert cfg["table"]["objectives"] == ["squared_error", "extended_qwk"]
    small = cfg_for("experiment=qwk_table_small")
    assert small["data"]["n_train"] == 20000 and small["table"] == cfg["table"]


def test_tune_config_composes():
    cfg = cfg_for("engine=lightgbm", "objective=extended_qwk", name="tune")
    from qwkboost.runs.tuning import study_name
    assert cfg["tune"]["study_name"] is None
    assert study_name(cfg).startswith("lightgbm-extended_qwk-quartiles-")
    assert "num_leaves" in cfg["engine"]["search_space"]


@pytest.mark.parametrize(
    "overrides, match",
    [
        (["engine.name=h2o"], r"engine.name='h2o' is unknown; choose one of: xgboost, lightgbm, native, catboost"),
        (["engine.params.learning_rate=-0.1"], r"engine.params.learning_rate must be a number > 0; got -0.1"),
        (["engine.num_boost_round=0"], r"engine.num_boost_round must be an integer >= 1"),
        (["objective.name=ranking"], r"objective.name='ranking' is unknown"),
        (["cv.n_splits=1"], r"cv.n_splits must be an integer >= 2"),
        (["thresholds.method=magic"], r"thresholds.method='magic' is unknown"),
        (["data=csv"], r"data.path is not set"),
        (["objective=extended_qwk", "objective.params.hessian=newton"], r"objective.params: hessian must be one of"),
        (["objective=squared_error", "+objective.params.clip=hold"], r"objective.params: .*unknown parameter"),
        (["data=csv", "data.path=/nonexistent/train.csv", "data.target=y"], r"data.path='/nonexistent/train.csv' does not exist"),
    ],
)
def test_bad_config_is_rejected_with_the_key(overrides, match):
    with pytest.raises(ValueError, match=match):
        check_config(cfg_for(*overrides))


def _csv(tmp_path, y, name="train.csv"):
    rs = np.random.RandomState(0)
    df = pd.DataFrame({"a": rs.rand(len(y)), "b": rs.rand(len(y)), "score": y})
    p = tmp_path / name
    df.to_csv(p, index=False)
    return p


def test_csv_missing_target_column(tmp_path):
    p = _csv(tmp_path, np.arange(40) % 3)
    cfg = cfg_for("data=csv", f"data.path={p}", "data.target=label")
    check_config(cfg)
    with pytest.raises(ValueError, match=r"data.target='label' is not a column of .*columns: \['a', 'b', 'score'\]"):
        load_dataset(cfg["data"])


def test_csv_non_integer_target_for_qwk(tmp_path):
    p = _csv(tmp_path, np.linspace(0, 3, 40))
    cfg = cfg_for("data=csv", f"data.path={p}", "data.target=score")
    with pytest.raises(ValueError, match=r"data.target='score' must be whole-numbered ordinal labels"):
        load_dataset(cfg["data"])


def test_csv_keeps_the_label_scale(tmp_path):
    p = _csv(tmp_path, 3 + np.arange(60) % 6)   # a 3..8 scale
    ds = load_dataset(cfg_for("data=csv", f"data.path={p}", "data.target=score", "data.test_size=0.25")["data"])
    assert ds.classes.min() == 3 and ds.classes.max() == 8
    assert len(ds.y_test) == 15 and ds.X_train.shape[1] == 2


@pytest.mark.parametrize(
    "overrides, match",
    [
        (["tune.metric=qwk_thresholds"], r"not an out-of-fold result \(test-set figures would leak"),
        (["data=chisq"], r"needs ordinal labels, but data=chisq is a regression target; use tune.metric=rmse_oof"),
        (["tune.direction=minimize"], r"contradicts tune.metric='qwk_thresholds_oof'; use tune.direction=maximize"),
    ],
)
def test_bad_tune_config(overrides, match):
    from qwkboost.config import check_tune

    with pytest.raises(ValueError, match=match):
        check_tune(cfg_for(*overrides, name="tune"))
    check_tune(cfg_for("data=chisq", "tune.metric=rmse_oof", "tune.direction=minimize", name="tune"))


def test_data_sources_are_built_from_their_target():
    from qwkboost.data.sources import SOURCES

    for name in SOURCES:
        cfg = cfg_for(f"data={name}", *(["objective=squared_error"] if name == "chisq" else []))
        assert cfg["data"]["_target_"].rsplit(".", 1)[1] == SOURCES[name].__name__
    ds = load_dataset({**cfg_for("data.n_train=300", "data.n_test=100")["data"]})
    assert ds.X_train.shape == (300, 5) and ds.name == "quartiles"


def test_optimized_metric_is_out_of_fold():
    from qwkboost.config import optimized_metric

    assert optimized_metric(cfg_for()) == "qwk_thresholds_oof"
    assert optimized_metric(cfg_for("data=chisq", "objective=squared_error")) == "rmse_oof"
    assert optimized_metric(cfg_for("optimized_metric=kappa_tilde_oof")) == "kappa_tilde_oof"
    with pytest.raises(ValueError, match="optimized_metric='qwk_thresholds' is not an out-of-fold result "
                                         "\\(a test-set figure would leak"):
        check_config(cfg_for("optimized_metric=qwk_thresholds"))


def test_the_one_config_hash_is_autos():
    """:func:`qwkboost.config.config_hash` is the hash a budget's candidates have carried (the value
    tests/autoblend pins on the same config), and with the cluster settings in it, their legacy hash."""
    from qwkboost.config import UNHASHED, config_hash

    cfg = {"data": {"name": "csv", "path": "train.csv", "target": "score"},
           "engine": {"name": "lightgbm", "params": {"learning_rate": 0.05}, "search_space": {"x": 1}},
           "objective": {"name": "extended_qwk", "params": {}}, "cv": {"n_splits": 5}, "seed": 0,
           "thresholds": {"method": "exact"}, "tracking": {"uri": None}, "n_jobs": None, "auto": {"time_limit": 60},
           "cluster": {"address": None}}
    assert config_hash(cfg) == "c484573dcea0"
    assert config_hash(cfg, tuple(k for k in UNHASHED if k != "cluster")) == "e92c6426240e"
