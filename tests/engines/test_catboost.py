"""CatBoost under qwkboost's objectives, on real CatBoost: the derivatives reach it with the right signs (the
same model as its built-in RMSE), one objective call a round at the round's scores, the initial score in and
out of saved models, early stopping on the objective's metric, categoricals, weights and groups, and the
refusals."""

import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

import qwkboost as qb
from qwkboost.objectives import ExtendedQWK

catboost = pytest.importorskip("catboost")

#: CatBoost's settings that qwkboost fixes, given to its built-in loss for the same model.
SAME = dict(boosting_type="Plain", leaf_estimation_iterations=1, leaf_estimation_backtracking="No",
            boost_from_average=False, logging_level="Silent", allow_writing_files=False)


@pytest.fixture(scope="module")
def data():
    from qwkboost.data.sources import quartiles

    return quartiles(n_train=6000, n_test=2000)


def builtin_rmse(X, y, weight=None, **params):
    model = catboost.CatBoost({"loss_function": "RMSE", **SAME, **params})
    model.fit(catboost.Pool(X, y, weight=weight))
    return model


@pytest.mark.parametrize("weighted", [False, True])
def test_squared_error_is_catboosts_own_rmse(data, weighted):
    """The gradient and hessian reach CatBoost with its signs: qwkboost's squared error trains CatBoost's RMSE
    model (the trees start from F0 there too), row weights included."""
    w = np.random.RandomState(1).uniform(0.5, 2.0, data.y_train.size) if weighted else None
    p = {"learning_rate": 0.2, "depth": 5}
    m = qb.train(data.X_train, data.y_train, "catboost", "squared_error", p, num_boost_round=60, seed=3, n_jobs=2,
                 sample_weight=w)
    ref = builtin_rmse(data.X_train, data.y_train - m.init_score, w, iterations=60, random_seed=3, thread_count=2,
                       **p)
    expected = ref.predict(data.X_test, prediction_type="RawFormulaVal") + m.init_score
    np.testing.assert_allclose(m.predict(data.X_test), expected, rtol=0, atol=1e-6)
    assert m.init_score == pytest.approx(np.average(data.y_train, weights=w))


SEEN: list = []


class Counting(ExtendedQWK):
    """Extended QWK that records the scores of every call (its gradient needs sums over all rows)."""

    def grad_hess(self, y, score, sample_weight=None):
        SEEN.append(np.array(score))
        return super().grad_hess(y, score, sample_weight)


def test_a_sums_objective_is_called_once_a_round_on_every_row(data):
    SEEN.clear()
    m = qb.train(data.X_train, data.y_train, "catboost", Counting(), {"learning_rate": 0.2}, num_boost_round=15,
                 n_jobs=2)
    assert len(SEEN) == 15 and all(s.size == data.y_train.size for s in SEEN)
    # round t's gradients are taken at the model's scores after t rounds
    for t in (0, 7, 14):
        np.testing.assert_allclose(SEEN[t], m.predict(data.X_train, num_iteration=t), rtol=0, atol=1e-9)


def test_extended_qwk_and_ordinal_logit_learn_and_stop_on_their_metric(data):
    for objective in ("extended_qwk", "ordinal_logit"):
        m = qb.train(data.X_train, data.y_train, "catboost", objective, {"learning_rate": 0.3},
                     num_boost_round=400, eval_set=(data.X_test, data.y_test), early_stopping_rounds=15,
                     early_stopping_min_delta=0.0)
        curve = m.learning_curve["valid"]
        assert m.num_rounds < 400 and len(curve) == m.num_rounds == len(m.learning_curve["train"])
        best = int(np.argmax(curve) if m.objective.higher_is_better else np.argmin(curve))
        assert m.best_iteration == best + 1 and m.num_rounds - m.best_iteration == 15
        assert qb.qwk(data.y_test.astype(int), np.clip(np.rint(m.predict(data.X_test)), 0, 3).astype(int)) > 0.5


def test_the_initial_score_survives_save_and_load_in_a_fresh_process(data, tmp_path):
    m = qb.train(data.X_train, data.y_train + 3, "catboost", "extended_qwk", {"learning_rate": 0.3},
                 num_boost_round=20)
    path = m.save(tmp_path / "m.json")
    np.save(tmp_path / "X.npy", data.X_test)
    code = ("import sys, numpy as np, qwkboost as qb; m = qb.load_model(%r); "
            "np.save(%r, m.predict(np.load(%r))); "
            "assert 'numba' not in sys.modules, 'predicting needs no compiled kernel'"
            % (str(path), str(tmp_path / "p.npy"), str(tmp_path / "X.npy")))
    subprocess.run([sys.executable, "-c", code], check=True)
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), m.predict(data.X_test))
    # the CatBoost model alone (a .cbm file, no qwkboost) predicts the full score, F0 included, on the labels
    # the engine saw (centred by the model's label_offset)
    m.booster.save_model(str(tmp_path / "m.cbm"))
    alone = catboost.CatBoost().load_model(str(tmp_path / "m.cbm"))
    assert m.label_offset == 4
    np.testing.assert_allclose(alone.predict(data.X_test, prediction_type="RawFormulaVal") + m.label_offset,
                               m.predict(data.X_test, num_iteration=20), rtol=0, atol=1e-6)
    assert abs(m.init_score - 4.5) < 0.1


def test_string_categoricals_go_to_catboost_as_its_own(tmp_path):
    rs = np.random.RandomState(0)
    n = 3000
    cats = [f"c{i:02d}" for i in range(30)]
    effect = dict(zip(cats, rs.normal(scale=2.0, size=30)))
    city = rs.choice(cats, n)
    x = rs.rand(n)
    y = np.array([effect[c] for c in city]) + x + rs.normal(scale=0.3, size=n)
    X = pd.DataFrame({"x": x, "city": city})
    m = qb.train(X.iloc[:2400], y[:2400], "catboost", "squared_error", {"learning_rate": 0.2}, num_boost_round=150,
                 n_jobs=2)
    assert m.booster.get_cat_feature_indices() == [1]
    # CatBoost's own model of the strings (its ordered target statistics), as CatBoostRegressor fits them
    ref = catboost.CatBoostRegressor(iterations=150, learning_rate=0.2, thread_count=2, random_seed=0, verbose=0,
                                     allow_writing_files=False, boost_from_average=False)
    ref.fit(X.iloc[:2400], y[:2400] - m.init_score, cat_features=[1])
    np.testing.assert_allclose(m.predict(X.iloc[2400:]), ref.predict(X.iloc[2400:]) + m.init_score, atol=1e-6)
    err = np.sqrt(np.mean((m.predict(X.iloc[2400:]) - y[2400:]) ** 2))
    assert err < 1.2, err                       # the category effects (sd 2) are mostly learned
    unseen = X.iloc[2400:].assign(city="never seen")
    np.testing.assert_array_equal(m.predict(unseen), m.predict(X.iloc[2400:].assign(city=None)))
    back = qb.load_model(m.save(tmp_path / "m.json"))
    np.testing.assert_array_equal(back.predict(X.iloc[2400:]), m.predict(X.iloc[2400:]))


def test_monotone_constraints_map_to_catboosts(data):
    m = qb.train(data.X_train, data.y_train, "catboost", "squared_error",
                 {"learning_rate": 0.3, "monotone_constraints": [1, 0, 0, 0, 0]}, num_boost_round=40)
    X = np.tile(data.X_test[:50], (21, 1))
    X[:, 0] = np.repeat(np.linspace(0, 1, 21), 50)
    p = m.predict(X).reshape(21, 50)
    assert (np.diff(p, axis=0) >= -1e-12).all()


def test_grouped_cross_validation_with_weights(data):
    rs = np.random.RandomState(0)
    groups = rs.randint(0, 300, data.y_train.size)
    w = rs.uniform(0.5, 2.0, data.y_train.size)
    cv = qb.cross_validate(data.X_train, data.y_train, data.X_test, engine="catboost", objective="extended_qwk",
                           params={"learning_rate": 0.3}, num_boost_round=60, early_stopping_rounds=10, n_splits=3,
                           groups=groups, sample_weight=w, progress=False)
    for _, va in cv.folds:
        assert len(set(groups[va]) & set(np.delete(groups, va))) == 0
    assert cv.oof.shape == data.y_train.shape and np.isfinite(cv.test).all()


@pytest.mark.parametrize("params, match", [
    ({"loss_function": "RMSE"}, r"'loss_function' cannot be set for catboost: the objective is qwkboost's"),
    ({"n_estimators": 10}, r"'n_estimators' cannot be set for catboost: use num_boost_round"),
    ({"task_type": "GPU"}, r"'task_type' cannot be set for catboost: CatBoost trains Python losses on the CPU only"),
    ({"boosting_type": "Ordered"}, r"boosting_type='Ordered' cannot be used with qwkboost's objectives"),
    ({"leaf_estimation_iterations": 3}, r"leaf_estimation_iterations=3 cannot be used"),
    ({"max_dept": 3}, r"catboost rejected the parameters: Unknown option \{max_dept\}"),
    ({"interaction_constraints": [[0, 1]]}, r"catboost rejected the parameters: Unknown option "
                                            r"\{interaction_constraints\}"),
    ({"depth": 40}, r"catboost rejected the parameters: Maximum tree depth is 16"),
    ({"monotone_constraints": [1, 0]}, r"monotone_constraints must have one entry per feature \(5\)"),
])
def test_bad_parameters_are_refused_before_training_naming_them(data, params, match):
    with pytest.raises(ValueError, match=match):
        qb.train(data.X_train, data.y_train, "catboost", "squared_error", params, num_boost_round=5)


def test_several_scores_per_row_are_refused_naming_the_engines_that_run_them(data):
    """soft_qwk has no CatBoost loss of its own (multiclass has: tests/engines/test_catboost_paths.py)."""
    with pytest.raises(ValueError, match=r"objective=soft_qwk has 4 scores per row, .* run it on "
                                         r"engine=xgboost, engine=lightgbm or engine=native \(objective=multiclass "
                                         r"runs on CatBoost's own MultiClass\)"):
        qb.train(data.X_train, data.y_train, "catboost", "soft_qwk", num_boost_round=5)


def test_a_config_refuses_them_before_training_too():
    from qwkboost.config import check_config
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    from pathlib import Path

    conf = Path(__file__).resolve().parents[2] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = OmegaConf.to_container(compose("config", ["engine=catboost", "cluster=local"]), resolve=True)
    with pytest.raises(ValueError, match="engine=catboost has no Dask interface"):
        check_config(cfg)


def test_a_zero_round_model_predicts_the_initial_score(data):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = qb.train(data.X_train, data.y_train, "catboost", "extended_qwk", num_boost_round=0)
    np.testing.assert_array_equal(m.predict(data.X_test), np.full(data.y_test.size, m.init_score))


def test_a_sums_objective_with_categoricals_and_weights(tmp_path):
    """With categorical columns the rows are trained in one seeded order (has_time): CatBoost's learning fold
    then scores them as its metric does, and every round's single call sees the model's scores."""
    rs = np.random.RandomState(2)
    n = 2500
    X = pd.DataFrame({"x": rs.rand(n), "city": rs.choice([f"c{i}" for i in range(25)], n)})
    y = np.clip(np.rint(X["x"] * 3 + (X["city"].str[1:].astype(int) % 3) + rs.normal(scale=0.5, size=n)), 0, 5)
    w = rs.uniform(0.5, 2.0, n)
    SEEN.clear()
    m = qb.train(X, y, "catboost", Counting(), {"learning_rate": 0.2}, num_boost_round=12, sample_weight=w, seed=5)
    assert len(SEEN) == 12 and all(s.size == n for s in SEEN) and m.booster.get_cat_feature_indices() == [1]
    np.testing.assert_array_equal(SEEN[0], np.full(n, m.init_score))
    # later rounds see CatBoost's training scores, whose target statistics use only the rows before each one
    # (not the model's predictions on the same rows): they move away from F0 round by round
    assert np.std(SEEN[1]) > 0 and np.std(SEEN[11]) > np.std(SEEN[1])
    again = qb.train(X, y, "catboost", "extended_qwk", {"learning_rate": 0.2}, num_boost_round=12, sample_weight=w,
                     seed=5)
    # the same seed, the same model (extended_qwk's compiled kernel rounds a row's gradient in its own order)
    np.testing.assert_allclose(again.predict(X), m.predict(X), rtol=0, atol=1e-12)


FILE_SETTINGS = [{"save_snapshot": True}, {"allow_writing_files": True}, {"train_dir": "logs"},
                 {"snapshot_file": "snap"}, {"json_log": "log.json"}]


@pytest.mark.parametrize("params", FILE_SETTINGS, ids=lambda p: next(iter(p)))
def test_settings_that_write_files_are_refused_in_one_line(data, params, tmp_path, monkeypatch):
    """CatBoost's training files would land in the working directory: refused by name (CatBoost's own check of
    save_snapshot came after the data, as its traceback), in Python before training and in a config before its
    data is read (the CSV here is not a table at all)."""
    from conftest import run_in_process
    from qwkboost.exceptions import ConfigError

    monkeypatch.chdir(tmp_path)
    name, value = next(iter(params.items()))
    line = rf"engine parameter {name}={value!r} cannot be set for catboost: it makes CatBoost write training files"
    with pytest.raises(ValueError, match=line):
        qb.train(data.X_train, data.y_train, "catboost", "squared_error", params, num_boost_round=5)
    (tmp_path / "junk.csv").write_bytes(b"\x00\xff not a table")
    shown = str(value).lower() if isinstance(value, bool) else value
    for config in ("config", "tune"):
        with pytest.raises(ConfigError, match=rf"^engine.params \(catboost\): {line}") as err:
            run_in_process(["engine=catboost", "data=csv", f"data.path={tmp_path / 'junk.csv'}", "data.target=y",
                            f"+engine.params.{name}={shown}", "tracking.uri=sqlite:///unused.db"], tmp_path / "out",
                           config_name=config)
        assert "\n" not in str(err.value)
    assert not (tmp_path / "catboost_info").exists()
    # the one value that writes nothing stays accepted
    qb.train(data.X_train[:300], data.y_train[:300], "catboost", "squared_error", {"allow_writing_files": False},
             num_boost_round=2)


def test_catboost_leaves_nothing_in_a_clean_working_directory(tmp_path, monkeypatch):
    """Training (categoricals, early stopping), prediction, SHAP values, gains, save and load, and a whole run
    from a clean directory: nothing appears in it (no catboost_info/)."""
    from qwkboost.data.sources import quartiles
    from qwkboost.runs.experiment import run_experiment

    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    rs = np.random.RandomState(0)
    X = pd.DataFrame({"x": rs.rand(400), "city": rs.choice(["a", "b", "c"], 400)})
    y = np.clip(np.rint(X["x"] * 3 + (X["city"] == "b")), 0, 3)
    m = qb.train(X, y, "catboost", "extended_qwk", num_boost_round=20, eval_set=(X, y), early_stopping_rounds=3)
    m.predict(X)
    qb.explain(m, X, max_rows=50).importance()
    qb.load_model(m.save(tmp_path / "m.json")).predict(X)
    ds = quartiles(n_train=600, n_test=200)
    cfg = {"data": {"name": "quartiles", "n_train": 600, "n_test": 200},
           "engine": {"name": "catboost", "num_boost_round": 10, "early_stopping_rounds": 3,
                      "params": {"learning_rate": 0.3, "depth": 3}},
           "objective": {"name": "squared_error", "params": {}},
           "cv": {"n_splits": 2, "stratified": True, "shuffle": True}, "thresholds": {"method": "exact"},
           "tracking": {"explain": False}, "seed": 0}
    run_experiment(cfg, None, output_dir=tmp_path / "run", dataset=ds)
    assert sorted(p.name for p in cwd.iterdir()) == []


@pytest.mark.parametrize("objective", ["squared_error", "extended_qwk"])
def test_a_stop_inside_catboost_s_training_is_a_stop_not_its_error(data, objective):
    """Ctrl-C or SIGTERM lands in Python between CatBoost's iterations, in one of qwkboost's callbacks (its own
    loss, its metric, the after-iteration hook), where CatBoost wraps it in a CatBoostError with a traceback: it
    comes out as the KeyboardInterrupt it was (found by Ctrl-C during an auto run on a CSV)."""
    X, y = data.X_train, data.y_train
    seen = []

    def stop(rnd, evals):
        seen.append(rnd)
        if rnd == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        qb.train(X, y, engine="catboost", objective=objective, num_boost_round=50, callbacks=[stop])
    assert seen[-1] == 3
