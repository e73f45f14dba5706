"""An engine whose library cannot be imported: one line naming the engine and what to do, and ``experiment=auto``
without ``auto.engines`` leaves it out with a log line.

A real import failure: the commands run in processes whose ``PYTHONPATH`` starts with a folder holding a
``catboost.py`` that raises ImportError, as a broken or half-removed install does.
"""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = ["data.n_train=300", "data.n_test=100", "tracking.explain=false"]


@pytest.fixture
def env(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "catboost.py").write_text('raise ImportError("this catboost is broken (a test)")\n')
    return {**os.environ, "CI": "true", "PYTHONPATH": str(broken)}


def _run(tmp_path, env, *args):
    return subprocess.run([sys.executable, str(ROOT / "experiments" / "run.py"), *args,
                           f"tracking.uri=sqlite:///{tmp_path}/mlflow.db"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)


def test_a_broken_engine_library_is_one_line_before_training(tmp_path, env):
    """It was a 20-line traceback from CatBoost's parameter check (the first import of the library)."""
    proc = _run(tmp_path, env, "engine=catboost", *TINY)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: ") and line.endswith(
        "engine=catboost cannot be used: catboost cannot be imported (ImportError: this catboost is broken (a "
        "test)); install it (pip install catboost), or choose another engine= (experiment=auto leaves it out "
        "unless auto.engines names it: e.g. auto.engines=[xgboost,lightgbm,native])")
    assert not list(tmp_path.glob("outputs/*/*/result.json"))


def test_auto_without_engines_leaves_a_broken_one_out(tmp_path, env):
    proc = _run(tmp_path, env, "experiment=auto", "auto.time_limit=60", "auto.objectives=[squared_error]",
                "auto.tune=false", f"hydra.run.dir={tmp_path}/auto", *TINY)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "auto: left out engine catboost (auto.engines not given): engine=catboost cannot be used: catboost " \
           "cannot be imported" in proc.stdout + proc.stderr
    board = pd.read_csv(tmp_path / "auto" / "leaderboard.csv")
    assert "catboost" not in set(board["engine"]) and "finished" in set(board["status"])


def test_auto_refuses_a_broken_engine_it_is_told_to_use(tmp_path, env):
    proc = _run(tmp_path, env, "experiment=auto", "auto.time_limit=15", "auto.engines=[lightgbm,catboost]",
                f"hydra.run.dir={tmp_path}/auto", *TINY)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert "engine=catboost cannot be used: catboost cannot be imported" in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "auto" / "candidates").exists()


def test_in_python_the_engine_is_refused_as_a_config_error(tmp_path, env):
    code = ("import numpy as np, qwkboost as qb\n"
            "try:\n"
            "    qb.train(np.zeros((20, 2)), np.arange(20) % 3, engine='catboost')\n"
            "except qb.ConfigError as exc:\n"
            "    print(type(exc).__name__, exc.engine, str(exc).count(chr(10)))\n")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.stdout.split() == ["EngineUnavailable", "catboost", "0"], proc.stderr[-3000:]
