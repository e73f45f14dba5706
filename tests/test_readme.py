"""The README's examples, as written: its Python blocks run, and its commands compose into valid configs."""

import re
import shlex
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from qwkboost.config import check_config, side_by_side

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_python_examples_run_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    codes = blocks("python")
    assert codes
    for code in codes:
        exec(compile(code, "README.md", "exec"), namespace)
    assert 0.5 < namespace["clf"].score(namespace["ds"].X_test, namespace["ds"].y_test + 1) <= 1


def test_readme_links_point_at_files():
    for target in re.findall(r"\]\(((?:docs|benchmarks)/[^)#]+)", README):
        assert (ROOT / target).is_file(), target


def commands(script):
    out = []
    for block in blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():      # a command continued with a backslash
            line = line.split("#")[0].strip()
            if line.startswith(f"python experiments/{script}"):
                line = re.sub(r"\[([^\]]*)\]$", r"\1", line)        # an optional tail, written [like=this]
                out.append(shlex.split(line)[2:])
    return out


@pytest.mark.parametrize("args", commands("run.py"), ids=" ".join)
def test_run_commands_compose_into_valid_configs(args, tmp_path):
    overrides = [a for a in args if a != "-m"]
    overrides = [o.split(",")[0] if "=" in o and "[" not in o else o for o in overrides]   # a sweep's first job
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = OmegaConf.to_container(compose("config", overrides), resolve=True)
    if cfg["data"]["name"] == "csv":
        (tmp_path / "train.csv").write_text("f,rating\n1,1\n")
        (tmp_path / "test.csv").write_text("f,rating\n1,1\n")
        cfg["data"]["path"], cfg["data"]["test_path"] = str(tmp_path / "train.csv"), str(tmp_path / "test.csv")
    if cfg["table"]:
        return
    if cfg.get("auto"):         # the budget places its candidates on a cluster itself, each config names none
        cfg, _ = side_by_side(cfg, placed=True)
    check_config(cfg)


@pytest.mark.parametrize("args", commands("tune.py"), ids=" ".join)
def test_tune_commands_compose(args, tmp_path):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = OmegaConf.to_container(compose("tune", args), resolve=True)
    if cfg["data"]["name"] == "csv":
        (tmp_path / "train.csv").write_text("f,rating\n1,1\n")
        cfg["data"]["path"], cfg["data"]["test_path"] = str(tmp_path / "train.csv"), str(tmp_path / "train.csv")
    check_config(cfg)
    assert cfg["engine"]["search_space"]


@pytest.mark.parametrize("args", commands("blend.py"), ids=" ".join)
def test_blend_commands_compose(args):
    import importlib.util

    spec = importlib.util.spec_from_file_location("blend_cli", ROOT / "experiments" / "blend.py")
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = OmegaConf.to_container(compose("blend", args), resolve=False)
    cli.check(cfg)
