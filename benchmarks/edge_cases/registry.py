"""The list of cases, the decorators that add to it (``case``, ``refusal_case``), and ``Ctx``: what a case is handed."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .harness import PY, RUN, TUNE, TWO, V, Ran, refusal, run_proc


@dataclass
class Case:
    name: str
    group: str
    good: str                       # what good means in this case
    fn: Callable
    expect: tuple = ("good",)
    needs: tuple = ()               # "dask", "catboost"
    quick: bool = False


CASES: list[Case] = []


def case(name, group, good, expect=("good",), needs=(), quick=False):
    def add(fn):
        CASES.append(Case(name, group, good, fn, tuple(expect), tuple(needs), quick))
        return fn
    return add


class Ctx:
    """A case's folder (the working directory of its commands), the data, its MLflow store, its runs."""

    def __init__(self, folder: Path, data: Path, scale: float):
        self.dir, self.data, self.scale = folder, data, scale
        self.runs: list[Ran] = []
        self.train, self.test = data / "train.csv", data / "test.csv"

    @property
    def store(self) -> str:
        return f"sqlite:///{self.dir}/mlflow.db"

    @property
    def storage(self) -> str:
        return f"sqlite:///{self.dir}/optuna.db"

    def data_args(self, train=None, test=None) -> list[str]:
        return ["data=csv", f"data.path={train or self.train}", f"data.test_path={test or self.test}",
                "data.target=score", "data.id=id"]

    def auto(self, out, T=30, pairs=TWO, extra=(), train=None, test=None) -> list:
        engines, objectives = pairs
        argv = [PY, RUN, "experiment=auto", f"auto.time_limit={T}", *self.data_args(train, test)]
        if engines:
            argv.append(f"auto.engines=[{','.join(engines)}]")
        if objectives:
            argv.append(f"auto.objectives=[{','.join(objectives)}]")
        return [*argv, f"tracking.uri={self.store}", f"hydra.run.dir={out}", *extra]

    def single(self, out, extra=()) -> list:
        return [PY, RUN, *self.data_args(), f"tracking.uri={self.store}", "tracking.explain=false",
                f"hydra.run.dir={out}", *extra]

    def tune(self, out, n=3, engine="lightgbm", storage=True, extra=()) -> list:
        return [PY, TUNE, f"engine={engine}", f"tune.n_trials={n}", *self.data_args(), f"tracking.uri={self.store}",
                "tracking.explain=false", f"hydra.run.dir={out}",
                *([f"tune.storage={self.storage}"] if storage else []), *extra]

    def run(self, argv, timeout=None, cwd=None, **kw) -> Ran:
        T = next((float(a.split("=", 1)[1]) for a in map(str, argv) if a.startswith("auto.time_limit=")
                  and re.fullmatch(r"[0-9.]+", a.split("=", 1)[1])), 30.0)
        r = run_proc(argv, cwd or self.dir, (timeout or T + 60) * self.scale, **kw)
        self.runs.append(r)
        return r

    def user_folder(self, name="mine") -> Path:
        """A folder of the user's own: their pipeline notes, a plot and a submission of theirs."""
        d = self.dir / name
        (d / "pipeline").mkdir(parents=True)
        (d / "plots").mkdir()
        (d / "pipeline" / "important.txt").write_text("my feature pipeline, three weeks of work\n")
        (d / "plots" / "mine.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(2048))
        (d / "submission.csv").write_text("id,score\n100000,3\n100001,0\n")
        return d


def refusal_case(name, group, good, argv_of, names=None, expect=("refused",), needs=(), slow_after=None,
                 accept=None):
    """Add a case whose promise is a refusal in one line before training (a quick one).

    Parameters
    ----------
    name, group, good, expect, needs
        As for :func:`case`.
    argv_of : callable
        ``argv_of(c, out)``: the command, given the ``Ctx`` and the output folder.
    names : str, optional
        A regex the ``error:`` line should match (:func:`~edge_cases.harness.refusal`).
    slow_after : float, optional
        Seconds after which a refusal's detail begins "slow refusal".
    accept : callable, optional
        ``accept(r, c, out)``: the verdict of an exit 0 (default: silent, a bad setting accepted without a word).
    """
    @case(name, group, good, expect=expect, needs=needs, quick=True)
    def _(c: Ctx):
        out = c.dir / "out"
        argv = argv_of(c, out)
        had = (out / "candidates").exists()
        r = c.run(argv, timeout=60)
        v = refusal(r, made=(out / "candidates").exists() and not had, names=names)
        if v is None:
            v = accept(r, c, out) if accept else V("silent", "exit 0: the setting was accepted without a word", r)
        if slow_after and v["verdict"] == "refused" and r.seconds > slow_after:
            v["detail"] = f"slow refusal ({r.seconds:.0f} s) " + v["detail"]
        if v["verdict"] == "refused" and "candidates run on the Dask cluster" in r.out:
            v["detail"] = "refused only after the cluster started: " + v["detail"]
        return v
