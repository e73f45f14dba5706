"""The cells of a study: building them from the spec, their keys, and computing one (a method, or a blend)."""

from __future__ import annotations

import hashlib
import json
import logging
import time
import traceback
import warnings
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any, Iterable, Mapping

import numpy as np

from qwkboost.cv.folds import make_folds, make_repeated_folds
from qwkboost.data.dataset import class_range
from qwkboost.data.packaged import train_rows
from qwkboost.data.shift import class_proportions, shift_proba, shift_weights, target_moments
from qwkboost.evaluation.metrics import qwk
from qwkboost.evaluation.thresholds import apply_thresholds, fit_thresholds
from qwkboost.runs.peers import cross_validate_peer
from qwkboost.study.spec import TEST_SEED_OFFSET, MethodSpec, StudySpec
from qwkboost.study.tuning import tune_cell, tuned_once

__all__ = ["Cell", "check_cells", "cell_key", "seeded", "build_cells", "run_cell", "run_blend_cell"]

log = logging.getLogger(__name__)

#: Config keys that do not change a cell's result (left out of its hash).
_BOOKKEEPING = ("tracking", "study", "table", "run_name", "n_jobs", "optimized_metric", "hydra", "tune")


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
    depends: tuple[str, ...] = ()   # a blend's member cells (their keys), in the order of its members

    @property
    def label(self) -> str:
        return f"{self.regime}/{self.engine}/{self.method.name}/seed{self.seed}"


def check_cells(cells: Iterable[Cell]) -> None:
    """Refuse, before any training, a decoder a method cannot use (``argmax`` needs class probabilities)."""
    from qwkboost.config import objective_ref  # slow to import: scipy
    from qwkboost.objectives import Objective, get  # slow to import: scipy

    seen = set()
    for c in cells:
        if c.method.peer is not None or c.method.is_blend or "argmax" not in c.method.decode \
                or c.method.name in seen:
            continue
        seen.add(c.method.name)
        obj = get(objective_ref(c.config["objective"]), **dict(c.config["objective"].get("params") or {}))
        if type(obj).predict_proba is Objective.predict_proba:
            raise ValueError(f"study.methods.{c.method.name}.decode: 'argmax' needs class probabilities, which "
                             f"objective {c.config['objective']['name']!r} does not give; use round, exact or "
                             "distribution")


def _hashable(config: Mapping[str, Any]) -> dict:
    return {k: v for k, v in config.items() if k not in _BOOKKEEPING}


def cell_key(config: Mapping[str, Any], method: MethodSpec, depends: tuple[str, ...] = ()) -> str:
    """A hash of everything that decides a cell's result: its config (without bookkeeping), its method's
    decoders and peer (a blend's method and member cells), and the qwkboost version."""

    payload = {"config": _hashable(config), "decode": sorted(method.decode), "peer": method.peer,
               "qwkboost": version("qwkboost")}
    if method.is_blend:
        payload["blend"] = {"method": method.blend_method, "members": list(depends)}
    if method.tune_trials:
        payload["tuning"] = {"n_trials": method.tune_trials, "pruner": method.tune_pruner, "seed": method.tune_seed}
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
    if max_train is not None and "n_train" in data:     # a packaged set's n_train: null is all of its rows
        if str(data.get("_target_", "")).endswith("data.packaged.load") and data.get("set"):

            max_train = None if max_train >= train_rows(data["set"]) else max_train   # a cap is at most
        if max_train is not None:
            data["n_train"] = max_train if data["n_train"] is None else min(int(data["n_train"]), max_train)
    if max_test is not None and "n_test" in data:
        data["n_test"] = min(int(data["n_test"]), max_test)
    return cfg


def build_cells(spec: StudySpec, compose) -> list[Cell]:
    """Every cell of the study, seed-major (a study stopped early has whole seeds).

    ``compose(overrides)`` returns a resolved config dict for a list of Hydra overrides.
    """
    by_name = {m.name: m for m in spec.methods}
    base: list[tuple[str, str, MethodSpec, dict]] = []
    for regime, size in ((r, n) for r in spec.regimes for n in spec.sizes):
        for method in sorted(spec.methods, key=lambda m: m.is_blend):     # a blend after its members
            engines = ("-",) if method.peer else spec.engines_of(method)
            if method.is_blend:     # the engines every member runs on
                engines = tuple(e for e in spec.engines_of(method)
                                if all(e in spec.engines_of(by_name[x]) for x in method.members))
            for engine in engines:
                overrides = [f"data={regime}"] + ([] if size is None else [f"data.n_train={size}"])
                if method.peer is None:
                    overrides += [f"engine={engine}", *method.overrides]
                base.append((spec.regime_name(regime, size), engine, method, compose(overrides)))
    cells = []
    for seed in spec.seed_list:
        keys: dict[tuple[str, str, str], str] = {}
        for regime, engine, method, cfg in base:
            c = seeded(cfg, seed, spec.max_train, spec.max_test)
            if method.peer is not None or method.is_blend:
                c.pop("engine", None)
                c.pop("objective", None)
                c.pop("thresholds", None)
            depends = tuple(keys[(regime, engine, x)] for x in method.members) if method.is_blend else ()
            cell = Cell(regime, engine, method, seed, c, cell_key(c, method, depends), depends=depends)
            keys[(regime, engine, method.name)] = cell.key
            cells.append(cell)
    return cells


def _cell_data(config: Mapping[str, Any]):
    """A cell's data set, its lowest class and number of classes, and the training and test labels as class
    indices ``0..k-1``."""
    from qwkboost.runs.experiment import load_dataset  # slow to import: matplotlib, scipy

    ds = load_dataset(config["data"], int(config["seed"]), config["cv"].get("group"))
    classes = class_range(ds.classes)
    lo = float(classes[0])
    return ds, lo, len(classes), (ds.y_train - lo).astype(np.int64), (ds.y_test - lo).astype(np.int64)


def run_cell(config: Mapping[str, Any], method: MethodSpec, threads: int = 1, keep_scores: bool = False,
             tuning_dir: str | None = None) -> dict:
    """Train ``method`` under ``config`` and score it with each of its decoders.

    Returns
    -------
    dict
        ``qwk`` (test QWK per decoder), ``qwk_oof`` (out-of-fold QWK per
        decoder), ``fit_seconds``, ``seconds``, ``best_iteration`` (engines),
        ``n_train``, ``n_test``, ``n_classes``; with ``keep_scores``, also
        ``scores``: the out-of-fold and test scores a blend of this cell needs; for a tuned
        method, ``tuning`` (:func:`qwkboost.study.tuning.tune_cell`), kept in ``tuning_dir`` when the
        method tunes once for all seeds.
    """
    from qwkboost.config import objective_ref  # slow to import: scipy
    from qwkboost.cv.crossval import cross_validate  # slow to import: scipy
    from qwkboost.engines.threads import blas_single_thread  # slow to import: scipy

    t0 = time.perf_counter()
    seed = int(config["seed"])
    cv_cfg = config["cv"]
    ds, lo, k, y_idx, yt_idx = _cell_data(config)
    prior = ds.test_prior
    tuning = None
    weights = None if prior is None else shift_weights(y_idx, prior)
    n_splits, repeats = int(cv_cfg["n_splits"]), int(cv_cfg.get("repeats", 1))
    best_iteration = None
    with blas_single_thread():
        if method.peer is not None:
            # the folds cross_validate makes for the engines, so cells pair up
            plan = make_repeated_folds(ds.y_train, n_splits, bool(cv_cfg.get("stratified", True)),
                                       bool(cv_cfg.get("shuffle", True)), seed, repeats, ds.groups_train)
            peer = cross_validate_peer(method.peer, ds.X_train, y_idx, ds.X_test, [f for s in plan for f in s], k,
                                       seed, repeats)
            oof_proba, test_proba, fit_seconds = peer.oof_proba, peer.test_proba, peer.fit_seconds
            oof = test = None
        else:
            objective = config["objective"]
            objective_params = dict(objective.get("params") or {})
            if prior is not None and "a" in objective_params and "b" in objective_params:
                # the target's label mean and variance, for extended QWK's denominator
                objective_params["a"], objective_params["b"] = target_moments(lo + np.arange(k), prior)
            engine = config["engine"]

            def run_cv(params, on_fold=None, X_test=ds.X_test, seed=seed, data=ds):
                return cross_validate(
                    data.X_train, data.y_train, X_test, engine=engine["name"], objective=objective_ref(objective),
                    params=params, objective_params=objective_params,
                    num_boost_round=int(engine["num_boost_round"]),
                    early_stopping_rounds=engine.get("early_stopping_rounds"),
                    early_stopping_min_delta=engine.get("early_stopping_min_delta"), n_splits=n_splits,
                    stratified=bool(cv_cfg.get("stratified", True)), shuffle=bool(cv_cfg.get("shuffle", True)),
                    seed=seed, progress=False, n_jobs=threads, schema=data.schema, groups=data.groups_train,
                    repeats=repeats, on_fold=on_fold)

            params = dict(engine.get("params") or {})
            if method.tune_trials:      # the same budget for every tuned method; the test rows are not seen

                # tuned once for every seed (study.tuning.per_seed=false): the first seed's training rows, folds
                # and draws, computed by whichever cell needs it first and kept in tuning_dir
                t_seed = seed if method.tune_seed is None else method.tune_seed
                t_config = seeded(config, t_seed, None, None)
                t_data = ds if t_seed == seed else _cell_data(t_config)[0]

                def tune():
                    return tune_cell(lambda p, on_fold: run_cv(p, on_fold, X_test=None, seed=t_seed, data=t_data),
                                     t_data.y_train, class_range(t_data.classes), engine.get("search_space") or {},
                                     params, method.tune_trials, method.tune_pruner, t_seed)

                tuning = tuned_once(tuning_dir, cell_key(t_config, method), tune)
                params.update(tuning["params"])
            cv = run_cv(params)
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
    if tuning is not None:
        out["tuning"] = tuning
    if keep_scores:
        out["scores"] = {"oof": np.asarray(oof, dtype=np.float64), "test": np.asarray(test, dtype=np.float64)}
    return out


def run_blend_cell(config: Mapping[str, Any], method: MethodSpec, scores: list[dict]) -> dict:
    """Blend the member cells' ``scores`` (out-of-fold and test, in the order of ``method.members``) and score
    the blend with each decoder, as :func:`run_cell` scores a method; ``qwk_oof_nested`` adds the nested
    out-of-fold QWK (:func:`qwkboost.blending.methods.fit_nested`)."""
    from qwkboost.blending.methods import fit_nested  # slow to import: scipy, scipy.optimize

    t0 = time.perf_counter()
    seed = int(config["seed"])
    cv_cfg = config["cv"]
    ds, lo, k, y_idx, yt_idx = _cell_data(config)
    weights = None if ds.test_prior is None else shift_weights(y_idx, ds.test_prior)
    S = np.column_stack([s["oof"] for s in scores]) - lo
    T = np.column_stack([s["test"] for s in scores]) - lo
    fold = np.empty(len(y_idx), dtype=np.int64)     # repeat 0's folds: the members' own
    for f, (_, va) in enumerate(make_folds(ds.y_train, int(cv_cfg["n_splits"]), bool(cv_cfg.get("stratified", True)),
                                           bool(cv_cfg.get("shuffle", True)), seed, ds.groups_train)):
        fold[va] = f
    out = {"qwk": {}, "qwk_oof": {}, "qwk_oof_nested": {}, "weights": {}}
    for dec in method.decode:
        fit, nested = fit_nested(method.blend_method, S, y_idx, k, weights, fold, dec)
        out["qwk"][dec] = qwk(yt_idx, fit.classes(T), n_classes=k)
        out["qwk_oof"][dec] = qwk(y_idx, fit.classes(S), n_classes=k, sample_weight=weights)
        out["qwk_oof_nested"][dec] = qwk(y_idx, nested, n_classes=k, sample_weight=weights)
        out["weights"][dec] = dict(zip(method.members, (float(w) for w in fit.weights)))
    out.update(fit_seconds=0.0, seconds=time.perf_counter() - t0, best_iteration=None, n_train=int(len(y_idx)),
               n_test=int(len(yt_idx)), n_classes=k)
    return out


def compute_cell(key: str, config: dict, method: MethodSpec, threads: int, keep_scores: bool = False,
                 scores: list[dict] | None = None, tuning_dir: str | None = None) -> tuple[str, dict]:
    """A pool worker's task: the cell's key and its result, or its error as text (a study stops on the first
    error). A blend cell gets its members' ``scores``."""

    logging.getLogger("qwkboost").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=UserWarning)
    try:
        if method.is_blend:
            return key, {"ok": run_blend_cell(config, method, scores)}
        return key, {"ok": run_cell(config, method, threads, keep_scores, tuning_dir)}
    except Exception as exc:    # noqa: BLE001 - reported by the main process with the cell's name
        return key, {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
