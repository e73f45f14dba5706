"""An objective's import path is checked exactly before anything is imported, and imported as checked: a name read
from a file (saved_objective) in ASCII, with no advice to set PYTHONPATH; a name typed in a config
(import_objective) with that advice kept for a module that is not found."""

import sys

import pytest

from qwkboost.objectives import check_trusted_modules, import_objective, import_path, saved_objective

CODE = """from pathlib import Path
Path({marker!r}).write_text("this module's code ran")
"""


@pytest.mark.parametrize("path, parts", [
    ("mypkg.losses.PseudoHuber", ("mypkg.losses", "PseudoHuber")),
    ("mypkg.losses:PseudoHuber", ("mypkg.losses", "PseudoHuber")),
    ("mypkg.losses:Outer.Inner", ("mypkg.losses", "Outer.Inner")),
    ("m:C", ("m", "C")),
])
def test_an_exact_import_path_is_split_as_written(path, parts):
    assert import_path(path) == parts and import_path(path, ascii_only=True) == parts


@pytest.mark.parametrize("path", ["json :Evil", "json\t:Evil", " json:Evil", "json: Evil", "os .Evil", "json.:Evil",
                                  "json.Evil.", "json..Evil", ".json:Evil", "json:Evil:X", "json:", ":Evil", "Evil",
                                  "", "json:Evil\n", "\uff4a\uff53\uff4f\uff4e:Evil", "json:\uff25vil",
                                  "my-pkg:Evil", "json/x:Evil", 3, None])
def test_anything_else_is_not_an_import_path(path):
    assert import_path(path) is None and import_path(path, ascii_only=True) is None


def test_a_look_alike_letter_passes_only_where_unicode_names_are_allowed():
    assert import_path("\u0458son:Evil") == ("\u0458son", "Evil")       # a Cyrillic 'ј': a valid identifier
    assert import_path("\u0458son:Evil", ascii_only=True) is None


@pytest.fixture
def traps(tmp_path, monkeypatch):
    """Module files named like near-names, in the working directory on ``sys.path``; the marker their import
    writes."""
    marker = tmp_path / "IMPORTED"
    for name in ("json ", " json", "json\t", "os ", "\uff4a\uff53\uff4f\uff4e"):
        (tmp_path / f"{name}.py").write_text(CODE.format(marker=str(marker)))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield marker
    for name in ("json ", " json", "json\t", "os ", "\uff4a\uff53\uff4f\uff4e"):
        sys.modules.pop(name, None)


@pytest.mark.parametrize("path", ["json :Evil", " json:Evil", "json\t:Evil", "os .Evil", "json.:Evil",
                                  "\uff4a\uff53\uff4f\uff4e:Evil"])
def test_a_near_name_in_a_file_imports_nothing(traps, path):
    for trusted in ((), ("json", "os")):
        with pytest.raises(ValueError) as err:
            saved_objective("crafted", path, trusted, "path 'm.json'")
        text = str(err.value)
        assert not traps.exists(), text
        assert text.startswith("path 'm.json': its objective's class") and "'objective.class'" in text
        assert "\n" not in text and "PYTHONPATH" not in text and "trusted_modules=[" not in text
        assert ascii(path) in text                   # a tab or a look-alike shown escaped


@pytest.mark.parametrize("path", ["json :Evil", " json.Evil", "\uff4a\uff53\uff4f\uff4e.Evil"])
def test_a_near_name_in_a_config_imports_nothing(traps, path):
    with pytest.raises(ValueError, match="give an import path") as err:
        import_objective(path)
    assert not traps.exists() and "\n" not in str(err.value)


def test_pythonpath_is_advised_only_for_a_name_typed_in_a_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="add its directory to PYTHONPATH"):
        import_objective("no_such_pkg_45.losses.Loss")
    with pytest.raises(ValueError) as err:
        saved_objective("crafted", "no_such_pkg_45.losses:Loss", ("no_such_pkg_45",), "path 'm.json'")
    assert "module 'no_such_pkg_45.losses' cannot be imported" in str(err.value)
    assert "PYTHONPATH" not in str(err.value)


@pytest.mark.parametrize("bad", [" json", "json ", "json\t", "json.", ".json", "a..b", "", "\uff4a\uff53\uff4f\uff4e",
                                 "\u0458son", "my-pkg"])
def test_trusted_modules_are_exact_names(bad):
    with pytest.raises(ValueError, match="trusted_modules must list module names exactly as imported") as err:
        check_trusted_modules([bad])
    assert ascii(bad) in str(err.value)
    assert check_trusted_modules(["mypkg", "mypkg.losses"]) == ("mypkg", "mypkg.losses")
    assert check_trusted_modules("mypkg") == ("mypkg",) and check_trusted_modules(None) == ()
