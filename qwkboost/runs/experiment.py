"""One experiment: data -> CV -> thresholds fitted on out-of-fold scores -> metrics -> one MLflow run.

The config is a plain mapping (a resolved Hydra config); nothing here imports
Hydra, so the same function serves ``experiments/run.py``, the table, the
tuner and tests.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import yaml

from qwkboost import tracking
from qwkboost.config import objective_ref
from qwkboost.cv.crossval import CVResult, cross_validate
from qwkboost.cv.folds import check_folds, check_groups, fold_assignment
from qwkboost.data.dataset import Dataset, class_range
from qwkboost.data.features import EncodedFeatures
from qwkboost.data.fingerprint import fingerprint
from qwkboost.data.files import from_file
from qwkboost.data.sources import SOURCES
from qwkboost.distributed.training import ClusterSpec, connect, dask_engines, dask_support
from qwkboost.engines import check_engine_params, get_engine
from qwkboost.evaluation import plots
from qwkboost.evaluation.metrics import extended_qwk, qwk, rmse
from qwkboost.evaluation.thresholds import (
    apply_thresholds,
    fit_thresholds,
    nested_classes,
)
from qwkboost.exceptions import EngineUnavailable, config_errors
from qwkboost.explanations.explanation import explain, sample_rows
from qwkboost.explanations.report import write_report
from qwkboost.objectives import get as get_objective
from qwkboost.tracking.outputs import CLASS, SCORE, OutputColumns, fold_role, write_predictions
from qwkboost.tracking.pipeline import FittedPipeline
from qwkboost.tracking.vocabulary import run_metrics
from qwkboost.tracking.writing import staged

__all__ = ["load_dataset", "Evaluation", "evaluate", "run_experiment", "check_against_data", "prediction_tables",
           "PredictionTables", "write_outputs"]

log = logging.getLogger(__name__)


def load_dataset(data: Mapping[str, Any], seed: int = 0, group: str | None = None) -> Dataset:
    """Build the :class:`~qwkboost.data.dataset.Dataset` a ``data`` config describes.

    The config names its loader with ``_target_`` (Hydra's convention) and
    holds every argument, so the defaults live in ``conf/data/*.yaml`` only. A
    config without ``_target_`` is looked up by ``data.name``
    (:data:`qwkboost.data.sources.SOURCES`); ``seed`` is the train/test split's for a
    CSV file that does not give one. ``group`` (``cv.group``) names the entity
    column of a file (see :func:`qwkboost.data.files.from_file`).

    Raises
    ------
    ValueError
        For an unknown source, or ``group`` with a source that has no columns to name.
    """
    from hydra.utils import get_method  # slow to import: hydra

    name = data.get("name")
    if name not in SOURCES:
        raise ValueError(f"data.name={name!r} is unknown; choose one of: {', '.join(SOURCES)}")
    loader = get_method(data["_target_"]) if data.get("_target_") else SOURCES[name]
    kwargs = {k: v for k, v in data.items() if k not in ("name", "_target_")}
    if loader in (from_file, SOURCES["packaged"]):
        kwargs.setdefault("seed", seed)
        if group is not None:
            kwargs["group"] = group
    elif group is not None:
        raise ValueError(f"cv.group={group!r} names an entity column, but data={name} is generated and has none; "
                         "cv.group needs a file (data=csv)")
    return loader(**kwargs)


@dataclass
class Evaluation:
    """Metrics and decisions of one cross-validated configuration.

    ``cuts`` and ``classes`` are on the labels' own scale; both are ``None``
    for a regression target.
    """

    metrics: dict[str, float]
    cuts: np.ndarray | None
    classes: np.ndarray | None
    test_classes: np.ndarray | None

    @property
    def thresholds(self) -> list[float] | None:
        return None if self.cuts is None else [round(float(c), 6) for c in self.cuts]


def evaluate(ds: Dataset, cv: CVResult, method: str) -> Evaluation:
    r"""Fit cut points on the OOF scores with ``method`` and score OOF and test.

    Rounding uses the cut points :math:`c_{k} + \tfrac12` between consecutive
    classes; the other methods come from :func:`qwkboost.evaluation.thresholds.fit_thresholds`
    on class indices :math:`y - \min y`, so scales like 1..9 work unchanged.

    ``qwk_thresholds_oof`` scores the cut points on the rows they were fitted
    on; ``qwk_thresholds_oof_nested`` fits them on the other folds' rows for
    each fold (:func:`qwkboost.evaluation.thresholds.nested_classes`), and
    ``cut_optimism`` is the difference: how much the fit flatters the OOF
    score. With repeated CV, ``qwk_thresholds_oof_repeat_sd`` is the spread of
    the single repeats' OOF QWK.
    """
    m: dict[str, float] = {"fit_seconds": cv.fit_seconds, "predict_seconds": cv.predict_seconds,
                           "best_iteration_mean": float(np.mean(cv.best_iterations))}
    labelled = cv.test is not None and ds.has_test_labels
    w, wt = ds.w_train, ds.w_test
    if labelled:
        m["rmse"] = rmse(ds.y_test, cv.test, wt)
    m["rmse_oof"] = rmse(ds.y_train, cv.oof, w)
    if not ds.is_ordinal:
        return Evaluation(m, None, None, None)
    classes = class_range(ds.classes)
    lo, hi = float(classes[0]), float(classes[-1])
    k = len(classes)
    y_idx = (ds.y_train - lo).astype(np.int64)
    round_cuts = classes[:-1] + 0.5
    # fit on the index scale (0..K-1), where every method's starting point lives, then shift back
    cuts = round_cuts if method == "round" else \
        fit_thresholds(method, cv.oof - lo, y_idx, n_classes=k, sample_weight=w) + lo
    m["qwk_round_oof"] = qwk(y_idx, apply_thresholds(cv.oof, round_cuts), n_classes=k, sample_weight=w)
    m["qwk_thresholds_oof"] = qwk(y_idx, apply_thresholds(cv.oof, cuts), n_classes=k, sample_weight=w)
    # the same cut points fitted without each fold, scored on it: what the fit flatters the OOF score by
    fold = (cv.fold_of if cv.fold_of is not None else fold_assignment(cv.folds, len(cv.oof), cv.repeats))[0]
    nested = nested_classes(method, cv.oof - lo, y_idx, fold, n_classes=k, sample_weight=w)
    m["qwk_thresholds_oof_nested"] = qwk(y_idx, nested, n_classes=k, sample_weight=w)
    m["cut_optimism"] = m["qwk_thresholds_oof"] - m["qwk_thresholds_oof_nested"]
    if cv.oof_repeats is not None:      # how much one repeat's OOF QWK moves with the split's seed
        per = [qwk(y_idx, apply_thresholds(o, round_cuts if method == "round" else
                                           fit_thresholds(method, o - lo, y_idx, n_classes=k, sample_weight=w) + lo),
                   n_classes=k, sample_weight=w) for o in cv.oof_repeats]
        m["qwk_thresholds_oof_repeat_mean"] = float(np.mean(per))
        m["qwk_thresholds_oof_repeat_sd"] = float(np.std(per, ddof=1))
    m["kappa_tilde_oof"] = extended_qwk(ds.y_train, np.clip(cv.oof, lo, hi), sample_weight=w)
    test_classes = None
    if cv.test is not None:
        test_idx = apply_thresholds(cv.test, cuts)
        test_classes = classes[test_idx]
    if labelled:
        yt = (ds.y_test - lo).astype(np.int64)
        m["qwk_round"] = qwk(yt, apply_thresholds(cv.test, round_cuts), n_classes=k, sample_weight=wt)
        m["qwk_thresholds"] = qwk(yt, test_idx, n_classes=k, sample_weight=wt)
        m["kappa_tilde"] = extended_qwk(ds.y_test, np.clip(cv.test, lo, hi), sample_weight=wt)
    return Evaluation(m, np.asarray(cuts, dtype=float), classes, test_classes)


def run_experiment(cfg: Mapping[str, Any], experiment_id: str | None = None, parent_run_id: str | None = None,
                   run_name: str | None = None, output_dir: str | Path | None = None,
                   dataset: Dataset | None = None, on_start=None, on_fold=None, on_round=None,
                   progress: bool | None = None, client=None, dask_stop=None,
                   fold_scores: bool = True, kind: str = "run", tags: Mapping[str, str] | None = None,
                   mlflow_name: str | None = None) -> dict[str, Any]:
    """Cross-validate ``cfg`` and log one MLflow run (a child of ``parent_run_id`` if given).

    Parameters
    ----------
    cfg : mapping
        Resolved config with ``data``, ``engine``, ``objective``, ``cv``,
        ``thresholds``, ``tracking`` and ``seed``.
    experiment_id : str, optional
        MLflow experiment; ``None`` disables tracking.
    parent_run_id : str, optional
    run_name : str, optional
        Default ``"{engine}/{objective}"``.
    output_dir : path, optional
        Where ``result.json`` is written.
    dataset : Dataset, optional
        Reuse data already loaded (the table loads it once for all rows).
    on_start : callable, optional
        Called with the MLflow run id once the run exists (the tuner records it on the trial).
    on_fold : callable, optional
        Called after each CV fold (:func:`qwkboost.cv.crossval.cross_validate`); raising
        :class:`~qwkboost.exceptions.RunStopped` there stops the run (a pruned trial): no cut points, no
        outputs, its MLflow run KILLED with the reason.
    on_round : callable, optional
        Called after every boosting round (:func:`qwkboost.cv.crossval.cross_validate`); raising
        :class:`~qwkboost.exceptions.RunStopped` there stops the run in the middle of a fold, as ``on_fold`` does.
    fold_scores : bool, default True
        Whether ``on_fold`` reads the fold's scores (:func:`~qwkboost.cv.crossval.cross_validate`).
    kind : str, default "run"
        The run's ``kind`` tag: ``run``, ``candidate`` (auto's), ``trial`` (a study's), ``rerun`` (a study's best
        on other seeds).
    tags : mapping, optional
        More tags for the run (auto's ``candidate``: its name in the leaderboard).
    mlflow_name : str, optional
        The MLflow run's name, where it differs from ``run_name`` (which its log lines keep): auto's candidate
        ``lightgbm-squared_error-trial-3`` is ``lightgbm/squared_error trial 3`` in MLflow, as every run is named.
    progress : bool, optional
        The folds' progress bar (default: on a terminal); a driver with a bar of its own turns it off.
    client : distributed.Client, optional
        Train each fold's rows across this client's Dask workers (a budget's cluster, already connected); else
        those of ``cfg``'s ``cluster``, if it names one.
    dask_stop : RoundStop, optional
        What stops the workers' rounds (:func:`~qwkboost.cv.crossval.cross_validate`).

    Returns
    -------
    dict
        ``engine``, ``objective``, ``thresholds``, the metrics and ``run_id``.
    """
    engine, objective = cfg["engine"], cfg["objective"]
    run_name = run_name or cfg.get("run_name") or f"{engine['name']}/{objective['name']}"
    seed = int(cfg.get("seed", 0))
    group = cfg["cv"].get("group")
    with config_errors():
        ds = dataset if dataset is not None else load_dataset(cfg["data"], seed, group)
        check_against_data(cfg, ds)

    spec = ClusterSpec.from_config(cfg.get("cluster"))
    logged: dict[str, str | None] = {}

    def body(active, client) -> dict[str, Any]:
        started = time.perf_counter()
        fp = fingerprint(ds)
        if active is not None:
            if on_start is not None:
                on_start(active.info.run_id)
            tracking.log_params(_loggable(cfg))
            tracking.set_tags({"kind": kind, "engine": engine["name"], "objective": objective["name"],
                               **({"objective.class": objective["_target_"]} if objective.get("_target_") else {}),
                               "data": cfg["data"]["name"], "command": tracking.command_line(),
                               **({} if spec is None else {"cluster": spec.address or
                                                           f"local:{spec.n_workers}x{spec.threads_per_worker}"}),
                               **({} if given is None else {"cluster": given.scheduler.address}),
                               **tracking.version_tags(),
                               **(tags or {})})
            tracking.log_datasets(fp, cfg["data"])
        cv = cross_validate(
            ds.X_train, ds.y_train, ds.X_test, engine=engine["name"], objective=objective_ref(objective),
            params=dict(engine.get("params") or {}), objective_params=dict(objective.get("params") or {}),
            num_boost_round=int(engine["num_boost_round"]), early_stopping_rounds=engine.get("early_stopping_rounds"),
            early_stopping_min_delta=engine.get("early_stopping_min_delta"),
            n_splits=int(cfg["cv"]["n_splits"]), stratified=bool(cfg["cv"].get("stratified", True)) and ds.is_ordinal,
            shuffle=bool(cfg["cv"].get("shuffle", True)), seed=seed, description=run_name, n_jobs=cfg.get("n_jobs"),
            schema=ds.schema, sample_weight=ds.w_train, client=client, groups=ds.groups_train,
            repeats=int(cfg["cv"].get("repeats", 1)), on_fold=on_fold, on_round=on_round, progress=progress,
            early_stopping_on=cfg["cv"].get("early_stopping_on"), dask_stop=dask_stop, fold_scores=fold_scores)
        ev = evaluate(ds, cv, cfg["thresholds"]["method"])
        row = {"engine": engine["name"], "objective": objective["name"], "thresholds": ev.thresholds, **ev.metrics}
        pipe = FittedPipeline(cv.models, ds.schema, ev.cuts, ev.classes, ds.id_name, ds.target,
                              info={"engine": engine["name"], "objective": objective["name"],
                                    "thresholds": cfg["thresholds"]["method"], "data": cfg["data"]["name"],
                                    "run_id": None if active is None else active.info.run_id,
                                    "columns": output_names(ds), "data_fingerprint": fp.to_dict()},
                              labels=ds.labels.to_list() if ds.labels is not None and ev.cuts is not None else None)
        out = Path(output_dir) if output_dir is not None else None
        if active is not None:
            row["run_id"] = active.info.run_id
        log.info("%s: %s", run_name, ", ".join(f"{k}={v:.4f}" for k, v in ev.metrics.items()
                                               if k.startswith(("qwk", "rmse"))))
        written = None
        if out is not None:     # on disk first: a tracking server that goes away while logging loses nothing
            out.mkdir(parents=True, exist_ok=True)
            written = write_outputs(out, ds, cv, ev, pipe)
            tmp = out / f"result.json.tmp{os.getpid()}"
            tmp.write_text(json.dumps(row, indent=2))
            os.replace(tmp, out / "result.json")
            log.info("predictions: %s", out / "submission.csv")
        if active is not None:
            logged["model_id"] = _log_run(cfg, ds, cv, ev, pipe, written, started)
        return row

    # the cluster first: a scheduler that does not answer stops the command before its MLflow run starts
    given = client
    with contextlib.nullcontext(given) if spec is None or given is not None else connect(spec) as client:
        if client is not None and given is None:
            log.info("%s: training on the Dask cluster at %s (%d workers)", run_name,
                     spec.address or "127.0.0.1 (LocalCluster)", len(client.scheduler_info()["workers"]))
        if experiment_id is None:
            return body(None, client)
        with tracking.run(experiment_id, mlflow_name or run_name, parent_run_id) as active:
            row = body(active, client)
    if parent_run_id is None:
        log.info("MLflow run: %s", tracking.run_link(experiment_id, row["run_id"]))
        if logged.get("model_id"):
            log.info("MLflow model: models:/%s", logged["model_id"])
    return row


def check_against_data(cfg: Mapping[str, Any], ds: Dataset) -> None:
    """Checks that need the data, run before any training: the engine's parameters
    (names and values, by the engine itself) and the objective against the target.

    Raises
    ------
    ValueError
        Naming the config key.
    """

    engine = cfg["engine"]["name"]
    try:
        params = check_engine_params(engine, dict(cfg["engine"].get("params") or {}), ds.X_train.shape[1])
        k = int(cfg["cv"]["n_splits"])     # a CV training fold is this many rows: can the engine split them?
        get_engine(engine).check_data(ds.X_train[: len(ds.X_train) * (k - 1) // k], params)
    except EngineUnavailable:
        raise
    except ValueError as exc:
        raise ValueError(f"engine.params ({engine}): {exc}") from None
    k = int(cfg["cv"]["n_splits"])
    if ds.is_ordinal and ds.has_test_labels and np.unique(ds.y_test).size < 2:
        raise ValueError(f"the {len(ds.y_test)} test row(s) hold a single class ({ds.y_test[0]:g}); QWK on the test "
                         "set is undefined: give more test rows (data.n_test, data.test_size or data.test_path)")
    if not ds.is_ordinal and k > len(ds.y_train):
        raise ValueError(f"cv.n_splits={k} exceeds the number of training rows ({len(ds.y_train)})")
    group = cfg["cv"].get("group")
    if group is not None:
        if ds.groups_train is None:
            raise ValueError(f"cv.group={group!r}: the data set was loaded without its entity column")
        n_groups = int(check_groups(ds.groups_train, len(ds.y_train), f"cv.group={group!r}").max()) + 1
        if k > n_groups:
            raise ValueError(f"cv.n_splits={k} exceeds the number of groups in cv.group={group!r} ({n_groups}); "
                             "lower cv.n_splits")
    obj = get_objective(objective_ref(cfg["objective"]), **(cfg["objective"].get("params") or {}))
    if ds.is_ordinal:       # the folds as cross-validation will make them; advice only of settings that work
        check_folds(ds.y_train, k, bool(cfg["cv"].get("stratified", True)), bool(cfg["cv"].get("shuffle", True)),
                    int(cfg.get("seed", 0)), int(cfg["cv"].get("repeats", 1)),
                    ds.groups_train if group is not None else None, ordinal=obj.ordinal, label_of=ds.label_of)
    if obj.ordinal and not ds.is_ordinal:
        raise ValueError(f"objective={obj.name} needs ordinal labels, but data={cfg['data']['name']} is a "
                         "regression target; use objective=squared_error")
    if ClusterSpec.from_config(cfg.get("cluster")) is not None and obj.gradient_needs == "sums" \
            and not dask_support(engine).allreduce:
        raise ValueError(f"objective={obj.name} needs sums over every training row for its gradient, which "
                         f"{engine}.dask cannot combine across workers; on a cluster use "
                         + " or ".join(f"engine={n}" for n in dask_engines(allreduce=True))
                         + ", or a per-row objective such as objective=squared_error")
    try:
        obj.fit(ds.y_train)     # what it learns from the labels (a label mean outside their range, ...)
    except ValueError as exc:
        raise ValueError(f"objective.params: {exc}") from None

    get_engine(engine).check_objective(obj)       # e.g. several scores per row on catboost


_FIRST = ("objective", "engine", "data", "cv", "thresholds", "seed")
_LAST = ("tracking", "n_jobs", "cluster")


def _loggable(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The config as logged with every run: what it used. Not Hydra's settings, the run's name (it is the run's), the
    groups of other commands left empty (``table``, ``study``, ``auto``: null) or a cluster it did not use; the
    tuning search space is logged with tuning only. What decides the result comes first (the objective, the
    engine, the data, the CV, the cut points), the run's machinery (``tracking``, ``n_jobs``) last."""
    kept = {k: v for k, v in cfg.items()
            if k not in ("hydra", "run_name") and not (k in ("table", "study", "auto", "tune") and v is None)}
    out = {k: kept[k] for k in _FIRST if k in kept}
    out.update({k: v for k, v in kept.items() if k not in _FIRST and k not in _LAST})
    out.update({k: kept[k] for k in _LAST if k in kept})
    if ClusterSpec.from_config(out.get("cluster")) is None:
        out.pop("cluster", None)
    if isinstance(out.get("engine"), Mapping) and "search_space" in out["engine"]:
        out["engine"] = {k: v for k, v in out["engine"].items() if k != "search_space"}
    return out


@dataclass
class PredictionTables:
    """A run's prediction files as DataFrames, with the record of their columns (:mod:`qwkboost.tracking.outputs`).

    Attributes
    ----------
    oof : DataFrame
        Id, label, entity and weight columns (when the run had them), out-of-fold score and class, and the
        row's validation fold in every CV repeat.
    predictions : DataFrame
        Id, the fold models' mean test score, the class, and the label where the test set has them.
    submission : DataFrame
        Id and class as the user's labels (the score for a regression target), named as in the training file.
    oof_columns, prediction_columns : OutputColumns
        Which column of ``oof`` and ``predictions`` plays which part.
    """

    oof: Any
    predictions: Any
    submission: Any
    oof_columns: OutputColumns
    prediction_columns: OutputColumns


def output_names(ds: Dataset) -> dict[str, str | None]:
    """The user's columns a run's outputs hold: id, label, and the entity and weight columns when it has them."""
    user = {"id": ds.id_name, "label": ds.target}
    if ds.groups_train is not None:
        user["group"] = ds.group_name
    if ds.w_train is not None:
        user["weight"] = ds.weight_name
    return user


def prediction_tables(ds: Dataset, cv: CVResult, ev: Evaluation) -> PredictionTables:
    """The ``oof``, ``predictions`` and ``submission`` tables of a run, named by the rule of
    :mod:`qwkboost.tracking.outputs`: the user's columns keep their names, qwkboost's give way."""
    import pandas as pd  # slow to import: pandas

    ordinal = ev.cuts is not None
    labels = ds.labels.to_list() if ds.labels is not None else None
    fold_of = cv.fold_of if cv.fold_of is not None else fold_assignment(cv.folds, len(cv.oof), cv.repeats)
    oc = OutputColumns.resolve(output_names(ds), [SCORE, *([CLASS] if ordinal else []),
                                      *(fold_role(r) for r in range(len(fold_of)))], labels)
    ids_train = ds.ids_train if ds.ids_train is not None else np.arange(len(ds.y_train))
    ids_test = ds.ids_test if ds.ids_test is not None else np.arange(len(ds.X_test))
    cols = {oc["id"]: ids_train, oc["label"]: ds.decode(ds.y_train) if ordinal else ds.y_train}
    if ds.groups_train is not None:
        cols.setdefault(oc["group"], ds.groups_train)       # the entity may also be the id
    if ds.w_train is not None:
        cols[oc["weight"]] = ds.w_train
    cols[oc["score"]] = cv.oof
    if ordinal:
        cols[oc["class"]] = ds.decode(apply_thresholds(cv.oof, ev.cuts, classes=ev.classes))
    for r, f in enumerate(fold_of):
        cols[oc[fold_role(r)]] = f.astype(np.int64)
    oof = pd.DataFrame(cols)[oc.names]

    pc = OutputColumns.resolve({"id": ds.id_name, **({"label": ds.target} if ds.has_test_labels else {})},
                               [SCORE, *([CLASS] if ordinal else [])], labels, reserved=list(oc.user.values()))
    pcols = {pc["id"]: ids_test}
    if ds.has_test_labels:
        pcols[pc["label"]] = ds.decode(ds.y_test) if ordinal else ds.y_test
    pcols[pc["score"]] = cv.test
    if ordinal:
        pcols[pc["class"]] = ds.decode(ev.test_classes)
    pred = pd.DataFrame(pcols)[pc.names]
    sub = pd.DataFrame({oc["id"]: ids_test, oc["label"]: ds.decode(ev.test_classes) if ordinal else cv.test})
    return PredictionTables(oof, pred, sub, oc, pc)


#: What a run writes into its directory.
RUN_OUTPUTS = ("oof.parquet", "predictions.parquet", "submission.csv", "pipeline")


def write_outputs(out: Path, ds: Dataset, cv: CVResult, ev: Evaluation, pipe: FittedPipeline) -> list[Path]:
    """Write ``oof.parquet``, ``predictions.parquet`` (each with its column record), ``submission.csv`` and
    ``pipeline/`` into ``out``: beside earlier ones, swapped in when all are written
    (:func:`qwkboost.tracking.writing.staged`), so a failure keeps what was there."""
    out = Path(out)
    with staged(out, remove=RUN_OUTPUTS) as new:
        files = _write_outputs(new, ds, cv, ev, pipe)
    return [out / f.relative_to(new) for f in files]


def _write_outputs(out: Path, ds: Dataset, cv: CVResult, ev: Evaluation, pipe: FittedPipeline) -> list[Path]:
    t = prediction_tables(ds, cv, ev)
    files = [write_predictions(t.oof, out / "oof.parquet", t.oof_columns),
             write_predictions(t.predictions, out / "predictions.parquet", t.prediction_columns),
             out / "submission.csv"]
    t.submission.to_csv(files[2], index=False)
    pipe.save(out / "pipeline")
    return files


def _log_run(cfg, ds: Dataset, cv: CVResult, ev: Evaluation, pipe: FittedPipeline,
             written: list[Path] | None = None, started: float | None = None) -> str | None:
    """Curves, metrics and artifacts of one run (the active MLflow run); ``written``: the output files
    :func:`write_outputs` already wrote (logged from there, not written again), else they are written to a
    temporary folder to be logged. The metrics go under MLflow's one vocabulary
    (:mod:`qwkboost.tracking.vocabulary`), with ``seconds`` since ``started`` (``time.perf_counter``), at step 0,
    before the servable model linked to them (the curves' rounds are steps 1, 2, ...). Returns the model's id
    (``None`` when none was logged)."""

    # the explanations are computed while the rest is logged (the engines' TreeSHAP runs outside the GIL)
    explaining = _start_explaining(cfg, ds, pipe) if cfg.get("tracking", {}).get("explain", True) else None
    model_id = None
    try:
        tracking.log_curves(cv.curves())
        tracking.log_metrics({**run_metrics(ev.metrics),
                              **({} if started is None else {"seconds": time.perf_counter() - started})})
        tracking.log_text(yaml.safe_dump(_loggable(cfg), sort_keys=False), "config.yaml")
        tracking.log_dict({"method": cfg["thresholds"]["method"], "cuts": ev.thresholds,
                           "classes": None if ev.classes is None else ev.classes.tolist(),
                           "labels": None if ds.labels is None else ds.labels.to_list()}, "thresholds.json")
        tracking.log_dict({"best_iterations": cv.best_iterations, "fold_seconds": cv.fold_seconds,
                           "repeats": cv.repeats, "grouped": cv.grouped, "duplicate_rows": cv.duplicate_rows,
                           **ev.metrics}, "metrics.json")
        if cv.duplicate_rows is not None:
            tracking.log_metrics({"duplicate_rows": cv.duplicate_rows})
        metric_name = cv.models[0].objective.metric_name
        tracking.log_figure(plots.learning_curves(cv.models, metric_name), "plots/learning_curves.png")
        names = None if ds.labels is None else ds.labels.to_list()
        if ev.classes is not None:
            tracking.log_figure(plots.score_histograms(cv.oof, ds.y_train, ev.classes, ev.cuts, names=names),
                                "plots/oof_histograms.png")
            if ev.test_classes is not None and ds.has_test_labels:
                tracking.log_figure(plots.confusion_matrix(ds.y_test, ev.test_classes, ev.classes, names=names),
                                    "plots/confusion_matrix.png")
        if cv.oof_proba is not None and ev.classes is not None:
            # the objective's classes are the labels' range, the same scale as the thresholds' classes
            tracking.log_figure(plots.class_probabilities(cv.oof_proba, ds.y_train, ev.classes, names=names),
                                "plots/class_probabilities.png")
        # what each fold's objective learned: its initial score, and e.g. ordinal_logit's cut points
        tracking.log_dict({f"fold_{k}": m.objective.get_state() for k, m in enumerate(cv.models)},
                          "objective_state.json")
        tracking.log_dict(ds.schema.to_dict(), "features.json")
        with contextlib.ExitStack() as stack:
            if written is None:
                d = stack.enter_context(tracking.tmpdir())
                written = write_outputs(Path(d), ds, cv, ev, pipe)
            else:           # the pipeline beside them: written once, on the scale of the fold models
                d = written[0].parent
            for f in written:
                tracking.log_file(f, "predictions")
            if cfg.get("tracking", {}).get("log_models", True):
                # the fold models, averaged, with the cut points: load_run's artifact and a servable model
                from qwkboost.tracking.serving import log_pyfunc  # slow to import: mlflow, pandas

                # once: inside the servable model, else as the run's artifact (load_run reads either)
                if cfg.get("tracking", {}).get("log_pyfunc", True):
                    model_id = log_pyfunc(Path(d) / "pipeline", ds.schema.decode(ds.X_train[:5]),
                                          name=f"{cfg['engine']['name']}/{cfg['objective']['name']}")
                else:
                    tracking.log_artifacts(Path(d) / "pipeline", "pipeline")
    except BaseException:
        if explaining is not None:      # its folder goes once the thread ends: nothing left in the temp dir
            future, folder, _ = explaining
            future.add_done_callback(lambda _: shutil.rmtree(folder, ignore_errors=True))
        raise
    if explaining is not None:
        _log_explanations(*explaining)
    return model_id


def _start_explaining(cfg, ds: Dataset, pipe: FittedPipeline):
    """Start explaining the run's fold ensemble on a seeded sample of its training rows (``tracking.explain_rows``,
    default 1,000) in a thread, its files (:mod:`qwkboost.explanations.report`, pictures drawn without pyplot)
    written into a directory of their own; ``(future, directory, start time)``."""


    t = time.perf_counter()
    rows = cfg.get("tracking", {}).get("explain_rows", 1000)
    X, pos = sample_rows(EncodedFeatures(ds.X_train, ds.schema), rows, int(cfg.get("seed", 0)))
    ids = ds.ids_train[pos] if ds.ids_train is not None else pos
    out = tempfile.mkdtemp(prefix="qwkboost-explain-")

    def work():
        return write_report(explain(pipe, X, max_rows=None), out, ids, ds.id_name,
                            reserved=list(output_names(ds).values()))

    pool = ThreadPoolExecutor(1, thread_name_prefix="qwkboost-explain")
    future = pool.submit(work)
    pool.shutdown(wait=False)
    return future, out, t


def _log_explanations(future, out: str, started: float) -> None:
    """The explanation's files under ``explanations/``, and the metric ``explain_seconds`` (from the start of the
    explaining thread to the files logged)."""

    try:
        for f in future.result():
            tracking.log_file(f, "explanations")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    tracking.log_metrics({"explain_seconds": time.perf_counter() - started})
