"""A command writes only into a folder that is new, empty but for Hydra's files, or its own
(:func:`qwkboost.tracking.writing.claim`): a folder holding the user's files, or another command's outputs, is
refused in one line before any work, and nothing in it changes. The one command, a run and a blend."""

import pytest

import qwkboost as qb
from conftest import TINY_OVERRIDES, command_in_process, quartile_frames, run_in_process
from qwkboost.exceptions import ConfigError
from qwkboost.tracking.writing import OWNER_FILE, claim


def _users_folder(d):
    """A folder of a user's own files, some under the names qwkboost's outputs take."""
    (d / "pipeline").mkdir(parents=True)
    (d / "pipeline" / "important.txt").write_text("mine")
    (d / "plots").mkdir()
    (d / "plots" / "mine.png").write_bytes(b"\x89PNG mine")
    (d / "submission.csv").write_text("id,label\n1,2\n")
    return {p: p.read_bytes() for p in d.rglob("*") if p.is_file()}


def _unchanged(d, before):
    return {p: p.read_bytes() for p in d.rglob("*") if p.is_file()} == before


def test_a_new_or_empty_folder_or_one_hydra_made_is_taken_and_marked(tmp_path):
    assert claim(tmp_path / "new", "auto") == tmp_path / "new"
    assert (tmp_path / "new" / OWNER_FILE).exists()
    hydra = tmp_path / "hydra"
    (hydra / ".hydra").mkdir(parents=True)
    (hydra / ".hydra" / "config.yaml").write_text("{}")
    (hydra / "run.log").write_text("")
    claim(hydra, "run", "hydra.run.dir")
    claim(hydra, "run", "hydra.run.dir")                 # its own now: again is fine, files or not
    (hydra / "submission.csv").write_text("id,y\n")
    claim(hydra, "run", "hydra.run.dir")


def test_a_folder_of_the_user_s_files_is_refused_naming_them(tmp_path):
    before = _users_folder(tmp_path / "mine")
    with pytest.raises(ConfigError, match=r"hydra.run.dir='.*mine' holds files qwkboost did not write \(pipeline/, "
                                          r"plots/, submission.csv\); a time budget \(experiment=auto\) writes only "
                                          r"into a new folder or one of its own.*give a new folder"):
        claim(tmp_path / "mine", "auto", "hydra.run.dir")
    assert _unchanged(tmp_path / "mine", before)
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        claim(tmp_path / "file", "run")


def test_another_command_s_folder_is_refused_and_an_older_one_s_record_counts_as_its_own(tmp_path):
    claim(tmp_path / "run", "run")
    with pytest.raises(ConfigError, match=r"holds the outputs of a run, not of a time budget"):
        claim(tmp_path / "run", "auto")
    old = tmp_path / "older"            # an earlier qwkboost's auto folder: its record, no owner file
    old.mkdir()
    (old / "auto.json").write_text("{}")
    (old / "submission.csv").write_text("id,y\n")
    (old / "blend.json").write_text("{}")        # an auto folder holds a blend's record too: it stays auto's
    with pytest.raises(ConfigError, match=r"holds the outputs of a time budget"):
        claim(old, "blend")
    claim(old, "auto")


def test_hydra_s_own_files_are_named_by_the_command(tmp_path):
    """Hydra's config folder may be renamed or off (``hydra.output_subdir``); the command names what Hydra made."""
    from types import SimpleNamespace

    from qwkboost.tracking.writing import hydra_entries

    d = tmp_path / "job"
    (d / "configs").mkdir(parents=True)
    (d / "run.log").write_text("")
    hc = SimpleNamespace(output_subdir="configs", job=SimpleNamespace(name="run"))
    assert hydra_entries(hc) == ("configs", "run.log")
    claim(d, "run", "hydra.run.dir", hydra_entries(hc))
    off = tmp_path / "off"
    off.mkdir()
    (off / "run.log").write_text("")
    claim(off, "run", "hydra.run.dir", hydra_entries(SimpleNamespace(output_subdir=None, job=hc.job)))
    (off / "notes.txt").write_text("mine")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"holds files qwkboost did not write \(notes.txt\)"):
        claim(mine, "run", "hydra.run.dir", hydra_entries(hc))


def test_the_one_command_refuses_a_folder_of_the_user_s_files_before_any_training(tmp_path):
    X, y, X_test, _ = quartile_frames(0)
    out = tmp_path / "mine"
    before = _users_folder(out)
    with pytest.raises(ConfigError, match=r"output_dir='.*mine' holds files qwkboost did not write"):
        qb.auto(X, y, X_test, time_limit=30, engines=["lightgbm"], objectives=["squared_error"], output_dir=out,
                progress=False)
    assert _unchanged(out, before) and not (out / "candidates").exists()
    # from the command line too, on a cluster before it starts (no scheduler answers at this address)
    for extra in ([], ["cluster.address=tcp://127.0.0.1:9"]):
        with pytest.raises(ConfigError, match=r"hydra.run.dir='.*mine' holds files qwkboost did not write"):
            run_in_process(["experiment=auto", "auto.time_limit=30", *TINY_OVERRIDES, "tracking.uri=null", *extra],
                           out)
    assert _unchanged(out, before)


def test_a_run_and_a_blend_refuse_a_folder_of_the_user_s_files(tmp_path):
    out = tmp_path / "mine"
    before = _users_folder(out)
    with pytest.raises(ConfigError, match=r"hydra.run.dir='.*mine' holds files qwkboost did not write .*a run writes"):
        run_in_process([*TINY_OVERRIDES, "tracking.uri=null"], out)
    with pytest.raises(SystemExit) as code:
        command_in_process("blend.py", [f"runs=[{tmp_path / 'no-run'}]", "tracking.uri=null"], out)
    assert code.value.code == 2
    assert _unchanged(out, before)
