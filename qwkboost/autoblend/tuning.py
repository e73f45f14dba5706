"""The tuning step of a time budget: the most promising candidate's engine parameters searched with Optuna while
time remains, every trial a candidate of the blend.

The target is the finished default candidate with the best nested out-of-fold QWK; when its trials no longer fit
in the time left, the next best whose trials do (a cheaper engine's) is tuned, and so on. Its engine's
``search_space`` (``conf/engine/<engine>.yaml``) is searched by the seeded multivariate TPE sampler of
``experiments/tune.py``, each trial a cross-validated run scored by its out-of-fold QWK after cut points and
stopped after a fold by the pruner (``auto.pruner``) or by the budget's guard. Optuna's own ``timeout`` is
checked only between trials, so the guard stops a running trial and a callback stops the study once the next
trial would not fit. The study is kept in ``<output dir>/tuning.db`` (SQLite): a resumed budget goes on with new
trials, on one machine or a cluster alike. Each study is named after its candidate's configuration and its data
(:func:`study_name`) and records the data's fingerprint, as ``tune.py``'s do: a study of other rows is never
continued (a line says it is set aside).
"""

from __future__ import annotations

import copy
import hashlib
import logging
import statistics
from dataclasses import replace

from qwkboost.autoblend.candidates import Candidate
from qwkboost.autoblend.state import Status, config_hash, legacy_config_hash
from qwkboost.data.dataset import class_range
from qwkboost.data.fingerprint import DataFingerprint
from qwkboost.exceptions import ClusterLost
from qwkboost.runs.tuning.space import suggest

__all__ = ["tune_best", "study_name"]

log = logging.getLogger("qwkboost.autoblend")


def tune_best(run, state) -> None:
    """Tune the finished default candidates of ``run`` (an :class:`~qwkboost.autoblend.driver.AutoRun`), best nested
    out-of-fold QWK first, each until its next trial would not fit in the time left: when the best one's trials no
    longer fit, a cheaper one's may (so tuning goes on while a trial fits)."""
    best: dict[tuple[str, str], tuple[float, float]] = {}      # pair -> (nested QWK, seconds at its own rate)
    for r in state.candidates.values():
        pair = (r.get("engine"), r.get("objective"))
        if r.get("status") == Status.FINISHED and r.get("trial") is None and pair in run.configs:
            q = r.get("qwk_thresholds_oof_nested", -1.0)
            if pair not in best or q > best[pair][0]:
                best[pair] = (q, r["seconds"] * r.get("speedup", 1.0))
    for rank, (pair, (_, seconds)) in enumerate(sorted(best.items(), key=lambda kv: -kv[1][0])):
        run.set_reserve(state, coming_seconds=seconds, coming_pair=pair)
        if seconds > run.budget.left_for_work:
            continue
        _tune(run, state, pair, seconds, "tuning the best candidate" if rank == 0 else
              f"tuning the best candidate whose trial fits in the time left (#{rank + 1} by nested QWK)")


def _draw(trial, pair: tuple[str, str], cfg: dict) -> tuple[Candidate, dict]:
    """The candidate of ``trial`` (its parameters drawn from ``cfg``'s search space) and its config."""
    drawn = suggest(trial, cfg["engine"]["search_space"])
    trial_cfg = copy.deepcopy(cfg)
    trial_cfg["engine"]["params"] = {**trial_cfg["engine"].get("params", {}), **drawn}
    return Candidate(pair[0], pair[1], tuple(sorted(drawn.items())), trial.number), trial_cfg


def _tune(run, state, pair: tuple[str, str], first_seconds: float, why: str) -> None:
    """Tune ``pair`` (its default took ``first_seconds`` at its configured learning rate) until its next trial
    would not fit in the time left."""
    import optuna  # slow to import: optuna

    from qwkboost.runs.tuning.pruners import FoldReporter, make_pruner  # slow to import: optuna
    from qwkboost.runs.tuning.samplers import make_sampler  # slow to import: optuna
    from qwkboost.runs.tuning.storage import quiet_stopped_trials  # slow to import: optuna

    cfg = run.configs[pair]
    space = cfg["engine"].get("search_space") or {}
    if not space:
        log.info("auto: %s-%s has no search space to tune (conf/engine/%s.yaml)", *pair, pair[0])
        return
    seed = int(cfg.get("seed", 0))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = _open_study(run, state, pair, cfg, sampler=make_sampler("tpe", seed),
                        pruner=make_pruner(run.settings.pruner))
    classes = class_range(run.ds.classes)
    seconds = [first_seconds]

    def expected() -> float:
        return statistics.median(seconds)

    def objective(trial) -> float:
        cand, trial_cfg = _draw(trial, pair, cfg)
        reporter = FoldReporter(trial, run.settings.pruner, "qwk_thresholds_oof", cfg["thresholds"]["method"],
                                run.ds.y_train, classes, run.ds.w_train)
        rec = run.run_candidate(state, cand, trial_cfg, reporter=reporter, why=why)
        if rec is None:
            if state.candidates.get(cand.name, {}).get("status") == Status.LEFT_OUT:
                trial.study.stop()      # the budget's estimate of a trial no longer fits: no more of this pair
            raise optuna.TrialPruned(state.candidates.get(cand.name, {}).get("reason", "out of time"))
        seconds.append(rec["seconds"])
        return rec["qwk_thresholds_oof"]

    def out_of_time() -> bool:
        run.set_reserve(state, coming_seconds=expected(), coming_pair=pair)
        return expected() > run.budget.left_for_work

    def stop_when_out_of_time(study, trial) -> None:
        if out_of_time():
            study.stop()

    if out_of_time():
        return
    log.info("auto: tuning %s-%s (%d trial(s) in its study so far)", *pair, len(study.trials))
    if run.executor.remote:
        _tune_at_once(run, state, pair, study, seconds, out_of_time, why)
        return
    with quiet_stopped_trials():        # a Ctrl-C is one line, not Optuna's report of a failed trial
        study.optimize(objective, callbacks=[stop_when_out_of_time], gc_after_trial=False)


def study_name(pair: tuple[str, str], cfg: dict, data: DataFingerprint) -> str:
    """The name of ``pair``'s study in ``tuning.db``: its configuration's hash (where it runs, one machine or a
    cluster, is not part of it) and its data's, so that the study of other data or settings is never continued."""
    rows = hashlib.sha256(f"{data.train}:{data.test}".encode()).hexdigest()[:8]
    return f"{pair[0]}-{pair[1]}-{config_hash(cfg)}-{rows}"


def _open_study(run, state, pair: tuple[str, str], cfg: dict, sampler, pruner):
    """``pair``'s study in ``<output dir>/tuning.db`` (:func:`study_name`), created on first use, its data checked
    as ``tune.py`` checks a study's (:func:`~qwkboost.runs.tuning.study.check_study_data`); studies of the pair on
    other data or settings stay in the file, set aside, with a line. A study an earlier qwkboost named (without the
    data's digest, with the ``cluster`` settings in its hash) goes on when ``auto.json`` vouches for the data."""
    import optuna  # slow to import: optuna

    from qwkboost.runs.tuning.study import DATA_ATTR, check_study_data  # slow to import: optuna, mlflow

    storage = optuna.storages.RDBStorage(f"sqlite:///{(run.out / 'tuning.db').resolve()}")
    name = study_name(pair, cfg, run.fingerprint)
    summaries = optuna.get_all_study_summaries(storage, include_best_trial=False)
    names = {s.study_name for s in summaries}
    earlier = [f"{pair[0]}-{pair[1]}-{h}" for h in (legacy_config_hash(cfg), config_hash(cfg))]
    if name not in names and state.resumed:
        name = next((n for n in earlier if n in names), name)
    prefix = f"{pair[0]}-{pair[1]}-"
    aside = [s for s in summaries if s.study_name.startswith(prefix) and s.study_name != name and s.n_trials]
    if aside:
        other = [s for s in aside if s.user_attrs.get(DATA_ATTR) not in (None, run.fingerprint.to_dict())]
        log.info("auto: tuning.db holds %d trial(s) of %s-%s in %d study(ies) of other %s; they stay there, set aside, "
                 "and are not continued", sum(s.n_trials for s in aside), *pair, len(aside),
                 "data" if len(other) == len(aside) else "settings or data")
    study = optuna.create_study(study_name=name, storage=storage, direction="maximize", sampler=sampler,
                                pruner=pruner, load_if_exists=True)
    if name in earlier and DATA_ATTR not in study.user_attrs:      # an earlier qwkboost's, of auto.json's data
        study.set_user_attr(DATA_ATTR, run.fingerprint.to_dict())
    check_study_data(study, run.fingerprint, f"auto's tuning study {name!r} in {run.out / 'tuning.db'}",
                     run.data_names, f"move {run.out / 'tuning.db'} away to start its studies afresh")
    return study


def _tune_at_once(run, state, pair, study, seconds: list, out_of_time, why: str) -> None:
    """Trials of ``pair`` on ``run``'s executor, as many at once as it has slots, until the next would not fit.

    Optuna's ask-and-tell interface: each trial is drawn here, runs where a slot is free, and reports its folds to
    the study from there, where its pruner runs: in the study's SQLite file in the output directory when the
    workers see it (a ``LocalCluster``, a shared disk); else in a working copy of the study in the Dask scheduler's
    memory (:func:`~qwkboost.runs.tuning.storage.on_the_scheduler`), each trial copied to the file as it ends.
    The default candidates still running when tuning starts (``run.running``) end beside the trials."""
    import optuna  # slow to import: optuna

    from qwkboost.autoblend.executor import Job, TrialSpec  # slow to import: scipy, sklearn, matplotlib
    from qwkboost.runs.tuning.storage import on_the_scheduler, scheduler_url, write_back  # slow to import: optuna

    cfg = run.configs[pair]
    record = study
    storage = f"sqlite:///{(run.out / 'tuning.db').resolve()}"
    if not getattr(run.executor, "shared", True):
        work = on_the_scheduler(study, run.executor.client)
        if work is None:
            log.info("auto: the workers do not see %s and optuna-integration is not installed, so %s-%s's trials "
                     "run unpruned (pip install 'qwkboost[cluster]')", run.out, *pair)
        else:
            study, storage = work, scheduler_url(work)
    prunable = study is not record or getattr(run.executor, "shared", True)

    def tell(trial, *args, **kwargs) -> None:
        study.tell(trial, *args, **kwargs)
        if study is not record:
            write_back(study, trial._trial_id, record)

    running = run.running       # with the default candidates still running beside tuning (trial None)
    left_out = False        # a trial was left out: no more are asked, the running ones finish
    try:
        while True:
            while run.executor.free > 0 and not left_out and not out_of_time():
                trial = study.ask()
                cand, trial_cfg = _draw(trial, pair, cfg)
                job = run.start_candidate(state, cand, trial_cfg, rescue=False, why=why, running=len(running))
                if job is None:         # left out: no trial of this pair fits any more
                    tell(trial, state=optuna.trial.TrialState.PRUNED)
                    left_out = True
                    break
                if not isinstance(job, Job):        # the same trial finished before
                    tell(trial, job["qwk_thresholds_oof"])
                    continue
                if prunable:
                    job = replace(job, trial=TrialSpec(storage, study.study_name, trial._trial_id,
                                                       run.settings.pruner, "qwk_thresholds_oof",
                                                       cfg["thresholds"]["method"]))
                run.executor.submit(job)
                running[job.name] = (cand, trial)
            if not running:
                return
            outcome = run.executor.next_outcome()
            cand, trial = running.pop(outcome.name)
            rec = run.end_candidate(state, cand, outcome)
            if trial is None:       # a default candidate that ran beside the trials
                continue
            if rec is None:
                tell(trial, state=optuna.trial.TrialState.PRUNED)
            else:
                seconds.append(rec["seconds"])
                tell(trial, rec["qwk_thresholds_oof"])
    except (KeyboardInterrupt, ClusterLost) as exc:
        lost = isinstance(exc, ClusterLost)        # the scheduler is gone: what ran there is lost
        for outcome in run.executor.abandon() if lost else run.executor.stop():
            cand, trial = running.pop(outcome.name)
            run.end_candidate(state, cand, outcome)
            if trial is not None and not (lost and study is not record):      # a copy on a lost scheduler is gone
                tell(trial, state=optuna.trial.TrialState.FAIL)
        raise
