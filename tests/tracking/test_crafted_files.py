"""Crafted run files, beyond test_loading_safety's module of a fresh name: an objective class that is a near-name
of an imported or trusted module (a space, a tab, a leading space, a trailing dot, an empty part, a look-alike
letter) imports nothing at any entry point, with a booby-trapped module of exactly that name in the working
directory and on the path; paths a run's files name stay inside the run (no '..', no symlink out); a FIFO where a
file is expected is refused without waiting; and a blend leaves no folder in the temporary directory.

Each test failed before the change it covers: the near-names imported their module (``json .py`` ran) or got a
refusal advising to trust a look-alike or to set PYTHONPATH; symlinks out of a run were followed; a FIFO fold file
hung a blend; every blend left an empty ``qwkboost-blend-*`` folder.
"""

import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from test_loading_safety import CODE, _command_refused, _refused, runs  # noqa: F401 - runs: the fixture

import qwkboost as qb
from conftest import command_in_process
from model_files import edit_header, model_uri
from qwkboost.blending import read_members, write_blend
from qwkboost.engines.model import check_model_file
from qwkboost.tracking.blend import FittedBlend
from qwkboost.tracking.files import run_path
from qwkboost.tracking.loading import load_run

ROOT = Path(__file__).resolve().parents[2]

#: (the objective class a crafted file names, the module file that would run if imported by that name, a module
#: a user could have trusted that it is a near-name of)
NEAR_NAMES = [
    ("json :Evil", "json ", "json"),                  # a space before the ':' (json is imported)
    ("json\t:Evil", "json\t", "json"),                # a tab
    (" json:Evil", " json", "json"),                  # a leading space
    ("os .Evil", "os ", "os"),                        # the dotted form, a space
    ("qwkboost :Evil", "qwkboost ", "qwkboost"),      # qwkboost itself
    ("json.:Evil", "json.", "json"),                  # a trailing dot
    ("json.Evil.", "json.Evil.", "json"),             # a trailing dot in the dotted form
    ("json..Evil", "json.", "json"),                  # an empty part
    ("\uff4a\uff53\uff4f\uff4e:Evil", "\uff4a\uff53\uff4f\uff4e", "\uff4a\uff53\uff4f\uff4e"),   # fullwidth 'json'
    ("\u0458son:Evil", "\u0458son", "\u0458son"),     # a Cyrillic 'ј'
]
IDS = ["space", "tab", "leading-space", "os-space", "qwkboost-space", "trailing-dot", "trailing-dot-dotted",
       "empty-part", "fullwidth", "cyrillic"]


@pytest.fixture
def trap(tmp_path, monkeypatch, request):
    """The near-name's module as a file in the working directory, which is on ``sys.path``: ``(class, trusted,
    marker)``, the marker being the file its import writes."""
    cls, module, trusted = request.param
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    marker = tmp_path / "IMPORTED"
    if "/" not in module:
        (cwd / f"{module}.py").write_text(CODE.format(marker=str(marker)))
    monkeypatch.chdir(cwd)
    monkeypatch.syspath_prepend(str(cwd))
    yield cls, trusted, marker
    sys.modules.pop(module, None)


def _craft(src: Path, dst: Path, cls: str) -> Path:
    """A copy of run (or blend) ``src`` whose fold models name ``cls`` as their objective's class, under a name
    no process registers (checksums intact)."""
    shutil.copytree(src, dst)
    for f in dst.rglob("fold_*.zip"):
        edit_header(f, lambda payload: payload["objective"].update(name="crafted_loss", **{"class": cls}))
    return dst


def _near_refused(marker: Path, call, *lines):
    """``call`` refused, the crafted module's code not run (``marker`` absent), in one line saying the class is
    not an import path, with no advice to trust a module or set PYTHONPATH."""
    with pytest.raises(ValueError) as err:
        call()
    assert not marker.exists(), f"the crafted module ran: {err.value}"
    text = str(err.value)
    assert "\n" not in text and all(x in text for x in ("'objective.class'", "is not an import path", *lines)), text
    assert "PYTHONPATH" not in text and "trusted_modules=[" not in text, text
    return text


def _trust(trusted: str):
    """``trusted_modules`` naming ``trusted``: the module itself when it is a plain name; a look-alike is refused
    as a module name, so it is not passed."""
    return [trusted] if trusted.isascii() else None


@contextmanager
def deadline(seconds: int = 30):
    """Fail, not hang, if the body waits (on a FIFO) longer than ``seconds``."""
    def stop(*_):
        raise TimeoutError(f"still waiting after {seconds} s (on a FIFO?)")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# -- near-names import nothing, at every entry point ---------------------------------------------------------------

@pytest.mark.parametrize("trap", NEAR_NAMES, ids=IDS, indirect=True)
def test_a_near_name_imports_nothing_in_load_model_and_load_run(runs, trap, tmp_path):
    cls, trusted, marker = trap
    run = _craft(runs["dirs"][0], tmp_path / "run", cls)
    fold = run / "pipeline" / "fold_0.zip"
    for how in ({}, {"trusted_modules": _trust(trusted)}):
        _near_refused(marker, lambda: qb.load_model(fold, **how), "fold_0.zip")
        _near_refused(marker, lambda: check_model_file(fold, **how), "fold_0.zip")
        _near_refused(marker, lambda: qb.load_run(run, **how), str(run), "fold_0.zip")
        _near_refused(marker, lambda: qb.load_run(run / "pipeline", **how), "fold_0.zip")
    assert not marker.exists()


@pytest.mark.parametrize("trap", NEAR_NAMES[:1] + NEAR_NAMES[-2:], ids=IDS[:1] + IDS[-2:], indirect=True)
def test_a_near_name_imports_nothing_from_an_mlflow_run(runs, trap, tmp_path):
    cls, trusted, marker = trap
    run = _craft(runs["dirs"][0], tmp_path / "run", cls)
    client = mlflow.MlflowClient(runs["uri"])
    run_id = client.create_run(client.get_experiment_by_name("loading_safety").experiment_id).info.run_id
    client.log_artifacts(run_id, str(run / "pipeline"), "pipeline")
    client.set_terminated(run_id)
    _near_refused(marker, lambda: load_run(run_id, runs["uri"]), "fold_0.zip")
    _near_refused(marker, lambda: load_run(run_id, runs["uri"], trusted_modules=_trust(trusted)), "fold_0.zip")
    assert not marker.exists()


@pytest.fixture(scope="module")
def file_store_model(runs, tmp_path_factory):
    """The first run's pyfunc model, copied through a real MLflow file store (``file:`` URI) in a temporary
    directory: the model directory as MLflow downloads it."""
    store = tmp_path_factory.mktemp("filestore")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_ALLOW_FILE_STORE", "true")        # MLflow keeps the file store in maintenance mode
        mp.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        local = Path(mlflow.artifacts.download_artifacts(model_uri(mlflow.MlflowClient(runs["uri"]), runs["run_id"]),
                                                         dst_path=str(store / "m"), tracking_uri=runs["uri"]))
        uri = (store / "mlruns").as_uri()
        client = mlflow.MlflowClient(uri)
        run_id = client.create_run(client.create_experiment("crafted")).info.run_id
        client.log_artifacts(run_id, str(local), "model")
        client.set_terminated(run_id)
        yield uri, run_id


@pytest.mark.parametrize("trap", NEAR_NAMES, ids=IDS, indirect=True)
def test_a_near_name_imports_nothing_in_the_mlflow_pyfunc_model(runs, file_store_model, trap, tmp_path):
    """The logged model, downloaded from a file store, its pipeline crafted, loaded by MLflow itself."""
    cls, trusted, marker = trap
    uri, run_id = file_store_model
    local = Path(mlflow.artifacts.download_artifacts(f"runs:/{run_id}/model", dst_path=str(tmp_path / "m"),
                                                     tracking_uri=uri))
    pipeline = local / "artifacts" / "pipeline"
    assert (pipeline / "fold_0.zip").is_file()
    shutil.rmtree(pipeline)
    _craft(runs["dirs"][0] / "pipeline", pipeline, cls)
    for config in (None, {"trusted_modules": _trust(trusted)}):
        with pytest.raises(Exception) as err:
            mlflow.pyfunc.load_model(str(local), model_config=config)
        assert not marker.exists(), f"the crafted module ran: {err.value}"
        assert "is not an import path" in str(err.value) and "PYTHONPATH" not in str(err.value), err.value
    assert not marker.exists()


@pytest.mark.parametrize("trap", NEAR_NAMES, ids=IDS, indirect=True)
@pytest.mark.parametrize("script", ["predict.py", "explain.py", "blend.py"])
def test_a_near_name_imports_nothing_in_the_commands(runs, trap, tmp_path, capsys, script):
    cls, trusted, marker = trap
    dirs = [_craft(d, tmp_path / d.name, cls) for d in runs["dirs"]]
    args = {"predict.py": [f"run={dirs[0]}", f"data.path={runs['new']}", f"out={tmp_path / 'p'}"],
            "explain.py": [f"run={dirs[0]}", f"data.path={runs['new']}", "log=false", "rows=50"],
            "blend.py": [f"runs=[{dirs[0]},{dirs[1]}]", f"tracking.uri={runs['uri']}",
                         "tracking.experiment_name=crafted_blend", "tracking.log_pyfunc=false"]}[script]
    trust = [f"trusted_modules=[{trusted}]"] if trusted.isascii() else []
    for extra in ([], trust):
        capsys.readouterr()
        with pytest.raises(SystemExit):
            command_in_process(script, [*args, *extra], tmp_path / "out")
        assert not marker.exists(), f"the crafted module ran: {capsys.readouterr().err}"
        err = _command_refused(capsys, script, [*args, *extra], tmp_path / "out", "fold_0.zip",
                               "is not an import path")
        assert "PYTHONPATH" not in err, err
    assert not marker.exists()


@pytest.mark.parametrize("trap", NEAR_NAMES, ids=IDS, indirect=True)
def test_a_near_name_imports_nothing_in_a_blends_members(runs, trap, tmp_path):
    """A blend of crafted runs (read_members, then its pipeline written), and a blend's pipeline whose members
    were crafted afterwards (FittedBlend.load, qb.load_run)."""
    cls, trusted, marker = trap
    dirs = [_craft(d, tmp_path / d.name, cls) for d in runs["dirs"]]
    assert len(read_members(dirs)) == 2          # the predictions are read: no model file is
    result = qb.blend(dirs)
    _near_refused(marker, lambda: write_blend(result, tmp_path / "blend"), "fold_0.zip")
    _near_refused(marker, lambda: FittedBlend.from_result(result), "fold_0.zip")
    good = qb.blend(runs["dirs"])
    write_blend(good, tmp_path / "good")
    crafted = _craft(tmp_path / "good", tmp_path / "crafted", cls)
    for how in ({}, {"trusted_modules": _trust(trusted)}):
        _near_refused(marker, lambda: FittedBlend.load(crafted / "pipeline", **how), "member_0", "fold_0.zip")
        _near_refused(marker, lambda: qb.load_run(crafted, **how), "fold_0.zip")
    assert not marker.exists()


def test_a_near_name_imports_nothing_in_a_new_process(runs, tmp_path):
    """The case as found: ``python -c`` in a working directory holding ``json .py`` (on the path as ``''``), no
    sys.path edited by the test."""
    run = _craft(runs["dirs"][0], tmp_path / "run", "json :Evil")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    marker = tmp_path / "IMPORTED"
    (cwd / "json .py").write_text(CODE.format(marker=str(marker)))
    code = (f"import qwkboost as qb\nfor how in ({{}}, {{'trusted_modules': ['json']}}):\n"
            f"    try:\n        qb.load_run({str(run)!r}, **how)\n    except ValueError as e:\n        print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists(), f"the crafted module ran: {proc.stdout}"
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2 and all("'json :Evil'" in x and "is not an import path" in x for x in lines), proc.stdout
    assert not marker.exists()


def test_trusted_modules_are_exact_module_names(runs):
    fold = runs["dirs"][0] / "pipeline" / "fold_0.zip"
    for bad in (" json", "json ", "json\t", "json.", ".json", "a..b", "\uff4a\uff53\uff4f\uff4e", "\u0458son", ""):
        _refused(lambda: qb.load_model(fold, trusted_modules=[bad]), "trusted_modules must list module names "
                 "exactly as imported", ascii(bad))
    assert qb.load_model(fold, trusted_modules=["json", "mypkg.losses"]).n_features == 3


# -- paths stay inside the run; only regular files are read ----------------------------------------------------------

def _edit(path: Path, **changes) -> None:
    payload = json.loads(path.read_text())
    payload.update(changes)
    path.write_text(json.dumps(payload))


def test_run_path_refuses_what_leads_out_or_is_not_a_file(tmp_path):
    root = tmp_path / "run"
    (root / "sub").mkdir(parents=True)
    (root / "a.json").write_text("{}")
    (tmp_path / "outside.json").write_text("{}")
    (root / "inside").symlink_to(root / "a.json")
    (root / "out").symlink_to(tmp_path / "outside.json")
    (root / "outdir").symlink_to(tmp_path)
    os.mkfifo(root / "fifo")
    assert run_path(root, "a.json", "'x'") == root / "a.json"
    assert run_path(root, "inside", "'x'") == root / "inside"          # a symlink that stays inside is followed
    assert run_path(root, "sub", "'x'", kind="dir") == root / "sub"
    where = f"directory {str(root)!r}"
    for name, kind, problem in (("../outside.json", "file", "holds '..'"), ("sub/../a.json", "file", "holds '..'"),
                                (str(tmp_path / "outside.json"), "file", "is an absolute path"),
                                ("out", "file", "leads out of the directory"),
                                ("outdir/outside.json", "file", "leads out of the directory"),
                                ("fifo", "file", "is a FIFO, not a regular file"),
                                ("sub", "file", "is a directory, not a regular file"),
                                ("a.json", "dir", "is a regular file, not a directory"),
                                ("missing.json", "file", "does not exist"), ("", "file", "is not a relative path"),
                                ("a\x00b", "file", "is not a relative path"), (3, "file", "is not a relative path")):
        _refused(lambda: run_path(root, name, "'x' entry", kind=kind), where, "'x' entry", problem)


@pytest.mark.parametrize("entry", ["../lgb/pipeline/fold_0.zip", "..", "/etc/hostname"])
def test_a_pipeline_naming_a_path_out_of_its_directory_is_refused(runs, tmp_path, entry):
    run = shutil.copytree(runs["dirs"][0], tmp_path / "xgb")
    shutil.copytree(runs["dirs"][1], tmp_path / "lgb")
    pipeline = run / "pipeline" / "pipeline.json"
    _edit(pipeline, models=[entry, "fold_1.zip"])
    reason = "is an absolute path" if entry.startswith("/") else "holds '..'"
    _refused(lambda: qb.load_run(run), "pipeline.json 'models' entry", ascii(entry), reason)


def test_a_symlink_out_of_the_run_is_refused(runs, tmp_path):
    """A fold symlinked to another run's fold (as a squared-error run mixed with another), a ``pipeline/`` folder
    symlinked out of its run, and a blend's member directory symlinked out of the blend."""
    run = shutil.copytree(runs["dirs"][0], tmp_path / "xgb")
    (run / "pipeline" / "fold_0.zip").unlink()
    (run / "pipeline" / "fold_0.zip").symlink_to(runs["dirs"][1] / "pipeline" / "fold_0.zip")
    _refused(lambda: qb.load_run(run), "'models' entry 'fold_0.zip' leads out of the directory")
    other = shutil.copytree(runs["dirs"][0], tmp_path / "other")
    shutil.rmtree(other / "pipeline")
    (other / "pipeline").symlink_to(runs["dirs"][1] / "pipeline")
    _refused(lambda: qb.load_run(other), "folder 'pipeline' leads out of the directory")
    _refused(lambda: read_members([other, runs["dirs"][1]]), "folder 'pipeline' leads out of the directory")
    (tmp_path / "mixed").mkdir()
    for name in ("oof.parquet", "predictions.parquet"):
        (tmp_path / "mixed" / name).symlink_to(runs["dirs"][1] / name)
    _refused(lambda: read_members([tmp_path / "mixed"]), "file 'oof.parquet' leads out of the directory")
    write_blend(qb.blend(runs["dirs"], method="mean"), tmp_path / "blend")       # mean: both members kept
    member = tmp_path / "blend" / "pipeline" / "member_1"
    shutil.rmtree(member)
    member.symlink_to(runs["dirs"][1] / "pipeline")
    _refused(lambda: qb.load_run(tmp_path / "blend"), "'members' entry 'member_1' leads out of the directory")
    _edit(tmp_path / "blend" / "pipeline" / "pipeline.json", members=["member_0", "../../xgb/pipeline"])
    _refused(lambda: qb.load_run(tmp_path / "blend"), "'members' entry '../../xgb/pipeline' holds '..'")


def test_a_symlink_inside_the_run_is_followed(runs, tmp_path):
    run = shutil.copytree(runs["dirs"][0], tmp_path / "xgb")
    (run / "pipeline" / "kept.json").write_bytes((run / "pipeline" / "fold_0.zip").read_bytes())
    (run / "pipeline" / "fold_0.zip").unlink()
    (run / "pipeline" / "fold_0.zip").symlink_to("kept.json")
    new = pd.read_csv(runs["new"])
    assert (qb.load_run(run).predict(new) == qb.load_run(runs["dirs"][0]).predict(new)).all()


def _fifo(src: Path, dst: Path, name: str) -> Path:
    """A copy of run ``src`` with a FIFO in place of its file ``name``."""
    run = shutil.copytree(src, dst)
    (run / name).unlink()
    os.mkfifo(run / name)
    return run


def test_a_fifo_in_place_of_a_fold_file_is_refused_by_a_blend_without_waiting(runs, tmp_path, capsys):
    run = _fifo(runs["dirs"][0], tmp_path / "xgb", "pipeline/fold_1.zip")
    with deadline():
        _refused(lambda: write_blend(qb.blend([run, runs["dirs"][1]]), tmp_path / "b"),
                 "'models' entry 'fold_1.zip' is a FIFO, not a regular file")
        _command_refused(capsys, "blend.py", [f"runs=[{run},{runs['dirs'][1]}]", f"tracking.uri={runs['uri']}",
                                              "tracking.experiment_name=crafted_blend"],
                         tmp_path / "out", "fold_1.zip", "is a FIFO")
        _refused(lambda: check_model_file(run / "pipeline" / "fold_1.zip"), "fold_1.zip", "is a FIFO")


def test_a_fifo_in_place_of_a_file_is_refused_by_the_loaders_naming_it(runs, tmp_path):
    run = _fifo(runs["dirs"][0], tmp_path / "xgb", "pipeline/fold_1.zip")
    with deadline():
        _refused(lambda: qb.load_run(run), "'models' entry 'fold_1.zip' is a FIFO, not a regular file")
        _refused(lambda: qb.load_model(run / "pipeline" / "fold_1.zip"), "fold_1.zip", "is a FIFO")
        other = _fifo(runs["dirs"][0], tmp_path / "other", "pipeline/pipeline.json")
        _refused(lambda: qb.load_run(other / "pipeline"), "file 'pipeline.json' is a FIFO")
        (other / "oof.parquet").unlink()
        os.mkfifo(other / "oof.parquet")
        _refused(lambda: read_members([other, runs["dirs"][1]]), "file 'oof.parquet' is a FIFO")


# -- no folder left behind --------------------------------------------------------------------------------------

@pytest.fixture
def own_tmpdir(tmp_path, monkeypatch):
    """The temporary directory of this test alone (``TMPDIR`` and tempfile's cached choice)."""
    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setenv("TMPDIR", str(d))
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def test_a_blend_leaves_no_folder_in_the_temporary_directory(runs, own_tmpdir, tmp_path):
    result = qb.blend(runs["dirs"])
    write_blend(result, tmp_path / "blend")
    assert list(own_tmpdir.glob("qwkboost-blend-*")) == []
    # members downloaded from MLflow: their folder lives while the blend does, then goes
    result = qb.blend([runs["run_id"], runs["dirs"][1]], tracking_uri=runs["uri"])
    assert len(list(own_tmpdir.glob("qwkboost-blend-*"))) == 1
    write_blend(result, tmp_path / "mixed")
    assert (tmp_path / "mixed" / "pipeline" / "member_0" / "fold_0.zip").is_file()
    del result
    gc.collect()
    assert list(own_tmpdir.glob("qwkboost-blend-*")) == []
    assert list(own_tmpdir.iterdir()) == []
