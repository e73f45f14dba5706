"""Optuna search over engine parameters, stored in an RDB so a killed study resumes.

Each invocation is one parent MLflow run; each trial a child run. The study
lives in ``sqlite:///optuna.db`` of the working directory by default (any SQLAlchemy URL for
parallel workers).

* **A study belongs to one configuration.** Its default name carries a short
  hash of everything that changes the result (engine, objective, data, CV,
  thresholds, seed, metric, search space: :func:`qwkboost.config.config_hash`), and the configuration is stored
  with the study: resuming a named study with another configuration is refused,
  naming the keys that differ. A study an earlier qwkboost named (with 8 hex digits of the same hash, or with the
  ``cluster`` settings in it) goes on under that name.
* **Trials never repeat themselves.** Each trial's sampler is seeded from
  ``(seed, trial number)``: a resumed study goes on where it stopped instead
  of replaying trial 0, parallel workers (which get different trial numbers)
  draw different parameters, and the same study replays the same draws.
* **Parallel workers share one study.** The same command on several processes
  or hosts with ``tune.storage=postgresql://user@host/dbname`` draws different
  parameters in each; every trial records its worker (user attribute
  ``qwkboost.process``: ``host:pid:start``), and all stop once the study holds
  ``tune.n_trials`` finished trials (completed or pruned). The first to open an empty database
  creates Optuna's tables under a lock. A password in the URL is masked in
  messages and MLflow (Hydra still saves the command line: prefer ``~/.pgpass``).
* **Killed trials are retried.** Trials send heartbeats; a trial whose process
  is gone (found at once on the same host, else after ``grace_period``) is
  failed and retried with the same parameters, and its MLflow run is marked
  KILLED.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import optuna

from qwkboost import tracking
from qwkboost.config import check_tune, config_hash, hashed_part, side_by_side
from qwkboost.data.fingerprint import DataFingerprint, check_same, data_names
from qwkboost.data.fingerprint import fingerprint as data_fingerprint
from qwkboost.exceptions import ClusterLost, ConfigError, RunStopped, config_errors
from qwkboost.runs.experiment import check_against_data, load_dataset, run_experiment
from qwkboost.runs.tuning.on_dask import optimize_on_cluster
from qwkboost.runs.tuning.plots import log_study
from qwkboost.runs.tuning.pruners import DEFAULT_PRUNER, fold_reporter, make_pruner
from qwkboost.runs.tuning.samplers import make_sampler
from qwkboost.runs.tuning.space import best_overrides, check_space, check_space_against_engine, draw
from qwkboost.runs.tuning.storage import (
    clean_dead_trials,
    default_storage,
    open_storage,
    quiet_stopped_trials,
    shown_url,
)
from qwkboost.tracking.interrupt import process_tag
from qwkboost.tracking.vocabulary import metric_name

__all__ = ["config_fingerprint", "study_name", "earlier_study_names", "open_study", "tune", "TrialObjective",
           "CONFIG_ATTR", "DATA_ATTR", "check_study_data", "winner_figures", "NESTED"]

log = logging.getLogger(__name__)

#: Keys that do not change a trial's result, left out of the study's fingerprint. Where trials run (``cluster``:
#: one machine, or side by side on a Dask cluster's workers) is one of them, so a study begun on a laptop goes on
#: on a cluster and back.
_NOT_FINGERPRINTED = ("tracking", "run_name", "n_jobs", "hydra", "cluster")
#: ``tune`` settings that do not change a trial's result either.
_NOT_FINGERPRINTED_INSIDE = {"tune": ("n_trials", "storage", "study_name", "heartbeat_interval", "grace_period",
                                      "max_retry", "rerun_repeats")}
CONFIG_ATTR = "qwkboost.config"
#: The study's record of the rows its trials were scored on (:mod:`qwkboost.data.fingerprint`).
DATA_ATTR = "qwkboost.data"
#: The trials ``tune.n_trials`` counts: completed and pruned (a pruned trial spent its budget).
FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)


def config_fingerprint(cfg: Mapping[str, Any]) -> tuple[dict, str]:
    """The part of ``cfg`` that changes a trial's result (as JSON reads it back), and its 12-hex-digit hash
    (:func:`qwkboost.config.config_hash`)."""
    kept = hashed_part(cfg, _NOT_FINGERPRINTED, _NOT_FINGERPRINTED_INSIDE)
    return (json.loads(json.dumps(kept, sort_keys=True, default=str)),
            config_hash(cfg, _NOT_FINGERPRINTED, _NOT_FINGERPRINTED_INSIDE))


def _named(cfg: Mapping[str, Any], digest: str) -> str:
    return f"{cfg['engine']['name']}-{cfg['objective']['name']}-{cfg['data']['name']}-{digest}"


def study_name(cfg: Mapping[str, Any]) -> str:
    """``tune.study_name``, or ``{engine}-{objective}-{data}-{hash}`` of the configuration."""
    given = cfg["tune"].get("study_name")
    if given:
        return str(given)
    return _named(cfg, config_fingerprint(cfg)[1])


def earlier_study_names(cfg: Mapping[str, Any]) -> list[str]:
    """The names earlier qwkboosts gave the study :func:`study_name` names, newest first: with 8 hex digits of the
    same hash, then with the ``cluster`` settings in it; none for a study named by ``tune.study_name``."""
    if cfg["tune"].get("study_name"):
        return []
    with_cluster = tuple(k for k in _NOT_FINGERPRINTED if k != "cluster")
    return [_named(cfg, config_fingerprint(cfg)[1][:8]),
            _named(cfg, config_hash(cfg, with_cluster, _NOT_FINGERPRINTED_INSIDE)[:8])]


def _diff(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += _diff(a.get(k), b.get(k), f"{prefix}{k}.")
        return out
    return [] if a == b else [f"{prefix[:-1]}: {a!r} -> {b!r}"]


def _say_where_the_study_was(url: str) -> None:
    """Without ``tune.storage`` the study is kept in the working directory; an earlier qwkboost kept it in the
    project's folder: a line says so when that file is there and is not this one."""
    before = tracking.PROJECT_ROOT / "optuna.db"
    if before.exists() and before.resolve() != (Path.cwd() / "optuna.db").resolve():
        log.info("tune.storage is not set: the study is kept in %s; an earlier qwkboost kept studies in %s (give "
                 "tune.storage=sqlite:///%s to go on with one)", url, before, before)


def check_study_data(study, rows: DataFingerprint, where: str, files: tuple[str, str], fix: str) -> None:
    """Record the rows a new study's trials are scored on, or refuse a study whose trials were scored on other rows
    (:func:`~qwkboost.data.fingerprint.check_same`): ``tune.py``'s studies and a time budget's (``tuning.db``) both
    pass here.

    Parameters
    ----------
    study : optuna.Study
    rows : DataFingerprint
        The data this invocation read.
    where : str
        What names the study in the message (``study 'x' in sqlite:///optuna.db``).
    files : (str, str)
        How to name the training and test data (:func:`~qwkboost.data.fingerprint.data_names`).
    fix : str
        What the user can do, ending the message.

    Raises
    ------
    ConfigError
        If the study records other rows, or holds trials and records none (an older qwkboost's: it cannot tell).
    """
    if DATA_ATTR not in study.user_attrs and not study.get_trials(deepcopy=False):
        study.set_user_attr(DATA_ATTR, rows.to_dict())
        return
    try:        # a study's trials belong to the rows they were scored on (a replaced train.csv is other data)
        check_same(study.user_attrs.get(DATA_ATTR), rows, where, *files)
    except ValueError as exc:
        raise ConfigError(f"{exc}: its trials were scored on that data; {fix}") from None


def open_study(storage, name: str, sampler, pruner, rows: DataFingerprint, files: tuple[str, str], fix: str, *,
               direction: str = "maximize", what: str = "study", where: str | None = None,
               earlier: Sequence[str] = (), stamp_earlier: bool = False, say_earlier: bool = True,
               aside: tuple[str, str] | None = None, logger: logging.Logger | None = None,
               check: Callable[[Any, str], None] | None = None, client=None):
    """Open study ``name`` in ``storage`` (created on first use), its data checked, its dead trials cleaned up:
    how ``tune.py`` and a time budget open theirs.

    Parameters
    ----------
    storage : str or optuna.storages.BaseStorage
        An RDB URL (``sqlite:///path/tuning.db``, opened as it is) or an opened storage
        (:func:`~qwkboost.runs.tuning.storage.open_storage`).
    name : str
    sampler, pruner
        Optuna's, for this invocation.
    rows : DataFingerprint
        The data this invocation read (:func:`check_study_data`).
    files : (str, str)
        How to name the training and test data in a refusal.
    fix : str
        What the user can do, ending a refusal.
    direction : str
    what, where : str
        The study is named ``{what} '{name}' in {where}`` in messages (``where``: the storage's URL by default).
    earlier : sequence of str
        Names an earlier qwkboost gave the same study: when ``name`` is not in the storage, the first of them that
        is goes on instead (pass none where the caller cannot vouch for them).
    stamp_earlier : bool
        A study continued under an earlier name that records no data is taken to be of ``rows``, which are
        recorded (the caller vouches for the data, as a budget's ``auto.json`` does).
    say_earlier : bool
        A line says that the study goes on under an earlier name.
    aside : (str, str), optional
        ``(prefix, label)``: the other studies whose names start with ``prefix`` and that hold trials stay in the
        storage, set aside, and one line says so (``{label} holds N trial(s) of {prefix} in K study(ies) of other
        data``, ``label`` such as ``auto: tuning.db``).
    logger : logging.Logger, optional
        Where the lines go (this module's logger by default).
    check : callable, optional
        ``check(study, text)`` before the data's check, ``text`` naming the study as messages do (``tune.py``
        compares the configuration stored with the study).
    client : mlflow.MlflowClient, optional
        With one, the MLflow runs of trials a killed process left are marked KILLED
        (:func:`~qwkboost.runs.tuning.storage.clean_dead_trials`).

    Returns
    -------
    optuna.Study
        Its ``study_name`` is the name it goes on under.

    Raises
    ------
    ConfigError
        If the study's trials were scored on other rows (:func:`check_study_data`), or ``check`` refuses it.
    """
    logger = logger or log
    if isinstance(storage, str):
        storage = optuna.storages.RDBStorage(storage)
    where = where or shown_url(str(getattr(storage, "url", storage)).split("?")[0])
    summaries = [] if aside is None else optuna.get_all_study_summaries(storage, include_best_trial=False)
    names = set(optuna.get_all_study_names(storage)) if aside is None else {s.study_name for s in summaries}
    was = name
    if name not in names:
        name = next((n for n in earlier if n in names), name)
    if name != was and say_earlier:
        logger.info("study %r: goes on under the name an earlier qwkboost gave it", name)
    if aside is not None:
        prefix, label = aside
        others = [s for s in summaries if s.study_name.startswith(prefix) and s.study_name != name and s.n_trials]
        if others:
            other = [s for s in others if s.user_attrs.get(DATA_ATTR) not in (None, rows.to_dict())]
            logger.info("%s holds %d trial(s) of %s in %d study(ies) of other %s; they stay there, set aside, and "
                        "are not continued", label, sum(s.n_trials for s in others), prefix.removesuffix("-"),
                        len(others), "data" if len(other) == len(others) else "settings or data")
    study = optuna.create_study(study_name=name, storage=storage, direction=direction, sampler=sampler,
                                pruner=pruner, load_if_exists=True)
    if stamp_earlier and name in earlier and DATA_ATTR not in study.user_attrs:
        study.set_user_attr(DATA_ATTR, rows.to_dict())
    text = f"{what} {name!r} in {where}"
    if check is not None:
        check(study, text)
    check_study_data(study, rows, text, files, fix)
    clean_dead_trials(study, client)
    return study


def _same_config(fingerprint: dict) -> Callable[[Any, str], None]:
    """:func:`open_study`'s ``check`` for ``tune.py``: the configuration ``fingerprint`` stored with a new study, or
    the study refused when it was created with another (naming the keys that differ)."""
    def check(study, where: str) -> None:
        stored = study.user_attrs.get(CONFIG_ATTR)
        if stored is None:
            study.set_user_attr(CONFIG_ATTR, fingerprint)
        elif config_fingerprint(stored)[0] != fingerprint:      # what an older qwkboost stored beyond it is ignored
            diff = _diff(config_fingerprint(stored)[0], fingerprint)
            raise ConfigError(f"{where} was created with another configuration ({'; '.join(diff[:8])}); choose "
                              "another tune.study_name, or leave it unset for a name derived from the configuration")
    return check


def _report_best(study, metric: str, name: str, honest: Mapping[str, float] | None = None) -> None:
    done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not done:
        return
    best = study.best_trial
    pruned = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.PRUNED,)))
    extra = "".join(f"\n  {k} = {v:.4f}" for k, v in (honest or {}).items())
    log.info("study %r: %d completed trials (%d pruned); best %s=%.4f (trial %d)%s\n  best parameters as "
             "overrides: %s", name, len(done), pruned, metric, best.value, best.number, extra,
             best_overrides(best.params))


#: The figure with cut points fitted without each fold, beside the study's in-sample metric.
NESTED = {"qwk_thresholds_oof": "qwk_thresholds_oof_nested"}


def winner_figures(study, metric: str, cfg: Mapping[str, Any], ds, experiment_id, parent_id) -> dict[str, float]:
    """The best trial's honest figures: its nested OOF figure (cut points fitted without each fold) beside the
    in-sample one, and with ``tune.rerun_repeats`` R > 0 the best configuration run again on R other fold splits
    (seeds the study never saw), which shows how much being the best of many flattered it."""
    best = study.best_trial
    out: dict[str, float] = {}
    nested = best.user_attrs.get("nested")
    if metric in NESTED and nested is not None:
        out[f"best_{NESTED[metric]}"] = float(nested)
        out["best_cut_optimism"] = float(best.value) - float(nested)
    repeats = int(cfg["tune"].get("rerun_repeats") or 0)
    if repeats:
        rerun = copy.deepcopy(dict(cfg))
        rerun["engine"] = {**rerun["engine"], "params": {**rerun["engine"]["params"], **best.params}}
        rerun.pop("tune", None)
        rerun["cv"] = {**rerun["cv"], "repeats": repeats}
        rerun["seed"] = int(cfg.get("seed", 0)) + 1000          # other folds than every trial's
        rerun["tracking"] = {**rerun.get("tracking", {}), "log_pyfunc": False, "explain": False}
        row = run_experiment(rerun, experiment_id, parent_run_id=parent_id, dataset=ds,
                             run_name=f"best (trial {best.number}) on {repeats} other splits", kind="rerun")
        out[f"rerun_{metric}"] = float(row[metric])
        out["selection_optimism"] = float(best.value) - float(row[metric])
        if metric in NESTED and NESTED[metric] in row:
            out[f"rerun_{NESTED[metric]}"] = float(row[NESTED[metric]])
    return out


class TrialObjective:
    """One trial of a study: its engine parameters drawn, its run cross-validated as a child MLflow run of the
    study's parent, its folds reported to the pruner; the study's metric.

    Picklable, so that a Dask worker runs trials of the same study (:mod:`qwkboost.runs.tuning.on_dask`).

    Parameters
    ----------
    cfg : mapping
        The study's resolved config (``tune`` and ``engine.search_space`` in it).
    ds : Dataset
    experiment_id : str or None
    parent_id : str or None
        The study's parent MLflow run (set once it has started).
    pruner : str
    on_round : callable, optional
        Called after every boosting round (``on_round(fold, round, evals)``): a stop from the client.
    n_jobs : int, optional
        Engine threads, when ``cfg`` leaves them unset (a worker's threads).
    """

    def __init__(self, cfg: Mapping[str, Any], ds, experiment_id: str | None, parent_id: str | None, pruner: str,
                 on_round=None, n_jobs: int | None = None):
        self.cfg, self.ds, self.experiment_id, self.parent_id = cfg, ds, experiment_id, parent_id
        self.pruner, self.on_round, self.n_jobs = pruner, on_round, n_jobs

    def __call__(self, trial) -> float:
        cfg, ds = self.cfg, self.ds
        metric = cfg["tune"]["metric"]
        _, trial_cfg = draw(trial, cfg)
        trial.set_user_attr(tracking.PROCESS_TAG, process_tag())
        trial_cfg.pop("tune", None)
        if trial_cfg.get("n_jobs") is None and self.n_jobs is not None:
            trial_cfg["n_jobs"] = self.n_jobs
        # trials keep their pipeline artifact; a servable pyfunc model or explanations per trial would cost seconds
        trial_cfg["tracking"] = {**trial_cfg.get("tracking", {}), "log_pyfunc": False, "explain": False}
        reporter = fold_reporter(trial, self.pruner, cfg["thresholds"]["method"], ds, metric)
        try:
            row = run_experiment(trial_cfg, self.experiment_id, parent_run_id=self.parent_id,
                                 run_name=f"{cfg['engine']['name']}/{cfg['objective']['name']} trial {trial.number}",
                                 dataset=ds,
                                 on_start=lambda run_id: trial.set_user_attr("mlflow_run_id", run_id),
                                 on_fold=reporter, on_round=self.on_round, kind="trial")
        except RunStopped as stop:
            if stop.tags.get("qwkboost.trial_state") != "PRUNED":
                raise           # stopped from outside (the client): the trial fails, and is retried on resume
            log.info("trial %d: %s", trial.number, stop)
            raise optuna.TrialPruned(str(stop)) from None
        trial.set_user_attr("nested", row.get(NESTED.get(metric, metric)))
        return row[metric]


def tune(cfg: Mapping[str, Any]) -> Any:
    """Run (or resume) the study described by ``cfg.tune``; return the Optuna study.

    ``tune.n_trials`` is the total: the study stops when it holds that many
    finished trials (completed or pruned), counting those of earlier invocations and of parallel
    workers (trials still running then finish, so a few more may complete).
    Running the same command again resumes an interrupted study, or reports the
    best trial of a finished one; raise ``tune.n_trials`` for more trials.

    Raises
    ------
    ValueError
        Before any trial: a malformed search space, an unusable storage URL,
        or a named study that was created with another configuration.
    """
    import mlflow  # slow to import: mlflow

    cfg, spec = side_by_side(cfg)          # trials side by side on a cluster's workers, each on one machine
    t = cfg["tune"]
    space = cfg["engine"].get("search_space") or {}
    with config_errors():
        if not space:
            raise ValueError(f"engine.search_space is empty for engine {cfg['engine']['name']!r}; nothing to tune")
        check_space(space)
        n_trials = t["n_trials"]
        if isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials < 1:
            raise ValueError(f"tune.n_trials must be a positive integer; got {n_trials!r}")
        check_tune(cfg)
        sampler = make_sampler(t.get("sampler", "tpe"), int(cfg.get("seed", 0)))
        pruner_name = t.get("pruner", DEFAULT_PRUNER)
        pruner = make_pruner(pruner_name)
        url = t.get("storage") or default_storage()
        name = study_name(cfg)
        fingerprint, _ = config_fingerprint(cfg)
        # the data, and what run.py checks against it (an objective the engine cannot run, ...), before the study
        # is opened: a refusal is one line, not a failed trial
        ds = load_dataset(cfg["data"], int(cfg.get("seed", 0)), cfg["cv"].get("group"))
        check_against_data(cfg, ds)
        check_space_against_engine(cfg, ds.X_train.shape[1])
        storage = open_storage(url, t)
    experiment_id = tracking.setup(cfg["tracking"]["uri"], cfg["tracking"]["experiment_name"])
    if not t.get("storage"):
        _say_where_the_study_was(url)
    client = mlflow.MlflowClient()
    study = open_study(storage, name, sampler, pruner, data_fingerprint(ds), data_names(cfg["data"]),
                       "choose another tune.study_name (or another tune.storage)", direction=t["direction"],
                       where=shown_url(url.split("?")[0]), earlier=earlier_study_names(cfg),
                       check=_same_config(fingerprint), client=client)
    name = study.study_name
    metric = t["metric"]
    done = len(study.get_trials(deepcopy=False, states=FINISHED))
    if done >= n_trials:
        log.info("study %r already has %d finished trials (tune.n_trials=%d is the total); raise tune.n_trials "
                 "for more", name, done, n_trials)
        _report_best(study, metric, name)
        return study

    objective = TrialObjective(cfg, ds, experiment_id, None, pruner_name)

    with tracking.run(experiment_id, f"tune {cfg['engine']['name']}/{cfg['objective']['name']}",
                      tags={"kind": "tune", "engine": cfg["engine"]["name"], "objective": cfg["objective"]["name"],
                            "optuna.study": name, "optuna.storage": shown_url(url.split("?")[0])}) as parent:
        objective.parent_id = parent_id = parent.info.run_id
        started = time.perf_counter()
        tracking.log_params({"objective": dict(cfg["objective"]),
                             "engine": {"name": cfg["engine"]["name"], "search_space": dict(space)},
                             "data": dict(cfg["data"]), "tune": {**t, "storage": shown_url(url)}})
        # parallel workers stop together once the study holds n_trials finished trials, not n_trials each
        until_total = optuna.study.MaxTrialsCallback(n_trials, states=FINISHED)
        if spec is None:
            with quiet_stopped_trials():
                study.optimize(objective, n_trials=n_trials - done, gc_after_trial=True, callbacks=[until_total])
        else:       # each worker runs trials of the same study, each trial whole (qwkboost.runs.tuning.on_dask)
            try:
                optimize_on_cluster(spec, objective, url, name, t, n_trials, int(cfg.get("seed", 0)), FINISHED)
            except ClusterLost as exc:      # the study keeps what finished; the same command goes on from there
                log.warning("study %r: %s; it ends with the trials that finished (the same command again goes on)",
                            name, exc)
                tracking.set_tags({"qwkboost.cluster_lost": str(exc)})
            clean_dead_trials(study, client)        # a lost worker's trial, and its MLflow run, are not left RUNNING
        states = [tr.state for tr in study.get_trials(deepcopy=False)]
        tracking.log_metrics({"n_complete": float(states.count(optuna.trial.TrialState.COMPLETE)),
                              "n_pruned": float(states.count(optuna.trial.TrialState.PRUNED))})
        if not study.best_trials:
            raise ConfigError(f"study {name!r} has no completed trial (every one was pruned or failed)")
        best = study.best_trial
        honest = winner_figures(study, metric, cfg, ds, experiment_id, parent_id)
        tracking.log_metrics({**_parent_metrics(metric, best, honest), "seconds": time.perf_counter() - started})
        tracking.log_dict({"best_params": best.params, "best_value": best.value, "best_trial": best.number,
                           "overrides": best_overrides(best.params), **honest}, "best.json")
        log_study(study, metric)
        tracking.set_tags(tracking.version_tags())
    _report_best(study, metric, name, honest)
    log.info("MLflow run: %s", tracking.run_link(experiment_id, parent_id))
    return study


def _parent_metrics(metric: str, best, honest: dict) -> dict[str, float]:
    """The study's parent run's metrics under MLflow's one vocabulary (:mod:`qwkboost.tracking.vocabulary`): its
    best trial's figure as the trial names it (``oof_qwk``), the honest figures beside it (``nested_oof_qwk``,
    ``cut_optimism``, ``rerun_oof_qwk``, ``selection_optimism``) and the best trial's ``test_qwk`` where its run
    logged one, so that one sorted column ranks the parent beside its trials."""
    out = {metric_name(metric): float(best.value)}
    for k, v in honest.items():
        if k == "best_cut_optimism":
            out["cut_optimism"] = v
        elif k.startswith("best_"):
            out[metric_name(k[len("best_"):])] = v
        elif k.startswith("rerun_"):
            out["rerun_" + metric_name(k[len("rerun_"):])] = v
        else:
            out[k] = v
    run_id = best.user_attrs.get("mlflow_run_id")
    if run_id:
        import mlflow  # slow to import: mlflow

        test = mlflow.MlflowClient().get_run(run_id).data.metrics.get("test_qwk")
        if test is not None:
            out["test_qwk"] = float(test)
    return out
