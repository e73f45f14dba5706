"""A tuning study belongs to the rows its trials were scored on: ``train.csv`` replaced at the same path is other
data, and the study refuses it in one line naming the file (``experiments/tune.py``, in this process)."""

import numpy as np
import pandas as pd
import pytest

from conftest import run_in_process
from qwkboost.exceptions import ConfigError


def test_a_study_refuses_a_train_csv_replaced_at_the_same_path(tmp_path, mlflow_store):
    import optuna

    from qwkboost.data import quartiles

    ds = quartiles(n_train=900, n_test=300, seed=2)
    cols = [f"f{j}" for j in range(ds.X_train.shape[1])]
    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    pd.DataFrame(ds.X_train, columns=cols).assign(grade=ds.y_train.astype(int)).to_csv(train, index=False)
    pd.DataFrame(ds.X_test, columns=cols).to_csv(test, index=False)
    db = tmp_path / "optuna.db"
    args = ["data=csv", f"data.path={train}", f"data.test_path={test}", "data.target=grade", "engine=lightgbm",
            "engine.num_boost_round=40", "cv.n_splits=3", "tracking.explain=false", "n_jobs=1",
            f"tracking.uri={mlflow_store}", "tracking.experiment_name=tune_data", f"tune.storage=sqlite:///{db}",
            "tune.study_name=s"]
    run_in_process([*args, "tune.n_trials=1"], tmp_path / "out", config_name="tune")
    pd.DataFrame(ds.X_train, columns=cols).assign(grade=np.roll(ds.y_train.astype(int), 1)).to_csv(train,
                                                                                                  index=False)
    with pytest.raises(ConfigError, match=rf"study 's' in sqlite:///{db} was made from other data: "
                                          rf"data.path='{train}' holds other values \(900 rows, as then\): its "
                                          r"trials were scored on that data; choose another tune.study_name"):
        run_in_process([*args, "tune.n_trials=2"], tmp_path / "out", config_name="tune")
    assert len(optuna.load_study(study_name="s", storage=f"sqlite:///{db}").trials) == 1
    # the rows as they were: the study goes on
    pd.DataFrame(ds.X_train, columns=cols).assign(grade=ds.y_train.astype(int)).to_csv(train, index=False)
    run_in_process([*args, "tune.n_trials=2"], tmp_path / "out", config_name="tune")
    assert len(optuna.load_study(study_name="s", storage=f"sqlite:///{db}").trials) == 2
