"""The house's countable signs: no import cycle between qwkboost's modules (function-level imports included),
no module over 600 lines unless it is one class, at most 12 modules at the package's top level, a short README,
and a public API that imports lazily."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "qwkboost"
MODULES = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
           for p in PKG.rglob("*.py")}


def imported(path: Path, name: str) -> set[str]:
    """The qwkboost modules ``path`` imports anywhere in its body (a ``from a import b`` names ``a.b`` when that
    is a module, else ``a``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("qwkboost")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            if not base.startswith("qwkboost"):
                continue
            for a in node.names:
                out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base)
    return {m for m in out if m in MODULES and m != name}


GRAPH = {name: imported(path, name) for name, path in MODULES.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_over_600_lines_unless_one_class():
    long = {}
    for name, path in MODULES.items():
        text = path.read_text()
        n = text.count("\n")
        if n > 600:
            tree = ast.parse(text)
            top = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
            if not (len([t for t in top if isinstance(t, ast.ClassDef)]) == 1 and len(top) == 1):
                long[name] = n
    assert long == {}


def test_at_most_12_modules_at_the_top_level():
    top = sorted(p.name for p in PKG.glob("*.py"))
    assert len(top) <= 12, top


def test_readme_is_a_landing_page():
    assert (ROOT / "README.md").stat().st_size <= 15_000


def test_import_qwkboost_is_lazy():
    """``import qwkboost`` loads none of the heavy libraries; the public names load on first use."""
    code = ("import sys, qwkboost as qb; heavy = [m for m in ('sklearn', 'pandas', 'xgboost', 'lightgbm', 'mlflow', "
            "'scipy', 'matplotlib') if m in sys.modules]; print(heavy); qb.qwk; qb.train; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]" and out[1] == "ok"


@pytest.mark.parametrize("name", ["train", "load_model", "load_run", "QWKClassifier", "qwk", "extended_qwk",
                                  "cross_validate", "blend", "Model", "FittedPipeline", "FeatureSchema",
                                  "ConfigError", "metrics", "objectives", "thresholds", "auto", "AutoResult"])
def test_the_public_api_resolves(name):
    import qwkboost

    assert name in qwkboost.__all__ and getattr(qwkboost, name) is not None


def test_every_face_resolves_every_name_it_offers():
    import importlib

    for face in ("qwkboost.data", "qwkboost.evaluation", "qwkboost.runs", "qwkboost.tracking", "qwkboost.distributed",
                 "qwkboost.autoblend"):
        module = importlib.import_module(face)
        for name in module.__all__:
            assert getattr(module, name) is not None, (face, name)


def test_the_wheel_lists_every_subpackage_and_the_configs():
    """pyproject.toml names the packages (``conf/`` is ``qwkboost.conf``, so the Python API reads the defaults
    from an installed wheel too): a new subpackage must be added there."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in PKG.rglob("__init__.py")}
    assert listed == found | {"qwkboost.conf"}
