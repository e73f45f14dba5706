"""``cv.early_stopping_on``: where each fold's early stopping looks, and what the fold it scores may influence."""

from pathlib import Path

import numpy as np
import pytest

import qwkboost.cv.crossval as cvmod
from qwkboost.cv.crossval import cross_validate
from qwkboost.cv.inner import INNER_SHARE, default_early_stopping_on, inner_split
from qwkboost.data.sources import quartiles

CONF = str(Path(__file__).resolve().parents[2] / "conf")

#: Unstratified folds: their rows depend on the number of rows and the seed only, so permuting one fold's labels
#: leaves every fold where it was (stratified folds are drawn from the labels).
KW = dict(engine="lightgbm", objective="squared_error", params={"verbose": -1, "num_threads": 1,
                                                                "deterministic": True, "learning_rate": 0.1},
          num_boost_round=400, early_stopping_rounds=10, n_splits=3, stratified=False, seed=2, progress=False)


@pytest.fixture(scope="module")
def data():
    ds = quartiles(n_train=1500, n_test=10)
    return ds.X_train, ds.y_train


def _permuted_fold(cv, y, k=0):
    """``y`` with the labels of fold ``k``'s validation rows shuffled among them, and those rows."""
    va = cv.folds[k][1]
    y2 = y.copy()
    y2[va] = np.random.default_rng(1).permutation(y[va])
    assert not np.array_equal(y2, y)
    return y2, va


def test_with_the_inner_slice_the_validation_folds_labels_never_reach_its_model(data):
    X, y = data
    cv = cross_validate(X, y, early_stopping_on="inner", **KW)
    y2, va = _permuted_fold(cv, y)
    again = cross_validate(X, y2, early_stopping_on="inner", **KW)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(cv.folds, again.folds))
    np.testing.assert_array_equal(again.oof[va], cv.oof[va])          # fold 0's scores: not moved by its labels
    assert again.best_iterations[0] == cv.best_iterations[0]
    assert not np.array_equal(again.oof, cv.oof)                      # the other folds trained on those labels


def test_stopping_on_the_validation_fold_lets_its_labels_choose_the_rounds(data):
    X, y = data
    cv = cross_validate(X, y, early_stopping_on="valid", **KW)
    y2, va = _permuted_fold(cv, y)
    again = cross_validate(X, y2, early_stopping_on="valid", **KW)
    assert again.best_iterations[0] != cv.best_iterations[0]
    assert not np.array_equal(again.oof[va], cv.oof[va])


def test_the_option_decides_which_rows_train_and_which_stop(data, monkeypatch):
    """The real engine trains; what it is given is recorded: with ``inner``, a fold's model trains on its
    training rows less a 10 % slice, stops on that slice, and never sees the validation rows; with ``valid`` it
    trains on every training row and stops on the validation rows. The same seed draws the same slices."""
    X, y = data
    real, seen = cvmod.train_scoring, []

    def train(X_fit, y_fit, **kw):
        seen.append((X_fit.X.copy(), kw["eval_set"][0].X.copy()))
        return real(X_fit, y_fit, **kw)

    monkeypatch.setattr(cvmod, "train_scoring", train)
    rows = {tuple(r): i for i, r in enumerate(X)}

    def positions(A):
        return {rows[tuple(r)] for r in A}

    for on in ("valid", "inner"):
        seen.clear()
        cv = cross_validate(X, y, early_stopping_on=on, **KW)
        for (tr, va), (fit, stop) in zip(cv.folds, seen):
            fit, stop = positions(fit), positions(stop)
            if on == "valid":
                assert fit == set(tr) and stop == set(va)
            else:
                assert fit | stop == set(tr) and not fit & stop and not stop & set(va)
                assert len(stop) == int(INNER_SHARE * len(tr))
    first = [s for _, s in seen]
    seen.clear()
    b = cross_validate(X, y, early_stopping_on="inner", **KW)
    assert all(np.array_equal(s, t) for s, (_, t) in zip(first, seen))
    np.testing.assert_array_equal(b.oof, cv.oof)                      # same seed, same numbers


def test_the_inner_slice_keeps_classes_entities_and_the_label_range():
    rs = np.random.RandomState(0)
    y = np.r_[np.zeros(500), np.ones(300), np.full(200, 2.0), [3.0]]
    fit, stop = inner_split(y, seed=5)
    assert [int((y[stop] == c).sum()) for c in (0, 1, 2, 3)] == [50, 30, 20, 0]    # by class, the rare top kept
    assert np.array_equal(np.sort(np.r_[fit, stop]), np.arange(y.size))
    again = inner_split(y, seed=5)
    assert all(np.array_equal(a, b) for a, b in zip((fit, stop), again))
    assert not np.array_equal(stop, inner_split(y, seed=6)[1])
    g = rs.randint(0, 100, y.size)
    g[-1] = g[0]                      # the one row of the top label shares an entity with a row of label 0
    fit, stop = inner_split(y, seed=1, groups=g)
    assert not set(g[fit]) & set(g[stop]) and 3.0 in y[fit] and stop.size > 0
    fit, stop = inner_split(y, seed=1, stratified=False)
    assert {0.0, 3.0} <= set(y[fit]) and stop.size == int(INNER_SHARE * y.size)
    with pytest.raises(ValueError, match="cv.early_stopping_on=inner: a fold's 4 training rows leave no rows to "
                                         "stop on"):
        inner_split(np.array([0.0, 1.0, 2.0, 3.0]), seed=0)


def test_inner_cv_with_groups_keeps_each_entitys_rows_on_one_side(monkeypatch):
    rs = np.random.RandomState(3)
    g = np.repeat(np.arange(200), 3)
    X = np.repeat(rs.rand(200, 4), 3, axis=0) + rs.normal(0, 0.01, (600, 4))
    y = np.repeat(rs.randint(0, 4, 200), 3).astype(float)
    real, seen = cvmod.train_scoring, []
    monkeypatch.setattr(cvmod, "train_scoring", lambda X_fit, y_fit, **kw: seen.append(
        (X_fit.X, kw["eval_set"][0].X)) or real(X_fit, y_fit, **kw))
    cross_validate(X, y, groups=g, early_stopping_on="inner", **{**KW, "stratified": True})
    entity = {tuple(r): e for r, e in zip(X, g)}
    for fit, stop in seen:
        assert not {entity[tuple(r)] for r in fit} & {entity[tuple(r)] for r in stop}


def test_a_bad_value_is_refused_before_training(data, monkeypatch):
    X, y = data
    trained = []
    monkeypatch.setattr(cvmod, "train_scoring", lambda *a, **k: trained.append(1))
    with pytest.raises(ValueError, match=r"^cv.early_stopping_on='fold' is unknown; choose one of: valid, inner, "
                                         r"other_folds$"):
        cross_validate(X, y, early_stopping_on="fold", **KW)
    assert not trained


def cfg_for(*overrides):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return OmegaConf.to_container(compose(config_name="config", overrides=list(overrides)), resolve=True)


def test_the_config_key_is_checked_and_reaches_the_run(monkeypatch):
    from qwkboost.config import check_config
    from qwkboost.runs import experiment

    assert cfg_for()["cv"]["early_stopping_on"] == default_early_stopping_on() == "other_folds"
    assert cfg_for("experiment=qwk_table")["cv"]["early_stopping_on"] == "valid"       # the article's protocol
    with pytest.raises(ValueError, match=r"^cv.early_stopping_on='test' is unknown; choose one of: valid, inner, "
                                         r"other_folds$"):
        check_config(cfg_for("cv.early_stopping_on=test"))
    cfg = cfg_for("cv.early_stopping_on=inner", "data.n_train=600", "data.n_test=200", "cv.n_splits=3",
                  "engine.num_boost_round=30", "engine.early_stopping_rounds=5", "tracking.explain=false")
    check_config(cfg)
    real, calls = experiment.cross_validate, []
    monkeypatch.setattr(experiment, "cross_validate", lambda *a, **k: calls.append(k) or real(*a, **k))
    experiment.run_experiment(cfg)
    assert calls[0]["early_stopping_on"] == "inner"
    del cfg["cv"]["early_stopping_on"]              # a config without the key (qwkboost.auto's candidates): conf's
    row = experiment.run_experiment(cfg)
    assert calls[1]["early_stopping_on"] is None and np.isfinite(row["qwk_thresholds_oof_nested"])


def test_other_folds_reads_each_folds_oof_at_the_other_folds_rounds(data):
    """The same models and test scores as ``valid``; each fold's out-of-fold scores (and class probabilities) are
    its model's at the median of the rounds the other folds of its repeat kept, at most the rounds it trained."""
    from qwkboost.cv.inner import other_rounds

    X, y = data
    X_test = X[:50]
    kw = {**KW, "objective": "ordinal_logit", "stratified": True, "repeats": 2}
    valid = cross_validate(X, y, X_test, early_stopping_on="valid", **kw)
    other = cross_validate(X, y, X_test, early_stopping_on="other_folds", **kw)
    np.testing.assert_array_equal(other.test, valid.test)
    np.testing.assert_array_equal(other.test_proba, valid.test_proba)
    assert other.best_iterations == valid.best_iterations == valid.oof_iterations
    best = np.array(other.best_iterations)
    assert len(set(other.oof_iterations)) > 1 and other.oof_iterations != other.best_iterations
    proba = np.zeros_like(other.oof_proba)
    for i, (m, (_, va)) in enumerate(zip(other.models, other.folds)):
        r, k = divmod(i, 3)
        rounds = other_rounds(best[3 * r:3 * r + 3], k, m.num_rounds)
        assert rounds == other.oof_iterations[i] == min(max(round(np.median(np.delete(best[3 * r:3 * r + 3], k))),
                                                             1), m.num_rounds)
        np.testing.assert_allclose(other.oof_repeats[r, va], m.predict(X[va], num_iteration=rounds))
        proba[va] += m.predict_proba(X[va], num_iteration=rounds) / 2
    np.testing.assert_allclose(other.oof_proba, proba)
    np.testing.assert_allclose(other.oof, other.oof_repeats.mean(axis=0))
    assert not np.array_equal(other.oof, valid.oof)
    np.testing.assert_array_equal(cross_validate(X, y, X_test, early_stopping_on="other_folds", **kw).oof,
                                  other.oof)                          # same seed, same numbers



@pytest.mark.parametrize("engine", ["lightgbm", "xgboost"])
def test_with_other_folds_a_fold_s_own_scores_are_predicted_only_for_who_reads_them(data, monkeypatch, engine):
    """With ``other_folds`` a fold's out-of-fold scores are read again at the other folds' rounds. On XGBoost its
    scores at its own rounds cost a prediction of its rows, made only when ``on_fold`` reads them (``fold_scores``),
    and so do the test rows; LightGBM scores both as it boosts, so nothing is predicted in full. Either way the
    same result, and an ``on_fold`` that does not read them gets ``None``."""
    from qwkboost.engines.model import Model

    X, y = data
    X_test = X[:50]
    kw = {**KW, "engine": engine, "objective": "ordinal_logit", "stratified": True}
    if engine == "xgboost":
        kw["params"] = {"nthread": 1, "learning_rate": 0.1}
    rows = []
    real = Model.predict_raw

    def counted(self, X_, *args, **kwargs):
        rows.append(len(X_))
        return real(self, X_, *args, **kwargs)

    monkeypatch.setattr(Model, "predict_raw", counted)
    seen = {True: [], False: []}
    results = {}
    for reads in (True, False):
        rows.clear()
        results[reads] = cross_validate(X, y, X_test, early_stopping_on="other_folds", fold_scores=reads,
                                        on_fold=lambda i, va, scores, reads=reads: seen[reads].append(scores), **kw)
        results[reads, "rows"] = sum(rows)
    assert all(s is not None and len(s) for s in seen[True]) and seen[False] == [None, None, None]
    np.testing.assert_array_equal(results[False].oof, results[True].oof)
    np.testing.assert_array_equal(results[False].test, results[True].test)
    np.testing.assert_array_equal(results[False].oof_proba, results[True].oof_proba)
    if engine == "xgboost":
        assert results[True, "rows"] - results[False, "rows"] == len(y)     # each row's own-round prediction saved
        assert results[False, "rows"] == len(y) + 3 * len(X_test)           # read again, and the test rows
    else:
        # the test rows and each fold's own rows come from training; only the rounds between the fold's best and
        # the other folds' are predicted (predict_span), which predict_raw does not count
        assert results[True, "rows"] == results[False, "rows"] == 0
        rows.clear()
        cross_validate(X, y, early_stopping_on="valid", **kw)       # no test rows: the fold's own still kept
        assert sum(rows) == 0

def test_without_early_stopping_every_setting_trains_and_scores_alike(data):
    X, y = data
    kw = {**KW, "early_stopping_rounds": None, "num_boost_round": 20}
    runs = [cross_validate(X, y, early_stopping_on=on, **kw) for on in ("valid", "inner", "other_folds")]
    for cv in runs[1:]:
        np.testing.assert_array_equal(cv.oof, runs[0].oof)


@pytest.mark.parametrize("on", ["valid", "inner", "other_folds"])
def test_scores_kept_while_boosting_are_the_models_predictions(data, on):
    """LightGBM scores the test rows (and, with ``inner``, the fold's own) as it boosts: the out-of-fold and test
    scores are still each fold model's predictions at the rounds read, up to rounding."""
    X, y = data
    X_test = X[:60] + 0.01
    cv = cross_validate(X, y, X_test, early_stopping_on=on, **{**KW, "objective": "ordinal_logit"})
    test = np.mean([m.predict(X_test) for m in cv.models], axis=0)
    np.testing.assert_allclose(cv.test, test, rtol=1e-12, atol=1e-12)
    for m, (_, va), n in zip(cv.models, cv.folds, cv.oof_iterations):
        np.testing.assert_allclose(cv.oof[va], m.predict(X[va], num_iteration=n), rtol=1e-12, atol=1e-12)
