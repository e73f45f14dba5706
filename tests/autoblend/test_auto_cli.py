"""``experiments/run.py experiment=auto`` as a process: Ctrl-C or SIGTERM while the first candidate trains is a
stop (exit 130 or 143, one line, the parent run and the candidate KILLED), never a configuration error."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "CI": "true"}
#: the first candidate trains for many seconds: 20,000 rows, no early stopping before 3,000 rounds
SLOW = ["experiment=auto", "auto.time_limit=600", "auto.engines=[lightgbm]", "auto.objectives=[squared_error]",
        "data=quartiles", "data.n_train=20000", "engine.num_boost_round=3000", "engine.early_stopping_rounds=3000",
        "n_jobs=1"]


def _default_sigint():
    # a suite started in the background hands its children SIGINT ignored; a terminal does not
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_a_stop_during_the_first_candidate_is_a_stop(tmp_path, how):
    from qwkboost.tracking import prepare_store

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    prepare_store(uri)
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, str(ROOT / "experiments" / "run.py"), *SLOW, f"tracking.uri={uri}",
                          f"hydra.run.dir={out}"], cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint, start_new_session=True)
    client = mlflow.MlflowClient(uri)
    deadline = time.time() + 300
    while True:         # until the parent run and the first candidate's run are RUNNING
        time.sleep(0.5)
        assert p.poll() is None and time.time() < deadline, p.communicate(timeout=60)[1][-2000:]
        exp = client.get_experiment_by_name("qwkboost")
        if exp and len(client.search_runs([exp.experiment_id], "attributes.status = 'RUNNING'")) >= 2:
            break
    if how == "sigterm":
        p.send_signal(signal.SIGTERM)
    else:
        os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == (143 if how == "sigterm" else 130), err[-3000:]
    assert "Traceback" not in err and "no candidate finished" not in err
    assert err.strip().splitlines()[-1] == ("experiments/run.py: " + ("terminated (SIGTERM)" if how == "sigterm"
                                            else "interrupted (Ctrl-C)") + "; its MLflow runs are marked KILLED")
    statuses = {r.data.tags.get("qwkboost.auto", "candidate"): r.info.status
                for r in client.search_runs([exp.experiment_id])}
    assert statuses == {"parent": "KILLED", "candidate": "KILLED"}
    assert json.loads((out / "auto.json").read_text())["sessions"][-1]["status"] == "stopped"


@pytest.mark.slow
def test_ctrl_c_during_a_tuning_trial_is_one_line_and_writes_the_blend(tmp_path):
    """Ctrl-C while a tuning trial's folds train: exit 130, the blend of what finished written, and one line on
    stderr, not Optuna's report of a failed trial with its traceback."""
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, str(ROOT / "experiments" / "run.py"), "experiment=auto",
                          "auto.time_limit=120", "auto.engines=[lightgbm]", "auto.objectives=[squared_error]",
                          "data=quartiles", "data.n_train=6000", "n_jobs=1",
                          f"tracking.uri=sqlite:///{tmp_path}/mlflow.db",       # not the project's store
                          f"hydra.run.dir={out}"], cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, preexec_fn=_default_sigint, start_new_session=True)
    lines = []
    for line in p.stdout:           # until a trial's first fold has ended: the second trains
        lines.append(line)
        if "-trial-" in line and ": fold 1/" in line:
            break
    else:
        pytest.fail("no tuning trial began: " + "".join(lines[-20:]))
    os.killpg(p.pid, signal.SIGINT)
    rest, _ = p.communicate(timeout=120)
    text = "".join(lines) + rest
    assert p.returncode == 130, text[-3000:]
    assert "Traceback" not in text and "failed because of the following error" not in text
    assert text.strip().splitlines()[-1] == ("experiments/run.py: interrupted (Ctrl-C); its MLflow runs are marked "
                                             "KILLED")
    assert (out / "submission.csv").exists() and (out / "leaderboard.csv").exists()
