"""Outputs written beside the old ones and swapped in whole, one writer per directory, and a manifest that tells a
damaged file (qwkboost.tracking.writing)."""

import os
import subprocess
import sys
import textwrap

import pytest

from qwkboost.exceptions import ConfigError
from qwkboost.tracking.writing import OutputLock, manifest, manifest_problem, staged


def _old_outputs(d):
    d.mkdir(parents=True, exist_ok=True)
    (d / "submission.csv").write_text("id,y\n1,old\n")
    (d / "blend.json").write_text("{}")
    (d / "pipeline").mkdir()
    (d / "pipeline" / "pipeline.json").write_text("old")
    (d / "keep.txt").write_text("a user's file")


def test_a_failure_while_writing_keeps_every_old_output(tmp_path):
    d = tmp_path / "out"
    _old_outputs(d)
    with pytest.raises(RuntimeError, match="disk full"):
        with staged(d, remove=("blend.json", "pipeline", "submission.csv")) as new:
            (new / "submission.csv").write_text("id,y\n1,new\n")
            (new / "pipeline").mkdir()
            raise RuntimeError("disk full")
    assert (d / "submission.csv").read_text() == "id,y\n1,old\n"
    assert (d / "pipeline" / "pipeline.json").read_text() == "old" and (d / "blend.json").exists()
    assert sorted(p.name for p in d.iterdir()) == ["blend.json", "keep.txt", "pipeline", "submission.csv"]


def test_a_ctrl_c_while_writing_keeps_the_old_outputs(tmp_path):
    d = tmp_path / "out"
    _old_outputs(d)
    with pytest.raises(KeyboardInterrupt):
        with staged(d) as new:
            (new / "submission.csv").write_text("half")
            raise KeyboardInterrupt
    assert (d / "submission.csv").read_text() == "id,y\n1,old\n"
    assert not [p for p in d.iterdir() if p.name.startswith(".")]


def test_a_complete_set_is_swapped_in_and_outputs_it_lacks_are_removed(tmp_path):
    d = tmp_path / "out"
    _old_outputs(d)
    with staged(d, remove=("blend.json", "pipeline", "submission.csv")) as new:
        (new / "submission.csv").write_text("id,y\n1,new\n")
        (new / "pipeline").mkdir()
        (new / "pipeline" / "pipeline.json").write_text("new")
    assert (d / "submission.csv").read_text() == "id,y\n1,new\n"
    assert (d / "pipeline" / "pipeline.json").read_text() == "new"
    assert not (d / "blend.json").exists(), "an earlier blend's file the new outputs lack is gone"
    assert (d / "keep.txt").read_text() == "a user's file", "what qwkboost does not write is left alone"
    assert sorted(p.name for p in d.iterdir()) == ["keep.txt", "pipeline", "submission.csv"]


def test_a_folder_replaces_a_file_of_its_name_and_back(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    (d / "pipeline").write_text("a file where a folder goes")
    with staged(d) as new:
        (new / "pipeline").mkdir()
        (new / "pipeline" / "x").write_text("1")
    assert (d / "pipeline" / "x").read_text() == "1"
    with staged(d) as new:
        (new / "pipeline").write_text("now a file")
    assert (d / "pipeline").read_text() == "now a file"


def test_a_second_writer_is_refused_naming_the_first(tmp_path):
    d = tmp_path / "out"
    holder = textwrap.dedent(f"""
        import sys, time
        from qwkboost.tracking.writing import OutputLock
        with OutputLock({str(d)!r}):
            print("held", flush=True)
            sys.stdin.readline()
    """)
    p = subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=rf"output_dir='{d}' is in use by another qwkboost command \(pid "
                                              rf"{p.pid} on "):
            with OutputLock(d, "output_dir"):
                pass
    finally:
        p.communicate("\n", timeout=60)
    with OutputLock(d, "output_dir"):       # free once the first has ended
        assert (d / ".qwkboost.lock.json").is_file()
    assert not (d / ".qwkboost.lock.json").exists()


def test_a_killed_writer_frees_the_directory(tmp_path):
    d = tmp_path / "out"
    code = f"from qwkboost.tracking.writing import OutputLock; l = OutputLock({str(d)!r}).__enter__(); import os; " \
           "os.kill(os.getpid(), 9)"
    subprocess.run([sys.executable, "-c", code], check=False)
    with OutputLock(d):
        pass


def test_a_directory_that_cannot_be_written_is_named(tmp_path):
    (tmp_path / "afile").write_text("")
    with pytest.raises(ConfigError, match=r"output_dir='.*afile/out' cannot be written"):
        with OutputLock(tmp_path / "afile" / "out", "output_dir"):
            pass


def test_the_manifest_names_a_truncated_deleted_replaced_linked_or_fifo_file(tmp_path):
    """Nothing but regular files inside the folder is read: a FIFO is named, never opened (it would block)."""
    d = tmp_path / "run"
    (d / "pipeline").mkdir(parents=True)
    (d / "oof.parquet").write_bytes(b"x" * 100)
    (d / "pipeline" / "fold_0.json").write_text('{"a": 1}')
    (d / "pipeline" / "fold_1.json").write_text('{"a": 2}')
    rec = manifest(d)
    assert set(rec) == {"oof.parquet", "pipeline/fold_0.json", "pipeline/fold_1.json"}
    assert manifest_problem(d, rec) is None
    (d / "oof.parquet").write_bytes(b"x" * 50)
    assert manifest_problem(d, rec) == "oof.parquet changed size (100 -> 50 bytes)"
    (d / "oof.parquet").write_bytes(b"y" * 100)
    assert manifest_problem(d, rec) == "oof.parquet changed (its content differs)"
    (d / "oof.parquet").write_bytes(b"x" * 100)
    (d / "pipeline" / "fold_0.json").unlink()
    assert manifest_problem(d, rec) == "file 'pipeline/fold_0.json' does not exist"
    other = tmp_path / "elsewhere.json"
    other.write_text('{"a": 1}')
    os.symlink(other, d / "pipeline" / "fold_0.json")
    assert manifest_problem(d, rec).startswith("file 'pipeline/fold_0.json' leads out of the directory (a symlink")
    (d / "pipeline" / "fold_0.json").unlink()
    os.mkfifo(d / "pipeline" / "fold_0.json")        # never opened: a FIFO would block the reader
    assert manifest_problem(d, rec) == "file 'pipeline/fold_0.json' is a FIFO, not a regular file"
    assert manifest_problem(d, {"../x": [1, "0"]}) == "file '../x' holds '..'; a run's files name paths inside its " \
                                                      "directory"
