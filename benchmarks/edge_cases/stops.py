"""Ctrl-C and SIGTERM at each moment of a run (and of a resume), on one machine and on a cluster (group ``stop``)."""

from __future__ import annotations

import signal
import time

from .harness import (LX, ONE, SIGNALS, TWO, OwnDask, V, ctrl_c, finished_file, judge_run, judge_stop, merge, seen,
                      submission_rows)
from .registry import Ctx, case


MOMENTS = {  # name: (trigger, delay, pairs, time limit, what the moment is)
    "starting": (lambda out: (lambda t: t > 0.8), 0.0, TWO, 30, "0.8 s in, the imports"),
    "store": (lambda out: seen(r"Creating initial MLflow database tables"), 0.0, TWO, 30,
              "the MLflow store being created"),
    "first-candidate": (lambda out: seen(r"auto: lightgbm-squared_error \(\d+ s left\)"), 0.5, TWO, 30,
                        "0.5 s into the first candidate, nothing finished"),
    "after-first": (lambda out: seen(r"auto: (the other|xgboost-squared_error \(|lightgbm-extended_qwk \()"), 0.3,
                    TWO, 30, "just after the first candidate finished"),
    "screening": (lambda out: seen(r"auto: screen [a-z]"), 0.05, TWO, 30, "a screen running (auto.screen=always)"),
    "second-trial": (lambda out: seen(r"auto: lightgbm-squared_error-trial-1 \("), 0.5, ONE, 35,
                     "0.5 s into the second tuning trial"),
    "blend": (lambda out: seen(r"auto: blend \("), 0.1, TWO, 30, "the blend being fitted"),
    "blend-files": (lambda out: seen(r"blend \(greedy\) of \d+ members"), 0.3, TWO, 30,
                    "the blend's files being written"),
    "mlflow-model": (lambda out: seen(r"Validating input example"), 0.0, TWO, 30,
                     "the blend's MLflow model being logged"),
}
GOOD_STOP = ("exit 130 (Ctrl-C) / 143 (SIGTERM), the one stop line last on stderr, no traceback, auto.json's "
             "session 'stopped', no MLflow run RUNNING, no process left; if a candidate had finished: "
             "submission.csv and leaderboard.csv written")


def _stop_case(moment, sig_name):
    trig, delay, pairs, T, what = MOMENTS[moment]
    sig, send = SIGNALS[sig_name]

    def fn(c: Ctx):
        out = c.dir / "out"
        extra = ["auto.screen=always"] if moment == "screening" else []     # these candidates all fit unscreened
        r = c.run(c.auto(out, T, pairs, extra), trigger=trig(out), delay=delay, action=send)
        return judge_stop(r, c.dir, out, sig, moment)
    case(f"stop-{sig_name}-{moment}", "stop", f"at {what}: {GOOD_STOP}", quick=moment == "starting")(fn)


for _m in MOMENTS:
    for _s in SIGNALS:
        _stop_case(_m, _s)


@case("stop-int-twice", "stop", "Ctrl-C twice 0.3 s apart while the blend's files are written: exit 130, no "
      "traceback, and either the blend written whole or no submission.csv at all (never a half-written one)")
def _(c: Ctx):
    out = c.dir / "out"

    def twice(p):
        ctrl_c(p)
        time.sleep(0.3)
        if p.poll() is None:
            ctrl_c(p)
    r = c.run(c.auto(out, 30, TWO), trigger=seen(r"blend \(greedy\) of \d+ members"), delay=0.2, action=twice)
    v = judge_stop(r, c.dir, out, signal.SIGINT, "blend-files")
    if v["verdict"] == "lost" and submission_rows(out) is None and not (out / "pipeline").exists():
        v = V("good", "no blend written (the second Ctrl-C stopped it), nothing half-written; " + v["detail"], r)
    return v


def _resume_stop_case(name, good, trigger, delay, moment):
    """A resume (the first run on 2 candidates, the second on 4) stopped by Ctrl-C at ``trigger``."""
    @case(name, "stop", good)
    def _(c: Ctx):
        out = c.dir / "out"
        first = c.run(c.auto(out, 25, LX))
        if first.rc != 0:
            return merge(judge_run(first, c.dir, out), V("skipped", "the first run failed"))
        r = c.run(c.auto(out, 30, TWO), trigger=seen(trigger), delay=delay, action=ctrl_c)
        return judge_stop(r, c.dir, out, signal.SIGINT, moment)


_resume_stop_case("stop-int-resume-candidate", "a resume stopped by Ctrl-C during its first new candidate: exit 130, "
                  "one line, the previous submission.csv and leaderboard.csv still there and whole",
                  r"auto: \w+-extended_qwk \(", 0.5, "resume's first new candidate")
_resume_stop_case("stop-int-resume-blend", "a resume stopped by Ctrl-C while its blend's files are written: exit 130, "
                  "one line, a whole submission.csv (the previous or the new) and leaderboard.csv",
                  r"blend \(greedy\) of \d+ members", 0.3, "resume's blend files")


CLUSTER_MOMENTS = {
    "first-candidate": (lambda out: seen(r"auto: lightgbm-squared_error \(\d+ s left\)"), 2.0, TWO, 40,
                        "2 s into the first candidates on the workers"),
    "after-first": (lambda out: finished_file(out), 0.5, TWO, 40, "0.5 s after the first candidate finished"),
    "tuning": (lambda out: seen(r"auto: tuning "), 2.0, LX, 45, "2 s into tuning on the workers"),
    "blend": (lambda out: seen(r"auto: blend \("), 0.1, TWO, 40, "the blend being fitted"),
}


def _cluster_stop_case(moment, sig_name):
    trig, delay, pairs, T, what = CLUSTER_MOMENTS[moment]
    sig, send = SIGNALS[sig_name]

    def fn(c: Ctx):
        out = c.dir / "out"
        r = c.run(c.auto(out, T, pairs, ["cluster=local"]), trigger=trig(out), delay=delay, action=send)
        return judge_stop(r, c.dir, out, sig, moment)
    case(f"stop-cluster-{sig_name}-{moment}", "stop", f"cluster=local, at {what}: {GOOD_STOP}; the LocalCluster's "
         "workers gone with the command", needs=("dask",))(fn)


for _m in CLUSTER_MOMENTS:
    for _s in SIGNALS:
        if _m != "blend" or _s == "int":
            _cluster_stop_case(_m, _s)


@case("stop-cluster-address-int", "stop", f"on your own scheduler and 2 workers, Ctrl-C 2 s into the first "
      f"candidates: {GOOD_STOP}; the workers alive and free afterwards", needs=("dask",))
def _(c: Ctx):
    out = c.dir / "out"
    with OwnDask(c.dir / "dask") as d:
        r = c.run(c.auto(out, 40, TWO, [f"cluster.address={d.address}"]),
                  trigger=seen(r"auto: lightgbm-squared_error \("), delay=2.0, action=ctrl_c)
        v = judge_stop(r, c.dir, out, signal.SIGINT, "first-candidate")
        dead = [i for i, w in enumerate(d.workers) if w.poll() is not None]
        if dead and v["verdict"] == "good":
            v = V("silent", f"worker(s) {dead} died with the client's Ctrl-C", r)
        if v["verdict"] == "good":
            from distributed import Client

            with Client(d.address, timeout="10s") as cl:
                deadline = time.time() + 30
                while any(cl.processing().values()) and time.time() < deadline:
                    time.sleep(0.5)
                if any(cl.processing().values()):
                    v = V("silent", "the workers still run the stopped budget's tasks 30 s after the stop", r)
    return v

