"""Which path each objective takes to CatBoost (qwkboost/engines/catboost_losses.py), on real CatBoost: the
built-in losses give the Python loss's model, the compiled row kernels give the lookup's gradients and model,
blocks at other scores than the metric's stop training, and the refusals."""

import numpy as np
import pandas as pd
import pytest

import qwkboost as qb
from qwkboost.engines.catboost_losses import MISMATCH, AfterIteration, KernelLoss, Metric, Rounds, path
from qwkboost.engines.engine import EngineObjective
from qwkboost.objectives import ExtendedQWK, Multiclass, OrdinalLogit, SquaredError

catboost = pytest.importorskip("catboost")


class PythonSquaredError(SquaredError):
    """A user's objective: the same squared error, through CatBoost's Python loss (blocks computed directly)."""


class PythonExtendedQWK(ExtendedQWK):
    """Extended QWK through the lookup path (a subclass takes no compiled kernel)."""


class PythonOrdinalLogit(OrdinalLogit):
    """Ordinal logit through the lookup path."""


@pytest.fixture(scope="module")
def data():
    from qwkboost.data.sources import quartiles

    return quartiles(n_train=3000, n_test=1500)


def test_each_objective_takes_its_path():
    assert [path(o) for o in (SquaredError(), Multiclass(), ExtendedQWK(), OrdinalLogit())] == \
        ["builtin", "builtin", "kernel", "kernel"]
    assert [path(o) for o in (PythonSquaredError(), PythonExtendedQWK(), OrdinalLogit(link="probit"))] == \
        ["rows", "lookup", "lookup"]


@pytest.mark.parametrize("weighted", [False, True])
def test_builtin_rmse_is_the_python_loss_model(data, weighted):
    """squared_error on CatBoost's RMSE: the same model as through the Python loss, early stopping on the
    objective's metric, learning curves and the initial score included."""
    w = np.random.RandomState(1).uniform(0.5, 2.0, data.y_train.size) if weighted else None
    kw = dict(params={"learning_rate": 0.3, "depth": 5}, num_boost_round=300, seed=3, n_jobs=2, sample_weight=w,
              eval_set=(data.X_test, data.y_test + 10), early_stopping_rounds=5)
    y = data.y_train + 10                          # labels away from 0: F0 and the label offset both matter
    built, python = (qb.train(data.X_train, y, "catboost", o, **kw) for o in ("squared_error", PythonSquaredError()))
    assert built.num_rounds < 300 and (built.num_rounds, built.best_iteration) == \
        (python.num_rounds, python.best_iteration)
    np.testing.assert_allclose(built.predict(data.X_test), python.predict(data.X_test), rtol=0, atol=1e-6)
    for part in ("train", "valid"):
        np.testing.assert_allclose(built.learning_curve[part], python.learning_curve[part], rtol=0, atol=1e-6)
    assert built.init_score == python.init_score


class SoftmaxLoss:
    """qwkboost's multiclass gradient through CatBoost's Python loss for several scores (``calc_ders_multi``,
    once per row), from the objective's own ``grad_hess``; ``exact``: the softmax's full K x K Hessian instead of
    the objective's diagonal."""

    no_jit = True

    def __init__(self, objective, exact):
        self.objective, self.exact = objective, exact
        self.f0 = np.asarray(objective.init_score_)

    def calc_ders_multi(self, approx, target, weight):
        score = (np.asarray(approx) + self.f0)[None, :]
        g, h = self.objective.grad_hess(np.array([target + self.objective.lo_]), score)
        if self.exact:
            p = self.objective.predict_proba(score)[0]
            return list(-g[0] * weight), (np.outer(p, p) - np.diag(p)) * weight
        return list(-g[0] * weight), -np.diag(h[0]) * weight


class Silent:
    def is_max_optimal(self):
        return False

    def evaluate(self, approxes, target, weight):
        return 0.0, 1.0

    def get_final_error(self, error, weight):
        return error


@pytest.mark.parametrize("method", ["Gradient", "Newton"])
def test_multiclass_is_catboosts_multiclass(data, method, tmp_path):
    """multiclass on CatBoost's MultiClass: the model of qwkboost's gradient through CatBoost's Python loss (with
    Newton leaves, of the same loss's exact Hessian, which CatBoost's MultiClass takes), row weights and the
    initial class scores included; the .cbm file alone predicts the full scores."""
    rs = np.random.RandomState(4)
    y = data.y_train + 1                                    # classes 1..4
    w = rs.uniform(0.5, 2.0, y.size)
    p = {"learning_rate": 0.3, "depth": 4, "leaf_estimation_method": method}
    m = qb.train(data.X_train, y, "catboost", "multiclass", p, num_boost_round=25, seed=2, n_jobs=2,
                 sample_weight=w)
    obj = Multiclass().fit(y, sample_weight=w)
    assert np.ptp(obj.init_score_) > 0.01                 # unequal priors: the initial scores matter
    ref = catboost.CatBoost({**p, "loss_function": SoftmaxLoss(obj, exact=method == "Newton"),
                             "eval_metric": Silent(), "classes_count": 4, "iterations": 25, "random_seed": 2,
                             "thread_count": 2, "boosting_type": "Plain", "leaf_estimation_iterations": 1,
                             "leaf_estimation_backtracking": "No", "boost_from_average": False,
                             "logging_level": "Silent", "allow_writing_files": False})
    ref.fit(catboost.Pool(data.X_train, y - 1, weight=w))
    expected = ref.predict(data.X_test, prediction_type="RawFormulaVal") + np.asarray(obj.init_score_)
    np.testing.assert_allclose(m.predict_raw(data.X_test), expected, rtol=0, atol=1e-6)
    m.booster.save_model(str(tmp_path / "m.cbm"))
    alone = catboost.CatBoost().load_model(str(tmp_path / "m.cbm"))
    np.testing.assert_allclose(alone.predict(data.X_test, prediction_type="RawFormulaVal"), expected, atol=1e-6)


def test_multiclass_stops_on_its_own_metric_and_explains(data):
    m = qb.train(data.X_train, data.y_train, "catboost", "multiclass", {"learning_rate": 0.3}, num_boost_round=400,
                 eval_set=(data.X_test, data.y_test), early_stopping_rounds=10, n_jobs=2)
    curve = m.learning_curve
    assert m.num_rounds < 400 and m.best_iteration == int(np.argmin(curve["valid"])) + 1
    # every round's metric is the objective's log-loss of the model's scores after that round
    for t in (1, m.best_iteration):
        for part, (X, y) in (("train", (data.X_train, data.y_train)), ("valid", (data.X_test, data.y_test))):
            assert curve[part][t - 1] == pytest.approx(m.objective.metric(y, m.predict_raw(X, t)), abs=1e-9)
    assert qb.qwk(data.y_test.astype(int), np.rint(m.predict(data.X_test)).astype(int)) > 0.5
    ex = qb.explain(m, data.X_test[:50])
    np.testing.assert_allclose(ex.values.sum(axis=1) + ex.bias, m.predict_raw(data.X_test[:50]), atol=1e-6)


def _kernel_case(objective, y, w, rs):
    """A fitted objective as an engine sees it, a kernel loss on it, and a round's scores."""
    objective.fit(y, sample_weight=w)
    seen = EngineObjective(objective, qb.engines.label_offset(y) if objective.centre_labels else 0.0,
                           sample_weight=w)
    yy = y - seen.offset
    rounds = Rounds(seen, yy, w, None)
    rounds.new_round(rs.normal(scale=1.5, size=y.size))
    rounds.approx[::7] = rounds.approx[3]              # repeated scores, as early rounds have
    rounds.approx[1:40:8] = [-800.0, -400.0, 400.0, 800.0, 1e-300]     # far out: the kernels' clips and bounds
    return seen, rounds, KernelLoss(rounds), yy


CASES = [ExtendedQWK(), ExtendedQWK(hessian="gauss_newton", clip="hold"), ExtendedQWK(clip="none", a=102.0, b=1.0),
         OrdinalLogit(), OrdinalLogit(cut_steps=2, hessian_every=1)]


@pytest.mark.parametrize("objective", CASES, ids=repr)
@pytest.mark.parametrize("weighted", [False, True])
def test_the_kernels_give_the_lookups_gradients(objective, weighted):
    """Every block's derivatives from the compiled kernel equal the objective's own grad_hess on every row (what
    the lookup path hands out), in any block order and size; the objective's learned state advances alike."""
    rs = np.random.RandomState(0)
    y = rs.randint(0, 5, 4000).astype(np.float64) + 100.0          # labels far from 0: centred for QWK
    w = rs.uniform(0.2, 3.0, y.size) if weighted else None
    seen, rounds, loss, yy = _kernel_case(objective.clone(), y, w, rs)
    ref_seen, _, _, _ = _kernel_case(objective.clone(), y, w, np.random.RandomState(0))
    # the same two rounds on both: the reference through grad_hess, the kernel's through round_state
    for _ in range(2):
        g, h = ref_seen.grad_hess(yy, rounds.f0 + rounds.approx)
        loss.check_round()
        order = rs.permutation(y.size)
        got = np.empty((y.size, 2))
        for block in np.array_split(order, 9):
            ww = None if w is None else w[block].astype(np.float32)
            got[block] = loss.calc_ders_range(rounds.approx[block], rounds.labels32[block], ww)
        ws = 1.0 if w is None else w.astype(np.float32).astype(np.float64) / w     # CatBoost holds float32 weights
        np.testing.assert_allclose(-got[:, 0], g * ws, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(-got[:, 1], h * ws, rtol=1e-12, atol=1e-12)
        rounds.new_round(rounds.approx + rs.normal(scale=0.1, size=y.size))
    if isinstance(objective, OrdinalLogit):
        assert seen.objective.cuts_ == ref_seen.objective.cuts_


@pytest.mark.parametrize("objective", CASES[:3], ids=repr)
@pytest.mark.parametrize("weighted", [False, True])
def test_extended_qwks_one_pass_is_its_metric_and_round_state(objective, weighted):
    """The compiled pass gives the objective's own metric on the training rows and its round state (to
    rounding), and the fingerprint of the rows' pairs; the Python metric hands CatBoost that value."""
    from qwkboost.engines import catboost_kernels as kernels

    rs = np.random.RandomState(4)
    y = rs.randint(0, 5, 3000).astype(np.float64) + 100.0
    w = rs.uniform(0.2, 3.0, y.size) if weighted else None
    seen, rounds, loss, yy = _kernel_case(objective.clone(), y, w, rs)
    assert loss.one_pass is not None
    metric = Metric(rounds, loss)
    for _ in range(3):
        scores = rounds.approx + rs.normal(scale=0.2, size=y.size)
        value, _ = metric.evaluate([scores], None, None)
        metric.calls = 0
        expected = seen.metric(yy, rounds.f0 + scores, w)
        assert value == pytest.approx(expected, rel=1e-12, abs=1e-12)
        state = seen.round_state(yy, rounds.f0 + scores)
        got = dict(zip(kernels.QWK_STATE, loss.args[0]))
        for key in ("f", "g", "n"):
            assert got[key] == pytest.approx(state[key], rel=1e-12)
        assert loss.expected == int(kernels.fingerprint(scores.view(np.uint64), rounds.labels32.view(np.uint32)))
        loss.seen = [(y.size, loss.expected)]          # the round's blocks, as CatBoost hands them


def test_a_round_at_other_scores_is_refused():
    """A round's blocks must hold every row's (score, label) pair, each pass once, and no other."""
    rs = np.random.RandomState(1)
    y = rs.randint(0, 4, 500).astype(np.float64)

    def one_round(loss, rounds, change=None):
        for _ in range(2):                                   # CatBoost's two passes: split search, leaves
            for block in np.array_split(rs.permutation(y.size), 7):
                a, t = rounds.approx[block].copy(), rounds.labels32[block].copy()
                if change is not None and 3 in block:
                    change(a, t, int(np.flatnonzero(block == 3)[0]))
                loss.calc_ders_range(a, t, None)
        loss.check_round()

    def score(a, t, i):
        a[i] += 1e-9

    def label(a, t, i):
        t[i] += 1

    for objective in (ExtendedQWK(), OrdinalLogit()):
        _, rounds, loss, _ = _kernel_case(objective, y, None, rs)
        one_round(loss, rounds)                              # the round's scores: fine
        for change in (score, label):
            with pytest.raises(RuntimeError, match="not the round's"):
                one_round(loss, rounds, change)
        loss.calc_ders_range(rounds.approx[:499].copy(), rounds.labels32[:499].copy(), None)
        with pytest.raises(RuntimeError, match="not the round's"):    # a row missing
            loss.check_round()


def test_catboost_moving_the_scores_stops_training_with_the_kernels_error(data):
    """CatBoost's model shrinkage moves the training scores after its metric saw them: the kernel finds the next
    round's blocks at other scores and training stops (qb.train refuses the setting before training)."""
    with pytest.raises(ValueError, match=r"model_shrink_rate=0.1 cannot be used with objective=extended_qwk"):
        qb.train(data.X_train, data.y_train, "catboost", "extended_qwk", {"model_shrink_rate": 0.1},
                 num_boost_round=5)
    obj = ExtendedQWK().fit(data.y_train)
    rounds = Rounds(EngineObjective(obj), data.y_train, None, None)
    loss = KernelLoss(rounds)
    metric = Metric(rounds, loss)
    model = catboost.CatBoost({"loss_function": loss, "eval_metric": metric, "iterations": 5,
                               "model_shrink_rate": 0.1, "boosting_type": "Plain", "boost_from_average": False,
                               "leaf_estimation_iterations": 1, "logging_level": "Silent",
                               "allow_writing_files": False, "thread_count": 2})
    with pytest.raises(catboost.CatBoostError, match=MISMATCH[:40]):
        model.fit(catboost.Pool(data.X_train, data.y_train), callbacks=[AfterIteration(rounds, metric, [])])
    # qwkboost's own fit turns CatBoost's wrapped error into the message alone
    from qwkboost.engines import catboost as adapter

    monkey = dict(adapter.MOVE_SCORES)
    try:
        adapter.MOVE_SCORES.clear()                          # the refusal off: the kernel's check is left
        with pytest.raises(RuntimeError, match=r"^catboost asked for derivatives at scores that are not the"):
            qb.train(data.X_train, data.y_train, "catboost", "ordinal_logit", {"model_shrink_rate": 0.1},
                     num_boost_round=5)
    finally:
        adapter.MOVE_SCORES.update(monkey)


@pytest.mark.parametrize("objective, reference", [("extended_qwk", PythonExtendedQWK()),
                                                  ("ordinal_logit", PythonOrdinalLogit())])
def test_the_kernel_path_trains_the_lookup_model(data, objective, reference):
    """With categorical columns (one seeded order of rows), weights and early stopping."""
    rs = np.random.RandomState(3)
    X = pd.DataFrame(data.X_train, columns=[f"x{j}" for j in range(data.X_train.shape[1])])
    X["city"] = rs.choice([f"c{i}" for i in range(20)], len(X))
    y = np.clip(data.y_train + (X["city"].str[1:].astype(int) % 2), 0, 4)
    w = rs.uniform(0.5, 2.0, y.size)
    kw = dict(params={"learning_rate": 0.3}, num_boost_round=200, seed=5, n_jobs=2, sample_weight=w,
              eval_set=(X.iloc[:800], y[:800]), early_stopping_rounds=8)
    fast, slow = (qb.train(X, y, "catboost", o, **kw) for o in (objective, reference))
    assert (fast.num_rounds, fast.best_iteration) == (slow.num_rounds, slow.best_iteration)
    np.testing.assert_allclose(fast.predict(X), slow.predict(X), rtol=0, atol=1e-9)
    np.testing.assert_allclose(fast.learning_curve["valid"], slow.learning_curve["valid"], rtol=0, atol=1e-12)
    if objective == "ordinal_logit":
        np.testing.assert_allclose(fast.objective.cuts_, slow.objective.cuts_, rtol=0, atol=1e-12)


def test_the_installed_catboost_is_in_the_tested_range():
    """pyproject.toml pins the CatBoost releases whose private synonym and parameter checks qwkboost uses; CI
    installs from it, so this suite runs on one of them."""
    import tomllib
    from pathlib import Path

    from packaging.specifiers import SpecifierSet

    from qwkboost.engines.catboost import CATBOOST_RANGE, catboost_private

    deps = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
    pinned = next(d for d in deps["dependencies"] if d.startswith("catboost"))
    assert pinned == "catboost" + CATBOOST_RANGE
    assert catboost.__version__ in SpecifierSet(CATBOOST_RANGE)
    assert len(catboost_private()) == 2


def test_a_catboost_whose_private_functions_changed_is_refused(data, monkeypatch):
    """A release whose synonym function no longer maps names gives a clear error before training, not
    parameters passed on under names qwkboost did not check."""
    from catboost import core

    from qwkboost.engines.catboost import catboost_private

    monkeypatch.setattr(core, "_process_synonyms", lambda params: None)
    catboost_private.cache_clear()
    try:
        with pytest.raises(RuntimeError, match=r"catboost 1\.2\.\d+ does not resolve and check parameters as the "
                                               r"releases qwkboost is tested on do .* install catboost>=1\.2\.5,<1\.3"):
            qb.train(data.X_train, data.y_train, "catboost", "squared_error", {"max_depth": 3}, num_boost_round=2)
        monkeypatch.delattr(core, "_process_synonyms")
        catboost_private.cache_clear()
        with pytest.raises(RuntimeError, match="does not resolve and check parameters"):
            qb.train(data.X_train, data.y_train, "catboost", "squared_error", num_boost_round=2)
    finally:
        monkeypatch.undo()
        catboost_private.cache_clear()
