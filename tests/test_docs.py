"""The documentation's examples, as written: every ``python`` block of a page runs (the page's blocks in order,
in one namespace, in an empty folder), and its ``experiments/run.py`` and ``experiments/blend.py`` commands
compose into valid configs. Blocks meant to be read, not run, are fenced as ``py`` or ``text``."""

import re
import shlex
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from qwkboost.config import check_config, side_by_side

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
                line = re.sub(r"\[([^\]]*)\]$", r"\1", line)        # an optional tail, written [like=this]
                out.append(shlex.split(line)[2:])
    return out


RUNNABLE = [p for p in PAGES if blocks(p.read_text(), "python")]


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: str(p.relative_to(ROOT / "docs")))
def test_python_blocks_run_as_written(page, tmp_path, monkeypatch):
    from qwkboost import objectives

    monkeypatch.chdir(tmp_path)
    registered = dict(objectives._REGISTRY)        # a page may register an objective of its own
    namespace: dict = {"__name__": "__docs__"}
    try:
        for code in blocks(page.read_text(), "python"):
            exec(compile(code, str(page), "exec"), namespace)
    finally:
        objectives._REGISTRY.clear()
        objectives._REGISTRY.update(registered)


def test_every_docs_page_is_in_the_site():
    nav = (ROOT / "mkdocs.yml").read_text()
    missing = [str(p.relative_to(ROOT / "docs")) for p in PAGES if str(p.relative_to(ROOT / "docs")) not in nav]
    assert missing == []


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
    if cfg.get("auto"):         # the budget places its candidates on a cluster itself, each config names none
        cfg, _ = side_by_side(cfg, placed=True)
    check_config(cfg)
    if cfg.get("auto"):
        from qwkboost.autoblend.settings import AutoSettings

        AutoSettings.from_config(cfg["auto"])


@pytest.mark.parametrize("page,args", BLEND_COMMANDS, ids=lambda v: v.name if isinstance(v, Path) else " ".join(v))
def test_blend_commands_compose(page, args):
    import importlib.util

    spec = importlib.util.spec_from_file_location("blend_cli", ROOT / "experiments" / "blend.py")
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = OmegaConf.to_container(compose("blend", args), resolve=False)
    cli.check(cfg)


def test_dask_example_runs_as_written(tmp_path):
    """The Dask example, as a script (Dask starts worker processes), on Parquet files shaped as it says."""
    import subprocess
    import sys

    import pandas as pd

    from qwkboost.data.sources import quartiles

    page = (ROOT / "docs" / "guide" / "scale-out.md").read_text()
    (code,) = [b for b in blocks(page, "py") if "read_parquet(" in b]
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


def test_dask_categorical_example_runs_as_written(tmp_path):
    """The in-memory example with a string column and the cumulative-link model, as a script: the cut points
    learned on the workers come back, and the saved model predicts from the strings on one machine."""
    import subprocess
    import sys

    import numpy as np
    import pandas as pd

    import qwkboost
    from qwkboost.data.sources import quartiles

    page = (ROOT / "docs" / "guide" / "scale-out.md").read_text()
    (code,) = [b for b in blocks(page, "py") if "ordinal_logit" in b]
    ds = quartiles(n_train=4_000, n_test=500)
    train = pd.DataFrame(ds.X_train, columns=[f"x{j}" for j in range(ds.X_train.shape[1])])
    train["region"] = np.array(["north", "south", "east", "west"])[(ds.X_train[:, 0] * 4).astype(int).clip(0, 3)]
    train["rating"] = ds.y_train
    train.to_csv(tmp_path / "train.csv", index=False)
    (tmp_path / "example.py").write_text(code)
    proc = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cuts = [float(c) for c in proc.stdout.split("cut points [")[1].split("]")[0].split(",")]
    assert len(cuts) == 3 and cuts == sorted(cuts)
    model = qwkboost.load_model(tmp_path / "model.json")
    assert model.schema.categories[train.columns.get_loc("region")] == ["east", "north", "south", "west"]
    pred = model.predict(train.drop(columns="rating").head(50))
    assert pred.shape == (50,) and np.isfinite(pred).all()


def test_auto_on_a_cluster_example_runs_as_written(tmp_path):
    """The scale-out guide's ``qb.auto(..., cluster="local")`` example, as a script: candidates on both workers of
    a LocalCluster, the leaderboard's ``worker`` column printed."""
    import subprocess
    import sys

    import pandas as pd

    from qwkboost.data.sources import quartiles

    page = (ROOT / "docs" / "guide" / "scale-out.md").read_text()
    (code,) = [b for b in blocks(page, "py") if 'cluster="local"' in b]
    ds = quartiles(n_train=2_000, n_test=500)
    cols = [f"x{j}" for j in range(ds.X_train.shape[1])]
    pd.DataFrame(ds.X_train, columns=cols).assign(rating=ds.y_train.astype(int)).to_csv(tmp_path / "train.csv",
                                                                                        index=False)
    pd.DataFrame(ds.X_test, columns=cols).to_csv(tmp_path / "test.csv", index=False)
    (tmp_path / "example.py").write_text(code)
    proc = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    board = pd.read_csv(tmp_path / "auto-on-a-cluster" / "leaderboard.csv")
    workers = board.loc[board["status"] == "finished", "worker"]
    assert workers.str.startswith("tcp://127.0.0.1:").all() and workers.nunique() == 2
    assert "worker" in proc.stdout.splitlines()[0]


def test_the_loop_diagram_names_what_the_code_has():
    """Every name in docs/auto-decides.md's diagram and table is a module, class, function or method of
    ``qwkboost.autoblend`` (the diagram is drawn from the code's own names)."""
    import importlib
    import re

    text = (ROOT / "docs" / "auto-decides.md").read_text()
    diagram = text.split("```text", 1)[1].split("```", 1)[0]
    names = set(re.findall(r"\b([A-Za-z_][A-Za-z_]*(?:\.[A-Za-z_]+)?)(?=\(|\s|$|,|\])", diagram))
    names |= set(re.findall(r"`([A-Za-z_][A-Za-z_.]*)`", text.split("## Where each decision stands", 1)[1]))
    modules = {m: importlib.import_module(f"qwkboost.autoblend.{m}") for m in
               ("driver", "state", "context", "loop", "schedule", "tuning", "fit", "jobs", "executor",
                "dask_executor", "finish", "ranking", "costs", "placement", "budget")}
    code_like = {n for n in names if re.search(r"[A-Z_]|\.", n) or n in modules or
                 any(hasattr(m, n) for m in modules.values())}

    def exists(name: str) -> bool:
        head, _, attr = name.partition(".")
        if head in modules:
            return not attr or hasattr(modules[head], attr)
        owners = [getattr(m, head) for m in modules.values() if hasattr(m, head)]
        fields = {f for o in owners for f in getattr(o, "__dataclass_fields__", {})}
        return bool(owners) and (not attr or attr in fields or any(hasattr(o, attr) for o in owners))

    prose = {"Ctrl", "C", "SIGTERM", "Source", "MLflow", "Started", "Outcome"}
    missing = sorted(n for n in code_like - prose if not exists(n) and not n.endswith((".md", ".json")))
    assert {"run_loop", "Defaults.next", "Tuning.next", "AutoState.record_finished", "fit"} <= names
    assert missing == []
