"""Optuna search over engine parameters, stored in an RDB so a killed study resumes.

Each invocation is one parent MLflow run; each trial a child run. The study
lives in ``sqlite:///<project>/optuna.db`` by default (any SQLAlchemy URL for
parallel workers).

* **A study belongs to one configuration.** Its default name carries a short
  hash of everything that changes the result (engine, objective, data, CV,
  thresholds, seed, metric, search space), and the configuration is stored
  with the study: resuming a named study with another configuration is refused,
  naming the keys that differ.
* **Trials never repeat themselves.** Each trial's sampler is seeded from
  ``(seed, trial number)``: a resumed study goes on where it stopped instead
  of replaying trial 0, parallel workers (which get different trial numbers)
  draw different parameters, and the same study replays the same draws.
* **Parallel workers share one study.** The same command on several processes
  or hosts with ``tune.storage=postgresql://user@host/dbname`` draws different
  parameters in each; every trial records its worker (user attribute
  ``qwkboost.process``: ``host:pid:start``), and all stop once the study holds
  ``tune.n_trials`` completed trials. The first to open an empty database
  creates Optuna's tables under a lock. A password in the URL is masked in
  messages and MLflow (Hydra still saves the command line: prefer ``~/.pgpass``).
* **Killed trials are retried.** Trials send heartbeats; a trial whose process
  is gone (found at once on the same host, else after ``grace_period``) is
  failed and retried with the same parameters, and its MLflow run is marked
  KILLED.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import numbers
import re
import warnings
from typing import Any, Iterator, Mapping

import numpy as np
import optuna

from qwkboost import tracking
from qwkboost.config import check_tune
from qwkboost.exceptions import ConfigError, config_errors
from qwkboost.runs.experiment import load_dataset, run_experiment
from qwkboost.tracking.interrupt import is_alive, process_tag

__all__ = ["default_storage", "suggest", "check_space", "check_space_against_engine", "config_fingerprint",
           "study_name", "best_overrides", "shown_url", "TrialSeededSampler", "tune"]

log = logging.getLogger(__name__)

SPACE_TYPES = ("float", "int", "categorical")
#: Keys that do not change a trial's result, left out of the study's fingerprint.
_NOT_FINGERPRINTED = {"tune": ("n_trials", "storage", "study_name", "heartbeat_interval", "grace_period",
                               "max_retry"),
                      None: ("tracking", "run_name", "n_jobs", "hydra")}
CONFIG_ATTR = "qwkboost.config"
#: PostgreSQL advisory-lock key under which the first worker creates Optuna's tables.
_PG_LOCK_KEY = int.from_bytes(hashlib.sha256(b"qwkboost.tuning.schema").digest()[:8], "big", signed=True)


def default_storage() -> str:
    return f"sqlite:///{tracking.PROJECT_ROOT / 'optuna.db'}"


def check_space(space: Mapping[str, Mapping[str, Any]]) -> None:
    """Check ``engine.search_space`` before a study starts.

    Raises
    ------
    ValueError
        For an unknown type, missing or reversed bounds, a log range that
        reaches 0, or empty choices, naming the parameter.
    """
    for name, spec in space.items():
        key = f"engine.search_space.{name}"
        if not isinstance(spec, Mapping):
            raise ValueError(f"{key} must be a mapping like {{type: float, low: 0.01, high: 0.3}}; got {spec!r}")
        kind = spec.get("type")
        if kind not in SPACE_TYPES:
            raise ValueError(f"{key}.type={kind!r}; choose one of {SPACE_TYPES}")
        if kind == "categorical":
            choices = spec.get("choices")
            if not isinstance(choices, (list, tuple)) or not choices:
                raise ValueError(f"{key} needs a non-empty list of choices")
            odd = [c for c in choices if c is not None and not isinstance(c, (str, int, float, bool))]
            if odd:
                raise ValueError(f"{key}.choices must be numbers, strings, booleans or null; got {odd}")
            continue
        if "log" in spec and not isinstance(spec["log"], bool):
            raise ValueError(f"{key}.log must be true or false; got {spec['log']!r}")
        if "low" not in spec or "high" not in spec:
            raise ValueError(f"{key} needs low and high")
        low, high = spec["low"], spec["high"]
        for b, v in (("low", low), ("high", high)):
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not np.isfinite(v):
                raise ValueError(f"{key}.{b} must be a finite number; got {v!r}")
            if kind == "int" and int(v) != v:
                raise ValueError(f"{key}.{b} must be a whole number for type int; got {v!r}")
        if low > high:
            raise ValueError(f"{key} has low={low!r} > high={high!r}; swap them")
        if spec.get("log") and low <= 0:
            raise ValueError(f"{key} has log: true, so low must be > 0; got {low!r}")


def suggest(trial, space: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Draw one value per entry of ``engine.search_space``.

    Entries look like ``{type: float, low: 0.01, high: 0.3, log: true}``,
    ``{type: int, low: 3, high: 8}`` or ``{type: categorical, choices: [...]}``.

    Raises
    ------
    ValueError
        For a malformed entry (see :func:`check_space`), naming the parameter.
    """
    check_space(space)
    out = {}
    for name, spec in space.items():
        kind = spec["type"]
        if kind == "categorical":
            out[name] = trial.suggest_categorical(name, list(spec["choices"]))
        elif kind == "int":
            out[name] = trial.suggest_int(name, int(spec["low"]), int(spec["high"]), log=bool(spec.get("log", False)))
        else:
            out[name] = trial.suggest_float(name, float(spec["low"]), float(spec["high"]),
                                            log=bool(spec.get("log", False)))
    return out


def config_fingerprint(cfg: Mapping[str, Any]) -> tuple[dict, str]:
    """The part of ``cfg`` that changes a trial's result, and its 8-hex-digit hash."""
    kept = {k: v for k, v in cfg.items() if k not in _NOT_FINGERPRINTED[None]}
    if isinstance(kept.get("tune"), Mapping):
        kept["tune"] = {k: v for k, v in kept["tune"].items() if k not in _NOT_FINGERPRINTED["tune"]}
    text = json.dumps(kept, sort_keys=True, default=str)
    return json.loads(text), hashlib.sha256(text.encode()).hexdigest()[:8]


def study_name(cfg: Mapping[str, Any]) -> str:
    """``tune.study_name``, or ``{engine}-{objective}-{data}-{hash}`` of the configuration."""
    given = cfg["tune"].get("study_name")
    if given:
        return str(given)
    _, digest = config_fingerprint(cfg)
    return f"{cfg['engine']['name']}-{cfg['objective']['name']}-{cfg['data']['name']}-{digest}"


def _diff(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += _diff(a.get(k), b.get(k), f"{prefix}{k}.")
        return out
    return [] if a == b else [f"{prefix[:-1]}: {a!r} -> {b!r}"]


def best_overrides(params: Mapping[str, Any]) -> str:
    """Best parameters as command-line overrides that ``experiments/run.py`` takes as is.

    ``++`` sets a parameter whether or not the engine's config lists it;
    values are written as Hydra reads them back (``null``, ``true``, quoted
    strings where needed).
    """
    import shlex

    def fmt(k, v):
        if v is None:
            text = "null"
        elif isinstance(v, bool):
            text = str(v).lower()
        elif isinstance(v, float):
            text = repr(v)
        elif isinstance(v, str) and not v.replace("_", "").replace(".", "").replace("-", "").isalnum():
            text = json.dumps(v)          # Hydra reads a double-quoted string as is
        else:
            text = str(v)
        return shlex.quote(f"++engine.params.{k}={text}")
    return " ".join(fmt(k, v) for k, v in params.items())


def check_space_against_engine(cfg: Mapping[str, Any], n_features: int) -> None:
    """Every search-space parameter, at its bounds and each choice, is one the engine accepts.

    Raises
    ------
    ValueError
        Naming ``engine.search_space.<name>`` and the engine's reason, before trial 0.
    """
    from qwkboost.engines import check_engine_params

    base = dict(cfg["engine"].get("params") or {})
    for name, spec in (cfg["engine"].get("search_space") or {}).items():
        values = spec["choices"] if spec["type"] == "categorical" else [spec["low"], spec["high"]]
        for v in values:
            try:
                check_engine_params(cfg["engine"]["name"], {**base, name: v}, n_features)
            except ValueError as exc:
                raise ValueError(f"engine.search_space.{name}={v!r}: {exc}") from None


class TrialSeededSampler(optuna.samplers.BaseSampler):
    """Optuna's TPE sampler, reseeded for every trial from ``(seed, trial number)``.

    One TPE sampler with a fixed seed replays the same random draws in every
    process that opens the study: a resumed study repeated trial 0, and two
    parallel workers drew identical pairs. Trial numbers are unique within a
    study, so seeding by them gives every trial its own draws, reproducibly.
    """

    def __init__(self, seed: int, **tpe_kwargs):
        self.seed = int(seed)
        self._kwargs = tpe_kwargs
        self._by_trial: dict[int, optuna.samplers.TPESampler] = {}

    def _for(self, trial) -> optuna.samplers.TPESampler:
        s = self._by_trial.get(trial.number)
        if s is None:
            trial_seed = int(np.random.SeedSequence([self.seed, trial.number]).generate_state(1)[0])
            s = self._by_trial[trial.number] = optuna.samplers.TPESampler(seed=trial_seed, **self._kwargs)
        return s

    def infer_relative_search_space(self, study, trial):
        return self._for(trial).infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space):
        return self._for(trial).sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self._for(trial).sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study, trial):
        self._for(trial).before_trial(study, trial)

    def after_trial(self, study, trial, state, values):
        s = self._by_trial.pop(trial.number, None)
        if s is not None:
            s.after_trial(study, trial, state, values)

    def reseed_rng(self):
        """Nothing to do: every trial's draws are already fixed by its number."""


def shown_url(url: str) -> str:
    """``url`` with its password masked, fit for messages, logs and MLflow."""
    return re.sub(r"(://[^/:@?]*:)[^/@?]*@", r"\1***@", url)


def _with_installed_driver(url: str) -> str:
    """A ``postgresql://`` URL, which names no driver, with the PostgreSQL driver that is installed.

    SQLAlchemy 2.0 reads it as psycopg2 and 2.1 as psycopg (version 3); the
    ``cluster`` extra installs psycopg2. A URL naming its driver is left as is.
    """
    import importlib.util

    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.drivername != "postgresql":
        return url
    for driver in ("psycopg2", "psycopg"):
        if importlib.util.find_spec(driver) is not None:
            return parsed.set(drivername=f"postgresql+{driver}").render_as_string(hide_password=False)
    return url


@contextlib.contextmanager
def _schema_lock(url: str, parsed) -> Iterator[None]:
    """Hold a lock across processes while Optuna creates its tables on first use.

    Workers started together on an empty database would otherwise race in
    Optuna's ``CREATE TABLE`` and version stamp; on PostgreSQL the loser fails
    with a duplicate key in ``pg_type``. SQLite takes a file lock beside the
    database, PostgreSQL an advisory lock; other servers take none.
    """
    if parsed.drivername.startswith("sqlite"):
        with tracking.store_lock(tracking.check_sqlite_path(url, "tune.storage")):
            yield
        return
    if parsed.get_backend_name() != "postgresql":
        yield
        return
    import sqlalchemy
    from sqlalchemy.pool import NullPool

    engine = sqlalchemy.create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            # a session lock: it outlives the transaction and ends with the connection at the latest
            conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:key)"), {"key": _PG_LOCK_KEY})
            try:
                yield
            finally:
                conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:key)"), {"key": _PG_LOCK_KEY})
    finally:
        engine.dispose()


def _storage(url: str, t: Mapping[str, Any]):
    """Open (and on first use create, under a lock across processes) the study storage.

    Parameters
    ----------
    url : str
        ``tune.storage``: an SQLAlchemy URL. ``postgresql://`` without a driver
        uses the installed one (psycopg2, else psycopg).
    t : mapping
        The ``tune`` settings: ``heartbeat_interval``, ``grace_period``, ``max_retry``.

    Raises
    ------
    ValueError
        Naming ``tune.storage`` (its password masked): a URL SQLAlchemy cannot
        read, a driver that is not installed, or a database that cannot be
        opened, e.g. a server that refuses the connection.
    """
    from optuna.storages import RDBStorage
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError

    shown = shown_url(url)
    try:
        url = _with_installed_driver(url)
        parsed = make_url(url)
        parsed.get_dialect()
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        raise ValueError(f"tune.storage={shown!r} is not a database URL qwkboost can use ({exc}); use e.g. "
                         "sqlite:////absolute/path/optuna.db or postgresql://user@host:5432/dbname") from None
    sqlite = parsed.drivername.startswith("sqlite")
    kwargs = {"connect_args": {"timeout": 60}} if sqlite else {}
    if parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
        kwargs = {"connect_args": {"connect_timeout": 10}}     # libpq would wait minutes for a silent host
    if sqlite:
        tracking.check_sqlite_path(url, "tune.storage")
    else:
        try:
            tracking.check_database_driver(url, "tune.storage")
        except ValueError as exc:
            raise ValueError(str(exc).replace(url, shown_url(url))) from None
    try:
        with _schema_lock(url, parsed), _quiet_experimental():
            retry = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None) \
                or optuna.storages.RetryFailedTrialCallback
            return RDBStorage(url, heartbeat_interval=int(t.get("heartbeat_interval", 10)),
                              grace_period=int(t.get("grace_period", 30)),
                              heartbeat_stale_trial_callback=retry(max_retry=int(t.get("max_retry", 2))),
                              engine_kwargs=kwargs)
    except ImportError as exc:
        raise ValueError(f"tune.storage={shown!r} needs a database driver that is not installed ({exc})") from None
    except Exception as exc:
        if type(exc).__module__.startswith(("sqlalchemy", "optuna", "sqlite3")):
            # a server that cannot be reached or refuses the login (not, say, an incompatible schema)
            hint = "" if sqlite or not isinstance(exc, OperationalError) else (
                "; check that the server runs and accepts connections there, and the host, port, user, password "
                "and database name")
            raise ValueError(f"tune.storage={shown!r} cannot be opened: {str(exc).splitlines()[0]}{hint}") from None
        raise


@contextlib.contextmanager
def _quiet_experimental():
    """Optuna marks heartbeats experimental; qwkboost relies on them knowingly."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        yield


def _fail_dead_trials(study) -> None:
    """Fail and retry the RUNNING trials whose process on this host is gone (after ``kill -9``).

    Optuna's heartbeat catches them only after ``grace_period``; a quick
    resume would otherwise leave them RUNNING for good.
    """
    storage = study._storage
    retry = storage.get_heartbeat_stale_trial_callback()
    for tr in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        tag = tr.user_attrs.get(tracking.PROCESS_TAG)
        if tag and is_alive(tag) is False:
            try:
                changed = storage.set_trial_state_values(tr._trial_id, state=optuna.trial.TrialState.FAIL)
            except optuna.exceptions.UpdateFinishedTrialError:
                continue
            if changed and retry is not None:
                retry(study, copy.deepcopy(storage.get_trial(tr._trial_id)))


def _kill_orphan_runs(study, client) -> None:
    """Mark the MLflow runs of trials a killed process left behind as KILLED."""
    for tr in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.FAIL,)):
        run_id = tr.user_attrs.get("mlflow_run_id")
        if run_id and client.get_run(run_id).info.status == "RUNNING":
            client.set_terminated(run_id, "KILLED")


def _report_best(study, metric: str, name: str) -> None:
    done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not done:
        return
    best = study.best_trial
    log.info("study %r: %d completed trials; best %s=%.4f (trial %d)\n  best parameters as overrides: %s",
             name, len(done), metric, best.value, best.number, best_overrides(best.params))


def tune(cfg: Mapping[str, Any]) -> Any:
    """Run (or resume) the study described by ``cfg.tune``; return the Optuna study.

    ``tune.n_trials`` is the total: the study stops when it holds that many
    completed trials, counting those of earlier invocations and of parallel
    workers (trials still running then finish, so a few more may complete).
    Running the same command again resumes an interrupted study, or reports the
    best trial of a finished one; raise ``tune.n_trials`` for more trials.

    Raises
    ------
    ValueError
        Before any trial: a malformed search space, an unusable storage URL,
        or a named study that was created with another configuration.
    """
    import mlflow

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
        url = t.get("storage") or default_storage()
        name = study_name(cfg)
        fingerprint, _ = config_fingerprint(cfg)
        storage = _storage(url, t)
    experiment_id = tracking.setup(cfg["tracking"]["uri"], cfg["tracking"]["experiment_name"])
    study = optuna.create_study(study_name=name, storage=storage, direction=t["direction"],
                                sampler=TrialSeededSampler(int(cfg.get("seed", 0))), load_if_exists=True)
    stored = study.user_attrs.get(CONFIG_ATTR)
    if stored is None:
        study.set_user_attr(CONFIG_ATTR, fingerprint)
    elif stored != fingerprint:
        diff = _diff(stored, fingerprint)
        raise ConfigError(f"study {name!r} in {shown_url(url.split('?')[0])} was created with another "
                          f"configuration ({'; '.join(diff[:8])}); choose another tune.study_name, or leave it "
                          "unset for a name derived from the configuration")
    client = mlflow.MlflowClient()
    _fail_dead_trials(study)
    with _quiet_experimental():
        optuna.storages.fail_stale_trials(study)
    _kill_orphan_runs(study, client)
    metric = t["metric"]
    done = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))
    if done >= n_trials:
        log.info("study %r already has %d completed trials (tune.n_trials=%d is the total); raise tune.n_trials "
                 "for more", name, done, n_trials)
        _report_best(study, metric, name)
        return study
    with config_errors():
        ds = load_dataset(cfg["data"], int(cfg.get("seed", 0)), cfg["cv"].get("group"))
        check_space_against_engine(cfg, ds.X_train.shape[1])

    def objective(trial) -> float:
        params = suggest(trial, space)
        trial.set_user_attr(tracking.PROCESS_TAG, process_tag())
        trial_cfg = copy.deepcopy(dict(cfg))
        trial_cfg["engine"] = {**trial_cfg["engine"], "params": {**trial_cfg["engine"]["params"], **params}}
        trial_cfg.pop("tune", None)
        # trials keep their pipeline artifact; a servable pyfunc model or explanations per trial would cost seconds
        trial_cfg["tracking"] = {**trial_cfg.get("tracking", {}), "log_pyfunc": False, "explain": False}
        row = run_experiment(trial_cfg, experiment_id, parent_run_id=parent_id, run_name=f"trial {trial.number}",
                             dataset=ds, on_start=lambda run_id: trial.set_user_attr("mlflow_run_id", run_id))
        return row[metric]

    with tracking.run(experiment_id, f"tune {name}",
                      tags={"optuna.study": name, "optuna.storage": shown_url(url.split("?")[0])}) as parent:
        parent_id = parent.info.run_id
        tracking.log_params({"tune": {**t, "storage": shown_url(url)},
                             "engine": {"name": cfg["engine"]["name"], "search_space": dict(space)},
                             "objective": dict(cfg["objective"]), "data": dict(cfg["data"])})
        # parallel workers stop together once the study holds n_trials completed trials, not n_trials each
        until_total = optuna.study.MaxTrialsCallback(n_trials, states=(optuna.trial.TrialState.COMPLETE,))
        study.optimize(objective, n_trials=n_trials - done, gc_after_trial=True, callbacks=[until_total])
        best = study.best_trial
        tracking.log_metrics({f"best_{metric}": best.value, "n_complete": float(len(
            study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))))})
        tracking.log_dict({"best_params": best.params, "best_value": best.value, "best_trial": best.number,
                           "overrides": best_overrides(best.params)}, "best.json")
        tracking.set_tags({f"version.{k}": v for k, v in tracking.library_versions().items()})
    _report_best(study, metric, name)
    return study
