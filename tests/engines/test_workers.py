"""Objectives whose gradient needs sums over every row, trained on several workers: the all-reduced
gradient equals the one-process gradient. Real XGBoost collective (its tracker and two worker processes)."""

import multiprocessing as mp

import numpy as np
import pytest

from qwkboost.engines.engine import for_workers
from qwkboost.engines.xgboost import xgboost_allreduce
from qwkboost.objectives import get
from qwkboost.objectives.squared_error import SquaredError


def _worker_grad(rank, args, objective, y, score, w, queue):
    from xgboost import collective

    with collective.CommunicatorContext(**args):
        g, h = objective.grad_hess(y, score, sample_weight=w)
        queue.put((collective.get_rank(), rank, g, h))


def grads_on_two_workers(objective, y, score, w=None):
    """Split rows over two processes joined by XGBoost's tracker; return the gradients in row order."""
    from xgboost.tracker import RabitTracker

    tracker = RabitTracker(n_workers=2, host_ip="127.0.0.1")
    tracker.start()
    args = tracker.worker_args()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    parts = np.array_split(np.arange(y.size), 2)
    procs = [ctx.Process(target=_worker_grad, args=(k, args, for_workers(objective, xgboost_allreduce), y[p], score[p],
                                                     None if w is None else w[p], queue)) for k, p in enumerate(parts)]
    for p in procs:
        p.start()
    out = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    tracker.wait_for(60)
    out.sort(key=lambda t: t[1])
    return np.concatenate([o[2] for o in out]), np.concatenate([o[3] for o in out])


@pytest.mark.parametrize("params", [{}, {"hessian": "gauss_newton", "clip": "none"}])
@pytest.mark.parametrize("weighted", [False, True])
def test_extended_qwk_gradient_on_two_workers_equals_one_process(params, weighted):
    rs = np.random.RandomState(0)
    y = rs.randint(0, 4, 3001).astype(float)
    score = y + rs.normal(0, 0.8, y.size)
    w = rs.uniform(0.5, 2.0, y.size) if weighted else None
    obj = get("extended_qwk", **params).fit(y, sample_weight=w)   # a, b and the range from every row
    g1, h1 = obj.grad_hess(y, score, sample_weight=w)
    g2, h2 = grads_on_two_workers(obj, y, score, w)
    np.testing.assert_allclose(g2, g1, rtol=0, atol=1e-10)
    np.testing.assert_allclose(h2, h1, rtol=0, atol=1e-10)
    # without the all-reduce each worker would optimise its own objective: the gradients differ
    half = np.array_split(np.arange(y.size), 2)[0]
    alone, _ = obj.grad_hess(y[half], score[half], sample_weight=None if w is None else w[half])
    assert np.abs(alone - g1[half]).max() > 1e-3


class WholeMean(SquaredError):
    """An objective that says its gradient needs sums over every row but does not take them through
    ``global_sums``."""

    name = "whole_mean"
    gradient_needs = "sums"


def test_row_objectives_need_nothing_and_unsupported_sums_are_refused():
    y = np.arange(8.0) % 4
    se = get("squared_error").fit(y)
    assert for_workers(se, xgboost_allreduce).allreduce is None
    for name in ("extended_qwk", "ordinal_logit", "soft_qwk"):      # every packaged objective that needs sums
        assert for_workers(get(name).fit(y), xgboost_allreduce).allreduce is xgboost_allreduce
    with pytest.raises(ValueError, match="objective 'whole_mean' needs sums over every training row"):
        for_workers(WholeMean().fit(y))
