"""What used to go silently wrong through qwkboost.train, on every engine: misspelled parameters, reordered
columns, label offsets, thread pools, malformed model files. Each case is a regression test."""

import json

import numpy as np
import pandas as pd
import pytest
import scipy.sparse

import qwkboost as qb
from qwkboost.engines import label_offset
from qwkboost.engines.threads import available_cores

ENGINES = ["xgboost", "lightgbm", "native", "catboost"]


@pytest.fixture(scope="module")
def frame(small_quartiles):
    ds = small_quartiles
    cols = ["a", "b", "c", "d", "e"]
    return (pd.DataFrame(ds.X_train, columns=cols), ds.y_train, pd.DataFrame(ds.X_test, columns=cols), ds.y_test)


# -- parameters ------------------------------------------------------------------------------------

@pytest.mark.parametrize("engine, bad, hint", [
    ("xgboost", "max_dept", "max_depth"), ("lightgbm", "num_leavs", "num_leaves"), ("native", "max_dept", "max_depth")])
def test_misspelled_parameter_is_refused_with_the_valid_names(engine, bad, hint, small_quartiles):
    ds = small_quartiles
    with pytest.raises(ValueError, match=bad) as err:
        qb.train(ds.X_train, ds.y_train, engine, params={bad: 3}, num_boost_round=1)
    assert hint in str(err.value) and "valid parameters" in str(err.value)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", ["learning_rate", "eta"])
def test_non_positive_learning_rate_is_refused_by_qwkboost(engine, name, small_quartiles):
    ds = small_quartiles
    for value in (-0.1, 0):
        with pytest.raises(ValueError, match=rf"params.{name} \(the learning rate\) must be a number > 0"):
            qb.train(ds.X_train, ds.y_train, engine, params={name: value}, num_boost_round=1)


@pytest.mark.parametrize("engine, params, match", [
    ("xgboost", {"max_depth": -1}, "xgboost rejected the parameters: value -1 for Parameter max_depth"),
    ("lightgbm", {"num_leaves": 1}, r"lightgbm rejected the parameters: Check failed: \(num_leaves\) > \(1\)"),
    ("xgboost", {"objective": "reg:squarederror"}, "cannot be set for xgboost: the objective is qwkboost's"),
    ("lightgbm", {"application": "regression"}, "cannot be set for lightgbm: the objective is qwkboost's"),
    ("lightgbm", {"num_iterations": 5}, "use num_boost_round"),
    ("lightgbm", {"num_leaves": 7, "num_leaf": 9}, "are the same parameter"),
    ("xgboost", {"seed": 3}, "use the seed argument"),
])
def test_values_the_engine_rejects_fail_before_training(engine, params, match, small_quartiles):
    ds = small_quartiles
    with pytest.raises(ValueError, match=match):
        qb.train(ds.X_train, ds.y_train, engine, params=params, num_boost_round=1)


def test_lightgbm_on_too_few_rows_is_a_clear_error():
    rs = np.random.RandomState(0)
    X, y = rs.rand(40, 5), np.arange(40) % 4
    for n in (30, 40):       # 40 rows pass 2 x min_data_in_leaf, yet LightGBM found no feature (a fatal check)
        with pytest.raises(ValueError, match=f"lightgbm can split no feature of these {n} training rows with "
                                             r"min_data_in_leaf=20 and min_data_in_bin=3 .*\+engine.params"):
            qb.train(X[:n], y[:n], "lightgbm", params={}, num_boost_round=5)      # LightGBM's own defaults
    # qwkboost's defaults name min_child_samples: the advice names that key, not a second alias that is refused
    with pytest.raises(ValueError, match="of these 12 training rows with min_child_samples=7 .*"
                                         r"engine.params.min_child_samples=3"):
        qb.train(X[:12], y[:12], "lightgbm", num_boost_round=5)
    m = qb.train(X, y, "lightgbm", params={"min_data_in_leaf": 5}, num_boost_round=5)   # the advice works
    assert m.num_rounds == 5
    m = qb.train(X[:12], y[:12], "lightgbm", params={**qb.defaults.engine_params("lightgbm"), "min_child_samples": 3},
                 num_boost_round=5)
    assert m.num_rounds == 5


@pytest.mark.parametrize("engine", ENGINES)
def test_constant_features_are_refused_on_every_engine(engine):
    with pytest.raises(ValueError, match="every feature is constant"):
        qb.train(np.ones((50, 3)), np.arange(50) % 4, engine, num_boost_round=3)


# -- threads ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("engine", ENGINES)
def test_engine_threads_default_to_the_cores_and_follow_n_jobs(engine, small_quartiles, monkeypatch):
    ds = small_quartiles
    monkeypatch.delenv("LOKY_MAX_CPU_COUNT", raising=False)    # every core, not a pytest-xdist worker's share

    def threads(m):
        if engine == "xgboost":
            return int(json.loads(m.booster.save_config())["learner"]["generic_param"]["nthread"])
        if engine == "lightgbm":
            return int(m.booster.params["num_threads"])
        if engine == "catboost":
            return int(m.booster.get_params()["thread_count"])
        return m.booster.params["n_jobs"]

    # the default is the cores free at training start (tests/engines/test_threads.py), at most every core
    assert 1 <= threads(qb.train(ds.X_train, ds.y_train, engine, num_boost_round=2)) <= available_cores()
    assert threads(qb.train(ds.X_train, ds.y_train, engine, num_boost_round=2, n_jobs=1)) == 1


@pytest.mark.parametrize("engine", ENGINES)
def test_blas_runs_on_one_thread_while_an_engine_trains(engine, small_quartiles):
    from threadpoolctl import threadpool_info

    from qwkboost.objectives import SquaredError

    seen = []

    class Spy(SquaredError):
        def grad_hess(self, y, score):
            seen.append({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})
            return super().grad_hess(y, score)

    ds = small_quartiles
    qb.train(ds.X_train, ds.y_train, engine, Spy(), num_boost_round=3)
    assert seen and all(s <= {1} for s in seen)


# -- columns ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("engine", ENGINES)
def test_reordered_columns_are_matched_by_name(engine, frame, tmp_path):
    X, y, Xt, _ = frame
    m = qb.train(X, y, engine, num_boost_round=20, params={"learning_rate": 0.3})
    assert m.feature_names == list("abcde")
    expected = m.predict(Xt)
    np.testing.assert_array_equal(m.predict(Xt[list("ecabd")]), expected)
    np.testing.assert_array_equal(m.predict(Xt.assign(Id=1)), expected)           # extra columns are not used
    with pytest.raises(ValueError, match=r"X lacks the feature column\(s\) \['c'\]"):
        m.predict(Xt.drop(columns="c"))
    back = qb.load_model(m.save(tmp_path / "m.json"))
    assert back.feature_names == list("abcde")
    np.testing.assert_array_equal(back.predict(Xt[list("edcba")]), expected)


def test_eval_set_columns_are_matched_too(frame):
    X, y, Xt, yt = frame
    a = qb.train(X, y, "xgboost", num_boost_round=10, eval_set=(Xt, yt))
    b = qb.train(X, y, "xgboost", num_boost_round=10, eval_set=(Xt[list("cbaed")], yt))
    assert a.learning_curve == b.learning_curve


def test_string_columns_are_categorical_and_sparse_input_gets_a_clear_error(frame):
    X, y, _, _ = frame
    m = qb.train(X.assign(city="x"), y, "xgboost", num_boost_round=1)
    assert m.schema.categorical == [5] and m.schema.categories[5] == ["x"]
    with pytest.raises(ValueError, match=r"feature 'a' was numeric in training, but row 0 of X holds 'oops'"):
        m.predict(X.assign(city="x", a=["oops"] + [0.5] * (len(X) - 1)))
    with pytest.raises(ValueError, match=r"X is a scipy.sparse matrix; pass a dense array instead: X.toarray\(\)"):
        qb.train(scipy.sparse.csr_matrix(X.to_numpy()), y, "xgboost", num_boost_round=1)


# -- labels ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("objective", ["squared_error", "extended_qwk"])
def test_label_offsets_do_not_change_results(engine, objective, small_quartiles):
    ds = small_quartiles
    p = {"learning_rate": 0.2}
    base = qb.train(ds.X_train, ds.y_train, engine, objective, params=p, num_boost_round=40,
                    eval_set=(ds.X_test, ds.y_test), early_stopping_rounds=10)
    far = qb.train(ds.X_train, ds.y_train + 1e6, engine, objective, params=p, num_boost_round=40,
                   eval_set=(ds.X_test, ds.y_test + 1e6), early_stopping_rounds=10)
    assert far.label_offset == 1e6 + 2 and base.label_offset == 0
    assert far.best_iteration == base.best_iteration
    a, b = far.predict(ds.X_test) - 1e6, base.predict(ds.X_test)
    # float noise only (the native engine may break a near-tie split the other way); uncentred, XGBoost's
    # float32 scores near 1e6 disagreed on 15-19% of the rounded classes
    assert np.mean(np.abs(a - b)) < 2e-3
    assert np.mean(np.rint(a) == np.rint(b)) >= 0.995
    assert far.init_score == pytest.approx(base.init_score + 1e6)


def test_label_offset_rule():
    assert label_offset(np.array([0, 1, 2, 3])) == 0
    assert label_offset(np.array([1, 5])) == 0
    assert label_offset(np.array([100_000, 100_003])) == 100_002
    assert label_offset(np.array([-5000.0, -4990.0])) == -4995


@pytest.mark.parametrize("engine", ENGINES)
def test_ordinal_objective_refuses_fractional_labels(engine, small_quartiles):
    ds = small_quartiles
    y = ds.y_train.copy()
    y[3] = 1.5
    with pytest.raises(ValueError, match=r"objective 'extended_qwk' needs whole-numbered ordinal labels; y\[3\] is 1.5"):
        qb.train(ds.X_train, y, engine, "extended_qwk", num_boost_round=1)


# -- model files -----------------------------------------------------------------------------------

@pytest.fixture(scope="module", params=ENGINES)
def saved(request, small_quartiles, tmp_path_factory):
    ds = small_quartiles
    m = qb.train(ds.X_train, ds.y_train, request.param, "extended_qwk", num_boost_round=5)
    path = m.save(tmp_path_factory.mktemp(request.param) / "m.json")
    return request.param, json.loads(path.read_text())


def _write(tmp_path, payload):
    p = tmp_path / "edited.json"
    p.write_text(payload if isinstance(payload, str) else json.dumps(payload))
    return p


@pytest.mark.parametrize("edit, match", [
    (lambda d: d.update(init_score=float("nan")), "'init_score' must be a finite number"),
    (lambda d: d.pop("num_rounds"), "lacks 'num_rounds'"),
    (lambda d: d.update(best_iteration=99), r"best_iteration 99 is not in \[0, num_rounds=5\]"),
    (lambda d: d.update(booster=d["booster"][: len(d["booster"]) // 2]), "does not match its checksum"),
    (lambda d: d["objective"]["state"].update(grad_hess="boom"), r"has no fitted attribute\(s\) \['grad_hess'\]"),
    (lambda d: d["objective"]["state"].update(a_="x"), "must be a finite number"),
    (lambda d: d["objective"]["params"].update(a="x"), "a must be a finite number or None"),
    (lambda d: d.update(feature_names=["only one"]), "feature_names must be a list of 5 strings"),
])
def test_malformed_model_files_are_refused(saved, tmp_path, edit, match):
    _, payload = saved
    payload = json.loads(json.dumps(payload))
    edit(payload)
    with pytest.raises(ValueError, match=match):
        qb.load_model(_write(tmp_path, payload))


def test_truncated_booster_text_is_refused_without_a_checksum(saved, tmp_path):
    """Files of format 1 have no checksum: the engines' own parsers must still not crash the process."""
    engine, payload = saved
    payload = json.loads(json.dumps(payload))
    payload.pop("booster_sha256")
    payload["booster"] = payload["booster"][: len(payload["booster"]) * 2 // 3]
    with pytest.raises(ValueError, match="malformed|truncated|not a qwkboost native model"):
        qb.load_model(_write(tmp_path, payload))


def test_native_model_with_a_cycle_is_refused(small_quartiles, tmp_path):
    ds = small_quartiles
    m = qb.train(ds.X_train, ds.y_train, "native", "squared_error", params={"max_depth": 2}, num_boost_round=2)
    payload = json.loads(m.save(tmp_path / "m.json").read_text())
    booster = json.loads(payload["booster"])
    tree = booster["trees"][0]
    tree["left"][1] = 0                      # a child pointing back at the root
    for edit, match in ((booster, "does not come after its parent"), ):
        payload["booster"] = json.dumps(edit)
        payload.pop("booster_sha256", None)
        with pytest.raises(ValueError, match=match):
            qb.load_model(_write(tmp_path, payload))
    tree["left"][1] = 3
    tree["feature"][0] = 17                  # a feature the model does not have
    payload["booster"] = json.dumps(booster)
    with pytest.raises(ValueError, match=r"feature index outside \[0, 5\)"):
        qb.load_model(_write(tmp_path, payload))


def test_binary_file_is_not_a_model(tmp_path):
    p = tmp_path / "model.json"
    p.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ValueError, match="not a qwkboost model file"):
        qb.load_model(p)
