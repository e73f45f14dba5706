"""QWKClassifier: scikit-learn's estimator checks, Pipeline, cross_val_score, GridSearchCV, weights, labels."""

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.estimator_checks import check_estimator

import qwkboost as qb
from qwkboost.estimator import QWKClassifier

# Two checks cannot hold for an ordinal classifier fitted by internal cross-validation; both are by design:
EXPECTED_FAILURES = {
    # the internal K-fold split depends on the rows, so repeating or dropping rows changes the folds (and
    # the out-of-fold cut points); weights themselves equal repeated rows in every stage
    # (tests/test_weights.py), as with any estimator that holds out validation rows
    "check_sample_weight_equivalence_on_dense_data":
        "internal CV folds depend on the rows; weights equal repeated rows stage by stage",
    # labels -1 and 1 are two steps apart on an ordinal scale, so 0 is a class (QWK weighs the difference
    # of label values): classes_ is every whole number from the lowest label to the highest
    "check_classifiers_classes": "classes_ spans the ordinal scale: labels -1 and 1 make 0 a class too",
}


def small(engine):
    return QWKClassifier(engine=engine, num_boost_round=30, early_stopping_rounds=10, n_jobs=1, n_splits=2,
                         params={"min_data_in_leaf": 1, "min_data_in_bin": 1} if engine == "lightgbm" else None)


@pytest.mark.parametrize("engine", ["native", pytest.param("xgboost", marks=pytest.mark.slow),
                                    pytest.param("lightgbm", marks=pytest.mark.slow)])
def test_scikit_learn_estimator_checks(engine):
    check_estimator(small(engine), expected_failed_checks=EXPECTED_FAILURES)


@pytest.fixture(scope="module")
def table():
    """The article's quartile data with a string column and labels on a 1..4 scale."""
    from qwkboost.data.sources import quartiles

    ds = quartiles(n_train=3000, n_test=1000)
    cols = [f"x{i}" for i in range(ds.X_train.shape[1])]
    X = pd.DataFrame(ds.X_train, columns=cols).assign(size=np.where(ds.X_train[:, 0] > 0, "big", "small"))
    Xt = pd.DataFrame(ds.X_test, columns=cols).assign(size=np.where(ds.X_test[:, 0] > 0, "big", "small"))
    return X, ds.y_train + 1, Xt, ds.y_test + 1


@pytest.mark.parametrize("engine", ["xgboost", "lightgbm", "native"])
def test_the_whole_job_on_every_engine(engine, table):
    X, y, Xt, yt = table
    clf = QWKClassifier(engine=engine, params={"learning_rate": 0.2}, num_boost_round=300,
                        early_stopping_rounds=20, n_splits=3).fit(X, y)
    assert list(clf.classes_) == [1, 2, 3, 4]
    pred = clf.predict(Xt)
    assert set(pred) <= {1, 2, 3, 4}
    assert clf.score(Xt, yt) == pytest.approx(qb.qwk(yt - 1, pred - 1))
    assert clf.score(Xt, yt) > 0.55                                  # the Bayes ceiling is about 0.64
    np.testing.assert_array_equal(clf.pipeline_.predict(Xt), pred)
    assert clf.pipeline_.schema.categorical == [X.shape[1] - 1]


def test_pipeline_cross_val_score_and_grid_search(table):
    X, y, _, _ = table
    num = X.drop(columns="size")
    pipe = make_pipeline(FunctionTransformer(lambda d: d * 2.0), QWKClassifier(engine="native", num_boost_round=100,
                                                                               early_stopping_rounds=10, n_splits=3))
    scores = cross_val_score(pipe, num, y, cv=3)
    assert scores.shape == (3,) and np.all(scores > 0.5)
    grid = GridSearchCV(QWKClassifier(engine="lightgbm", num_boost_round=100, early_stopping_rounds=10, n_splits=3),
                        {"params": [{"num_leaves": 4}, {"num_leaves": 15}], "thresholds": ["round", "exact"]}, cv=2)
    grid.fit(num, y)
    assert grid.best_score_ > 0.5 and len(grid.cv_results_["params"]) == 4


def test_sample_weights_and_text_labels(table):
    X, y, Xt, _ = table
    num, numt = X.drop(columns="size"), Xt.drop(columns="size")
    w = np.where(y == 4, 5.0, 1.0)                                   # the top class counts five times
    plain = QWKClassifier(engine="native", num_boost_round=80, early_stopping_rounds=10, n_splits=3).fit(num, y)
    heavy = QWKClassifier(engine="native", num_boost_round=80, early_stopping_rounds=10, n_splits=3).fit(
        num, y, sample_weight=w)
    assert (heavy.predict(numt) == 4).mean() > (plain.predict(numt) == 4).mean()
    names = np.array(["a-low", "b-mid", "c-high", "d-top"])[y.astype(int) - 1]
    txt = QWKClassifier(engine="native", num_boost_round=80, early_stopping_rounds=10, n_splits=3).fit(num, names)
    assert list(txt.classes_) == ["a-low", "b-mid", "c-high", "d-top"]
    ranks = QWKClassifier(engine="native", num_boost_round=80, early_stopping_rounds=10, n_splits=3).fit(num, y - 1)
    # text labels are ranked 0, 1, 2, ...: the same model as on those numbers
    np.testing.assert_array_equal(txt.predict(numt), txt.classes_[ranks.predict(numt).astype(int)])
