"""Issue 23's rewrites of ordinal_logit, multiclass and soft_qwk against their implementations before it
(``reference_objectives``, kept verbatim): the same gradients, hessians, metrics and cut-point steps to 1e-10
where the arithmetic is the same; the kept rows (metric, then gradients) equal fresh ones; the helpers in
qwkboost.objectives.rows."""

import numpy as np
import pytest
import reference_objectives as ref

import qwkboost as qb
import qwkboost.objectives.ordinal_logit as ol
from qwkboost.objectives import get
from qwkboost.objectives.rows import Memo, class_rows, sum_log
from qwkboost.objectives.soft_qwk import class_qwk


def close(a, b, rtol=1e-10):
    """Equal to ``rtol`` relative to the largest value (values near zero may differ by rounding of larger ones)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape
    scale = max(float(np.max(np.abs(b))), 1e-300)
    assert float(np.max(np.abs(a - b))) <= rtol * scale, float(np.max(np.abs(a - b))) / scale


def labels(n, k, seed, lo=1.0, weighted=False):
    rs = np.random.RandomState(seed)
    y = rs.randint(0, k, n).astype(float) + lo
    w = rs.uniform(0.5, 2.0, n) if weighted else None
    return rs, y, w


# -- ordinal_logit ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("link", ["logit", "probit"])
@pytest.mark.parametrize("weighted", [False, True])
def test_ordinal_logit_gradient_hessian_and_metric_equal_the_reference_at_the_same_cut_points(link, weighted):
    rs, y, w = labels(3000, 5, 0, weighted=weighted)
    F = (y - 3) * 0.8 + rs.normal(size=y.size)
    new = get("ordinal_logit", link=link, cut_steps=0).fit(y, w)
    old = ref.OrdinalLogit(link=link, cut_steps=0).fit(y, w)
    cuts = sorted((np.array(new.cuts_) + rs.normal(size=4) * 0.2).tolist())
    new.cuts_, old.cuts_ = list(cuts), list(cuts)
    g, h = new.grad_hess(y, F, w)
    g0, h0 = old.grad_hess(y, F, w)
    close(g, g0)
    close(h, h0)
    assert new.metric(y, F, w) == pytest.approx(old.metric(y, F, w), rel=1e-12)
    close(new.predict_proba(F), old.predict_proba(F), 1e-14)


@pytest.mark.parametrize("link", ["logit", "probit"])
@pytest.mark.parametrize("steps", [1, 3, 30])
def test_ordinal_logit_newton_steps_on_the_cut_points_equal_the_reference(link, steps):
    rs, y, w = labels(4000, 4, 1)
    F = (y - 2.5) * 1.2 + rs.normal(size=y.size)
    start = sorted((np.array(get("ordinal_logit").fit(y).cuts_) + rs.normal(size=3) * 0.3).tolist())
    new = get("ordinal_logit", link=link, cut_steps=steps).fit(y)
    old = ref.OrdinalLogit(link=link, cut_steps=steps).fit(y)
    new.cuts_, old.cuts_ = list(start), list(start)
    new.update_cuts(y, F)
    old.update_cuts(y, F)
    close(new.cuts_, old.cuts_)
    assert np.max(np.abs(np.array(new.cuts_) - start)) > 0.1       # long steps: checked on the likelihood


def test_ordinal_logit_takes_a_short_newton_step_as_it_is():
    rs, y, _ = labels(4000, 4, 2)
    F = (y - 2.5) * 1.2 + rs.normal(size=y.size)
    obj = get("ordinal_logit", cut_steps=40).fit(y)
    obj.update_cuts(y, F)                                    # the maximum likelihood at F
    mle = np.array(obj.cuts_)
    G = F + 0.01 * rs.normal(size=y.size)                     # a round later: the optimum moved a little
    new = get("ordinal_logit", cut_steps=1).fit(y)
    old = ref.OrdinalLogit(cut_steps=1).fit(y)
    new.cuts_, old.cuts_ = mle.tolist(), mle.tolist()
    new.update_cuts(y, G)
    old.update_cuts(y, G)
    step = np.array(new.cuts_) - mle
    assert 0 < np.max(np.abs(step)) <= ol.TRUSTED_STEP
    close(new.cuts_, old.cuts_)                              # the reference's line search took the full step too
    assert new.metric(y, G) < get("ordinal_logit").fit(y).set_state({**new.get_state(), "cuts_": mle.tolist()}) \
        .metric(y, G)


def test_ordinal_logit_rows_kept_by_the_metric_give_the_gradients_of_fresh_rows():
    rs, y, w = labels(2000, 5, 3, weighted=True)
    F = rs.normal(size=y.size)
    a = get("ordinal_logit").fit(y, w)
    b = get("ordinal_logit").fit(y, w)
    a.metric(y, F, w)                                         # keeps its rows for the next gradients at F
    ga, ha = a.grad_hess(y, F, w)
    gb, hb = b.grad_hess(y, F, w)
    np.testing.assert_array_equal(ga, gb)
    np.testing.assert_array_equal(ha, hb)
    assert a.cuts_ == b.cuts_
    a.metric(y, F + 1e-9, w)                                  # other scores: not kept for F
    np.testing.assert_array_equal(a.grad_hess(y, F, w)[0], b.grad_hess(y, F, w)[0])


def test_ordinal_logit_a_step_that_does_not_pay_is_not_taken(monkeypatch):
    rs, y, _ = labels(3000, 4, 4)
    F = (y - 2.5) + rs.normal(size=y.size)
    obj = get("ordinal_logit", cut_steps=40).fit(y)
    obj.update_cuts(y, F)
    at_optimum = list(obj.cuts_)
    obj.cut_steps = 1
    obj.update_cuts(y, F + 1e-7)                              # predicted gain far below MIN_GAIN
    assert obj.cuts_ == at_optimum
    monkeypatch.setattr(ol, "MIN_GAIN", 0.0)                  # every step pays
    obj.update_cuts(y, F + 1e-7)
    assert obj.cuts_ != at_optimum


def test_ordinal_logit_keeps_its_cut_point_hessian_for_hessian_every_rounds(monkeypatch):
    """The hessian is computed in rounds 1, 1 + m, 1 + 2m, ... and whenever the kept one's step is long, and
    the cut points move as with a hessian computed every round."""
    rs, y, _ = labels(4000, 4, 11)
    F = (y - 2.5) * 0.5
    computed = []
    real = ol.OrdinalLogit._cut_hess
    monkeypatch.setattr(ol.OrdinalLogit, "_cut_hess", lambda self, *a: computed.append(1) or real(self, *a))
    start = get("ordinal_logit", cut_steps=40).fit(y)
    start.update_cuts(y, F)                                    # boosting's later rounds: the cut points settled
    objs = {m: get("ordinal_logit", hessian_every=m).fit(y) for m in (1, 4)}
    counts = {}
    for m, obj in objs.items():
        obj.cuts_ = list(start.cuts_)
        computed.clear()
        G = F.copy()
        for _ in range(12):
            g, h = obj.grad_hess(y, G)
            G = G - 0.1 * g / h
        counts[m] = len(computed)
    assert counts[1] == 12
    assert 3 <= counts[4] < 12                                 # rounds 1, 5, 9, and any long step
    np.testing.assert_allclose(objs[4].cuts_, objs[1].cuts_, rtol=1e-2)   # a kept hessian steps nearly as far
    with pytest.raises(ValueError, match="hessian_every must be an integer >= 1"):
        get("ordinal_logit", hessian_every=0)


def test_ordinal_logit_extreme_scores_give_finite_gradients():
    y = np.array([0, 1, 2, 3, 0, 3, 1, 2.0])
    obj = get("ordinal_logit").fit(y)
    F = np.array([-1e4, -800.0, 0.0, 800.0, 1e4, -1e4, 1e4, 710.0])
    g, h = obj.grad_hess(y, F)
    assert np.all(np.isfinite(g)) and np.all(np.isfinite(h)) and np.all(h > 0)
    assert np.isfinite(obj.metric(y, F))
    # the bottom class far below / above every cut point, the top class far below / above
    np.testing.assert_allclose(g[[0, 4, 5, 6]], [0.0, 1.0, -1.0, 1.0], atol=1e-12)


@pytest.mark.parametrize("engine", ["xgboost", "lightgbm", "native"])
def test_ordinal_logit_trains_as_the_reference_on_every_engine(engine, small_quartiles):
    """Gradients one round behind the cut points' step (issue 23) fit as three steps before them did."""
    ds = small_quartiles
    X, y, Xt, yt = ds.X_train[:3000], ds.y_train[:3000], ds.X_test, ds.y_test
    valid = (ds.X_train[3000:], ds.y_train[3000:])
    fits = [qb.train(X, y, engine, obj, {"learning_rate": 0.1}, num_boost_round=60, eval_set=valid)
            for obj in ("ordinal_logit", ref.OrdinalLogit(cut_steps=3))]
    new, old = (np.array(m.evals_result["valid"]["logloss"]) for m in fits)
    np.testing.assert_allclose(new, old, rtol=1e-2)           # the trees differ, the curves do not drift apart
    assert new.min() == pytest.approx(old.min(), rel=5e-3)
    np.testing.assert_allclose(fits[0].objective.cuts_, fits[1].objective.cuts_, atol=0.02)
    P, P0 = (m.predict_proba(Xt) for m in fits)
    assert abs(qb.qwk(yt, P.argmax(axis=1)) - qb.qwk(yt, P0.argmax(axis=1))) < 0.01


# -- multiclass and soft_qwk ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name, hessian", [("multiclass", "xgboost"), ("multiclass", "diagonal"),
                                           ("soft_qwk", "local"), ("soft_qwk", "constant")])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("weighted", [False, True])
def test_class_objectives_equal_the_reference(name, hessian, order, weighted):
    rs, y, w = labels(2000, 5, 5, lo=2.0, weighted=weighted)
    S = np.asarray(rs.normal(size=(y.size, 5)) * 2.0, order=order)
    cls = {"multiclass": ref.Multiclass, "soft_qwk": ref.SoftQWK}[name]
    new, old = get(name, hessian=hessian).fit(y, w), cls(hessian=hessian).fit(y, w)
    assert new.metric(y, S, w) == pytest.approx(old.metric(y, S, w), rel=1e-12)
    g, h = new.grad_hess(y, S, w)                              # from the rows the metric kept
    g0, h0 = old.grad_hess(y, S, w)
    close(g, g0)
    close(h, h0)
    assert g.flags.f_contiguous == (order == "F")             # LightGBM's column-major scores stay so
    fresh = get(name, hessian=hessian).fit(y, w).grad_hess(y, S, w)
    np.testing.assert_array_equal(fresh[0], g)
    np.testing.assert_array_equal(fresh[1], h)
    assert new.loss(y, S, w) == pytest.approx(old.loss(y, S, w), rel=1e-12)
    close(new.predict_proba(S), old.predict_proba(S), 1e-14)


def test_soft_qwk_metric_and_class_qwk_equal_qwk():
    rs = np.random.RandomState(6)
    t, p = rs.randint(0, 6, 3000), rs.randint(0, 6, 3000)
    assert class_qwk(t, p) == qb.qwk(t, p)
    w = rs.uniform(0.5, 2, 3000)
    assert class_qwk(t, p, w) == pytest.approx(qb.qwk(t, p, sample_weight=w), rel=1e-12)
    y = np.array([2.0, 2, 2])
    assert get("soft_qwk").fit(np.array([2.0, 3])).metric(y, np.zeros((3, 2))) == 0.0   # a single class


# -- the helpers -------------------------------------------------------------------------------------------

def test_sum_log_equals_the_sum_of_logarithms():
    rs = np.random.RandomState(7)
    for n in (0, 1, 15, 16, 17, 1000, 80_003):
        p = np.exp(rs.uniform(np.log(1e-15), 0.0, n))
        assert sum_log(p) == pytest.approx(float(np.log(p).sum()), rel=1e-13, abs=1e-12)
    assert sum_log(np.full(64, 1e-15)) == pytest.approx(64 * np.log(1e-15), rel=1e-14)


def test_class_rows_sort_by_class_and_are_kept_per_array():
    y = np.array([3, 1, 1, 0, 3, 0, 1.0])
    cache = {}
    rows = class_rows(cache, y, lambda v: v.astype(np.int64), 5)
    np.testing.assert_array_equal(y[rows.perm], [0, 0, 1, 1, 1, 3, 3])
    np.testing.assert_array_equal(rows.bounds, [0, 2, 5, 5, 7, 7])        # classes 2 and 4 are empty
    np.testing.assert_array_equal(rows.perm[rows.inv], np.arange(7))
    np.testing.assert_array_equal(rows.sums(np.arange(7.0)[rows.perm] * 0 + 1.0, 0, 4), [2, 3, 0, 2, 0])
    np.testing.assert_array_equal(rows.sums(np.ones(3), 1, 2), [3, 0])
    assert class_rows(cache, y, lambda v: v.astype(np.int64), 5) is rows
    y[0] = 0.0                                                 # the same array with other values
    assert class_rows(cache, y, lambda v: v.astype(np.int64), 5) is not rows


def test_memo_gives_back_only_what_was_kept_at_equal_scores():
    y = np.array([0, 1, 1.0])
    rows = class_rows({}, y, lambda v: v.astype(np.int64), 2)
    memo = Memo()
    s = np.array([0.5, 1.0, 2.0])
    memo.put(rows, s, (1.0,), "kept")
    s[0] = 9.0                                                 # the caller's array changed: the copy holds
    assert memo.get(rows, s, (1.0,)) is None
    s[0] = 0.5
    assert memo.get(rows, s, (2.0,)) is None                   # other parameters
    assert memo.take(rows, s, (1.0,)) == "kept"
    assert memo.get(rows, s, (1.0,)) is None                   # taken


# -- scratch buffers and out= ------------------------------------------------------------------------------

@pytest.mark.parametrize("name, shape", [("ordinal_logit", None), ("multiclass", "C"), ("multiclass", "F"),
                                         ("soft_qwk", "F")])
def test_buffered_objectives_give_what_fresh_ones_give_in_any_call_order(name, shape):
    """Rows kept in a layout's buffers never leak: metrics, losses and gradients at other scores on the same
    labels, in any order, leave every result equal to a fresh objective's, and a result returned without
    ``out=`` is never written over."""
    rs, y, w = labels(3000, 5, 8)
    mk = (lambda s: (y - 3) * 0.7 + rs.normal(size=y.size) * s) if shape is None else \
        (lambda s: np.asarray(rs.normal(size=(y.size, 5)) * s, order=shape))
    F1, F2 = mk(1.0), mk(2.0)
    kw = {"cut_steps": 0} if name == "ordinal_logit" else {}      # the cut points stay: results comparable
    obj = get(name, **kw).fit(y)
    expect = {i: get(name, **kw).fit(y).grad_hess(y, F) for i, F in ((1, F1), (2, F2))}
    m2 = get(name, **kw).fit(y).metric(y, F2)
    calls = [("metric", F1), ("metric", F2), ("grad", F1), ("grad", F2), ("loss", F1), ("metric", F2),
             ("grad", F1), ("grad", F2), ("metric", F2), ("metric", F1), ("grad", F2)]
    held = []
    for what, F in calls:
        i = 1 if F is F1 else 2
        if what == "grad":
            g, h = obj.grad_hess(y, F)
            np.testing.assert_array_equal(g, expect[i][0])
            np.testing.assert_array_equal(h, expect[i][1])
            held.append((g, i))
        elif what == "metric" and i == 2:
            assert obj.metric(y, F) == m2
        else:
            getattr(obj, what)(y, F)
    for g, i in held:
        np.testing.assert_array_equal(g, expect[i][0])


@pytest.mark.parametrize("name, order", [("ordinal_logit", "C"), ("multiclass", "F"), ("soft_qwk", "C")])
def test_grad_hess_writes_into_out(name, order):
    rs, y, w = labels(2000, 4, 9, weighted=True)
    F = (y - 2.5) + rs.normal(size=y.size) if name == "ordinal_logit" else \
        np.asarray(rs.normal(size=(y.size, 4)), order=order)
    a, b = get(name).fit(y, w), get(name).fit(y, w)
    out = (np.full_like(F, np.nan), np.full_like(F, np.nan))
    g, h = a.grad_hess(y, F, w, out=out)
    assert g is out[0] and h is out[1]
    g0, h0 = b.grad_hess(y, F, w)
    np.testing.assert_array_equal(g, g0)
    np.testing.assert_array_equal(h, h0)
    with pytest.raises(ValueError, match="out must be two float64 arrays of shape"):
        a.grad_hess(y, F, w, out=(np.empty(3), np.empty(3)))


def test_the_training_loop_passes_one_out_pair_every_round():
    from qwkboost.engines.engine import EngineObjective

    rs, y, _ = labels(1000, 4, 10)
    eo = EngineObjective(get("ordinal_logit").fit(y))
    g1, h1 = eo.grad_hess(y, np.zeros(y.size))
    first = g1.copy()
    g2, _ = eo.grad_hess(y, rs.normal(size=y.size))
    assert g2 is g1 and not np.array_equal(g2, first)            # the same arrays, written anew
    g3, _ = eo.grad_hess(y[:500], np.zeros(500))                # another shape: another pair
    assert g3.shape == (500,) and g3 is not g1


def test_class_rows_trust_identity_only_for_frozen_arrays():
    from qwkboost.objectives.rows import freeze

    idx_of = lambda v: v.astype(np.int64)
    y = np.array([0, 1, 1, 2.0])
    cache = {}
    rows = class_rows(cache, y, idx_of, 3)
    y.flags.writeable = False                                  # read-only but not frozen: values are compared
    assert class_rows(cache, y, idx_of, 3) is rows
    z = freeze(np.array([0, 1, 1, 2.0]))
    rz = class_rows(cache, z, idx_of, 3)
    assert class_rows(cache, z, idx_of, 3) is rz
    z.flags.writeable = True                                   # made writable again: compared again
    z[0] = 2.0
    assert class_rows(cache, z, idx_of, 3) is not rz
    with pytest.raises(ValueError, match="owns its memory"):
        freeze(np.zeros(4)[1:])
