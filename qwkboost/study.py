r"""A multi-seed study of ordinal methods: does optimising QWK directly beat squared error plus thresholds?

One *cell* is a regime (a data config), a seed, a method and an engine, run
through the project's protocol: stratified K-fold CV with early stopping, cut
points fitted on the out-of-fold scores, test QWK. A method is trained once per
cell and scored with each of its *decoders*: rounding, exact or
distribution-matching cut points (:mod:`qwkboost.thresholds`), or the most
probable class (``argmax``, for methods with class probabilities). Every method
sees the same seeds, so methods are compared by per-seed differences
(:mod:`qwkboost.stats`).

Cells are content-addressed: each is stored in ``study.cache_dir`` under a hash
of everything that decides its result, so running the same command again
reuses finished cells (a killed study resumes) and a changed setting computes
new ones. The report (``study.md``, ``study.csv``, ``cells.csv``, plots) is
written to the run's output directory, and MLflow holds a parent run with one
child per cell.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from qwkboost import tracking

__all__ = ["Cell", "MethodSpec", "StudySpec", "check_cells", "cell_key", "run_cell", "run_study", "summarise",
           "render_report",
           "DECODERS"]

log = logging.getLogger(__name__)

#: How a cell's scores become classes: a thresholds method on the decoded score, or the most probable class.
DECODERS = ("round", "exact", "distribution", "nelder_mead", "argmax")
#: Config keys that do not change a cell's result (left out of its hash).
_BOOKKEEPING = ("tracking", "study", "table", "run_name", "n_jobs", "optimized_metric", "hydra", "tune")
#: Seeds of a generated test split sit this far above the training seed.
TEST_SEED_OFFSET = 100_000


@dataclass(frozen=True)
class MethodSpec:
    """One method of a study.

    Attributes
    ----------
    name : str
    overrides : tuple of str
        Hydra overrides that make it (``objective=extended_qwk``, ``objective.params.hessian=gauss_newton``).
    decode : tuple of str
        Decoders it is scored with (:data:`DECODERS`).
    engines : tuple of str or None
        Engines it runs on; ``None``: every engine of the study.
    peer : str or None
        An outside model (:data:`qwkboost.peers.PEERS`) instead of an engine and objective.
    """

    name: str
    overrides: tuple[str, ...] = ()
    decode: tuple[str, ...] = ("exact",)
    engines: tuple[str, ...] | None = None
    peer: str | None = None

    @property
    def objective(self) -> str | None:
        for o in self.overrides:
            if o.startswith("objective="):
                return o.split("=", 1)[1]
        return None


@dataclass(frozen=True)
class StudySpec:
    """The settings of ``study:`` in a config (``conf/experiment/study.yaml``), checked."""

    seeds: int
    first_seed: int
    regimes: tuple[str, ...]
    engines: tuple[str, ...]
    methods: tuple[MethodSpec, ...]
    n_jobs: int
    max_train: int | None
    max_test: int | None
    cache_dir: str
    confidence: float
    alpha: float
    reference: str
    log_children: bool

    @classmethod
    def from_config(cls, study: Mapping[str, Any]) -> "StudySpec":
        from qwkboost.engines import ENGINES
        from qwkboost.parallel import available_cores
        from qwkboost.peers import check_peer
        from qwkboost.validation import check_bool, check_int, check_real

        known = {"seeds", "first_seed", "regimes", "engines", "methods", "only", "n_jobs", "cap", "cache_dir",
                 "confidence", "alpha", "reference", "log_children"}
        unknown = sorted(set(study) - known)
        if unknown:
            raise ValueError(f"study: unknown key(s) {unknown}; known: {sorted(known)}")
        seeds = check_int(study.get("seeds", 20), "study.seeds", 1)
        first = check_int(study.get("first_seed", 0), "study.first_seed", 0, 2**31 - TEST_SEED_OFFSET - 1)
        regimes = tuple(study.get("regimes") or ())
        if not regimes or not all(isinstance(r, str) and r for r in regimes):
            raise ValueError(f"study.regimes must list data configs (e.g. [quartiles, label_shift]); got {regimes!r}")
        engines = tuple(study.get("engines") or ())
        bad = [e for e in engines if e not in ENGINES]
        if not engines or bad:
            raise ValueError(f"study.engines must list engines from {sorted(ENGINES)}; got {list(engines)!r}")
        methods = []
        raw = study.get("methods") or {}
        if not isinstance(raw, Mapping) or not raw:
            raise ValueError("study.methods must map method names to {overrides, decode[, engines][, peer]}")
        for name, m in raw.items():
            if m is None:       # a method switched off with study.methods.NAME=null
                continue
            extra = sorted(set(m) - {"overrides", "decode", "engines", "peer"})
            if extra:
                raise ValueError(f"study.methods.{name}: unknown key(s) {extra}; known: overrides, decode, engines, "
                                 "peer")
            decode = tuple(m.get("decode") or ("exact",))
            bad = [d for d in decode if d not in DECODERS]
            if bad:
                raise ValueError(f"study.methods.{name}.decode: {bad} unknown; choose from {list(DECODERS)}")
            peer = m.get("peer")
            if peer is not None:
                check_peer(peer)
                if m.get("overrides"):
                    raise ValueError(f"study.methods.{name}: a peer takes no overrides")
            m_engines = None if m.get("engines") is None else tuple(m["engines"])
            if m_engines is not None and any(e not in ENGINES for e in m_engines):
                raise ValueError(f"study.methods.{name}.engines must be engines from {sorted(ENGINES)}")
            spec = MethodSpec(str(name), tuple(m.get("overrides") or ()), decode, m_engines, peer)
            if peer is None and spec.objective is None:
                raise ValueError(f"study.methods.{name}.overrides must choose an objective (objective=...)")
            methods.append(spec)
        only = study.get("only")
        if only is not None:
            only = [only] if isinstance(only, str) else list(only)
            unknown = [m for m in only if m not in raw]
            if unknown or not only:
                raise ValueError(f"study.only: {unknown or only!r} not among study.methods ({', '.join(raw)})")
            methods = [m for m in methods if m.name in only]
        if not methods:
            raise ValueError("study.methods: every method is switched off")
        cap = study.get("cap") or {}
        if not isinstance(cap, Mapping) or set(cap) - {"n_train", "n_test"}:
            raise ValueError(f"study.cap must be null or {{n_train: rows, n_test: rows}}; got {cap!r}")
        max_train, max_test = cap.get("n_train"), cap.get("n_test")
        n_jobs = available_cores() if study.get("n_jobs") is None else check_int(study["n_jobs"], "study.n_jobs", 1)
        return cls(seeds, first, regimes, engines, tuple(methods),
                   n_jobs,
                   None if max_train is None else check_int(max_train, "study.cap.n_train", 10),
                   None if max_test is None else check_int(max_test, "study.cap.n_test", 10),
                   str(study.get("cache_dir") or "outputs/study_cache"),
                   check_real(study.get("confidence", 0.95), "study.confidence", 0.5, 1.0, hi_open=True),
                   check_real(study.get("alpha", 0.05), "study.alpha", 0.0, 0.5, lo_open=True),
                   str(study.get("reference", "squared_error+exact")),
                   check_bool(study.get("log_children", True), "study.log_children"))

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.first_seed, self.first_seed + self.seeds))


@dataclass
class Cell:
    """One unit of work: a method on one engine, in one regime, with one seed."""

    regime: str
    engine: str           # "-" for a peer
    method: MethodSpec
    seed: int
    config: dict          # the composed config with the seed set
    key: str = ""
    result: dict | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        return f"{self.regime}/{self.engine}/{self.method.name}/seed{self.seed}"


def check_cells(cells: Iterable[Cell]) -> None:
    """Refuse, before any training, a decoder a method cannot use (``argmax`` needs class probabilities)."""
    from qwkboost.config import objective_ref
    from qwkboost.objectives import Objective, get

    seen = set()
    for c in cells:
        if c.method.peer is not None or "argmax" not in c.method.decode or c.method.name in seen:
            continue
        seen.add(c.method.name)
        obj = get(objective_ref(c.config["objective"]), **dict(c.config["objective"].get("params") or {}))
        if type(obj).predict_proba is Objective.predict_proba:
            raise ValueError(f"study.methods.{c.method.name}.decode: 'argmax' needs class probabilities, which "
                             f"objective {c.config['objective']['name']!r} does not give; use round, exact or "
                             "distribution")


def _hashable(config: Mapping[str, Any]) -> dict:
    return {k: v for k, v in config.items() if k not in _BOOKKEEPING}


def cell_key(config: Mapping[str, Any], method: MethodSpec) -> str:
    """A hash of everything that decides a cell's result: its config (without bookkeeping), its method's
    decoders and peer, and the qwkboost version."""
    from importlib.metadata import version

    payload = {"config": _hashable(config), "decode": sorted(method.decode), "peer": method.peer,
               "qwkboost": version("qwkboost")}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:20]


def seeded(config: Mapping[str, Any], seed: int, max_train: int | None, max_test: int | None) -> dict:
    """``config`` for one seed: CV folds and engines take ``seed``; generated data draws its training split
    with ``seed`` and its test split with ``seed + TEST_SEED_OFFSET``; a file's train/test split takes ``seed``.
    Generated data is cut to ``max_train`` / ``max_test`` rows."""
    cfg = json.loads(json.dumps(config))
    cfg["seed"] = seed
    data = cfg["data"]
    if "test_seed" in data:
        data["seed"], data["test_seed"] = seed, seed + TEST_SEED_OFFSET
    elif "seed" in data:
        data["seed"] = seed
    if max_train is not None and "n_train" in data:
        data["n_train"] = min(int(data["n_train"]), max_train)
    if max_test is not None and "n_test" in data:
        data["n_test"] = min(int(data["n_test"]), max_test)
    return cfg


# --------------------------------------------------------------------------- one cell

def run_cell(config: Mapping[str, Any], method: MethodSpec, threads: int = 1) -> dict:
    """Train ``method`` under ``config`` and score it with each of its decoders.

    Returns
    -------
    dict
        ``qwk`` (test QWK per decoder), ``qwk_oof`` (out-of-fold QWK per
        decoder), ``fit_seconds``, ``seconds``, ``best_iteration`` (engines),
        ``n_train``, ``n_test``, ``n_classes``.
    """
    from qwkboost.config import objective_ref
    from qwkboost.cv import cross_validate, make_folds
    from qwkboost.data import class_range
    from qwkboost.experiment import load_dataset
    from qwkboost.metrics import qwk
    from qwkboost.parallel import blas_single_thread
    from qwkboost.peers import cross_validate_peer
    from qwkboost.shift import class_proportions, shift_proba, shift_weights, target_moments
    from qwkboost.thresholds import apply_thresholds, fit_thresholds

    t0 = time.perf_counter()
    seed = int(config["seed"])
    ds = load_dataset(config["data"], seed)
    classes = class_range(ds.classes)
    lo, k = float(classes[0]), len(classes)
    y_idx = (ds.y_train - lo).astype(np.int64)
    yt_idx = (ds.y_test - lo).astype(np.int64)
    prior = ds.test_prior
    weights = None if prior is None else shift_weights(y_idx, prior)
    cv_cfg = config["cv"]
    n_splits = int(cv_cfg["n_splits"])
    best_iteration = None
    with blas_single_thread():
        if method.peer is not None:
            # the folds cross_validate makes for the engines, so cells pair up
            folds = make_folds(ds.y_train, n_splits, bool(cv_cfg.get("stratified", True)),
                               bool(cv_cfg.get("shuffle", True)), seed)
            peer = cross_validate_peer(method.peer, ds.X_train, y_idx, ds.X_test, folds, k, seed)
            oof_proba, test_proba, fit_seconds = peer.oof_proba, peer.test_proba, peer.fit_seconds
            oof = test = None
        else:
            objective = config["objective"]
            objective_params = dict(objective.get("params") or {})
            if prior is not None and "a" in objective_params and "b" in objective_params:
                # the target's label mean and variance, for extended QWK's denominator
                objective_params["a"], objective_params["b"] = target_moments(classes, prior)
            engine = config["engine"]
            cv = cross_validate(
                ds.X_train, ds.y_train, ds.X_test, engine=engine["name"], objective=objective_ref(objective),
                params=dict(engine.get("params") or {}), objective_params=objective_params,
                num_boost_round=int(engine["num_boost_round"]),
                early_stopping_rounds=engine.get("early_stopping_rounds"), n_splits=n_splits,
                stratified=bool(cv_cfg.get("stratified", True)), shuffle=bool(cv_cfg.get("shuffle", True)),
                seed=seed, progress=False, n_jobs=threads, schema=ds.schema)
            oof, test, oof_proba, test_proba = cv.oof, cv.test, cv.oof_proba, cv.test_proba
            fit_seconds = cv.fit_seconds
            best_iteration = float(np.mean(cv.best_iterations))
    if oof_proba is not None:
        if prior is not None:
            train_prior = class_proportions(y_idx, k)
            oof_proba = shift_proba(oof_proba, train_prior, prior)
            test_proba = shift_proba(test_proba, train_prior, prior)
        if oof is None or prior is not None:
            # the expected class under (shifted) probabilities, on the index scale
            oof, test = oof_proba @ np.arange(k) + lo, test_proba @ np.arange(k) + lo
    out = {"qwk": {}, "qwk_oof": {}}
    for dec in method.decode:
        if dec == "argmax":
            if oof_proba is None:
                raise ValueError(f"study method {method.name!r}: decoder 'argmax' needs class probabilities, which "
                                 f"objective {config['objective']['name']!r} does not give")
            oof_pred, test_pred = oof_proba.argmax(axis=1), test_proba.argmax(axis=1)
        else:
            cuts = fit_thresholds(dec, oof - lo, y_idx, n_classes=k, sample_weight=weights)
            oof_pred, test_pred = apply_thresholds(oof - lo, cuts), apply_thresholds(test - lo, cuts)
        out["qwk"][dec] = qwk(yt_idx, test_pred, n_classes=k)
        out["qwk_oof"][dec] = qwk(y_idx, oof_pred, n_classes=k, sample_weight=weights)
    out.update(fit_seconds=float(fit_seconds), seconds=time.perf_counter() - t0, best_iteration=best_iteration,
               n_train=int(len(y_idx)), n_test=int(len(yt_idx)), n_classes=k)
    return out


def _work(key: str, config: dict, method: MethodSpec, threads: int) -> tuple[str, dict]:
    """A pool worker's task: the cell's key and its result, or its error as text (a study stops on the first
    error)."""
    import traceback
    import warnings

    logging.getLogger("qwkboost").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=UserWarning)
    try:
        return key, {"ok": run_cell(config, method, threads)}
    except Exception as exc:    # noqa: BLE001 - reported by the main process with the cell's name
        return key, {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}


# --------------------------------------------------------------------------- the cache

class CellCache:
    """Finished cells on disk, one JSON file each, written atomically; and a journal of every computation."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.cells = self.root / "cells"
        self.cells.mkdir(parents=True, exist_ok=True)
        self.journal = self.root / "computed.jsonl"

    def get(self, key: str) -> dict | None:
        path = self.cells / f"{key}.json"
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return None      # a torn file from a crash: computed again

    def record_command(self, fingerprint: str, wall: float, computed: int, reused: int) -> list[dict]:
        """Append this command's wall time to the study's history; return every command of the study so far."""
        path = self.root / "commands.jsonl"
        with open(path, "a") as fh:
            fh.write(json.dumps({"study": fingerprint, "wall": wall, "computed": computed, "reused": reused,
                                 "time": time.time()}) + "\n")
        return [r for r in map(json.loads, path.read_text().splitlines()) if r["study"] == fingerprint]

    def put(self, key: str, record: dict) -> None:
        path = self.cells / f"{key}.json"
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(record, indent=1, default=float))
        os.replace(tmp, path)
        with open(self.journal, "a") as fh:
            fh.write(json.dumps({"key": key, "label": record.get("label"), "pid": os.getpid(),
                                 "time": time.time()}) + "\n")


# --------------------------------------------------------------------------- building the cells

def build_cells(spec: StudySpec, compose) -> list[Cell]:
    """Every cell of the study, seed-major (a study stopped early has whole seeds).

    ``compose(overrides)`` returns a resolved config dict for a list of Hydra overrides.
    """
    base: list[tuple[str, str, MethodSpec, dict]] = []
    for regime in spec.regimes:
        for method in spec.methods:
            engines = ("-",) if method.peer else (method.engines or spec.engines)
            for engine in engines:
                overrides = [f"data={regime}"]
                if method.peer is None:
                    overrides += [f"engine={engine}", *method.overrides]
                base.append((regime, engine, method, compose(overrides)))
    cells = []
    for seed in spec.seed_list:
        for regime, engine, method, cfg in base:
            c = seeded(cfg, seed, spec.max_train, spec.max_test)
            if method.peer is not None:
                c.pop("engine", None)
                c.pop("objective", None)
                c.pop("thresholds", None)
            cells.append(Cell(regime, engine, method, seed, c, cell_key(c, method)))
    return cells


# --------------------------------------------------------------------------- results and statistics

def cells_frame(cells: Sequence[Cell]) -> pd.DataFrame:
    """One row per cell and decoder: regime, engine, method, decoder, row label, seed, test and OOF QWK, times."""
    rows = []
    for c in cells:
        if c.result is None:
            continue
        for dec, q in c.result["qwk"].items():
            rows.append({"regime": c.regime, "engine": c.engine, "method": c.method.name, "decoder": dec,
                         "objective": c.method.objective or c.method.peer, "peer": c.method.peer is not None,
                         "seed": c.seed, "qwk": q, "qwk_oof": c.result["qwk_oof"][dec],
                         "cell_seconds": c.result["seconds"], "fit_seconds": c.result["fit_seconds"],
                         "reused": bool(c.result.get("reused", False)), "key": c.key})
    df = pd.DataFrame(rows)
    if len(df):
        multi_engine = df.loc[~df["peer"], "engine"].nunique() > 1
        df["row"] = [f"{m}+{d}" if (p or not multi_engine) else f"{e}:{m}+{d}"
                     for e, m, d, p in zip(df["engine"], df["method"], df["decoder"], df["peer"])]
    return df


#: Generated data whose best rule is known: cut points on the sum of the visible columns.
CEILING_SOURCES = ("quartiles", "latent_classes")


def ceilings(cells: Sequence[Cell]) -> pd.DataFrame:
    """Test QWK of the generator's own rule per regime and seed, for generated data
    (:func:`qwkboost.table.bayes_ceiling`)."""
    from qwkboost.experiment import load_dataset
    from qwkboost.table import bayes_ceiling

    rows, seen = [], set()
    for c in cells:
        data = c.config["data"]
        if data.get("name") not in CEILING_SOURCES or (c.regime, c.seed) in seen or c.result is None:
            continue
        seen.add((c.regime, c.seed))
        rows.append({"regime": c.regime, "seed": c.seed, "ceiling": bayes_ceiling(load_dataset(data, c.seed))})
    return pd.DataFrame(rows, columns=["regime", "seed", "ceiling"])


def summarise(df: pd.DataFrame, confidence: float = 0.95, alpha: float = 0.05,
              reference: str = "squared_error+exact") -> tuple[pd.DataFrame, pd.DataFrame]:
    r"""Per regime and row: mean test QWK with its interval, and the paired comparison with the regime's best.

    Also, per regime, the headline: the best extended-QWK row minus ``reference``
    on the same engine, Holm-corrected across regimes.

    Only seeds where every row of a regime has a result are compared (pairs need both).

    Returns
    -------
    summary : DataFrame
        One row per regime and row: ``mean``, ``low``, ``high``, ``n``, ``rank``
        (mean rank over seeds, 1 = best), ``diff``/``diff_low``/``diff_high`` (row
        minus best), ``p`` (Wilcoxon), ``p_holm`` (Holm over the regime's rows),
        ``worse`` (significantly below the best).
    headline : DataFrame
        One row per regime: ``best_eqwk``, ``reference``, ``diff``, interval, ``p``, ``p_holm``, ``verdict``.
    """
    from qwkboost.stats import holm, mean_interval, paired_comparison

    out, heads = [], []
    for regime, g in df.groupby("regime", sort=False):
        wide = g.pivot_table(index="seed", columns="row", values="qwk", aggfunc="first").dropna()
        if wide.empty:
            continue
        means = wide.mean().sort_values(ascending=False)
        best = means.index[0]
        ranks = wide.rank(axis=1, ascending=False).mean()
        recs = []
        for row in means.index:
            iv = mean_interval(wide[row], confidence)
            rec = {"regime": regime, "row": row, "mean": iv.mean, "low": iv.low, "high": iv.high, "n": iv.n,
                   "rank": float(ranks[row]), "is_best": row == best}
            if row != best:
                pc = paired_comparison(wide[row], wide[best], confidence)
                rec.update(diff=pc.diff.mean, diff_low=pc.diff.low, diff_high=pc.diff.high, p=pc.p_value)
            recs.append(rec)
        ps = [r["p"] for r in recs if not r["is_best"]]
        adj = iter(holm(ps))
        for r in recs:
            if r["is_best"]:
                r.update(diff=0.0, diff_low=0.0, diff_high=0.0, p=np.nan, p_holm=np.nan, worse=False)
            else:
                r["p_holm"] = float(next(adj))
                r["worse"] = bool(r["p_holm"] <= alpha and r["diff"] < 0)
        out += recs
        # the headline: the best extended-QWK row on an engine that also has the reference row
        refs = g[(g["method"] + "+" + g["decoder"]) == reference].drop_duplicates("engine").set_index("engine")["row"]
        eq = g[(g["objective"] == "extended_qwk") & g["engine"].isin(refs.index)]
        eq_rows = [r for r in means.index if r in set(eq["row"])]
        if eq_rows:
            best_eq = eq_rows[0]
            ref = refs[g.loc[g["row"] == best_eq, "engine"].iloc[0]]
            pc = paired_comparison(wide[best_eq], wide[ref], confidence)
            heads.append({"regime": regime, "best_eqwk": best_eq, "reference": ref, "diff": pc.diff.mean,
                          "diff_low": pc.diff.low, "diff_high": pc.diff.high, "p": pc.p_value, "wins": pc.wins,
                          "losses": pc.losses, "n": pc.diff.n, "best": best})
    summary = pd.DataFrame(out)
    headline = pd.DataFrame(heads, columns=["regime", "best_eqwk", "reference", "diff", "diff_low", "diff_high", "p",
                                            "wins", "losses", "n", "best"])
    headline["p_holm"] = holm(headline["p"].to_numpy(dtype=float))
    headline["verdict"] = pd.Series(dtype=object) if headline.empty else [
        "better" if (ph <= alpha and d > 0) else "worse" if (ph <= alpha and d < 0) else "no difference"
        for ph, d in zip(headline["p_holm"], headline["diff"])]
    return summary, headline


def _fmt_diff(d: float, lo: float, hi: float) -> str:
    return f"{d:+.4f} [{lo:+.4f}, {hi:+.4f}]"


def _p(p: float) -> str:
    return "" if not np.isfinite(p) else ("< 0.0001" if p < 1e-4 else f"{p:.4f}")


def regime_verdict(regime: str, summary: pd.DataFrame, head: Mapping | None, alpha: float) -> str:
    """One plain sentence (or two) on a regime."""
    s = summary[summary["regime"] == regime]
    best = s[s["is_best"]].iloc[0]
    ties = s[~s["is_best"] & ~s["worse"]]["row"].tolist()
    text = [f"Best: `{best['row']}` (mean test QWK {best['mean']:.4f})"]
    text[0] += (f"; not distinguishable from it at {alpha:.0%} (Wilcoxon, Holm): "
                + ", ".join(f"`{t}`" for t in ties) + "." if ties else "; every other method is significantly worse.")
    if head is not None:
        what = {"better": "is significantly higher than", "worse": "is significantly lower than",
                "no difference": "does not differ significantly from"}[head["verdict"]]
        text.insert(0, f"Optimising QWK directly (`{head['best_eqwk']}`) {what} squared error with exact cut points "
                       f"(`{head['reference']}`): {_fmt_diff(head['diff'], head['diff_low'], head['diff_high'])} "
                       f"test QWK, p = {_p(head['p'])} (Holm over regimes {_p(head['p_holm'])}).")
    return " ".join(text)


def overall_verdict(headline: pd.DataFrame, summary: pd.DataFrame, n_seeds: int, alpha: float) -> str:
    if headline.empty:
        return "No regime has both an extended-QWK method and the reference method; no verdict."
    counts = headline["verdict"].value_counts()
    b, w, n = int(counts.get("better", 0)), int(counts.get("worse", 0)), int(counts.get("no difference", 0))
    ranks = summary.groupby("row")["rank"].mean().sort_values()
    top = ", ".join(f"`{r}` ({v:.1f})" for r, v in ranks.head(3).items())
    return (f"Over {len(headline)} regime{'s' * (len(headline) != 1)} and {n_seeds} seed{'s' * (n_seeds != 1)}, "
            f"optimising QWK directly (its best variant in each regime) beat squared error with exact cut points "
            f"significantly in {b}, lost significantly in {w}, and was indistinguishable in {n} (Wilcoxon "
            f"signed-rank, Holm-corrected across regimes at {alpha:.0%}). "
            f"Mean rank over regimes, lower is better: {top}.")


# --------------------------------------------------------------------------- plots

def plot_differences(summary: pd.DataFrame, headline: pd.DataFrame):
    """Left: the headline difference per regime; right: every row minus its regime's best, with intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    regimes = list(dict.fromkeys(summary["regime"]))
    rows = sorted(set(summary["row"]))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, max(4, 0.32 * len(rows) * 1 + 2)),
                                   gridspec_kw={"width_ratios": [1, 2]})
    if len(headline):
        y = np.arange(len(headline))
        d = headline["diff"].to_numpy()
        err = np.vstack([d - headline["diff_low"], headline["diff_high"] - d])
        colors = ["tab:green" if v == "better" else "tab:red" if v == "worse" else "tab:gray"
                  for v in headline["verdict"]]
        for i in range(len(d)):
            ax1.errorbar(d[i], y[i], xerr=err[:, i:i + 1], fmt="o", color=colors[i], capsize=3)
        ax1.set_yticks(y, headline["regime"])
        ax1.axvline(0, color="k", lw=0.8)
        ax1.invert_yaxis()
    ax1.set_title("best extended QWK − squared error + exact cuts")
    ax1.set_xlabel("test QWK difference (95% interval)")
    cmap = plt.get_cmap("tab10")
    offsets = np.linspace(-0.35, 0.35, max(1, len(regimes)))
    for j, regime in enumerate(regimes):
        s = summary[summary["regime"] == regime].set_index("row")
        ys = [rows.index(r) + offsets[j] for r in s.index]
        d = s["diff"].to_numpy()
        err = np.vstack([d - s["diff_low"], s["diff_high"] - d])
        ax2.errorbar(d, ys, xerr=err, fmt="o", ms=3, color=cmap(j % 10), label=regime, capsize=2, lw=0.8)
    ax2.set_yticks(range(len(rows)), rows)
    ax2.axvline(0, color="k", lw=0.8)
    ax2.invert_yaxis()
    ax2.set_title("each method − the regime's best (paired over seeds)")
    ax2.set_xlabel("test QWK difference (95% interval)")
    ax2.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return fig


def plot_ranking(summary: pd.DataFrame):
    """Mean rank of each row per regime (1 = best), rows ordered by their mean rank over regimes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wide = summary.pivot_table(index="row", columns="regime", values="rank")
    wide = wide[list(dict.fromkeys(summary["regime"]))]
    wide = wide.loc[wide.mean(axis=1).sort_values().index]
    fig, ax = plt.subplots(figsize=(1.1 * wide.shape[1] + 4, 0.35 * wide.shape[0] + 1.8))
    im = ax.imshow(wide.to_numpy(), cmap="viridis_r", aspect="auto")
    ax.set_xticks(range(wide.shape[1]), wide.columns, rotation=30, ha="right")
    ax.set_yticks(range(wide.shape[0]), [f"{r} ({m:.1f})" for r, m in wide.mean(axis=1).items()])
    for i in range(wide.shape[0]):
        for j in range(wide.shape[1]):
            v = wide.iat[i, j]
            if np.isfinite(v):
                ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize=7, color="w" if v > wide.to_numpy()[
                    np.isfinite(wide.to_numpy())].mean() else "k")
    fig.colorbar(im, ax=ax, label="mean rank over seeds (1 = best)")
    ax.set_title("ranking: mean rank per regime (row label: mean over regimes)")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- the report

def render_report(spec: StudySpec, df: pd.DataFrame, summary: pd.DataFrame, headline: pd.DataFrame,
                  timing: Mapping[str, Any], command: str, ceiling: pd.DataFrame | None = None) -> str:
    """``study.md``: the overall verdict, a section per regime (verdict, ceiling, table) and the time taken."""
    from qwkboost.stats import mean_interval

    lines = ["# Study: optimising QWK directly against squared error with cut points, classification and ordinal "
             "models", "", f"Command: `{command}`", "",
             f"Seeds: {spec.seeds} ({spec.first_seed}..{spec.first_seed + spec.seeds - 1}); regimes: "
             f"{', '.join(spec.regimes)}; engines: {', '.join(spec.engines)}; {spec.confidence:.0%} intervals; "
             f"tests at {spec.alpha:.0%}.", "",
             "## Verdict", "", overall_verdict(headline, summary, spec.seeds, spec.alpha), ""]
    if spec.seeds < 6:
        # the smallest two-sided signed-rank p-value with n pairs is 2 / 2**n
        lines += [f"With {spec.seeds} seed{'s' * (spec.seeds != 1)} no difference can be significant: the two-sided "
                  f"Wilcoxon test's smallest p-value is {2 / 2 ** spec.seeds:.3f}. Use study.seeds=6 or more.", ""]
    for regime in dict.fromkeys(summary["regime"]):
        head = headline[headline["regime"] == regime]
        lines += [f"## {regime}", "",
                  regime_verdict(regime, summary, head.iloc[0] if len(head) else None, spec.alpha), ""]
        ceil = None if ceiling is None else ceiling.loc[ceiling["regime"] == regime, "ceiling"]
        if ceil is not None and len(ceil):
            iv = mean_interval(ceil, spec.confidence)
            lines += [f"The generator's rule (cut points on the sum of the visible columns, fitted on the training "
                      f"split): {iv.mean:.4f} [{iv.low:.4f}, {iv.high:.4f}]. Its cut points are estimated, so a "
                      "method can match it within noise.", ""]
        lines += ["| method | mean test QWK [95% CI] | − best [95% CI] | Wilcoxon p | Holm p | mean rank |",
                  "|---|---|---|---:|---:|---:|"]
        for r in summary[summary["regime"] == regime].itertuples():
            mark = " (best)" if r.is_best else (" (worse)" if r.worse else "")
            diff = "" if r.is_best else _fmt_diff(r.diff, r.diff_low, r.diff_high)
            lines.append(f"| `{r.row}`{mark} | {r.mean:.4f} [{r.low:.4f}, {r.high:.4f}] | {diff} | {_p(r.p)} | "
                         f"{_p(r.p_holm)} | {r.rank:.1f} |")
        lines.append("")
    lines += ["## Time", "",
              f"Wall time of this command: {timing['wall']:.0f} s with {spec.n_jobs} cells at a time; "
              f"{timing['computed']} cells computed, {timing['reused']} reused from `{spec.cache_dir}`."]
    history = timing.get("history") or []
    if len(history) > 1:
        lines.append(f"The {len(history)} commands that ran this study took {sum(h['wall'] for h in history):.0f} s "
                     f"in all, computing {sum(h['computed'] for h in history)} cells.")
    lines += [f"Compute over all cells: {timing['cell_total']:.0f} s (one cell at a time that would take "
              f"{timing['cell_total'] / 60:.1f} min).", "",
              "| regime | cells | median s per cell | max s |", "|---|---:|---:|---:|"]
    per = df.drop_duplicates("key").groupby("regime", sort=False)["cell_seconds"]
    for regime, v in per:
        lines.append(f"| {regime} | {v.size} | {v.median():.2f} | {v.max():.2f} |")
    per_m = df.drop_duplicates("key").groupby("method", sort=False)["cell_seconds"]
    lines += ["", "| method | cells | median s per cell |", "|---|---:|---:|"]
    for m, v in per_m:
        lines.append(f"| {m} | {v.size} | {v.median():.2f} |")
    lines += ["", "How to read this: a method's row is its test QWK over seeds. `− best` is the paired difference "
              "to the regime's best row (highest mean; picking it on these seeds favours it a little). Wilcoxon p is "
              "the two-sided signed-rank test of that difference, Holm p the same corrected for the number of "
              "rows in the regime. Methods given label shift's target distribution use it as described in "
              "`qwkboost/shift.py`.", ""]
    return "\n".join(lines)


def _log_child(client, experiment_id: str, parent_id: str, cell: Cell) -> str:
    from mlflow.entities import Metric, Param, RunTag

    now = int(time.time() * 1000)
    tags = [RunTag("mlflow.parentRunId", parent_id), RunTag("mlflow.runName", cell.label),
            RunTag("study.cell", cell.key), RunTag("study.regime", cell.regime)]
    run = tracking._retry(client.create_run, experiment_id, tags={t.key: t.value for t in tags},
                          run_name=cell.label)
    r = cell.result
    metrics = [Metric(f"test_qwk_{d}", float(v), now, 0) for d, v in r["qwk"].items()]
    metrics += [Metric(f"oof_qwk_{d}", float(v), now, 0) for d, v in r["qwk_oof"].items()]
    metrics += [Metric(k, float(r[k]), now, 0) for k in ("seconds", "fit_seconds") if r.get(k) is not None]
    params = {"regime": cell.regime, "engine": cell.engine, "method": cell.method.name, "seed": cell.seed,
              "decode": ",".join(cell.method.decode), "overrides": " ".join(cell.method.overrides) or "-",
              "peer": cell.method.peer or "-", "reused": bool(r.get("reused", False))}
    tracking._retry(client.log_batch, run.info.run_id, metrics=metrics,
                    params=[Param(k, str(v)) for k, v in params.items()])
    tracking._retry(client.set_terminated, run.info.run_id, "FINISHED")
    return run.info.run_id


def _find_parent(client, experiment_id: str, fingerprint: str):
    runs = tracking._retry(client.search_runs, [experiment_id],
                           f"tags.`study.fingerprint` = '{fingerprint}'", max_results=1,
                           order_by=["attributes.start_time DESC"])
    return runs[0] if runs else None


def run_study(spec: StudySpec, cells: list[Cell], experiment_id: str | None, output_dir: str | os.PathLike,
              command: str = "", run_name: str = "study") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Compute the missing cells in parallel, reuse the cached ones, and write and log the report.

    The MLflow parent run is found by the study's fingerprint (the hash of all its
    cell keys), so a resumed study continues the same parent run: children are
    logged for the cells that lack one.
    """
    from joblib import Parallel, delayed
    from tqdm.auto import tqdm

    from qwkboost.cv import progress_enabled
    from qwkboost.parallel import threads_per_job

    t_start = time.perf_counter()
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    cache = CellCache(spec.cache_dir)
    pending = []
    for c in cells:
        hit = cache.get(c.key)
        if hit is not None:
            c.result = {**hit["result"], "reused": True}
        else:
            pending.append(c)
    n_reused = len(cells) - len(pending)
    log.info("study: %d cells (%d regimes x %d seeds); %d reused from %s, %d to compute on %d workers",
             len(cells), len(spec.regimes), spec.seeds, n_reused, cache.root, len(pending), spec.n_jobs)
    fingerprint = hashlib.sha256("".join(sorted(c.key for c in cells)).encode()).hexdigest()[:16]

    def body(parent_id: str | None) -> tuple[pd.DataFrame, pd.DataFrame]:
        client = None
        logged: set[str] = set()
        if parent_id is not None:
            import mlflow

            client = mlflow.MlflowClient()
            tracking.set_tags({"study.fingerprint": fingerprint, "command": command,
                               **{f"version.{k}": v for k, v in tracking.library_versions().items()}})
            if spec.log_children:
                for r in client.search_runs([experiment_id], f"tags.`mlflow.parentRunId` = '{parent_id}'",
                                            max_results=50_000):
                    logged.add(r.data.tags.get("study.cell", ""))
                for c in cells:
                    if c.result is not None and c.key not in logged:
                        _log_child(client, experiment_id, parent_id, c)
                        logged.add(c.key)
        threads = threads_per_job(spec.n_jobs)
        bar = tqdm(total=len(cells), initial=n_reused, disable=not progress_enabled(), desc="study", unit="cell",
                   dynamic_ncols=True)
        done = n_reused
        t_run = time.perf_counter()
        try:
            if pending:
                by_key = {}
                jobs = []
                for c in pending:
                    by_key.setdefault(c.key, []).append(c)
                    if len(by_key[c.key]) == 1:
                        jobs.append(c)
                results = Parallel(n_jobs=spec.n_jobs, return_as="generator_unordered")(
                    delayed(_work)(c.key, c.config, c.method, threads) for c in jobs)
                for key, res in results:
                    if "error" in res:
                        label = by_key[key][0].label
                        log.error("study cell %s failed:\n%s", label, res["traceback"])
                        raise RuntimeError(f"study cell {label} failed: {res['error']}")
                    for c in by_key[key]:
                        c.result = res["ok"]
                    cache.put(key, {"label": by_key[key][0].label, "result": res["ok"]})
                    done += len(by_key[key])
                    bar.update(len(by_key[key]))
                    if client is not None and spec.log_children:
                        for c in by_key[key]:
                            if c.key not in logged:
                                _log_child(client, experiment_id, parent_id, c)
                                logged.add(c.key)
                    if not bar.disable:
                        continue
                    computed = done - n_reused
                    if computed % max(1, len(jobs) // 20) == 0 or done == len(cells):
                        rate = (time.perf_counter() - t_run) / max(1, computed)
                        log.info("study: %d/%d cells, %.1f s per cell, about %.0f s to go", done, len(cells),
                                 rate, rate * (len(cells) - done))
        finally:
            bar.close()
        df = cells_frame(cells)
        summary, headline = summarise(df, spec.confidence, spec.alpha, spec.reference)
        timing = {"wall": time.perf_counter() - t_start, "computed": len(pending), "reused": n_reused,
                  "cell_total": float(df.drop_duplicates("key")["cell_seconds"].sum())}
        timing["history"] = cache.record_command(fingerprint, timing["wall"], len(pending), n_reused)
        ceiling = ceilings(cells)
        md = render_report(spec, df, summary, headline, timing, command, ceiling)
        (out / "study.md").write_text(md)
        summary.to_csv(out / "study.csv", index=False)
        headline.to_csv(out / "headline.csv", index=False)
        ceiling.to_csv(out / "ceiling.csv", index=False)
        df.to_csv(out / "cells.csv", index=False)
        (out / "plots").mkdir(exist_ok=True)
        import matplotlib.pyplot as plt

        for name, fig in (("paired_differences", plot_differences(summary, headline)),
                          ("ranking", plot_ranking(summary))):
            fig.savefig(out / "plots" / f"{name}.png", dpi=110)
            plt.close(fig)
        if parent_id is not None:
            tracking.log_params({"study": {"seeds": spec.seeds, "first_seed": spec.first_seed,
                                           "regimes": ",".join(spec.regimes), "engines": ",".join(spec.engines),
                                           "methods": ",".join(m.name for m in spec.methods),
                                           "cap_n_train": spec.max_train, "cap_n_test": spec.max_test}})
            metrics = {f"{r.regime}.{r.row}.mean".replace("+", "_"): r.mean for r in summary.itertuples()}
            metrics.update({f"{h.regime}.headline_diff": h.diff for h in headline.itertuples()})
            metrics.update({f"{r}.bayes_ceiling": v for r, v in ceiling.groupby("regime")["ceiling"].mean().items()})
            metrics["wall_seconds"] = timing["wall"]
            tracking.log_metrics(metrics)
            for f in ("study.md", "study.csv", "headline.csv", "ceiling.csv", "cells.csv",
                      "plots/paired_differences.png", "plots/ranking.png"):
                tracking.log_file(out / f, str(Path(f).parent) if "/" in f else None)
        log.info("study written to %s (study.md, study.csv, cells.csv, plots/) in %.0f s", out, timing["wall"])
        return summary, headline

    if experiment_id is None:
        return body(None)
    import mlflow

    client = mlflow.MlflowClient()
    previous = _find_parent(client, experiment_id, fingerprint)
    with tracking.run(experiment_id, run_name, run_id=previous.info.run_id if previous else None) as parent:
        result = body(parent.info.run_id)
    log.info("MLflow run: %s", tracking.run_link(experiment_id, parent.info.run_id))
    return result
