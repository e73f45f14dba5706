"""The README's examples, as written: its Python blocks run, and its commands compose into valid configs."""

import re
import shlex
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from qwkboost.config import check_config

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_python_examples_run_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from qwkboost import objectives

    namespace: dict = {}
    try:
        for code in blocks("python"):
            exec(compile(code, "README.md", "exec"), namespace)
    finally:
        objectives._REGISTRY.pop("pseudo_huber", None)
    assert (tmp_path / "model.json").exists()
    assert list(namespace["classes"][:0]) == [] and namespace["model"].feature_names == list("abcde")


def commands(script):
    out = []
    for block in blocks("bash"):
        for line in block.splitlines():
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
    check_config(cfg)


@pytest.mark.parametrize("args", commands("tune.py"), ids=" ".join)
def test_tune_commands_compose(args):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = OmegaConf.to_container(compose("tune", args), resolve=True)
    check_config(cfg)
    assert cfg["engine"]["search_space"]
