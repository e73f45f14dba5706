"""Every objective and categorical columns on XGBoost's cluster path, on a real Dask LocalCluster (2 workers).

``ordinal_logit`` learns cut points from sums over every row each round and ``soft_qwk`` forms its gradient from the
expected confusion matrix of every row: on the workers both take those sums all-reduced, so every row's gradient
(and the cut points) equal one process's. Category columns are encoded on the client, with one process's codes.
"""

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import qwkboost
from conftest import TINY_OVERRIDES, run_in_process
from qwkboost.config import ConfigError
from qwkboost.cv import cross_validate
from qwkboost.data.sources import quartiles
from qwkboost.distributed.training import train_dask
from qwkboost.evaluation.metrics import qwk
from qwkboost.objectives.ordinal_logit import OrdinalLogit
from qwkboost.objectives.soft_qwk import SoftQWK

PARAMS = {"max_depth": 4, "learning_rate": 0.2}


@pytest.fixture(scope="module")
def data():
    """Quartile data on a 0.01 grid (fewer distinct values than bins: the histogram cuts are the same however the
    rows are split, so a difference between 1 and 2 workers is the objective's), rows sorted by the first feature
    so that the workers' rows differ in their label mix."""
    ds = quartiles(n_train=8_000, n_test=4_000, seed=5)
    X, Xt = np.round(ds.X_train, 2), np.round(ds.X_test, 2)
    order = np.argsort(X[:, 0], kind="stable")
    return X[order], ds.y_train[order], Xt, ds.y_test


def _save(record_dir, calls, **arrays):
    np.savez(Path(record_dir) / f"{os.getpid()}-{calls}.npz", **arrays)


class RecordingLogit(OrdinalLogit):
    """The cumulative-link model, saving on the worker each round's rows, gradients and cut points."""

    def __init__(self, record_dir: str = "", hessian_every: int = 8):    # parameters by name: objectives are cloned
        super().__init__(hessian_every=hessian_every)
        self.record_dir = record_dir

    def grad_hess(self, y, score, sample_weight=None, out=None):
        before = np.array(self.cuts_)
        g, h = super().grad_hess(y, score, sample_weight, out)
        self.calls = getattr(self, "calls", 0) + 1
        _save(self.record_dir, self.calls, y=y, score=score, g=g, h=h, before=before, after=np.array(self.cuts_),
              w=np.zeros(0) if sample_weight is None else sample_weight)
        return g, h


class RecordingSoftQWK(SoftQWK):
    """Soft QWK, saving on the worker each round's rows and gradients."""

    def __init__(self, record_dir: str = ""):
        super().__init__()
        self.record_dir = record_dir

    def grad_hess(self, y, score, sample_weight=None, out=None):
        g, h = super().grad_hess(y, score, sample_weight, out)
        self.calls = getattr(self, "calls", 0) + 1
        _save(self.record_dir, self.calls, y=y, score=score, g=g, h=h,
              w=np.zeros(0) if sample_weight is None else sample_weight)
        return g, h


def _rounds(record_dir, n_rounds):
    """Each round's records of both workers, concatenated over the rows."""
    files = sorted(Path(record_dir).glob("*.npz"))
    assert len({f.name.split("-")[0] for f in files}) == 2 and len(files) == 2 * n_rounds   # two workers
    for rnd in range(1, n_rounds + 1):
        parts = [np.load(f) for f in files if f.stem.endswith(f"-{rnd}")]
        yield parts, {k: np.concatenate([p[k] for p in parts]) for k in ("y", "score", "g", "h", "w")}


def _close(a, b, rel=1e-10):
    return np.abs(np.asarray(a) - np.asarray(b)).max() <= rel * max(1.0, np.abs(b).max())


@pytest.mark.parametrize("weighted", [False, True])
def test_ordinal_logit_on_the_workers_is_the_one_process_model(client, data, tmp_path, weighted):
    """Inside a real xgboost.dask run, every round: the gradients at the cut points, and the cut points' Newton step
    from sums over every row, equal one process's replay of the same rounds on all rows to 1e-10; the client's
    model keeps the workers' cut points."""
    X, y, _, _ = data
    w = np.random.default_rng(1).uniform(0.5, 2.0, y.size) if weighted else None
    n_rounds = 10
    model = train_dask(client, X, y, engine="xgboost", objective=RecordingLogit(str(tmp_path), hessian_every=3),
                       params=PARAMS, num_boost_round=n_rounds, sample_weight=w)
    reference = OrdinalLogit(hessian_every=3).fit(y, sample_weight=w)
    first = True
    for parts, cat in _rounds(tmp_path, n_rounds):
        if first:           # the client fitted the first cut points from every label's (weighted) count
            assert _close(reference.cuts_, parts[0]["before"], 1e-12)
            reference.cuts_ = list(parts[0]["before"])
            first = False
        for p in parts:     # the workers agree on the cut points before and after each round
            assert np.array_equal(p["before"], parts[0]["before"]) and np.array_equal(p["after"], parts[0]["after"])
        assert _close(parts[0]["before"], np.array(reference.cuts_))
        g, h = reference.grad_hess(cat["y"], cat["score"], cat["w"] if weighted else None)
        assert _close(cat["g"], g) and _close(cat["h"], h)
        assert _close(parts[0]["after"], np.array(reference.cuts_))
    moved = np.abs(np.array(reference.cuts_) - parts[0]["before"]).max()
    assert moved > 0                                    # the cut points were learning in the last round
    # the model on the client predicts with the cut points the workers learned
    assert np.allclose(model.objective.cuts_, parts[0]["after"], rtol=0, atol=1e-12)
    # a worker's own rows alone would have stepped the cut points elsewhere
    own = OrdinalLogit(hessian_every=3).fit(y, sample_weight=w)
    own.cuts_ = list(parts[0]["before"])
    own.grad_hess(parts[0]["y"], parts[0]["score"], parts[0]["w"] if weighted else None)
    assert np.abs(np.array(own.cuts_) - parts[0]["after"]).max() > 1e-4


@pytest.mark.parametrize("weighted", [False, True])
def test_soft_qwk_gradients_on_the_workers_equal_one_process(client, data, tmp_path, weighted):
    X, y, _, _ = data
    w = np.random.default_rng(2).uniform(0.5, 2.0, y.size) if weighted else None
    train_dask(client, X, y, engine="xgboost", objective=RecordingSoftQWK(str(tmp_path)), params=PARAMS,
               num_boost_round=4, sample_weight=w)
    reference = SoftQWK().fit(y, sample_weight=w)
    for parts, cat in _rounds(tmp_path, 4):
        assert cat["score"].shape == (y.size, 4)
        g, h = reference.grad_hess(cat["y"], cat["score"], cat["w"] if weighted else None)
        assert _close(cat["g"], g) and _close(cat["h"], h)
    own = SoftQWK().fit(y, sample_weight=w)
    g_own, _ = own.grad_hess(parts[0]["y"], parts[0]["score"], parts[0]["w"] if weighted else None)
    assert np.abs(g_own - parts[0]["g"]).max() > 1e-3      # a worker's own sums give other gradients


@pytest.mark.parametrize("objective", ["ordinal_logit", "soft_qwk"])
def test_two_workers_train_and_stop_where_one_process_does(client, data, objective):
    """With a validation set and early stopping: the same best round, the metric of all validation rows each
    round, and the same predictions as one process."""
    X, y, Xt, yt = data
    kw = dict(engine="xgboost", objective=objective, params=PARAMS, num_boost_round=60, early_stopping_rounds=8,
              eval_set=(Xt, yt))
    one = qwkboost.train(X, y, n_jobs=1, **kw)
    two = train_dask(client, X, y, **kw)
    assert two.best_iteration == one.best_iteration
    c1, c2 = np.asarray(one.learning_curve["valid"]), np.asarray(two.learning_curve["valid"])
    assert c1.shape == c2.shape and np.abs(c1 - c2).max() < 1e-3
    assert np.abs(one.predict(Xt) - two.predict(Xt)).max() < 1e-3
    assert abs(qwk(yt, np.rint(one.predict(Xt))) - qwk(yt, np.rint(two.predict(Xt)))) <= 0.002
    if objective == "ordinal_logit":       # the best round's cut points, as one process keeps them
        assert np.abs(np.subtract(one.objective.cuts_, two.objective.cuts_)).max() < 1e-4


def _with_category(X, rng):
    """``X`` as a DataFrame whose second column is a string category (with missing values)."""
    df = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    letters = np.array(list("edcba"))[np.clip((X[:, 1] * 5).astype(int), 0, 4)]
    df["f1"] = np.where(rng.uniform(size=len(df)) < 0.02, None, letters)
    return df


def test_category_columns_train_on_xgboost_workers_with_one_process_codes(client, data):
    X, y, Xt, yt = data
    rng = np.random.default_rng(3)
    df, dft = _with_category(X, rng), _with_category(Xt, rng)
    kw = dict(engine="xgboost", objective="extended_qwk", params=PARAMS, num_boost_round=40)
    one = qwkboost.train(df, y, n_jobs=1, **kw)
    two = train_dask(client, df, y, eval_set=(dft, yt), early_stopping_rounds=40, **kw)
    assert two.schema.categories == one.schema.categories == {1: ["a", "b", "c", "d", "e"]}
    assert two.booster.feature_types == ["q", "c"] + ["q"] * (X.shape[1] - 2)
    # strings in, on one machine, reordered columns matched by name
    shuffled = dft[list(reversed(dft.columns))]
    assert np.abs(two.predict(shuffled) - one.predict(dft)).max() < 1e-3
    # cross-validation on the cluster encodes once and trains every fold there
    res = cross_validate(df, y, engine="xgboost", objective="squared_error", params=PARAMS, num_boost_round=20,
                         n_splits=2, client=client, progress=False)
    assert res.oof.shape == y.shape and np.isfinite(res.oof).all()


def test_lightgbm_refuses_category_columns_in_one_line(client, data):
    X, y, _, _ = data
    with pytest.raises(ValueError, match=r"categorical columns \['f1'\]: lightgbm.dask takes numeric features only; "
                                         r"use engine=xgboost"):
        train_dask(client, _with_category(X, np.random.default_rng(0)), y, engine="lightgbm",
                   objective="squared_error", num_boost_round=5)


@pytest.mark.parametrize("objective", ["ordinal_logit", "soft_qwk"])
def test_the_command_refuses_what_lightgbm_workers_would_get_wrong_before_any_cluster(tmp_path, objective):
    """A ConfigError (one line on stderr, exit status 2) from the config check, before a cluster starts."""
    with pytest.raises(ConfigError, match=f"objective '{objective}' needs sums over every training row"):
        run_in_process([*TINY_OVERRIDES, "cluster=local", "engine=lightgbm", "engine.early_stopping_rounds=null",
                        f"objective={objective}"], tmp_path / "out")
