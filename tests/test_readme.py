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
    check_config(cfg)


@pytest.mark.parametrize("args", commands("tune.py"), ids=" ".join)
def test_tune_commands_compose(args):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = OmegaConf.to_container(compose("tune", args), resolve=True)
    check_config(cfg)
    assert cfg["engine"]["search_space"]


def test_dask_example_runs_as_written(tmp_path):
    """The Dask example, as a script (Dask starts worker processes), on Parquet files shaped as it says."""
    import subprocess
    import sys

    import pandas as pd

    from qwkboost.data.sources import quartiles

    (code,) = [b for b in blocks("python") if "train_dask(" in b]
    ds = quartiles(n_train=6_000, n_test=2_000)
    frame = lambda X, y=None: pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])]).assign(
        **({} if y is None else {"rating": y}))
    (tmp_path / "data").mkdir()
    for i, rows in enumerate((slice(0, 2_500), slice(2_500, 5_000))):
        frame(ds.X_train[rows], ds.y_train[rows]).to_parquet(tmp_path / "data" / f"train-{i}.parquet")
    frame(ds.X_train[5_000:], ds.y_train[5_000:]).to_parquet(tmp_path / "data" / "valid-0.parquet")
    frame(ds.X_test).to_parquet(tmp_path / "data" / "test-0.parquet")
    (tmp_path / "example.py").write_text(code + "    print('scored', len(scores))\n")
    proc = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "scored 2000" in proc.stdout
    assert (tmp_path / "model.json").exists()


@pytest.mark.parametrize("args", commands("blend.py"), ids=" ".join)
def test_blend_commands_compose(args):
    import importlib.util

    spec = importlib.util.spec_from_file_location("blend_cli", ROOT / "experiments" / "blend.py")
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = OmegaConf.to_container(compose("blend", args), resolve=False)
    cli.check(cfg)
