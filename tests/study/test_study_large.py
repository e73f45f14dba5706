"""The study at competition size: the equal tuning budget (qwkboost.study.tuning: every tuned method and engine
gets the same Optuna trials on the training folds only, reproducibly; the report puts defaults and tuned side by
side) and the training-set sizes (study.sizes, the size figure)."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from qwkboost.study import TUNED, StudySpec, build_cells, run_study, tune_cell

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["engine.num_boost_round=60", "engine.early_stopping_rounds=10", "engine.params.learning_rate=0.3",
         "cv.n_splits=3"]


def composed(*overrides) -> dict:
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        return OmegaConf.to_container(compose("config", overrides=list(overrides)), resolve=True)


def test_the_large_study_gives_every_objective_and_engine_the_same_budget():
    cfg = composed("experiment=study_large")
    spec = StudySpec.from_config(cfg["study"])
    assert set(spec.regimes) >= {"diamonds", "chem97", "insteval", "gss_vocab", "happiness"}
    assert spec.seeds >= 5 and spec.max_train >= 10_000
    tuned = [m for m in spec.methods if m.name.endswith(TUNED) and not m.is_blend]
    defaults = {m.name for m in spec.methods if not m.name.endswith(TUNED) and m.peer is None}
    # the blend's members are tuned side by side with their defaults, all on one budget
    assert {m.name[: -len(TUNED)] for m in tuned} == {"squared_error", "extended_qwk", "ordinal_logit"} <= defaults
    assert {(m.tune_trials, m.tune_pruner) for m in tuned} == {(10, "successive_halving")}
    assert {spec.engines_of(m) for m in tuned} == {("lightgbm", "xgboost")}
    assert spec.engines_of(next(m for m in spec.methods if m.name == "blend_tuned")) == ("lightgbm", "xgboost")
    # each engine searches at least the learning rate, leaves or depth, the minimum child weight and L2
    need = [("learning_rate",), ("num_leaves", "max_depth", "depth"), ("min_child_samples", "min_child_weight"),
            ("lambda_l2", "reg_lambda", "l2_leaf_reg")]
    for engine in spec.engines:
        space = composed(f"engine={engine}")["engine"]["search_space"]
        missing = [alt for alt in need if not set(alt) & set(space)]
        # CatBoost's symmetric trees have no minimum leaf size (min_data_in_leaf needs Depthwise or Lossguide)
        assert missing == ([need[2]] if engine == "catboost" else []), (engine, missing)

    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        def compose_(overrides):
            return OmegaConf.to_container(compose("config", overrides=["experiment=study_large", *overrides]),
                                          resolve=True)

        # (two methods: composing every cell of the study takes a minute)
        cells = build_cells(StudySpec.from_config({**cfg["study"], "seeds": 1, "regimes": ["happiness"],
                                                   "only": ["squared_error", "multiclass"],
                                                   "tuning": {**cfg["study"]["tuning"], "methods": None,
                                                              "engines": None}}), compose_)
    budgets = {(c.engine, c.method.name): c.method.tune_trials for c in cells if c.method.name.endswith(TUNED)}
    assert set(budgets.values()) == {10} and len(budgets) == 6      # multiclass: not on CatBoost or native
    assert {e for e, _ in budgets} == {"lightgbm", "xgboost", "catboost", "native"}
    # study.engines=[lightgbm] runs multiclass on LightGBM only (skip_engines, not a list of its own)
    only_lgb = StudySpec.from_config({**cfg["study"], "engines": ["lightgbm"]})
    assert {only_lgb.engines_of(m) for m in only_lgb.methods if m.peer is None} == {("lightgbm",)}
    assert all(c.config["engine"]["search_space"] for c in cells)
    # a tuned cell and its default have different keys; the default's key does not depend on tuning
    keys = {(c.engine, c.method.name): c.key for c in cells}
    assert keys[("lightgbm", "squared_error")] != keys[("lightgbm", "squared_error_tuned")]


@pytest.mark.parametrize("tuning, message", [
    ({"n_trials": -1}, "study.tuning.n_trials"),
    ({"n_trials": 5, "pruner": "hyperband"}, "study.tuning.pruner='hyperband' is unknown"),
    ({"n_trials": 5, "variants": ["best"]}, "study.tuning.variants must list default and/or tuned"),
    ({"n_trials": 0, "variants": ["tuned"]}, r"variants=\[tuned\] needs study.tuning.n_trials > 0"),
    ({"trials": 5}, "study.tuning must be null or"),
    ({"n_trials": 5, "methods": ["sq"]}, r"study.tuning.methods: \['sq'\] not among study.methods \(se, om, bl, le\)"),
    ({"n_trials": 5, "methods": ["om"]}, r"\['om'\] are peers, which bring their own settings"),
    ({"n_trials": 5, "methods": ["bl", "se"]}, r"tunes the blend bl but not its members \['le'\]"),
    ({"n_trials": 5, "engines": ["lgbm"]}, r"study.tuning.engines: \['lgbm'\] not among the engines"),
])
def test_bad_tuning_settings_are_refused(tuning, message):
    study = {"seeds": 2, "regimes": ["quartiles"], "engines": ["lightgbm"], "tuning": tuning,
             "methods": {"se": {"overrides": ["objective=squared_error"]}, "om": {"peer": "ordered_model"},
                         "bl": {"members": ["se", "le"]}}}
    study["methods"]["le"] = {"overrides": ["objective=extended_qwk"]}
    with pytest.raises(ValueError, match=message):
        StudySpec.from_config(study)


def test_the_study_test_is_checked():
    study = {"seeds": 5, "regimes": ["quartiles"], "engines": ["lightgbm"],
             "methods": {"se": {"overrides": ["objective=squared_error"]}}}
    assert StudySpec.from_config(study).test == "wilcoxon"
    assert StudySpec.from_config({**study, "test": "t"}).test == "t"
    with pytest.raises(ValueError, match="study.test='ttest' is unknown; choose one of: wilcoxon, t"):
        StudySpec.from_config({**study, "test": "ttest"})


def test_tuning_sees_only_the_training_folds_and_replays(small_quartiles):
    from qwkboost.cv.crossval import cross_validate

    X, y = small_quartiles.X_train[:1500], small_quartiles.y_train[:1500]
    calls = []

    def cv(params, on_fold):
        calls.append(params)
        return cross_validate(X, y, None, engine="lightgbm", objective="squared_error",
                              params={**params, "verbose": -1}, num_boost_round=30, early_stopping_rounds=5,
                              n_splits=3, seed=0, progress=False, on_fold=on_fold, n_jobs=1)

    space = composed("engine=lightgbm")["engine"]["search_space"]
    a = tune_cell(cv, y, np.unique(y), space, {"num_leaves": 31}, 6, "median", seed=3)
    first = list(calls)
    b = tune_cell(cv, y, np.unique(y), space, {"num_leaves": 31}, 6, "median", seed=3)
    assert a["params"] == b["params"] and calls[6:] == first          # the same seed draws the same trials
    assert a["n_trials"] == 6 and len(first) == 6 and 0 <= a["n_pruned"] <= 1   # median: 5 trials before pruning
    assert set(a["params"]) == set(space) and 0 < a["best_oof"] <= 1
    c = tune_cell(cv, y, np.unique(y), space, {}, 2, "none", seed=4)
    assert c["params"] != a["params"] and c["n_pruned"] == 0


def test_a_tuned_study_reports_defaults_and_tuning_side_by_side(tmp_path):
    study = {"seeds": 2, "regimes": ["quartiles"], "engines": ["lightgbm"], "cache_dir": str(tmp_path / "cache"),
             "n_jobs": 1, "cap": {"n_train": 700, "n_test": 400}, "tuning": {"n_trials": 2, "pruner": "none"},
             "reference": "se+exact",
             "methods": {"se": {"overrides": ["objective=squared_error"], "decode": ["exact"]},
                         "eq": {"overrides": ["objective=extended_qwk"], "decode": ["exact"]}}}
    spec = StudySpec.from_config(study)
    assert [m.name for m in spec.methods] == ["se", "eq", "se_tuned", "eq_tuned"]
    assert {m.tune_seed for m in spec.methods if m.tune_trials} == {0}
    per_seed = StudySpec.from_config({**study, "tuning": {**study["tuning"], "per_seed": True}})
    assert {m.tune_seed for m in per_seed.methods if m.tune_trials} == {None}
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        def compose_(overrides):
            return OmegaConf.to_container(compose("config", overrides=[*SMALL, *overrides]), resolve=True)

        cells = build_cells(spec, compose_)
    run_study(spec, cells, None, tmp_path / "out")
    for c in cells:
        tuning = c.result.get("tuning")
        assert (tuning is not None) == c.method.name.endswith(TUNED)
        if tuning:
            assert tuning["n_trials"] == 2 and set(tuning["params"]) >= {"learning_rate", "num_leaves"}
    # tuned once per training set: the first seed's study serves the second seed (the same training rows)
    for name in ("se_tuned", "eq_tuned"):
        first, second = sorted((c for c in cells if c.method.name == name), key=lambda c: c.seed)
        assert first.result["tuning"]["params"] == second.result["tuning"]["params"]
        assert sum(bool(c.result["tuning"].get("reused")) for c in (first, second)) == 1
    assert len(list((tmp_path / "cache" / "tuning").glob("*.json"))) == 2
    table = pd.read_csv(tmp_path / "out" / "tuning.csv")
    assert sorted(table["method"]) == ["eq", "se"] and (table["n"] == 2).all()
    md = (tmp_path / "out" / "study.md").read_text()
    assert "## Defaults against tuning" in md
    # the tuned verdict counts the tuned extended-QWK rows against the tuned reference, engine by engine
    assert ("With every objective tuned on the same budget: Over 1 regime, 1 engine and 2 seeds, optimising QWK "
            "directly (tuned) against squared error with exact cut points on the same engine (tuned)") in md
    assert "| quartiles | lightgbm | `eq_tuned` | `se_tuned` |" in md
    # extended QWK against the reference per engine, the tuned against the tuned, with the paired t-test
    engines = pd.read_csv(tmp_path / "out" / "engines.csv")
    assert [tuple(r) for r in engines[["method", "reference"]].to_numpy()] == [("eq", "se"),
                                                                             ("eq_tuned", "se_tuned")]
    cells_df = pd.read_csv(tmp_path / "out" / "cells.csv")
    exact = cells_df[cells_df["decoder"] == "exact"].pivot_table(index="seed", columns="method", values="qwk")
    assert engines["diff"].tolist() == pytest.approx([(exact["eq"] - exact["se"]).mean(),
                                                      (exact["eq_tuned"] - exact["se_tuned"]).mean()])
    assert "engine by engine" in md and "Wilcoxon signed-rank test, Holm" in md
    assert (tmp_path / "out" / "plots" / "engines.png").stat().st_size > 10_000
    headline = pd.read_csv(tmp_path / "out" / "headline.csv")
    assert list(headline["best_eqwk"]) == ["eq+exact"]          # the default headline compares default rows


def test_sizes_run_each_regime_at_each_training_size_and_draw_the_curve(tmp_path):
    study = {"seeds": 2, "regimes": ["quartiles"], "engines": ["lightgbm"], "cache_dir": str(tmp_path / "cache"),
             "n_jobs": 1, "cap": {"n_train": None, "n_test": 300}, "sizes": [200, 500],
             "methods": {"squared_error": {"overrides": ["objective=squared_error"], "decode": ["exact"]},
                         "extended_qwk": {"overrides": ["objective=extended_qwk"], "decode": ["exact"]}}}
    spec = StudySpec.from_config(study)
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        def compose_(overrides):
            return OmegaConf.to_container(compose("config", overrides=[*SMALL, *overrides]), resolve=True)

        cells = build_cells(spec, compose_)
    assert {c.regime for c in cells} == {"quartiles@200", "quartiles@500"}
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = mlflow.create_experiment("sizes")
    run_study(spec, cells, experiment, tmp_path / "out")           # a real MLflow parent run and its children
    assert {c.regime: c.result["n_train"] for c in cells} == {"quartiles@200": 200, "quartiles@500": 500}
    parent = mlflow.search_runs([experiment], "tags.`mlflow.runName` = 'study'", output_format="list")
    assert len(parent) == 1 and parent[0].info.status == "FINISHED"
    assert "quartiles_n200.squared_error_exact.mean" in parent[0].data.metrics   # "@" is not allowed
    assert (tmp_path / "out" / "plots" / "sizes.png").stat().st_size > 10_000
    with pytest.raises(ValueError, match="study.sizes repeats a size"):
        StudySpec.from_config({**study, "sizes": [200, 200]})


def test_the_size_study_reuses_the_large_studys_cells():
    big = composed("experiment=study_large")["study"]
    sizes = composed("experiment=study_sizes")["study"]
    assert sizes["sizes"] == [1000, 5000, 20000, None] and sizes["regimes"] == ["insteval"]
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        def cells_of(study, experiment):
            def compose_(overrides):
                return OmegaConf.to_container(compose("config", overrides=[f"experiment={experiment}", *overrides]),
                                              resolve=True)
            return build_cells(StudySpec.from_config({**study, "seeds": 1, "engines": ["lightgbm"], "tuning": None,
                                                      "only": ["squared_error"], "regimes": ["insteval"]}), compose_)

        by_size = {}
        for c in cells_of(sizes, "study_sizes"):
            by_size.setdefault(c.regime, {})[(c.engine, c.method.name)] = c.key
        large = {(c.engine, c.method.name): c.key for c in cells_of(big, "study_large") if c.regime == "insteval"}
    # the large study's cap is one of the sizes: those cells are computed once; the other sizes are not theirs
    assert big["cap"]["n_train"] == 20000 and by_size["insteval@20000"] == large
    assert not set(by_size["insteval@all"].values()) & set(large.values())


def test_a_cap_above_a_packaged_sets_rows_keeps_them_all():
    from qwkboost.data.packaged import load, train_rows
    from qwkboost.study import seeded

    cfg = composed("data=happiness")
    rows = train_rows("happiness")
    assert rows == len(load("happiness").y_train) == 12_852
    # study.cap.n_train is at most: a set smaller than the cap keeps every row instead of being refused
    assert seeded(cfg, 0, 20_000, None)["data"]["n_train"] is None
    assert seeded(cfg, 0, 5_000, None)["data"]["n_train"] == 5_000
    assert seeded({**cfg, "data": {**cfg["data"], "n_train": 3_000}}, 0, 20_000, None)["data"]["n_train"] == 3_000


def test_size_regimes_become_mlflow_metric_names():
    from qwkboost.study.runner import _metric_name

    assert _metric_name("insteval@1000.lightgbm:squared_error+exact.mean") == \
        "insteval_n1000.lightgbm:squared_error_exact.mean"
