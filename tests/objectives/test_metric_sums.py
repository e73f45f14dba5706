"""Metrics from sums that add over row sets: what a distributed engine all-reduces to score every row."""

import numpy as np
import pytest

from qwkboost.objectives import Objective, resolve


class PerRow(Objective):
    name = "per_row_test"

    def grad_hess(self, y, score):
        return score - y, np.ones_like(score)


class OwnMetric(PerRow):
    def metric(self, y, score, sample_weight=None):
        return float(np.max(np.abs(score - y)))


@pytest.mark.parametrize("name", ["extended_qwk", "squared_error", "multiclass", "soft_qwk", "ordinal_logit"])
@pytest.mark.parametrize("weighted", [False, True])
def test_sums_of_parts_give_the_metric_of_the_whole(name, weighted):
    rng = np.random.default_rng(0)
    y = rng.integers(1, 6, 3_000).astype(float)
    obj = resolve(name)
    obj.fit(y)
    k = getattr(obj, "n_outputs_", 1)
    score = rng.normal(3.0, 1.5, (y.size, k) if k > 1 else y.size)
    w = rng.uniform(0.2, 3.0, y.size) if weighted else None
    cuts = [0, 700, 701, 2_000, y.size]          # uneven parts, one of a single row
    parts = [obj.metric_sums(y[a:b], score[a:b], None if w is None else w[a:b]) for a, b in zip(cuts, cuts[1:])]
    assert obj.metric_adds_up()
    assert obj.metric_from_sums(np.sum(parts, axis=0)) == pytest.approx(obj.metric(y, score, w), rel=1e-12)


def test_a_metric_without_sums_is_known():
    assert PerRow.metric_adds_up()                 # the default RMSE and its sums
    assert not OwnMetric.metric_adds_up()          # its own metric: the inherited sums are not its metric
    assert OwnMetric().metric_sums(np.zeros(2), np.ones(2)) is None
