"""The pieces of tuning that ``tune.py`` and a time budget share: a trial's parameters drawn, its fold reporter
(here or loaded where the trial runs), and a study opened (continued under an earlier name, its data checked, the
studies of other data set aside, dead trials cleaned up). Real Optuna SQLite storage, no mocks."""

import logging
import sqlite3
import subprocess
import sys

import numpy as np
import optuna
import pytest

from conftest import TINY, TINY_OVERRIDES, run_in_process
from qwkboost import tracking
from qwkboost.data.fingerprint import fingerprint
from qwkboost.exceptions import ConfigError
from qwkboost.runs.experiment import load_dataset
from qwkboost.runs.tuning import (DATA_ATTR, FoldReporter, draw, earlier_study_names, fold_reporter, open_study,
                                  stored_fold_reporter, study_name)

SPACE = {"max_depth": {"type": "int", "low": 2, "high": 6}, "eta": {"type": "float", "low": 0.05, "high": 0.3}}


@pytest.fixture(scope="module")
def ds():
    return load_dataset(TINY["data"], 0)


def _study(tmp_path, name="s"):
    return optuna.create_study(study_name=name, storage=f"sqlite:///{tmp_path / 'tuning.db'}", direction="maximize")


def test_draw_puts_the_drawn_parameters_over_the_engine_s_in_a_copy(tmp_path):
    cfg = {**TINY, "engine": {**TINY["engine"], "search_space": SPACE}}
    trial = _study(tmp_path).ask()
    drawn, trial_cfg = draw(trial, cfg)
    assert set(drawn) == {"max_depth", "eta"} and drawn == trial.params
    assert trial_cfg["engine"]["params"] == {**TINY["engine"]["params"], **drawn}
    assert cfg["engine"]["params"] == TINY["engine"]["params"]          # the caller's config is untouched
    trial_cfg["data"]["n_train"] = 1
    assert cfg["data"]["n_train"] == TINY["data"]["n_train"]            # a deep copy


def test_fold_reporters_report_each_fold_to_the_study(tmp_path, ds):
    study = _study(tmp_path)
    trial = study.ask()
    reporter = fold_reporter(trial, "none", "exact", ds)
    assert isinstance(reporter, FoldReporter) and reporter.metric == "qwk_thresholds_oof"
    assert np.array_equal(reporter.classes, np.arange(4.0)) and reporter.weight is ds.w_train
    rows = np.arange(300)
    reporter(0, rows, ds.y_train[rows].astype(float))       # perfect scores: QWK 1
    # the same trial's reporter loaded from the storage by name and id, as a Dask worker loads it
    far = stored_fold_reporter(f"sqlite:///{tmp_path / 'tuning.db'}", "s", trial._trial_id, "none", "exact", ds)
    far(1, rows, ds.y_train[rows].astype(float))
    stored = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'tuning.db'}").trials[0]
    assert stored.intermediate_values == {0: pytest.approx(1.0), 1: pytest.approx(1.0)}


def test_open_study_creates_records_the_data_and_refuses_other_data(tmp_path, ds):
    url = f"sqlite:///{tmp_path / 'tuning.db'}"
    rows = fingerprint(ds)
    study = open_study(url, "s", optuna.samplers.RandomSampler(0), optuna.pruners.NopPruner(), rows, ("a", "b"),
                       "move it away", what="the study", where="tuning.db")
    assert study.study_name == "s" and study.user_attrs[DATA_ATTR] == rows.to_dict()
    study.tell(study.ask(), 0.5)
    other = fingerprint(load_dataset({**TINY["data"], "seed": 5}, 0))
    with pytest.raises(ConfigError, match="the study 's' in tuning.db.*move it away"):
        open_study(url, "s", None, None, other, ("a", "b"), "move it away", what="the study", where="tuning.db")


def test_open_study_continues_an_earlier_name_and_stamps_its_data_when_asked(tmp_path, ds, caplog):
    url = f"sqlite:///{tmp_path / 'tuning.db'}"
    rows = fingerprint(ds)
    old = _study(tmp_path, "x-y-old")         # an earlier qwkboost's study: trials, no record of its data
    old.tell(old.ask(), 0.5)
    with pytest.raises(ConfigError):          # not vouched for: its data cannot be told
        open_study(url, "x-y-new", None, None, rows, ("a", "b"), "fix", earlier=["x-y-old"])
    with caplog.at_level(logging.INFO, logger="qwkboost"):
        study = open_study(url, "x-y-new", None, None, rows, ("a", "b"), "fix", earlier=["x-y-gone", "x-y-old"],
                           stamp_earlier=True)
    assert study.study_name == "x-y-old" and len(study.trials) == 1 and study.user_attrs[DATA_ATTR] == rows.to_dict()
    assert "study 'x-y-old': goes on under the name an earlier qwkboost gave it" in caplog.text
    assert "x-y-new" not in optuna.get_all_study_names(url)
    # once the new name is there, it is the one opened
    optuna.create_study(study_name="x-y-new", storage=url)
    assert open_study(url, "x-y-new", None, None, rows, ("a", "b"), "fix", earlier=["x-y-old"]).study_name == "x-y-new"


def test_open_study_says_which_studies_of_its_prefix_are_set_aside(tmp_path, ds, caplog):
    url = f"sqlite:///{tmp_path / 'tuning.db'}"
    rows = fingerprint(ds)
    other = _study(tmp_path, "xgboost-ext-aaaa-1111")
    other.set_user_attr(DATA_ATTR, {"train": "elsewhere", "test": "elsewhere"})
    for _ in range(2):
        other.tell(other.ask(), 0.5)
    another_pair = _study(tmp_path, "lightgbm-ext-aaaa-1111")
    another_pair.tell(another_pair.ask(), 0.1)
    logger = logging.getLogger("qwkboost.autoblend")
    with caplog.at_level(logging.INFO, logger="qwkboost.autoblend"):
        open_study(url, "xgboost-ext-bbbb-2222", None, None, rows, ("a", "b"), "fix",
                   aside=("xgboost-ext-", "auto: tuning.db"), logger=logger)
    assert [r.getMessage() for r in caplog.records if r.name == "qwkboost.autoblend"] == [
        "auto: tuning.db holds 2 trial(s) of xgboost-ext in 1 study(ies) of other data; they stay there, set aside, "
        "and are not continued"]


def test_open_study_fails_the_trials_a_dead_process_left_running(tmp_path, ds):
    url = f"sqlite:///{tmp_path / 'tuning.db'}"
    rows = fingerprint(ds)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    study = open_study(url, "s", None, None, rows, ("a", "b"), "fix")
    left = study.ask()
    left.set_user_attr(tracking.PROCESS_TAG, tracking.process_tag(dead.pid))
    study = open_study(url, "s", None, None, rows, ("a", "b"), "fix")
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.FAIL]


def test_tune_goes_on_with_a_study_an_earlier_qwkboost_named_with_8_hex_digits(tmp_path, mlflow_store, caplog):
    """Study names carry 12 hex digits of the one config hash now; a study named with the first 8 of the same
    hash (as tune.py named them before) is continued, not begun again beside it."""
    db = tmp_path / "optuna.db"
    args = [*TINY_OVERRIDES, f"tracking.uri={mlflow_store}", "tracking.experiment_name=tune_legacy",
            f"tune.storage=sqlite:///{db}", "tune.rerun_repeats=0", "tune.pruner=none"]
    first = run_in_process([*args, "tune.n_trials=1"], tmp_path / "one", config_name="tune")
    name = first.study_name
    legacy = name[:-4]              # the same study as tune.py named it before: 8 hex digits
    assert len(name.rsplit("-", 1)[1]) == 12
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE studies SET study_name = ? WHERE study_name = ?", (legacy, name))
    con.close()
    with caplog.at_level(logging.INFO, logger="qwkboost"):
        second = run_in_process([*args, "tune.n_trials=2"], tmp_path / "two", config_name="tune")
    assert second.study_name == legacy and optuna.get_all_study_names(f"sqlite:///{db}") == [legacy]
    assert len([t for t in second.trials if t.state.is_finished()]) == 2
    assert f"study {legacy!r}: goes on under the name an earlier qwkboost gave it" in caplog.text


def test_earlier_names_are_8_hex_digits_of_the_same_hash_and_none_for_a_given_name():
    cfg = {**TINY, "tune": {"study_name": None, "metric": "qwk_thresholds_oof"}, "cluster": {"name": "local"}}
    name = study_name(cfg)
    assert earlier_study_names(cfg)[0] == name[:-4] and earlier_study_names(cfg)[1] != name[:-4]
    assert earlier_study_names({**cfg, "tune": {"study_name": "mine"}}) == []
