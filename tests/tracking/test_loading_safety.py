"""Loading a model, a run or a blend runs no code the file names, and a malformed file is refused in one line
naming it, at every entry point: qb.load_model, qb.load_run (a directory, an MLflow run id), the MLflow pyfunc
model, experiments/predict.py, explain.py and blend.py.

A crafted model file names its objective's class ``<module>:Loss``, where ``<module>.py`` sits on the path and
writes a file when imported: that file must not appear unless the module is allowed (``trusted_modules``). And
the commands that read a file of rows name it, not "X", when it lacks a column."""

import json
import shutil
import sys
import uuid
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest

import qwkboost as qb
from conftest import command_in_process
from model_files import edit_header, model_uri
from qwkboost.runs.experiment import run_experiment
from qwkboost.tracking.loading import load_run

CODE = """from pathlib import Path
Path({marker!r}).write_text("this module's code ran")
from qwkboost.objectives import SquaredError


class Loss(SquaredError):
    pass
"""
#: JSON nested 100,000 times: Python's parser raises RecursionError, XGBoost's ends the process.
BOMB = "[" * 100_000 + "]" * 100_000


@pytest.fixture
def evil(tmp_path, monkeypatch):
    """A module of a fresh name on ``sys.path`` (in the working directory, as a file from elsewhere might find
    it); ``(name, marker)``, the marker being the file its import writes."""
    name = f"evil_{uuid.uuid4().hex[:8]}"
    mods = tmp_path / "cwd"
    mods.mkdir()
    marker = tmp_path / "IMPORTED"
    (mods / f"{name}.py").write_text(CODE.format(marker=str(marker)))
    monkeypatch.chdir(mods)
    monkeypatch.syspath_prepend(str(mods))
    yield name, marker
    sys.modules.pop(name, None)
    from qwkboost.objectives import _REGISTRY

    for key in [k for k, c in _REGISTRY.items() if c.__module__ == name]:
        del _REGISTRY[key]


def _frame(n=240, seed=0):
    rs = np.random.RandomState(seed)
    X = rs.randn(n, 3)
    y = np.digitize(X[:, 0] + 0.5 * X[:, 1] + 0.3 * rs.randn(n), [-0.7, 0, 0.7])
    return pd.DataFrame({"Id": np.arange(n) + 100, "a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "y": y})


def _cfg(path, engine):
    return {"data": {"name": "csv", "path": str(path), "target": "y", "id": "Id", "test_size": 0.25, "seed": 0},
            "engine": {"name": engine, "num_boost_round": 8, "early_stopping_rounds": None,
                       "params": {"learning_rate": 0.3, **({"nthread": 1} if engine == "xgboost" else
                                                          {"num_leaves": 7, "verbose": -1, "num_threads": 1})}},
            "objective": {"name": "squared_error", "params": {}},
            "cv": {"n_splits": 2, "stratified": True, "shuffle": True}, "thresholds": {"method": "exact"},
            "tracking": {"explain": False, "log_models": True, "log_pyfunc": True}, "seed": 0}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, mlflow_store):
    """Two finished runs on one file (their output directories), the first also an MLflow run with its pyfunc
    model; the file of rows."""
    from qwkboost import tracking

    d = tmp_path_factory.mktemp("safety")
    _frame().to_csv(d / "train.csv", index=False)
    _frame(seed=1).drop(columns="y").to_csv(d / "new.csv", index=False)
    exp = tracking.setup(mlflow_store, "loading_safety")
    first = run_experiment(_cfg(d / "train.csv", "xgboost"), exp, output_dir=d / "xgb")
    run_experiment(_cfg(d / "train.csv", "lightgbm"), None, output_dir=d / "lgb")
    return {"dirs": [d / "xgb", d / "lgb"], "run_id": first["run_id"], "new": d / "new.csv", "uri": mlflow_store}


def _poison(src: Path, dst: Path, module: str) -> Path:
    """A copy of run ``src`` whose fold models name ``<module>:Loss`` as their objective (checksums intact)."""
    shutil.copytree(src, dst)
    for f in dst.rglob("fold_*.zip"):
        edit_header(f, lambda payload: payload["objective"].update(name=f"{module}_loss",
                                                                   **{"class": f"{module}:Loss"}))
    return dst


def _bomb(src: Path, dst: Path, which: str) -> Path:
    """A copy of run ``src`` with its first fold model (``which="model"``) or its pipeline.json a nesting bomb."""
    shutil.copytree(src, dst)
    (dst / "pipeline" / ("fold_0.zip" if which == "model" else "pipeline.json")).write_text(BOMB)
    return dst


def _refused(call, *lines):
    """``call`` raises a ValueError of one line holding each of ``lines``."""
    with pytest.raises(ValueError) as err:
        call()
    text = str(err.value)
    assert "\n" not in text and all(line in text for line in lines), text
    return text


def _command_refused(capsys, script, args, out, *lines):
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        command_in_process(script, args, out)
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and err.count("\n") == 0 and "Traceback" not in err, err
    assert all(line in err for line in lines), err
    return err


# -- no module a file names is imported -------------------------------------------------------------------------

def test_load_model_and_load_run_import_nothing_unless_allowed(runs, evil, tmp_path):
    name, marker = evil
    run = _poison(runs["dirs"][0], tmp_path / "run", name)
    line = f"its objective '{name}_loss' (class {name}:Loss) is not registered in this process"
    _refused(lambda: qb.load_model(run / "pipeline" / "fold_0.zip"), line, f"trusted_modules=[{name}]")
    _refused(lambda: load_run(run), line, "fold_0.zip")
    _refused(lambda: qb.load_run(run / "pipeline"), line)
    assert not marker.exists() and name not in sys.modules
    # allowed: imported, and the model is the same model
    pipe = qb.load_run(run, trusted_modules=[name])
    assert marker.exists() and type(pipe.models[0].objective).__name__ == "Loss"
    new = pd.read_csv(runs["new"])
    np.testing.assert_allclose(pipe.predict_score(new), qb.load_run(runs["dirs"][0]).predict_score(new))


def test_a_run_from_mlflow_imports_nothing_unless_allowed(runs, evil, tmp_path):
    name, marker = evil
    run = _poison(runs["dirs"][0], tmp_path / "run", name)
    client = mlflow.MlflowClient(runs["uri"])
    run_id = client.create_run(client.get_experiment_by_name("loading_safety").experiment_id).info.run_id
    client.log_artifacts(run_id, str(run / "pipeline"), "pipeline")
    client.set_terminated(run_id)
    _refused(lambda: load_run(run_id, runs["uri"]), f"its objective '{name}_loss'", f"trusted_modules=[{name}]")
    assert not marker.exists()
    pipe = load_run(run_id, runs["uri"], trusted_modules=[name])
    assert marker.exists() and type(pipe.models[0].objective).__name__ == "Loss"


def test_the_mlflow_pyfunc_model_imports_nothing_unless_allowed(runs, evil, tmp_path):
    """The logged model, its pipeline artifact crafted, loaded by MLflow itself (PipelineModel.load_context);
    ``model_config={"trusted_modules": [...]}`` allows a module."""
    name, marker = evil
    local = Path(mlflow.artifacts.download_artifacts(model_uri(mlflow.MlflowClient(runs["uri"]), runs["run_id"]), dst_path=str(tmp_path / "m"),
                                                     tracking_uri=runs["uri"]))
    pipeline = local / "artifacts" / "pipeline"
    assert (pipeline / "fold_0.zip").is_file()
    shutil.rmtree(pipeline)
    _poison(runs["dirs"][0] / "pipeline", pipeline, name)
    with pytest.raises(Exception) as err:
        mlflow.pyfunc.load_model(str(local))
    assert f"its objective '{name}_loss'" in str(err.value) and not marker.exists()
    model = mlflow.pyfunc.load_model(str(local), model_config={"trusted_modules": [name]})
    assert marker.exists() and len(model.predict(pd.read_csv(runs["new"]))) == 240


@pytest.mark.parametrize("script", ["predict.py", "explain.py", "blend.py"])
def test_the_commands_import_nothing_unless_allowed(runs, evil, tmp_path, capsys, script):
    name, marker = evil
    dirs = [_poison(d, tmp_path / d.name, name) for d in runs["dirs"]]
    args = {"predict.py": [f"run={dirs[0]}", f"data.path={runs['new']}", f"out={tmp_path / 'p'}"],
            "explain.py": [f"run={dirs[0]}", f"data.path={runs['new']}", "log=false", "rows=50"],
            "blend.py": [f"runs=[{dirs[0]},{dirs[1]}]", f"tracking.uri={runs['uri']}",
                         "tracking.experiment_name=loading_safety_blend", "tracking.log_pyfunc=false"]}[script]
    _command_refused(capsys, script, args, tmp_path / "out", f"its objective '{name}_loss'",
                     f"trusted_modules=[{name}]")
    assert not marker.exists()
    command_in_process(script, [*args, f"trusted_modules=[{name}]"], tmp_path / "out2")
    assert marker.exists()


def test_trusted_modules_must_name_modules(runs):
    _refused(lambda: qb.load_run(runs["dirs"][0], trusted_modules=[3]), "trusted_modules must list module names")
    _refused(lambda: qb.load_model(runs["dirs"][0] / "pipeline" / "fold_0.zip", trusted_modules={"a": 1}),
             "trusted_modules must list module names")


# -- malformed files ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("engine", ["xgboost", "lightgbm", "native", "catboost"])
def test_a_nesting_bomb_is_refused_by_load_model(tmp_path, engine):
    """The file itself, and the booster text inside a valid file (with a matching checksum): XGBoost's parser
    would end the process on it, the native engine's Python parser would raise RecursionError."""
    import hashlib

    (tmp_path / "bomb.json").write_text(BOMB)
    _refused(lambda: qb.load_model(tmp_path / "bomb.json"), "path", "bomb.json' is not a qwkboost model file "
             "(its JSON is nested too deeply)")
    X = np.random.RandomState(0).rand(100, 3)
    payload = json.loads(qb.train(X, X[:, 0], engine, "squared_error", num_boost_round=2).save(tmp_path / "m.json")
                         .read_text())
    text = '{"learner": ' + BOMB + "}"
    payload.update(booster=text, booster_sha256=hashlib.sha256(text.encode()).hexdigest())
    (tmp_path / "inner.json").write_text(json.dumps(payload))
    _refused(lambda: qb.load_model(tmp_path / "inner.json"), "inner.json")


@pytest.mark.parametrize("content, reason", [
    ('{"format": "qwkboost-model", "format_version": 3, "engine": "xgboost", "init_score": 0.5, "num_rounds": 1, '
     '"best_iteration": 1, "objective": {"name": "squared_error", "params": [], "state": {}}}', "'objective' must"),
    ('{"format": "qwkboost-model", "format_version": [[[3]]]}', "model format version [[[3]]]"),
    ('{"format": "qwkboost-model", "format_version": 3, "engine": {"a": 1}}', "'engine' must be a finite str"),
    ("[1, 2", "invalid JSON"),
    ("1" * 5000, "invalid JSON"),
])
def test_malformed_model_files_are_one_line_naming_them(tmp_path, content, reason):
    (tmp_path / "m.json").write_text(content)
    _refused(lambda: qb.load_model(tmp_path / "m.json"), "m.json", reason)


@pytest.mark.parametrize("which", ["model", "pipeline"])
def test_a_nesting_bomb_in_a_run_is_refused_at_every_entry_point(runs, tmp_path, capsys, which):
    dirs = [_bomb(d, tmp_path / d.name, which) for d in runs["dirs"]]
    bad = "fold_0.zip" if which == "model" else "pipeline.json"
    _refused(lambda: qb.load_run(dirs[0]), str(dirs[0]), bad, "nested too deeply")
    _refused(lambda: qb.load_run(dirs[0] / "pipeline"), bad, "nested too deeply")
    for script, args in (
            ("predict.py", [f"run={dirs[0]}", f"data.path={runs['new']}", f"out={tmp_path / 'p'}"]),
            ("explain.py", [f"run={dirs[0]}", f"data.path={runs['new']}", "log=false"]),
            ("blend.py", [f"runs=[{dirs[0]},{runs['dirs'][1]}]", f"tracking.uri={runs['uri']}",
                          "tracking.experiment_name=loading_safety_blend"])):
        _command_refused(capsys, script, args, tmp_path / "out", str(dirs[0]), bad, "nested too deeply")


def test_a_malformed_blend_pipeline_is_refused_naming_it(runs, tmp_path):
    result = qb.blend(runs["dirs"])
    from qwkboost.blending import write_blend

    write_blend(result, tmp_path / "blend")
    payload = json.loads((tmp_path / "blend" / "pipeline" / "pipeline.json").read_text())
    for edit, reason in ((lambda p: p.update(info=[1, 2]), "'info' must be a mapping"),
                         (lambda p: p.update(members="member_0"), "'members' must list"),
                         (lambda p: p.update(labels=[[1]]), "'labels' must be a list of labels")):
        edited = json.loads(json.dumps(payload))
        edit(edited)
        (tmp_path / "blend" / "pipeline" / "pipeline.json").write_text(json.dumps(edited))
        _refused(lambda: qb.load_run(tmp_path / "blend"), "blend pipeline", reason)
    (tmp_path / "blend" / "pipeline" / "pipeline.json").write_text(BOMB)
    _refused(lambda: qb.load_run(tmp_path / "blend"), "pipeline.json", "nested too deeply")


@pytest.mark.parametrize("script", ["predict.py", "explain.py"])
def test_a_file_without_a_feature_column_is_named_as_the_users_file(runs, tmp_path, capsys, script):
    short = tmp_path / "short.csv"
    pd.read_csv(runs["new"]).drop(columns="b").to_csv(short, index=False)
    args = [f"run={runs['dirs'][0]}", f"data.path={short}", *(["log=false"] if script == "explain.py" else [])]
    err = _command_refused(capsys, script, args, tmp_path / "out", f"data.path='{short}' lacks the feature column(s) "
                                                                   "['b']")
    assert " X " not in err
