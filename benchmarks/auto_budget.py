"""The time budget (``experiment=auto``) against AutoGluon at the same time limit, and against the multirun and
blend by hand, on the five large packaged sets with every training row.

    python benchmarks/auto_budget.py --json benchmarks/results/auto_budget.json --workdir outputs/auto_budget
    python benchmarks/auto_budget.py --long 0 --by-hand-engines lightgbm xgboost \
        --json benchmarks/results/auto_budget.json --workdir outputs/auto_budget          # as in RESULTS.md
    python benchmarks/auto_budget.py --json benchmarks/results/auto_budget.json --report-only   # its tables
    python benchmarks/auto_budget.py --json benchmarks/results/auto_budget.json --workdir outputs/auto_budget \
        --reblend                       # the finished runs' candidates blended again with the current pool rule
    python benchmarks/auto_budget.py --sets happiness --budgets 60 --no-autogluon --no-by-hand \
        --json /tmp/smoke.json                                              # a smoke run, two minutes

Issue 46 (auto against the path by hand with CatBoost and against the code before it; ``git worktree add
/tmp/qwkboost-before d6134c3`` first):

    python benchmarks/auto_budget.py --sets diamonds chem97 insteval gss_vocab happiness movielens \
        --budgets 60 300 900 --long 0 --no-autogluon --baseline-root /tmp/qwkboost-before \
        --json outputs/auto_plan/by_hand.json --workdir outputs/auto_plan
    python benchmarks/auto_budget.py --json outputs/auto_plan/by_hand.json --workdir outputs/auto_plan \
        --members-only                  # by-hand rows written without their members: filled from the workdir
    python benchmarks/auto_budget.py --json outputs/auto_plan/by_hand.json --workdir outputs/auto_plan \
        --paired                        # auto − before on the same test rows, with a paired bootstrap

Issue 57 (auto on the whole machine and on half of it, ``taskset -c 0`` on a two-CPU machine: what a slower or
busier machine looks like to the plan; against the code before the change, ``git worktree add /tmp/qwkboost-before
<commit>`` first, and the path by hand with CatBoost; then MovieLens on more train/test splits):

    python benchmarks/auto_budget.py --sets diamonds chem97 insteval gss_vocab happiness movielens \
        --budgets 60 300 --long 0 --no-autogluon --baseline-root /tmp/qwkboost-before \
        --json outputs/auto57/auto57.json --workdir outputs/auto57                     # the whole machine
    python benchmarks/auto_budget.py --sets diamonds chem97 insteval gss_vocab happiness movielens \
        --budgets 60 300 --long 0 --no-autogluon --no-by-hand --baseline-root /tmp/qwkboost-before --cpus 0 \
        --json outputs/auto57/auto57.json --workdir outputs/auto57                     # half of it
    python benchmarks/auto_budget.py --sets movielens --budgets 60 300 --long 0 --no-autogluon --no-by-hand \
        --baseline-root /tmp/qwkboost-before --split-seeds 1 2 3 4 \
        --json outputs/auto57/auto57.json --workdir outputs/auto57                     # MovieLens, four more splits
    python benchmarks/auto_budget.py --json outputs/auto57/auto57.json --workdir outputs/auto57 --paired
    python benchmarks/auto_budget.py --json outputs/auto57/auto57.json --report-only

``--cpus CPUS`` starts every command (auto's, the baseline's, the path by hand's multirun and blend, AutoGluon's)
under ``taskset -c CPUS`` (refused without ``taskset``); its rows record ``cpus`` (``None``: the whole machine) and
``affinity`` (the CPUs a process so started had), resume by it and keep their runs in ``<workdir>/cpus-CPUS``, so
both machines' rows live in one ``--json``. The path by hand has no time limit: without ``--no-by-hand`` it runs
again on the pinned CPUs (for its wall time); where it did not, the whole machine's stands in the pinned tables,
named as such. ``--split-seeds`` runs auto (and the baseline) on each set split with those seeds instead of its own:
the library's packaged configs take no split seed, so the benchmark writes the split (the same preparation,
``TEST_SIZE`` and stratification, :func:`split_files`) and gives it as ``data=csv``; rows record ``split_seed``
(``None``, or ``SPLIT_SEED`` given, is the set's own split) and keep their runs in ``<workdir>/split-<seed>``. The
path by hand reads the same split's files (``large_sets.one``'s ``data``); AutoGluon runs on the set's own split
only. ``--report-only`` prints
the tables per CPUs and split, then auto on each set of CPUs side by side, with its gap to the path by hand and to
``auto_before``.

Per set (``qwkboost.data.packaged``, its fixed train/test split) and budget (``--budgets``, 60 and 300 s, and
``--long`` on ``--long-set``): ``python experiments/run.py experiment=auto auto.time_limit=<budget> data=<set>``
in a fresh process, as a user runs it, its wall time measured from outside; then AutoGluon's
``TabularPredictor(eval_metric="quadratic_kappa")`` in its own environment (``benchmarks/autogluon_peer.py``,
``.venv-autogluon``) with the same ``time_limit``, once per preset (``best_quality``, ``medium_quality``); and once
per set the path by hand (``benchmarks/large_sets.py``: the multirun of ``--by-hand-engines`` times squared error
and extended QWK, then ``experiments/blend.py``), timed. Every row is kept in ``--json`` as it finishes: the same
command resumes. The runs of a set follow each other, so the machine's load is alike for all of them.

With ``--baseline-root`` (a second checkout, e.g. a ``git worktree`` of the commit before a change), every (set,
budget) also runs that checkout's ``experiments/run.py experiment=auto`` with the same python and arguments, in
that checkout, importing its own ``qwkboost`` and reading its own ``conf/`` (see :func:`baseline_env`); those rows
are ``kind: "auto_before"``. A set the baseline does not package is given to it as ``data=csv`` on the same
prepared train and test files (:func:`data_args`). Every auto row names the commit that ran (``commit``, and
``dirty`` when the checkout had uncommitted changes to ``qwkboost/``, ``conf/`` or ``experiments/``), the share of
the budget auto's own clock used (``budget_used``) and how many candidates were left (``left_candidates``: the
engine and objective pairs that never finished, as ``auto.json`` records them, else the leaderboard's rows left
out, stopped for time or only screened). The by-hand row keeps each run of its multirun (``members``: engine, objective, seconds,
nested out-of-fold and test QWK), the offline evidence for ranking candidates by the data's shape.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import large_sets  # noqa: E402
from large_sets import one, run  # noqa: E402
from auto_budget_report import group, report  # noqa: E402
from machine import machine  # noqa: E402


#: The ``sitecustomize`` a baseline's process starts with. The project's editable install maps ``qwkboost`` and
#: ``qwkboost.conf`` to this checkout with a finder that ``PYTHONPATH`` does not outrank for ``qwkboost.conf``
#: (a checkout has ``conf/`` beside ``qwkboost/``, not in it), so ``qwkboost.defaults`` of the baseline would read
#: this checkout's ``conf/``; this points the finder's mapping at the baseline instead.
SHIM = """# written by benchmarks/auto_budget.py for a baseline checkout's processes (--baseline-root); see SHIM there
import os
import sys

_new = {root!r}
for _name, _mod in list(sys.modules.items()):
    if _name.startswith("__editable___qwkboost") and _name.endswith("_finder") and "qwkboost" in _mod.MAPPING:
        _old = os.path.dirname(_mod.MAPPING["qwkboost"])
        _move = (lambda p: _new + p[len(_old):] if p == _old or p.startswith(_old + os.sep) else p)
        for _k, _v in list(_mod.MAPPING.items()):
            _mod.MAPPING[_k] = _move(_v)
        for _k, _v in list(_mod.NAMESPACES.items()):
            _mod.NAMESPACES[_k] = [_move(p) for p in _v]
"""


def git_commit(root: str) -> str | None:
    """The short commit of the checkout at ``root`` (``None`` if it is not a git checkout)."""
    proc = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return (proc.stdout.strip() or None) if proc.returncode == 0 else None


def git_dirty(root: str) -> bool | None:
    """Whether the checkout at ``root`` has uncommitted changes (untracked files included) to the code a run
    imports or reads: ``qwkboost/``, ``conf/``, ``experiments/``; ``None`` if it is not a git checkout."""
    proc = subprocess.run(["git", "-C", root, "status", "--porcelain", "--", "qwkboost", "conf", "experiments"],
                          capture_output=True, text=True)
    return bool(proc.stdout.strip()) if proc.returncode == 0 else None


def baseline_env(root: str, work: str) -> dict:
    """The environment of a process of the baseline checkout ``root``: this one's, with ``PYTHONPATH`` the
    checkout (its ``qwkboost`` is imported, not this one's) after a folder of ``work`` holding :data:`SHIM` as
    ``sitecustomize.py`` (its ``conf/`` is read)."""
    site = os.path.abspath(os.path.join(work, ".baseline-site"))
    os.makedirs(site, exist_ok=True)
    with open(os.path.join(site, "sitecustomize.py"), "w") as f:
        f.write(SHIM.format(root=os.path.abspath(root)))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([site, os.path.abspath(root)])}


def taskset(cpus: str | None) -> list[str]:
    """The words that start a command on the CPUs ``cpus`` (``taskset -c <cpus>``); none for the whole machine."""
    return [] if cpus is None else ["taskset", "-c", cpus]


def check_cpus(cpus: str | None) -> list[int]:
    """The CPUs a process started by :func:`taskset` ``(cpus)`` may run on, read by starting one (this process's
    for the whole machine). Raises ``SystemExit`` when ``taskset`` is missing or refuses ``cpus``."""
    if cpus is None:
        return sorted(os.sched_getaffinity(0))
    if not re.fullmatch(r"\d+(-\d+)?(,\d+(-\d+)?)*", cpus):
        raise SystemExit(f"--cpus {cpus!r}: a list of CPUs as taskset -c takes it (0, 0,1, 0-3)")
    if shutil.which("taskset") is None:
        raise SystemExit("--cpus needs taskset (util-linux), which is not on PATH; "
                         "without --cpus the runs use the whole machine")
    proc = subprocess.run([*taskset(cpus), sys.executable, "-c",
                           "import os; print(','.join(map(str, sorted(os.sched_getaffinity(0)))))"],
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"taskset -c {cpus} refused: {(proc.stderr or proc.stdout).strip()}")
    return [int(c) for c in proc.stdout.strip().split(",")]


@contextlib.contextmanager
def pinned_large_sets(cpus: str | None):
    """While open, every command ``large_sets`` starts (the path by hand's multirun and blend, AutoGluon) is
    started under :func:`taskset` ``(cpus)``: its ``run`` is wrapped (``large_sets.py`` itself is not changed)."""
    if cpus is None:
        yield
        return
    plain = large_sets.run
    large_sets.run = (lambda cmd, log, cwd=None, env=None: plain([*taskset(cpus), *cmd], log, cwd=cwd, env=env))
    try:
        yield
    finally:
        large_sets.run = plain


def subwork(work: str, cpus: str | None = None, split_seed: int | None = None) -> str:
    """Where the runs on ``cpus`` and ``split_seed`` go: ``work`` itself for the whole machine on the set's own
    split (as before these options), else ``<work>/cpus-<cpus>`` and/or ``.../split-<seed>``: the layout of
    ``<name>-<seed>/...`` inside is the same, so the rows of each (cpus, split seed) keep their own runs."""
    parts = ([f"cpus-{cpus.replace(',', '_')}"] if cpus is not None else []) \
        + ([f"split-{split_seed}"] if split_seed is not None else [])
    return os.path.join(work, *parts)


def split_files(name: str, split_seed: int, where: str) -> tuple[str, str]:
    """Packaged set ``name``'s training and test files (Parquet, written once under ``where``) with another split
    seed: the table :func:`qwkboost.data.packaged.prepared_frame` prepares, split as
    :func:`qwkboost.data.packaged.split_indices` does (``TEST_SIZE``, stratified by the label) but drawn with
    ``split_seed`` instead of ``SPLIT_SEED``. The library's packaged configs take no split seed, so these runs read
    them as ``data=csv`` (:func:`data_args`)."""
    from sklearn.model_selection import train_test_split

    from qwkboost.data.packaged import PACKAGED, TEST_SIZE, prepared_frame

    d = os.path.abspath(os.path.join(where, f"data-{name}"))
    paths = (os.path.join(d, "train.parquet"), os.path.join(d, "test.parquet"))
    if all(os.path.isfile(p) for p in paths):
        return paths
    df = prepared_frame(name)
    labels = df[PACKAGED[name].target].to_numpy()
    tr, te = train_test_split(range(len(labels)), test_size=TEST_SIZE, stratify=labels, random_state=split_seed)
    os.makedirs(d, exist_ok=True)
    for rows, path in ((sorted(tr), paths[0]), (sorted(te), paths[1])):
        df.iloc[rows].to_parquet(path + ".part", index=False)
        os.replace(path + ".part", path)
    return paths


def data_args(root: str, name: str, split_seed: int | None = None, work: str | None = None) -> list[str]:
    """The data overrides of packaged set ``name`` for the checkout at ``root``: ``data=<name>`` when the
    checkout has its config (and ``split_seed`` is ``None``, the set's own split); else ``data=csv`` on the same
    prepared train and test files (those :func:`qwkboost.data.packaged.load` reads, with the same categorical
    columns and classes), or with a ``split_seed`` those of :func:`split_files` (written under ``work``)."""
    if split_seed is None and os.path.exists(os.path.join(root, "conf", "data", f"{name}.yaml")):
        return [f"data={name}"]
    from qwkboost.data.packaged import PACKAGED, materialise

    spec = PACKAGED[name]
    train, test = materialise(name) if split_seed is None else split_files(name, split_seed, work)
    quote = (lambda v: "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'")
    out = ["data=csv", f"data.path={quote(train)}", f"data.test_path={quote(test)}",
           f"data.target={quote(spec.target)}"]
    if spec.categorical:
        out.append(f"data.categorical=[{','.join(map(quote, spec.categorical))}]")
    if spec.classes:
        out.append(f"data.classes=[{','.join(quote(c) if isinstance(c, str) else str(c) for c in spec.classes)}]")
    return out


def auto(name: str, budget: float, seed: int, work: str, root: str = ROOT, folder: str = "auto",
         extra: list[str] | tuple = (), cpus: str | None = None, split_seed: int | None = None) -> dict:
    """``experiment=auto`` on a packaged set in a fresh process; its figures from ``leaderboard.csv``, ``auto.json``
    and the blend's files.

    Parameters
    ----------
    name : str
        A packaged set.
    budget : float
        ``auto.time_limit``, seconds.
    seed : int
    work : str
        The work directory; the run goes to ``<work>/<name>-<seed>/<folder>-<budget>``. An output left there by a
        run that wrote no row (killed) is renamed aside first: auto would resume it, reusing its candidates.
    root : str
        The checkout whose ``experiments/run.py`` runs: this one, or a baseline (:func:`baseline_env`).
    folder : str
        ``auto`` or ``auto-before``.
    extra : list of str
        More overrides (``cluster=local``: ``benchmarks/auto_cluster.py``).
    cpus : str or None
        Start the run under ``taskset -c <cpus>`` (:func:`taskset`); ``None``: the whole machine. Recorded in
        the row; give it a ``work`` of its own (:func:`subwork`).
    split_seed : int or None
        The set split with this seed (:func:`split_files`, read as ``data=csv``); ``None``: its own fixed split.
        Recorded in the row.
    """
    import pandas as pd

    d = os.path.abspath(os.path.join(work, f"{name}-{seed}", f"{folder}-{budget:g}"))
    os.makedirs(d, exist_ok=True)
    if os.path.exists(f"{d}/out"):
        aside = next(f"{d}/out.stale-{i}" for i in range(1, 1000) if not os.path.exists(f"{d}/out.stale-{i}"))
        os.rename(f"{d}/out", aside)
        print(f"{d}/out (a run that wrote no row) moved to {aside}: auto would resume it", flush=True)
    baseline = os.path.abspath(root) != ROOT
    commit, dirty = git_commit(root), git_dirty(root)
    data = data_args(root, name, split_seed, work) if baseline or split_seed is not None else [f"data={name}"]
    wall = run([*taskset(cpus), sys.executable, os.path.join(root, "experiments", "run.py"), "experiment=auto",
                f"auto.time_limit={budget:g}", *data,
                f"seed={seed}", f"tracking.uri=sqlite:///{d}/mlflow.db", f"hydra.run.dir={d}/out", *extra],
               f"{d}/auto.log",
               cwd=root if baseline else None, env=baseline_env(root, work) if baseline else None)
    board = pd.read_csv(f"{d}/out/leaderboard.csv")
    record = json.load(open(f"{d}/out/auto.json"))
    session = record["sessions"][-1]
    blend = json.load(open(f"{d}/out/blend.json")) if os.path.exists(f"{d}/out/blend.json") else None
    finished = board[board.status == "finished"]
    best = finished.sort_values("nested_oof_qwk", ascending=False).iloc[0]
    started = [(r["started_at"], n) for n, r in record.get("candidates", {}).items()
               if isinstance(r, dict) and r.get("started_at") is not None]
    return {"set": name, "seed": seed, "budget": budget, "cpus": cpus, "split_seed": split_seed,
            "wall_seconds": wall, "auto_seconds": session["seconds"],
            "test_qwk": blend["test_qwk"] if blend else float(best["test_qwk"]),
            "nested_oof_qwk": blend["nested_oof_qwk"] if blend else float(best["nested_oof_qwk"]),
            "finished": int(len(finished)), "stopped": int((board.status == "stopped").sum()),
            "pruned": int((board.status == "pruned").sum()),
            "trials": int(finished.candidate.str.contains("-trial-").sum()),
            "members": int((board.weight > 0).sum()),
            "best_single": str(best.candidate), "best_single_test_qwk": float(best["test_qwk"]),
            "commit": commit, "dirty": dirty, "root": os.path.abspath(root),
            "budget_used": session["seconds"] / budget,
            "left_candidates": len(session["pairs_not_run"]) if "pairs_not_run" in session else
            int(board.status.isin(["left out", "stopped", "screened"]).sum()),
            "pairs_not_run": session.get("pairs_not_run"),
            "unused_for_work": session.get("unused_for_work"), "reserve": session.get("reserve"),
            "work_ended_at": session.get("work_ended_at"),
            "screened": int(board["screen_qwk"].notna().sum()) if "screen_qwk" in board else None,
            "run_order": [n for _, n in sorted(started, key=lambda t: (isinstance(t[0], str), t[0]))]
            if started else None,
            "candidates": candidate_rows(board, record)}


def candidate_rows(board, record: dict) -> list[dict]:
    """Each candidate that started: its status, seconds and, once finished, its folds' training seconds (the rest
    is its time outside the engine's training), its estimate, the estimate's kind and error, its capped folds and
    blend weight (issue 57's tables)."""
    import math

    out = []
    for _, r in board.iterrows():
        if r.status == "left out" or r.status == "screened" or r.status == "set aside":
            continue
        rec = record.get("candidates", {}).get(r.candidate, {})

        def num(v):
            return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)

        out.append({"name": r.candidate, "engine": r.engine, "objective": r.objective, "status": r.status,
                    "seconds": num(r.seconds), "fit_seconds": num(rec.get("fit_seconds")),
                    "predict_seconds": num(rec.get("predict_seconds")),
                    "estimate": num(r.get("estimate_seconds")), "estimate_kind": r.get("estimate_kind")
                    if isinstance(r.get("estimate_kind"), str) else None,
                    "estimate_error": num(r.get("estimate_error")), "capped_folds": num(r.get("capped_folds")),
                    "weight": num(r.get("weight"))})
    return out


def paired(name: str, budget: float, seed: int, work: str, draws: int = 2000) -> dict:
    """Test QWK of auto's submission minus the code before's on the same test rows (``<work>/<name>-<seed>/
    auto-<budget>`` and ``auto-before-<budget>``), with its paired bootstrap standard error and 95 % interval:
    ``draws`` resamples of the test rows, both submissions scored on each (Efron & Tibshirani, *An Introduction to
    the Bootstrap*, 1993, ch. 6 and 13). Test QWK of one seed moves with which rows the test set holds; this says
    by how much."""
    import numpy as np
    import pandas as pd

    from qwkboost.data.packaged import PACKAGED

    spec = PACKAGED[name]
    target = spec.target
    base = os.path.join(work, f"{name}-{seed}")
    a = pd.read_parquet(os.path.join(base, f"auto-{budget:g}", "out", "predictions.parquet"))
    b = pd.read_parquet(os.path.join(base, f"auto-before-{budget:g}", "out", "predictions.parquet"))
    y = a[target].to_numpy()
    if not np.array_equal(y, b[target].to_numpy()):
        raise ValueError(f"{name}: the two runs' test rows differ")
    values = (y, a["class"].to_numpy(), b["class"].to_numpy())
    if spec.classes:            # labels in their order (diamonds' cut: Fair < Good < ...), not alphabetical
        rank = {c: i for i, c in enumerate(spec.classes)}
        yi, ai, bi = (np.array([rank[c] for c in v]) for v in values)
        k = len(spec.classes)
    else:
        levels = np.unique(np.concatenate(values))
        k = levels.size
        yi, ai, bi = (np.searchsorted(levels, v) for v in values)
    w = (np.arange(k)[:, None] - np.arange(k)[None, :]) ** 2

    def kappa(t, p, idx):                       # quadratic weighted kappa of each row of idx (resamples)
        n = idx.shape[1]
        obs = np.zeros((idx.shape[0], k * k))
        np.add.at(obs, (np.arange(idx.shape[0])[:, None], t[idx] * k + p[idx]), 1.0)
        obs = obs.reshape(-1, k, k)
        exp = obs.sum(2)[:, :, None] * obs.sum(1)[:, None, :] / n
        return 1.0 - (obs * w).sum((1, 2)) / (exp * w).sum((1, 2))

    whole = np.arange(y.size)[None, :]
    diff = float(kappa(yi, ai, whole)[0] - kappa(yi, bi, whole)[0])
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(draws // 200):
        idx = rng.integers(0, y.size, size=(200, y.size))
        boot.append(kappa(yi, ai, idx) - kappa(yi, bi, idx))
    boot = np.concatenate(boot)
    lo, hi = np.quantile(boot, [0.025, 0.975])
    return {"set": name, "seed": seed, "budget": budget, "test_rows": int(y.size), "diff": diff,
            "se": float(boot.std(ddof=1)), "low": float(lo), "high": float(hi), "draws": int(boot.size)}


def members(name: str, seed: int, work: str) -> list[dict] | None:
    """Each run of the multirun by hand of ``large_sets.one`` (``<work>/<name>-<seed>/multirun/<n>/``), in the
    order it ran: engine, objective, ``seconds`` (the cross-validation's fit seconds its ``result.json`` holds, else
    ``None``), ``wall_seconds`` (from its config's writing to its last file's, else ``None``), nested out-of-fold
    and test QWK, and its weight in the blend by hand (``None`` if that blend does not name it); ``None`` without
    the multirun."""
    d = os.path.abspath(os.path.join(work, f"{name}-{seed}", "multirun"))
    if not os.path.isdir(d):
        return None
    weights = {}
    bj = os.path.join(os.path.dirname(d), "blend", "blend.json")
    if os.path.exists(bj):
        for m in json.load(open(bj)).get("members", []):
            if m.get("source"):
                weights[os.path.realpath(m["source"])] = m.get("weight")
    out = []
    for n in sorted((e for e in os.listdir(d) if e.isdigit()), key=int):
        run_dir = os.path.join(d, n)
        if not os.path.exists(os.path.join(run_dir, "result.json")):
            continue
        r = json.load(open(os.path.join(run_dir, "result.json")))
        cfg = os.path.join(run_dir, ".hydra", "config.yaml")
        files = [os.path.join(run_dir, f) for f in os.listdir(run_dir) if os.path.isfile(os.path.join(run_dir, f))]
        wall = max(map(os.path.getmtime, files)) - os.path.getmtime(cfg) if os.path.exists(cfg) else None
        out.append({"run": int(n), "engine": r.get("engine"), "objective": r.get("objective"),
                    "seconds": r.get("fit_seconds"), "wall_seconds": wall,
                    "qwk_thresholds_oof_nested": r.get("qwk_thresholds_oof_nested"),
                    "qwk_thresholds": r.get("qwk_thresholds"), "weight": weights.get(os.path.realpath(run_dir))})
    return out


def reblend(name: str, budget: float, seed: int, work: str) -> dict:
    """An auto run's finished candidates blended again as its last step does now (the pool of
    ``qwkboost.autoblend.ranking.diverse_pool``, greedy selection, exact cut points): what the blend rule alone
    changes, on the same candidates."""
    from dataclasses import replace
    from pathlib import Path

    from qwkboost.autoblend.ranking import diverse_pool
    from qwkboost.autoblend.state import CandidateRecord
    from qwkboost.blending import blend, read_members

    out = Path(work) / f"{name}-{seed}" / f"auto-{budget:g}" / "out"
    rec = json.loads((out / "auto.json").read_text())
    done = [(n, CandidateRecord.from_dict(r)) for n, r in rec["candidates"].items()
            if r.get("status") == "finished" and (out / r["dir"] / "oof.parquet").exists()]
    pool = diverse_pool(done, 15)
    members = [replace(m, name=n) for m, (n, _) in zip(read_members([out / r.dir for _, r in pool]), pool)]
    result = blend(members, method="greedy", thresholds="exact")
    return {"set": name, "seed": seed, "budget": budget, "pool": len(pool),
            "members": int(sum(w > 0 for w in result.weights)), "test_qwk": result.metrics["test_qwk"],
            "nested_oof_qwk": result.metrics["nested_oof_qwk"]}


def autogluon(name: str, budget: float, preset: str, seed: int, work: str) -> dict:
    from large_sets import autogluon as ag_run

    row = {"set": name, "seed": seed, "qwkboost_seconds": budget}
    args = argparse.Namespace(n_train=None)
    sub = os.path.join(work, f"budget-{budget:g}")
    out = ag_run(row, preset, args, sub)
    return {"set": name, "seed": seed, "budget": budget, "preset": preset, **out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="*", default=["diamonds", "chem97", "insteval", "gss_vocab", "happiness"])
    ap.add_argument("--budgets", type=float, nargs="*", default=[60, 300])
    ap.add_argument("--long", type=float, default=900, help="a longer budget, on --long-set only")
    ap.add_argument("--long-set", default="insteval", help="the largest set")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--presets", nargs="*", default=["best_quality", "medium_quality"])
    ap.add_argument("--no-autogluon", dest="autogluon", action="store_false")
    ap.add_argument("--no-by-hand", dest="by_hand", action="store_false")
    ap.add_argument("--by-hand-engines", nargs="*", default=["lightgbm", "xgboost", "catboost"])
    ap.add_argument("--workdir", help="keep the runs here (default: a temporary directory)")
    ap.add_argument("--json", required=True, help="every row as it finishes; finished rows are not rerun")
    ap.add_argument("--report-only", action="store_true", help="print the tables of --json and run nothing")
    ap.add_argument("--reblend", action="store_true",
                    help="re-blend every finished auto run in --workdir with the current blend pool (no training) "
                         "and keep the figures as kind=reblend rows")
    ap.add_argument("--baseline-root", help="a second checkout (e.g. git worktree add /tmp/qwkboost-before "
                                            "<commit>): its experiment=auto also runs, as kind=auto_before rows")
    ap.add_argument("--kinds", nargs="*", default=["auto", "auto_before"],
                    help="which auto runs to make: auto (this checkout), auto_before (--baseline-root's)")
    ap.add_argument("--paired", action="store_true",
                    help="auto minus before on the same test rows, with a paired bootstrap (runs in --workdir)")
    ap.add_argument("--members-only", action="store_true",
                    help="fill the by-hand rows without members from the multiruns in --workdir (no training)")
    ap.add_argument("--cpus", help="start every run (auto, the baseline's, the path by hand's and AutoGluon's "
                                   "commands) under taskset -c CPUS, e.g. 0 or 0,1 (default: the whole machine); "
                                   "rows record it and resume by it, in --workdir/cpus-CPUS")
    ap.add_argument("--split-seeds", type=int, nargs="*", default=None,
                    help="auto and the baseline on each set split with these seeds instead of its own "
                         "(qwkboost.data.packaged.SPLIT_SEED, which stands for it), read as data=csv; "
                         "rows record split_seed and resume by it; the path by hand on them too, no AutoGluon")
    args = ap.parse_args()
    from qwkboost.data.packaged import SPLIT_SEED

    splits = list(dict.fromkeys(None if s in (None, SPLIT_SEED) else s for s in (args.split_seeds or [None])))
    if args.baseline_root and not os.path.exists(os.path.join(args.baseline_root, "experiments", "run.py")):
        ap.error(f"--baseline-root {args.baseline_root}: no experiments/run.py there")
    if (args.members_only or args.reblend or args.paired) and not args.workdir:
        ap.error("--members-only, --reblend and --paired read the runs in --workdir")
    rows = json.load(open(args.json)) if os.path.exists(args.json) else []
    if args.members_only:
        for r in [r for r in rows if r["kind"] == "by_hand" and not r.get("members")]:
            r["members"] = members(r["set"], r["seed"], subwork(args.workdir, r.get("cpus")))
            print(f"{r['set']}: {len(r['members']) if r['members'] is not None else 'no multirun in --workdir, no'} "
                  "members", flush=True)
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.reblend:
        rows = [r for r in rows if r["kind"] != "reblend"]
        for r in [r for r in rows if r["kind"] == "auto"]:
            rows.append({"kind": "reblend", "cpus": r.get("cpus"), "split_seed": r.get("split_seed"),
                         **reblend(r["set"], r["budget"], r["seed"],
                                   subwork(args.workdir, r.get("cpus"), r.get("split_seed")))})
            print(json.dumps(rows[-1]), flush=True)
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.paired:
        rows = [r for r in rows if r["kind"] != "paired"]
        for r in [r for r in rows if r["kind"] == "auto"]:
            if any(o["kind"] == "auto_before" and o["set"] == r["set"] and o["budget"] == r["budget"]
                   and o["seed"] == r["seed"] and group(o) == group(r) for o in rows):
                rows.append({"kind": "paired", "cpus": r.get("cpus"), "split_seed": r.get("split_seed"),
                             **paired(r["set"], r["budget"], r["seed"],
                                      subwork(args.workdir, r.get("cpus"), r.get("split_seed")))})
                print(json.dumps(rows[-1]), flush=True)
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.report_only or args.reblend or args.members_only or args.paired:
        report(rows)
        return
    affinity = check_cpus(args.cpus)
    print(json.dumps({**machine(), "cpus": args.cpus, "affinity": affinity}), flush=True)

    def have(**key) -> bool:        # of this seed, CPUs and split: another's row is not this one's (None: rows
        return any(all(r.get(k) == v for k, v in {**key, "seed": args.seed, "cpus": args.cpus}.items())
                   for r in rows)   # written before --cpus and --split-seeds are the whole machine's, own split

    def keep(row: dict) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)

    with tempfile.TemporaryDirectory() as tmp, pinned_large_sets(args.cpus):
        for split in splits:
            work = subwork(args.workdir or tmp, args.cpus, split)
            for name in args.sets:
                budgets = list(args.budgets) + ([args.long] if args.long and name == args.long_set else [])
                where = {"cpus": args.cpus, "split_seed": split}
                pin = {"affinity": affinity}
                for budget in budgets:
                    if "auto" in args.kinds and not have(kind="auto", set=name, budget=budget, split_seed=split):
                        keep({"kind": "auto", **auto(name, budget, args.seed, work, cpus=args.cpus,
                                                     split_seed=split), **pin})
                    if args.baseline_root and "auto_before" in args.kinds and \
                            not have(kind="auto_before", set=name, budget=budget, split_seed=split):
                        keep({"kind": "auto_before", **auto(name, budget, args.seed, work, root=args.baseline_root,
                                                            folder="auto-before", cpus=args.cpus,
                                                            split_seed=split), **pin})
                    for preset in args.presets if args.autogluon and split is None else []:
                        if not have(kind="autogluon", set=name, budget=budget, preset=preset, split_seed=split):
                            keep({"kind": "autogluon", **where,
                                  **autogluon(name, budget, preset, args.seed, work), **pin})
                if split is not None and args.autogluon:
                    print(f"{name}, split seed {split}: no AutoGluon (it reads the set's own split only)", flush=True)
                if args.by_hand and not have(kind="by_hand", set=name, split_seed=split):
                    t = time.perf_counter()
                    r = one(name, args.seed, argparse.Namespace(n_train=None, engines=args.by_hand_engines), work,
                            data=None if split is None else data_args(ROOT, name, split, work))
                    keep({"kind": "by_hand", "set": name, "seed": args.seed, **where, "engines": args.by_hand_engines,
                          "seconds": r["qwkboost_seconds"], "test_qwk": r["qwkboost_test_qwk"],
                          "nested_oof_qwk": r["qwkboost_nested_oof_qwk"], "wall_seconds": time.perf_counter() - t,
                          "members": members(name, args.seed, work), **pin})
    report(rows)


if __name__ == "__main__":
    main()
