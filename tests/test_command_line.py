"""What Hydra would answer with a traceback, answered before it starts in one line: an output directory that cannot
be made or written (``hydra.run.dir``, ``hydra.sweep.dir``, predict's ``out``), and an unquoted value with a
character its grammar takes only quoted (``☃``).

The commands run as processes where the process is under test (exit status, stderr); the checks themselves
(:func:`qwkboost.validation.check_writable_dir`, :func:`~qwkboost.validation.check_command_line`) in this one.
Tests run as root, where permissions do not stop writes: a directory is made unwritable by a regular file in
its path, or by a read-only bind mount where this process may mount one.
"""

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CONF_DIR, command_in_process
from qwkboost.validation import check_command_line, check_writable_dir

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "CI": "true"}


def _command(tmp_path, *args, script="run.py"):
    return subprocess.run([sys.executable, str(ROOT / "experiments" / script), *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, env=ENV)


def _one_line(proc) -> str:
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    (line,) = proc.stderr.strip().splitlines()
    return line


@pytest.fixture
def a_file(tmp_path):
    (tmp_path / "afile").write_text("a regular file, where a directory would be made\n")
    return tmp_path / "afile"


@pytest.fixture
def read_only_dir(tmp_path):
    """A directory on a read-only bind mount of itself (stops root too); skipped where this process cannot mount."""
    d = tmp_path / "ro"
    d.mkdir()
    if subprocess.run(["mount", "--bind", "-o", "ro", str(d), str(d)], capture_output=True).returncode != 0:
        pytest.skip("cannot make a read-only bind mount here (needs root in a namespace that allows it)")
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=True)


def test_a_run_directory_under_a_file_is_one_line_before_hydra(tmp_path, a_file):
    """Hydra made the directory and configured its log file there first: its traceback, exit status 1."""
    line = _one_line(_command(tmp_path, f"hydra.run.dir={a_file}/out"))
    assert line == (f"error: hydra.run.dir='{a_file}/out' cannot be made: {a_file} is a regular file, not a "
                    "directory; give hydra.run.dir=<a directory you can write to>")


def test_the_default_directory_is_checked_where_the_command_runs(tmp_path):
    (tmp_path / "multirun").write_text("a file named like the sweeps' folder\n")
    line = _one_line(_command(tmp_path, "-m", "seed=1,2"))
    assert line == ("error: hydra.sweep.dir='multirun/${now:%Y-%m-%d}/${now:%H-%M-%S}' cannot be made: multirun is "
                    "a regular file, not a directory; run the command in a directory you can write to, or give "
                    "hydra.sweep.dir=<a directory you can write to>")
    assert not list(tmp_path.glob("outputs"))


def test_an_unquoted_snowman_is_one_line_that_shows_the_quoted_form(tmp_path):
    """Hydra's lexer error (LexerNoViableAltException, exit status 1) said where, not what to do."""
    path = f"{tmp_path}/☃/train.csv"
    line = _one_line(_command(tmp_path, "data=csv", f"data.path={path}", "data.target=y"))
    quoted = shlex.quote(f'data.path="{path}"')
    assert line == f"error: data.path={path}: Hydra takes '☃' in a value only in quotes; quote it: {quoted}"
    # the quoted form, as the shell hands it over, is the path itself to Hydra
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=["data=csv", *shlex.split(quoted), "data.target=y"])
    assert cfg.data.path == path


@pytest.mark.parametrize("argv, message", [
    (["-m", "data.path=/a/☃,/b/☃"], """quote it: 'data.path="/a/☃","/b/☃"'"""),
    (["+data.note=☃"], """quote it: '+data.note="☃"'"""),
    (["☃=1"], "a key is an ASCII name"),
])
def test_quoting_advice_for_sweeps_new_keys_and_keys(argv, message):
    with pytest.raises(ValueError, match="Hydra takes '☃'") as got:
        check_command_line(argv)
    assert message in str(got.value)


@pytest.mark.parametrize("argv", [
    ['data.path="/tmp/☃/train.csv"'],               # quoted: Hydra reads it
    ["--cfg", "job", "hydra.run.dir=/dev/null/x"],  # writes nothing
    ["hydra.run.dir=${oc.env:HOME}/x"],             # where it goes is known only to Hydra
    ["seed=3"],
])
def test_command_lines_hydra_takes_pass(argv, tmp_path):
    check_command_line(argv, Path(CONF_DIR) / "config.yaml")


def test_check_writable_dir(tmp_path, a_file):
    assert check_writable_dir(tmp_path / "new" / "deeper", "output_dir") == tmp_path / "new" / "deeper"
    assert not (tmp_path / "new").exists()          # checked, not made
    with pytest.raises(ValueError, match=r"^output_dir='.*/afile/x/y' cannot be made: .*/afile is a regular file, "
                                         r"not a directory; give output_dir=<a directory you can write to>$"):
        check_writable_dir(a_file / "x" / "y", "output_dir")


def test_a_read_only_directory_is_refused_for_root_too(read_only_dir):
    with pytest.raises(ValueError, match=r"cannot be written: .*/ro is on a read-only file system"):
        check_writable_dir(read_only_dir / "out", "output_dir")
    with pytest.raises(ValueError, match=r"^hydra.run.dir='.*/ro/out' cannot be written"):
        check_command_line([f"hydra.run.dir={read_only_dir}/out"])


def test_predict_refuses_an_out_it_cannot_write_before_reading_the_run(tmp_path, a_file, capsys):
    with pytest.raises(SystemExit) as stop:
        command_in_process("predict.py", ["run=no-such-run", f"data.path={tmp_path}/new.csv", f"out={a_file}/p"],
                           tmp_path / "o")
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip() == (f"error: out='{a_file}/p' cannot be made: {a_file} is a regular "
                                               "file, not a directory; give out=<a directory you can write to>")
