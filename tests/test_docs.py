"""The documentation's examples, as written: every ``python`` block of a page runs (the page's blocks in order,
in one namespace, in an empty folder), and its ``experiments/run.py`` and ``experiments/blend.py`` commands
compose into valid configs. Blocks meant to be read, not run, are fenced as ``py`` or ``text``."""

import re
import shlex
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from qwkboost.config import check_config

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").rglob("*.md"))


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M)


def commands(text: str, script: str) -> list[list[str]]:
    out = []
    for block in blocks(text, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("#")[0].strip()
            if line.startswith(f"python experiments/{script}"):
                out.append(shlex.split(line)[2:])
    return out


RUNNABLE = [p for p in PAGES if blocks(p.read_text(), "python")]


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: str(p.relative_to(ROOT / "docs")))
def test_python_blocks_run_as_written(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for code in blocks(page.read_text(), "python"):
        exec(compile(code, str(page), "exec"), namespace)


RUN_COMMANDS = [(p, args) for p in PAGES for args in commands(p.read_text(), "run.py")]
BLEND_COMMANDS = [(p, args) for p in PAGES for args in commands(p.read_text(), "blend.py")]


@pytest.mark.parametrize("page,args", RUN_COMMANDS, ids=lambda v: v.name if isinstance(v, Path) else " ".join(v))
def test_run_commands_compose_into_valid_configs(page, args, tmp_path):
    overrides = [a for a in args if a != "-m"]
    overrides = [o.split(",")[0] if "=" in o and "[" not in o else o for o in overrides]   # a sweep's first job
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = OmegaConf.to_container(compose("config", overrides), resolve=True)
    if cfg["data"]["name"] == "csv":                  # the page's own file names, stood in for by tiny files
        (tmp_path / "train.csv").write_text("f,label,id,entity\n1,1,1,1\n")
        (tmp_path / "test.csv").write_text("f,id,entity\n1,2,2\n")
        cfg["data"]["path"], cfg["data"]["test_path"] = str(tmp_path / "train.csv"), str(tmp_path / "test.csv")
    if cfg["table"]:
        return
    check_config(cfg)


@pytest.mark.parametrize("page,args", BLEND_COMMANDS, ids=lambda v: v.name if isinstance(v, Path) else " ".join(v))
def test_blend_commands_compose(page, args):
    import importlib.util

    spec = importlib.util.spec_from_file_location("blend_cli", ROOT / "experiments" / "blend.py")
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = OmegaConf.to_container(compose("blend", args), resolve=False)
    cli.check(cfg)
