"""A damaged SQLite study file (``tune.storage``, auto's ``<output dir>/tuning.db``): one line naming the file and
saying to move it away, before any trial, instead of SQLAlchemy's traceback (for auto, after its candidates had
trained). Real Optuna studies, damaged as files are: truncated, overwritten in the middle, or not a database.
"""

import os

import mlflow
import optuna
import pytest

from conftest import TINY_OVERRIDES, run_in_process
from qwkboost.exceptions import ConfigError
from qwkboost.runs.tuning.storage import check_study_file

PAGE = 4096


@pytest.fixture(scope="module")
def study_bytes(tmp_path_factory) -> bytes:
    """A real Optuna study of 40 trials, as its file holds it."""
    db = tmp_path_factory.mktemp("study") / "tuning.db"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="s", storage=f"sqlite:///{db}")
    study.optimize(lambda t: t.suggest_float("x", 0, 1) + t.suggest_int("n", 1, 9), n_trials=40)
    data = db.read_bytes()
    assert len(data) > 8 * PAGE
    return data


def _damaged(study_bytes, how: str) -> bytes:
    if how == "truncated":
        return study_bytes[: len(study_bytes) // 2]
    if how == "overwritten":        # a page in the middle, as a disk or a copy can spoil it; the header is intact
        k = len(study_bytes) // PAGE // 2
        return study_bytes[: k * PAGE] + os.urandom(PAGE) + study_bytes[(k + 1) * PAGE:]
    return os.urandom(len(study_bytes))     # not a database at all


@pytest.mark.parametrize("how, why", [
    ("truncated", "database disk image is malformed"),
    ("overwritten", ""),
    ("noise", "file is not a database"),
])
def test_a_damaged_study_file_is_one_line_naming_it(tmp_path, study_bytes, how, why):
    path = tmp_path / "tuning.db"
    path.write_bytes(_damaged(study_bytes, how))
    with pytest.raises(ValueError) as got:
        check_study_file(path, "auto's tuning study")
    message = str(got.value)
    assert message.startswith(f"auto's tuning study: {path} is damaged (") and why in message
    assert message.endswith(f"move it away (e.g. mv {path} {path}.damaged) to start afresh")
    assert "\n" not in message


def test_a_sound_missing_or_empty_study_file_passes(tmp_path, study_bytes):
    (tmp_path / "sound.db").write_bytes(study_bytes)
    (tmp_path / "empty.db").write_bytes(b"")            # SQLite's empty database: made on first use
    for name in ("sound.db", "empty.db", "missing.db"):
        check_study_file(tmp_path / name, "tune.storage")
    optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'sound.db'}")      # not changed by the check


def test_a_directory_in_place_of_the_study_file_is_refused(tmp_path):
    (tmp_path / "tuning.db").mkdir()
    with pytest.raises(ValueError, match=r"tuning.db is not a database file \(it is not a regular file\); move it"):
        check_study_file(tmp_path / "tuning.db", "auto's tuning study")


@pytest.mark.parametrize("how", ["overwritten", "truncated"])
def test_tune_refuses_a_damaged_storage_before_any_trial(tmp_path, mlflow_store, study_bytes, how):
    """Overwritten in the middle, the file opened and Optuna's first queries passed: the damage showed as a
    traceback later, in a trial or the summary."""
    db = tmp_path / "optuna.db"
    db.write_bytes(_damaged(study_bytes, how))
    args = [*TINY_OVERRIDES, f"tracking.uri={mlflow_store}", "tracking.experiment_name=tune_damaged",
            f"tune.storage=sqlite:///{db}", "tune.n_trials=1", "tune.study_name=s"]
    with pytest.raises(ConfigError) as got:
        run_in_process(args, tmp_path / "out", config_name="tune")
    assert str(got.value).startswith(f"tune.storage='sqlite:///{db}': {db} is damaged (")
    assert str(got.value).endswith(f"move it away (e.g. mv {db} {db}.damaged) to start afresh")
    assert mlflow.MlflowClient(mlflow_store).get_experiment_by_name("tune_damaged") is None     # nothing ran
