"""``tune.py`` and tuning in ``experiment=auto``: a stop in a trial, the printed best command, the default storage,
resumes of a study, refusals (group ``tune``)."""

from __future__ import annotations

import contextlib
import re
import shlex
import signal

from .harness import (LX, ONE, PY, ROOT, SIGNALS, V, ctrl_c, judge_run, judge_stop, last_err, merge,
                      mlflow_running_like, refusal, seen, studies)
from .registry import Ctx, case, refusal_case


def _trial_stop_case(name, sig_name, cluster, good):
    sig, send = SIGNALS[sig_name]

    @case(name, "tune", good, needs=("dask",) if cluster else ())
    def _(c: Ctx):
        out = c.dir / "out"
        pattern = r"auto: tuning " if not cluster else r"auto: tuning [\w-]+ \("
        r = c.run(c.auto(out, 45 if cluster else 35, LX if cluster else ONE, ["cluster=local"] if cluster else []),
                  trigger=seen(pattern), delay=2.0, action=send)
        return judge_stop(r, c.dir, out, sig, "tuning trial")


_trial_stop_case("tune-auto-int-trial", "int", False, "experiment=auto on one machine, Ctrl-C 2 s after 'auto: "
                 "tuning': exit 130, the blend written, no traceback, no Optuna 'Trial N failed because of the "
                 "following error'")
_trial_stop_case("tune-auto-term-trial", "term", False, "the same with SIGTERM: exit 143, the blend written, no "
                 "traceback or Optuna error")
_trial_stop_case("tune-auto-cluster-int-trial", "int", True, "cluster=local, Ctrl-C 2 s after 'auto: tuning': exit "
                 "130, the blend written, no traceback or Optuna error, the workers gone")


def _best_command_case(name, cluster, good):
    @case(name, "tune", good, needs=("dask",) if cluster else ())
    def _(c: Ctx):
        a = c.run(c.tune(c.dir / "t", 3, extra=["cluster=local"] if cluster else []), timeout=90)
        v = judge_run(a, c.dir, None, submission=False)
        if v["verdict"] != "good":
            return v
        lines = a.lines()
        at = next((i for i, l in enumerate(lines) if "run the best trial with:" in l), None)
        if at is None or at + 1 >= len(lines):
            return V("silent", "no 'run the best trial with:' line", a)
        printed = lines[at + 1].strip()
        argv = shlex.split(printed)
        if argv and argv[0] in ("python", "python3"):
            argv[0] = PY
        out = c.dir / "best"
        b = c.run([*argv, f"hydra.run.dir={out}"], timeout=90)      # from the folder tune.py ran in, as typed
        if b.rc == 2 and "can't open file" in b.err:
            from_root = c.run([*argv, f"hydra.run.dir={out}"], timeout=90, cwd=ROOT)
            return V("raw", f"the printed command names experiments/run.py relative to the project, so it fails "
                            f"in the folder tune.py ran in ({last_err(b)[:100]}); from the project it exits "
                            f"{from_root.rc}", b)
        v = judge_run(b, c.dir, out, submission=False)      # a single run: its submission, no leaderboard
        if v["verdict"] == "good" and not (out / "submission.csv").exists():
            return V("silent", "the best trial's command ended exit 0 without a submission.csv", b)
        return v


_best_command_case("tune-best-command", False, "tune.py tune.n_trials=3, then the printed 'run the best trial "
                   "with:' command run as typed (python -> this venv) in the same folder: it runs, exit 0, a "
                   "submission.csv")
_best_command_case("tune-cluster-best-command", True, "tune.py cluster=local tune.n_trials=3, then the printed "
                   "command run as typed: exit 0, a submission.csv")


@case("tune-default-storage", "tune", "tune.py without tune.storage, run from the case folder: optuna.db appears "
      "in the working directory, not in the project (/work/main/optuna.db; a study put there is removed again)",
      quick=True)
def _(c: Ctx):
    project_db = ROOT / "optuna.db"
    had = project_db.exists()
    before = project_db.stat().st_mtime if had else None
    r = c.run(c.tune(c.dir / "t", 2, storage=False), timeout=90)
    wrote = project_db.exists() and (not had or project_db.stat().st_mtime != before)
    names = re.findall(r"A new study created in RDB with name: (\S+)", r.text)
    if wrote:                                   # put the project's file back as it was
        if not had:
            project_db.unlink()
            with contextlib.suppress(FileNotFoundError):
                (ROOT / "optuna.db.lock").unlink()
        else:
            import optuna

            for n in names:
                with contextlib.suppress(KeyError):
                    optuna.delete_study(study_name=n, storage=f"sqlite:///{project_db}")
    v = judge_run(r, c.dir, None, submission=False)
    if v["verdict"] != "good":
        return v
    if wrote:
        return V("silent", f"the study went to {project_db}, not the working directory, without a word "
                           f"(removed again by this sweep)", r)
    if not (c.dir / "optuna.db").exists():
        return V("silent", "no optuna.db in the working directory", r)
    return V("good", "optuna.db in the working directory", r)


def _tune_stop_resume_case(name, cluster, good):
    @case(name, "tune", good, needs=("dask",) if cluster else ())
    def _(c: Ctx):
        extra = ["cluster=local"] if cluster else []
        trigger = ((lambda t: mlflow_running_like(c.dir, "trial %") >= 1) if cluster else
                   seen(r"trial 1: fold 2/5"))
        a = c.run(c.tune(c.dir / "t1", 6, extra=extra), timeout=90, trigger=trigger, delay=1.0 if cluster else 0.2,
                  action=ctrl_c)
        v = judge_stop(a, c.dir, None, signal.SIGINT, "a trial")
        if v["verdict"] != "good":
            return v
        b = c.run(c.tune(c.dir / "t2", 6, extra=extra), timeout=90)
        v = judge_run(b, c.dir, None, submission=False)
        if v["verdict"] != "good":
            return v
        found = studies(c.storage)
        if len(found) != 1 or next(iter(found.values())) < 6:
            return V("silent", f"after the resume: {found} (one study of >= 6 finished trials expected)", b)
        return V("good", f"{found}", b)


_tune_stop_resume_case("tune-int-then-resume", False, "tune.py tune.n_trials=6 stopped by Ctrl-C in trial 1 (exit "
                       "130, one line), then the same command: exit 0, one study with >= 6 finished trials, no "
                       "MLflow run RUNNING")
_tune_stop_resume_case("tune-cluster-int-then-resume", True, "tune.py cluster=local tune.n_trials=6, Ctrl-C 1 s after "
                       "a trial's run starts, then the same command: exit 0, one study of >= 6 finished trials")

refusal_case("tune-n-trials-zero", "tune", "tune.py tune.n_trials=0: refused in one line, or exit 0 with nothing "
             "run and no traceback", lambda c, out: c.tune(out, 0), names="n_trials", expect=("refused", "good"),
             accept=lambda r, c, out: judge_run(r, c.dir, None, submission=False))
refusal_case("tune-storage-relative", "tune", "tune.storage=sqlite:///optuna.db (a relative path): refused in one "
             "line naming tune.storage", lambda c, out: [*c.tune(out, 2, storage=False),
                                                        "tune.storage=sqlite:///optuna.db"], names="tune.storage")
refusal_case("tune-storage-directory", "tune", "tune.storage=sqlite:///<a directory>: refused in one line",
             lambda c, out: [*c.tune(out, 2, storage=False), f"tune.storage=sqlite:///{c.dir}"],
             names="tune.storage")
refusal_case("tune-cluster-address-nothing", "tune", "tune.py cluster.address=tcp://127.0.0.1:9: refused in one "
             "line, within ~10 s", lambda c, out: c.tune(out, 2, extra=["cluster.address=tcp://127.0.0.1:9"]),
             names="cluster.address", needs=("dask",), slow_after=10)


@case("tune-study-name-other-config", "tune", "tune.study_name=shared on LightGBM, then the same name on XGBoost: the "
      "second refused in one line (a named study belongs to one configuration)", expect=("refused",))
def _(c: Ctx):
    a = c.run(c.tune(c.dir / "t1", 2, extra=["tune.study_name=shared"]), timeout=90)
    b = c.run(c.tune(c.dir / "t2", 2, engine="xgboost", extra=["tune.study_name=shared"]), timeout=90)
    first = judge_run(a, c.dir, None, submission=False)
    v = refusal(b, names="study")
    if v is None:
        v = V("silent", f"a study of another configuration went on: {studies(c.storage)}", b)
    return v if first["verdict"] == "good" else merge(first, v)

