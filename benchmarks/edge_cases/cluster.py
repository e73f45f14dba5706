"""LocalCluster, your own scheduler, training across the rows, killed workers and schedulers, memory limits
(group ``cluster``)."""

from __future__ import annotations

import os
import signal

from .harness import (LX, SCHEDULER_LOST, TWO, WORKER_LOST, OwnDask, V, board, finished_file, judge_run,
                      local_workers, merge, refusal, seen)
from .registry import Ctx, case, refusal_case


def _workers_column(out) -> str:
    done = [r for r in board(out) if r.get("status") == "finished"]
    if not done or "worker" not in done[0]:
        return "no worker column in leaderboard.csv"
    return f"workers: {sorted({r['worker'] for r in done})}"


@case("cluster-local", "cluster", "cluster=local: exit 0, submission.csv, leaderboard.csv with a worker column",
      needs=("dask",))
def _(c: Ctx):
    out = c.dir / "out"
    r = c.run(c.auto(out, 40, TWO, ["cluster=local"]))
    v = judge_run(r, c.dir, out)
    v["detail"] = (v["detail"] + " " + _workers_column(out)).strip()
    return v


def _address_case(nanny):
    @case(f"cluster-address-{'nanny' if nanny else 'no-nanny'}", "cluster",
          f"cluster.address= your own scheduler and 2 `dask worker --{'' if nanny else 'no-'}nanny`: exit 0, "
          "submission.csv, each finished candidate's worker a tcp:// address", needs=("dask",))
    def _(c: Ctx):
        out = c.dir / "out"
        with OwnDask(c.dir / "dask", nanny=nanny) as d:
            r = c.run(c.auto(out, 40, TWO, [f"cluster.address={d.address}"]))
        v = judge_run(r, c.dir, out)
        v["detail"] = (v["detail"] + " " + _workers_column(out)).strip()
        return v


_address_case(False)
_address_case(True)


@case("cluster-rows", "cluster", "cluster=local cluster.parallel=rows: exit 0, submission.csv, and a line that "
      "XGBoost trains its rows across the workers (silent if the setting is ignored)", needs=("dask",))
def _(c: Ctx):
    out = c.dir / "out"
    r = c.run(c.auto(out, 45, LX, ["cluster=local", "cluster.parallel=rows"]))
    v = judge_run(r, c.dir, out)
    if v["verdict"] == "good" and "rows across" not in r.out:
        v = V("silent", "cluster.parallel=rows: no candidate trained its rows across the workers, no word why", r)
    return v


def _lost_line(v, r, pattern, what):
    """A good run after a kill must say what was lost."""
    ours = [l for l in r.lines() if ("[qwkboost" in l or l.startswith("error:")) and pattern.search(l)]
    if v["verdict"] == "good" and not ours:
        return V("silent", f"no line of qwkboost's says the {what} was lost", r)
    if v["verdict"] == "good":
        v["detail"] = ours[0].strip()[-160:]
    return v


class KillLocalWorker:
    """An action: SIGKILL one worker process of the command's LocalCluster; ``killed`` the pids it killed."""

    def __init__(self):
        self.killed: list[int] = []

    def __call__(self, p):
        ws = local_workers(p.pid)
        if ws:
            os.kill(ws[0], signal.SIGKILL)
            self.killed.append(ws[0])


@case("cluster-local-kill-worker", "cluster", "cluster=local, a worker killed (SIGKILL) 3 s into the first "
      "candidates: exit 0, a line that its candidate lost its worker, submission.csv of what finished",
      needs=("dask",))
def _(c: Ctx):
    out = c.dir / "out"
    kill = KillLocalWorker()
    r = c.run(c.auto(out, 45, TWO, ["cluster=local"]), trigger=seen(r"auto: lightgbm-squared_error \("), delay=3.0,
              action=kill)
    if not kill.killed:
        return merge(judge_run(r, c.dir, out), V("missed", "no LocalCluster worker was killed (none running yet)"))
    return _lost_line(judge_run(r, c.dir, out), r, WORKER_LOST, "worker")


def _kill_own_worker_case(nanny):
    @case(f"cluster-address-kill-worker-{'nanny' if nanny else 'no-nanny'}", "cluster",
          f"your own scheduler and 2 workers ({'nanny' if nanny else 'no nanny'}), one killed (SIGKILL) 3 s into "
          "the first candidates: exit 0, a line that the candidate lost its worker, submission.csv", needs=("dask",))
    def _(c: Ctx):
        out = c.dir / "out"
        with OwnDask(c.dir / "dask", nanny=nanny) as d:
            victim = d.worker_pid(0)
            r = c.run(c.auto(out, 45, TWO, [f"cluster.address={d.address}"]),
                      trigger=seen(r"auto: lightgbm-squared_error \("), delay=3.0,
                      action=lambda p: os.kill(victim, signal.SIGKILL))
        if r.acted is None:
            return V("missed", "the first candidate never started", r)
        return _lost_line(judge_run(r, c.dir, out), r, WORKER_LOST, "worker")


_kill_own_worker_case(False)
_kill_own_worker_case(True)


@case("cluster-rows-kill-worker", "cluster", "cluster=local cluster.parallel=rows, a worker killed as XGBoost's "
      "second fold trains across the rows: exit 0 within the limit, a line that the worker was lost, "
      "submission.csv", needs=("dask",))
def _(c: Ctx):
    out = c.dir / "out"
    kill = KillLocalWorker()
    # at its first fold's line, not a time after "rows across": a kill before the rows are placed costs nothing
    r = c.run(c.auto(out, 45, LX, ["cluster=local", "cluster.parallel=rows"]),
              trigger=seen(r"xgboost-squared_error: fold 1/5"), delay=0.2, action=kill)
    if not kill.killed:
        return merge(judge_run(r, c.dir, out), V("missed", "no worker killed during a job across the rows"))
    return _lost_line(judge_run(r, c.dir, out), r, WORKER_LOST, "worker")


def _own_dask_kill_case(name, good, kill, pattern, what):
    """Your own scheduler and 2 workers (no nanny); ``kill(dask)`` once a candidate has finished."""
    @case(name, "cluster", good, needs=("dask",))
    def _(c: Ctx):
        out = c.dir / "out"
        with OwnDask(c.dir / "dask") as d:
            r = c.run(c.auto(out, 45, TWO, [f"cluster.address={d.address}"]), trigger=finished_file(out),
                      delay=0.5, action=lambda p: kill(d))
        if r.acted is None:
            return V("missed", "no candidate finished", r)
        return _lost_line(judge_run(r, c.dir, out), r, pattern, what)


def _kill_workers(d):
    for w in d.workers:
        w.send_signal(signal.SIGKILL)


_own_dask_kill_case("cluster-address-kill-scheduler", "your own scheduler killed (SIGKILL) once a candidate has "
                    "finished: the command ends within its limit, exit 0, a line that the scheduler was lost, "
                    "submission.csv of what finished", lambda d: d.scheduler.send_signal(signal.SIGKILL),
                    SCHEDULER_LOST, "scheduler")
_own_dask_kill_case("cluster-address-kill-all-workers", "both of your own workers (no nanny) killed once a candidate "
                    "has finished: the command ends within its limit, exit 0, a line that the workers were lost, "
                    "submission.csv of what finished", _kill_workers, WORKER_LOST, "workers")


refusal_case("cluster-memory-local-200MB", "cluster", "cluster=local cluster.memory_limit=200MB (below what a "
             "worker with the engines needs): refused in one line naming cluster.memory_limit before the cluster "
             "starts", lambda c, out: c.auto(out, 30, TWO, ["cluster=local", "cluster.memory_limit=200MB"]),
             names="memory_limit", needs=("dask",),
             accept=lambda r, c, out: judge_run(r, c.dir, out))
refusal_case("cluster-memory-lots", "cluster", "cluster.memory_limit=lots: refused in one line naming it",
             lambda c, out: c.auto(out, 30, TWO, ["cluster=local", "cluster.memory_limit=lots"]),
             names="memory_limit", needs=("dask",))
refusal_case("cluster-memory-negative", "cluster", "cluster.memory_limit=-1GB: refused in one line naming it",
             lambda c, out: c.auto(out, 30, TWO, ["cluster=local", "cluster.memory_limit=-1GB"]),
             names="memory_limit", needs=("dask",))
refusal_case("cluster-n-workers-zero", "cluster", "cluster=local cluster.n_workers=0: refused in one line",
             lambda c, out: c.auto(out, 30, TWO, ["cluster=local", "cluster.n_workers=0"]),
             names="n_workers", needs=("dask",))
refusal_case("cluster-threads-zero", "cluster", "cluster=local cluster.threads_per_worker=0: refused in one line",
             lambda c, out: c.auto(out, 30, TWO, ["cluster=local", "cluster.threads_per_worker=0"]),
             names="threads_per_worker", needs=("dask",))
refusal_case("cluster-address-nothing", "cluster", "cluster.address=tcp://127.0.0.1:9 (nothing listens): refused "
             "in one line, within ~10 s (else 'slow refusal' in the detail)",
             lambda c, out: c.auto(out, 30, TWO, ["cluster.address=tcp://127.0.0.1:9"]), names="cluster.address",
             needs=("dask",), slow_after=10)
refusal_case("cluster-address-garbage", "cluster", "cluster.address=not-an-address: refused in one line",
             lambda c, out: c.auto(out, 30, TWO, ["cluster.address=not-an-address"]), names="cluster.address",
             needs=("dask",), slow_after=10)
refusal_case("cluster-parallel-bogus", "cluster", "cluster=local cluster.parallel=everything: refused in one line",
             lambda c, out: c.auto(out, 30, TWO, ["cluster=local", "cluster.parallel=everything"]),
             names="parallel", needs=("dask",))


@case("cluster-memory-workers-200MB", "cluster", "your own 2 workers started with --memory-limit 200MB: refused in "
      "one line, or a blend written (exit 0 and submission.csv); never a traceback or a hang",
      expect=("refused", "good"), needs=("dask",))
def _(c: Ctx):
    out = c.dir / "out"
    try:
        d = OwnDask(c.dir / "dask", worker_args=["--memory-limit", "200MB"]).__enter__()
    except Exception as exc:
        return V("skipped", f"the workers did not start: {exc}")
    try:
        r = c.run(c.auto(out, 40, TWO, [f"cluster.address={d.address}"]), timeout=75)
    finally:
        d.__exit__(None, None, None)
    return refusal(r, made=False) if r.rc != 0 or r.timed_out else judge_run(r, c.dir, out)

