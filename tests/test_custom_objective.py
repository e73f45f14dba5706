"""A user's objective in the user's own module, named from Hydra: single runs, multiruns, tuning and the table;
and a saved model that loads once the objective is registered, its module imported or allowed (a file alone
imports nothing)."""

import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest

from conftest import TINY_OVERRIDES, run_in_process

ROOT = Path(__file__).resolve().parents[1]

LOSSES = '''
import numpy as np
from qwkboost.objectives import Objective


class PseudoHuber(Objective):
    metric_name = "pseudo_huber"

    def __init__(self, delta=1.0):
        self.delta = delta

    def grad_hess(self, y, score):
        r = score - y
        s = 1.0 + (r / self.delta) ** 2
        return r / np.sqrt(s), s ** -1.5

    def metric(self, y, score):
        r = score - y
        return float(np.mean(self.delta ** 2 * (np.sqrt(1 + (r / self.delta) ** 2) - 1)))
'''


@pytest.fixture
def user_module(tmp_path):
    """``<tmp>/src/mypkg/losses.py``; importable only with ``PYTHONPATH=<tmp>/src``."""
    pkg = tmp_path / "src" / "mypkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "losses.py").write_text(LOSSES)
    return tmp_path / "src"


def _run(cwd, script, *args, pythonpath=None, ok=True):
    env = {**os.environ, "CI": "true"}
    if pythonpath:
        env["PYTHONPATH"] = str(pythonpath)
    proc = subprocess.run([sys.executable, str(ROOT / "experiments" / script), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    if ok:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


CUSTOM = ["objective=custom", "objective._target_=mypkg.losses.PseudoHuber", "+objective.params.delta=2.0"]


def test_a_custom_objective_runs_in_single_runs_multiruns_and_the_table(user_module, mlflow_store, monkeypatch):
    tmp = user_module.parent
    common = [*TINY_OVERRIDES, *CUSTOM, f"tracking.uri={mlflow_store}", "tracking.log_pyfunc=false"]
    # the multirun's jobs import the user's module in a new process, found through PYTHONPATH
    _run(tmp, "run.py", "-m", *common, "engine=xgboost,native", "tracking.experiment_name=custom_multi",
         pythonpath=user_module)
    monkeypatch.syspath_prepend(str(user_module))        # the same, for the runs in this process
    run_in_process([*common, "tracking.experiment_name=custom_single"], tmp / "single")
    run_in_process(["experiment=qwk_table_small", "data.n_train=1500", "data.n_test=800",
                    "table.engines=[lightgbm]", "table.objectives=[squared_error,custom]", "objective=custom",
                    "objective._target_=mypkg.losses.PseudoHuber", "engine.num_boost_round=40",
                    f"tracking.uri={mlflow_store}", "tracking.experiment_name=custom_table"], tmp / "table")
    client = mlflow.MlflowClient(mlflow_store)
    for name, n in (("custom_single", 1), ("custom_multi", 3), ("custom_table", 3)):
        runs = client.search_runs([client.get_experiment_by_name(name).experiment_id])
        assert len(runs) == n and all(r.info.status == "FINISHED" for r in runs), name
    child = [r for r in client.search_runs([client.get_experiment_by_name("custom_single").experiment_id])][0]
    assert child.data.tags["objective.class"] == "mypkg.losses.PseudoHuber"
    assert "valid_pseudo_huber" in child.data.metrics
    assert (tmp / "table" / "qwk_table.md").exists()


def test_tuning_a_custom_objective(user_module, mlflow_store, monkeypatch):
    tmp = user_module.parent
    monkeypatch.syspath_prepend(str(user_module))
    run_in_process([*TINY_OVERRIDES, *CUSTOM, "tune.n_trials=2", f"tracking.uri={mlflow_store}",
                    "tracking.experiment_name=custom_tune", f"tune.storage=sqlite:///{tmp}/optuna.db"],
                   tmp / "tune", config_name="tune")
    client = mlflow.MlflowClient(mlflow_store)
    runs = client.search_runs([client.get_experiment_by_name("custom_tune").experiment_id])
    assert len(runs) == 3 and all(r.info.status == "FINISHED" for r in runs)          # the study and 2 trials


def test_missing_module_is_named_before_training_and_when_loading(user_module, tmp_path):
    tmp = user_module          # tmp_path itself has no mypkg
    proc = _run(tmp_path, "run.py", *TINY_OVERRIDES, *CUSTOM, ok=False)       # no PYTHONPATH: not importable
    assert proc.returncode == 2
    assert "module 'mypkg.losses' cannot be imported" in proc.stderr
    # a model saved with the user's objective: another process loads it only with the objective registered, its
    # module imported by the user, or the module allowed; the file alone imports nothing
    code = ("import numpy as np, qwkboost as qb, mypkg.losses as L; X = np.random.rand(200, 3); "
            "y = X[:, 0] * 3; qb.train(X, y, 'native', L.PseudoHuber(delta=2.0), num_boost_round=5)"
            f".save(r'{tmp}/m.json')")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(tmp)})
    env = {**os.environ, "PYTHONPATH": str(tmp)}
    load = "import sys, qwkboost as qb; m = qb.load_model(r'%s/m.json'%s); print(m.objective.delta, 'mypkg' in sys.modules)"
    bad = subprocess.run([sys.executable, "-c", load % (tmp, "")], capture_output=True, text=True, env=env)
    assert bad.returncode != 0 and ("objective 'custom' (class mypkg.losses:PseudoHuber) is not registered in this "
                                    "process, and qwkboost imports no module a model file names") in bad.stderr
    assert "allow it with trusted_modules=[mypkg.losses]" in bad.stderr
    for how in (", trusted_modules=['mypkg']", ", trusted_modules=['mypkg.losses']"):
        good = subprocess.run([sys.executable, "-c", load % (tmp, how)], capture_output=True, text=True, env=env)
        assert good.returncode == 0 and good.stdout.split() == ["2.0", "True"], good.stderr
    imported = subprocess.run([sys.executable, "-c", "import mypkg.losses; " + load % (tmp, "")],
                              capture_output=True, text=True, env=env)
    assert imported.returncode == 0 and imported.stdout.split() == ["2.0", "True"], imported.stderr
    # allowed but not importable here: the module is named
    missing = subprocess.run([sys.executable, "-c", load % (tmp, ", trusted_modules=['mypkg']")],
                             capture_output=True, text=True, cwd=tmp_path)
    assert missing.returncode != 0 and "module 'mypkg.losses' cannot be imported" in missing.stderr
