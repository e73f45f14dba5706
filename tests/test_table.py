import numpy as np
import pytest

from qwkboost.data import quartiles
from qwkboost.table import ARTICLE_TABLE, bayes_ceiling


def test_bayes_ceiling_bounds_what_a_model_can_reach():
    ds = quartiles(n_train=20000, n_test=20000)
    ceiling = bayes_ceiling(ds)
    # the sum of the visible columns is sufficient; a noisy version of it must do worse
    noisy = type(ds)(ds.X_train + np.random.RandomState(0).normal(0, 0.3, ds.X_train.shape), ds.y_train,
                     ds.X_test + np.random.RandomState(1).normal(0, 0.3, ds.X_test.shape), ds.y_test)
    assert bayes_ceiling(noisy) < ceiling
    # and it sits above every figure the article published
    assert ceiling > max(max(v) for v in ARTICLE_TABLE.values())
