"""A blend's members come from the same rows: two runs over a ``test.csv`` edited between them (same ids, other
values) are refused by name, as are runs over another ``train.csv``; runs of the same files blend."""

import numpy as np
import pandas as pd
import pytest

import qwkboost as qb
from conftest import run_in_process
from qwkboost.blending.members import BlendInputError


def test_members_made_from_other_rows_are_refused_naming_both(tmp_path):
    from qwkboost.data import quartiles

    ds = quartiles(n_train=900, n_test=300, seed=6)
    cols = [f"f{j}" for j in range(ds.X_train.shape[1])]
    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    pd.DataFrame(ds.X_train, columns=cols).assign(grade=ds.y_train.astype(int)).to_csv(train, index_label="id")
    pd.DataFrame(ds.X_test, columns=cols).to_csv(test, index_label="id")
    args = ["data=csv", f"data.path={train}", f"data.test_path={test}", "data.target=grade", "data.id=id",
            "engine.num_boost_round=40", "cv.n_splits=3", "n_jobs=1", "tracking.uri=null"]
    run_in_process([*args, "engine=lightgbm"], tmp_path / "a")
    run_in_process([*args, "engine=xgboost"], tmp_path / "b")
    run_in_process([*args, "engine=xgboost", "data.drop=[f0]"], tmp_path / "fewer")    # other features: fine
    assert qb.blend([tmp_path / "a", tmp_path / "b", tmp_path / "fewer"]).metrics["nested_oof_qwk"] > 0.3
    pd.DataFrame(ds.X_test[::-1], columns=cols).to_csv(test, index_label="id")       # same ids, other rows
    run_in_process([*args, "engine=xgboost"], tmp_path / "c")
    with pytest.raises(BlendInputError, match=r"member 'xgboost/squared_error' \(.*/c\) was made from other data "
                                              r"than member 'lightgbm/squared_error' \(.*/a\): the test data holds "
                                              r"other values \(300 rows in both\) in columns 'f0', 'f1', 'f2', 'f3', "
                                              r"'f4'; blend runs of the same files"):
        qb.blend([tmp_path / "a", tmp_path / "c"])
    X = pd.DataFrame(ds.X_train, columns=cols)
    X.assign(f2=X["f2"] + 1.0, grade=ds.y_train.astype(int)).to_csv(train, index_label="id")
    pd.DataFrame(ds.X_test, columns=cols).to_csv(test, index_label="id")
    run_in_process([*args, "engine=xgboost"], tmp_path / "d")
    with pytest.raises(BlendInputError, match=r"the training data holds other values \(900 rows in both\) in "
                                              r"column 'f2'; blend"):
        qb.blend([tmp_path / "a", tmp_path / "d"])
