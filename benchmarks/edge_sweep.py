"""The one command (``experiments/run.py experiment=auto``) and ``experiments/tune.py`` at their edges, as a new
user and an attacker would meet them, on a 2,000-row CSV with 4 classes: every case's outcome classified.

    .venv/bin/python benchmarks/edge_sweep.py                      # every case: about an hour on 2 cores
    .venv/bin/python benchmarks/edge_sweep.py --only folder memory # the cases whose name holds "folder" or "memory"
    .venv/bin/python benchmarks/edge_sweep.py --quick              # the short cases only (refusals, mostly)
    .venv/bin/python benchmarks/edge_sweep.py --list               # the cases and what good means in each

Each case runs the commands as a user types them (a fresh process, ``CI=true``, the working directory its own
folder, an MLflow store of its own: ``tracking.uri=sqlite:///<case>/mlflow.db``), stops them with Ctrl-C (SIGINT to
the process group, as a terminal does) or SIGTERM (to the process, as ``kill`` does) when a log line shows the
moment, kills Dask workers and schedulers, damages or replaces files between a run and its resume, and reads what
was left: exit status, stderr, the output folder, ``auto.json``, the MLflow store, the Optuna storage, the processes
still running.

Verdicts, worst first:

* ``raw``: a ``Traceback`` (or an Optuna "Trial N failed because of the following error") on stdout or stderr, an
  exit status of 1 (or a signal's), an error longer than a line, or a refusal that came after training began.
* ``lost``: a result the user paid for is gone: candidates finished but no ``submission.csv``/``leaderboard.csv``
  (or a truncated one), or the user's own files deleted or overwritten.
* ``silent``: a stale or wasted answer without a word: a resumed study that restarted at 0 trials, a default
  candidate run again after a resume, a study on other data reused, a MLflow run left RUNNING, processes left
  running 10 s after the command ended, a bad setting accepted, a Ctrl-C ignored (exit 0 long after it), a lost
  worker or scheduler that no line of qwkboost's mentions.
* ``hang``: the case's timeout passed (its processes are killed).
* ``missed``: the moment a case waits for never came (the command ended first): nothing was tested.
* ``refused``: exit status 2, stderr's last line ``error: ...``, no traceback, and no ``candidates/`` made.
* ``good``: what the docs promise there (each case says what that is: ``--list``).
* ``skipped``: a package or a start-up step the case needs is missing.

``expect`` lists the verdicts that are right for a case (``refused`` where a refusal is the promise); ``ok`` says
whether it got one. After the fix this sweep is for, the run must report 0 raw, 0 lost, 0 silent (and 0 hang,
ideally every case ``ok``).

Nothing is written outside the work folder: every command gets ``tracking.uri`` and ``hydra.run.dir`` there (with
``tracking.uri=null`` MLflow would write ``<project>/mlflow.db``), except ``tune-default-storage``, whose point is
where a study goes without ``tune.storage``: a ``<project>/optuna.db`` it creates is removed again.

Output: one line per case as it ends; ``--out`` (``benchmarks/results/edge_sweep.json``: every case's verdict,
seconds, exit status, detail, commands and the tail of its stderr, plus the machine) and a markdown table beside
it (``edge_sweep.md``: counts by verdict and group, then every case). The data and each case's folder are kept
with ``--keep``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from machine import machine  # noqa: E402

PY = sys.executable
RUN = str(ROOT / "experiments" / "run.py")
TUNE = str(ROOT / "experiments" / "tune.py")
BLEND = str(ROOT / "experiments" / "blend.py")
ENV = {**os.environ, "CI": "true", "PYTHONUNBUFFERED": "1"}
ENV.pop("MLFLOW_TRACKING_URI", None)

TWO = (["lightgbm", "xgboost"], ["squared_error", "extended_qwk"])   # 4 candidates: screening, blend of several
LX = (["lightgbm", "xgboost"], ["squared_error"])                    # 2 candidates: one per LocalCluster worker
ONE = (["lightgbm"], ["squared_error"])                              # 1 candidate, then tuning from ~12 s on
N_TEST = 600

STOP_LINE = re.compile(r"^experiments/(run|tune|blend)\.py: (interrupted \(Ctrl-C\)|terminated \(SIGTERM\))")
OPTUNA_FAILED = re.compile(r"Trial \d+ failed.*because of the following error")
STARTED = re.compile(r"auto: ([\w.-]+) \(\d+ s left\)")          # a candidate (or trial) starts
REUSED = re.compile(r"auto: ([\w.-]+) reused")
AGAIN = re.compile(r"auto: ([\w.-]+) runs again")
TUNING = re.compile(r"auto: tuning ([\w.-]+) \((\d+) trial\(s\) in its study so far\)")
TRIAL = re.compile(r"auto: ([\w.-]+)-trial-\d+ \(\d+ s left\)")
WORKER_LOST = re.compile(r"worker.*\blost\b|\blost\b.*worker", re.IGNORECASE)
SCHEDULER_LOST = re.compile(r"scheduler.*\b(lost|gone|unreachable|closed|no longer|died)\b|"
                            r"\b(lost|gone|unreachable|closed|no longer|died)\b.*scheduler", re.IGNORECASE)


# ----------------------------------------------------------------------------------------------------- the data

def write_data(folder: Path) -> None:
    """``train.csv`` (2,000 rows: id, 6 numeric features, a string categorical, ``score`` 0..3 from the features),
    ``test.csv`` (600 rows, no label) and the variants the resume cases swap in."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(20261128)
    effect = {"red": 0.5, "green": 0.0, "blue": -0.5, "amber": 0.25}

    def rows(n, first):
        X = rng.normal(size=(n, 6))
        colour = rng.choice(list(effect), size=n)
        z = (X[:, 0] + 0.7 * X[:, 1] - 0.5 * X[:, 2] * X[:, 3] + np.vectorize(effect.get)(colour)
             + rng.normal(scale=0.8, size=n))
        frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(6)]).round(5)
        frame.insert(0, "id", np.arange(first, first + n))
        frame["colour"] = colour
        return frame, z

    train, z = rows(2000, 0)
    train["score"] = np.digitize(z, np.quantile(z, [0.25, 0.5, 0.75]))
    test, _ = rows(N_TEST, 100_000)
    folder.mkdir(parents=True, exist_ok=True)
    train.to_csv(folder / "train.csv", index=False)
    test.to_csv(folder / "test.csv", index=False)
    other = train.copy()
    other["score"] = rng.permutation(other["score"].to_numpy())        # same features, other labels
    other.to_csv(folder / "train_other_labels.csv", index=False)
    train.drop(index=1000).to_csv(folder / "train_minus_one.csv", index=False)
    test.iloc[:N_TEST - 10].to_csv(folder / "test_other.csv", index=False)  # 590 rows


# ------------------------------------------------------------------------------------------------ processes

def _default_sigint():
    # a sweep started in the background hands its children SIGINT ignored; a terminal does not
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stat(pid: str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _cmdline(pid) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def in_session(sid: int) -> list[tuple[int, str]]:
    """The live processes of session ``sid`` (a command started with ``start_new_session=True`` and its children)."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != sid:
            s = _stat(d)
            if s and s[3] == str(sid) and s[0] != "Z":
                found.append((int(d), _cmdline(d)))
    return found


def children(pid: int) -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit() and (_stat(d) or [None, None])[1] == str(pid)]


def local_workers(pid: int) -> list[int]:
    """The worker processes of the LocalCluster a command started (multiprocessing's spawned children)."""
    return [q for q, cmd in in_session(pid) if "spawn_main" in cmd and "resource_tracker" not in cmd]


@dataclass
class Ran:
    """One process as it ended."""

    argv: list
    pid: int
    rc: int | None
    out: str
    err: str
    seconds: float
    timed_out: bool
    fired: float | None = None      # seconds in when the trigger fired (None: never)
    acted: float | None = None      # seconds in when the action ran (None: the process had ended first)
    leftovers: list = field(default_factory=list)   # its session's processes still alive 10 s after it ended
    note: str = ""

    @property
    def text(self) -> str:
        return self.out + self.err

    def lines(self) -> list[str]:
        return self.text.splitlines()


def run_proc(argv, cwd, timeout, trigger=None, delay=0.0, action=None, env=None) -> Ran:
    """Run ``argv`` in its own session, its output read line by line; when ``trigger`` (a regex on a line, or a
    callable of the seconds elapsed polled every 0.1 s) first holds, ``action(popen)`` runs ``delay`` s later."""
    t0 = time.monotonic()
    p = subprocess.Popen([str(a) for a in argv], cwd=cwd, env=env or ENV, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1, errors="replace",
                         preexec_fn=_default_sigint, start_new_session=True)
    out, err, fired, acting, acted = [], [], [], [], []
    lock = threading.Lock()

    def fire():
        with lock:
            if fired:
                return
            fired.append(time.monotonic() - t0)

        def later():
            time.sleep(delay)
            if p.poll() is None and action is not None:
                acted.append(time.monotonic() - t0)
                with contextlib.suppress(ProcessLookupError):
                    action(p)
        t = threading.Thread(target=later, daemon=True)
        acting.append(t)
        t.start()

    def read(stream, sink):
        for line in stream:
            sink.append(line)
            if isinstance(trigger, re.Pattern) and trigger.search(line):
                fire()
        stream.close()

    readers = [threading.Thread(target=read, args=(p.stdout, out), daemon=True),
               threading.Thread(target=read, args=(p.stderr, err), daemon=True)]
    for t in readers:
        t.start()
    timed_out = False
    try:
        while p.poll() is None:
            if callable(trigger) and not isinstance(trigger, re.Pattern) and not fired:
                try:
                    hit = trigger(time.monotonic() - t0)
                except Exception:            # a file half written, a database locked: look again
                    hit = False
                if hit:
                    fire()
            if time.monotonic() - t0 > timeout:
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                break
            time.sleep(0.1)
    except BaseException:                    # the sweep itself stopped: its command (own session) goes too
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        raise
    p.wait()
    seconds = time.monotonic() - t0
    for t in acting:
        t.join(timeout=120)
    left = in_session(p.pid)
    deadline = time.monotonic() + 10
    while left and time.monotonic() < deadline:      # children a moment behind their parent
        time.sleep(0.5)
        left = in_session(p.pid)
    if left:                                         # they hold its pipes: end them before reading to the end
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
    for t in readers:
        t.join(timeout=30)
    return Ran([str(a) for a in argv], p.pid, p.returncode, "".join(out), "".join(err), seconds, timed_out,
               fired[0] if fired else None, acted[0] if acted else None, [c[:120] for _, c in left])


def ctrl_c(p):
    os.killpg(p.pid, signal.SIGINT)             # a terminal's Ctrl-C: the whole foreground group


def sigterm(p):
    p.send_signal(signal.SIGTERM)               # `kill <pid>`: the process alone


class OwnDask:
    """A ``dask scheduler`` and ``n`` ``dask worker`` processes on 127.0.0.1, as a user starts them, each in a
    session of its own (a Ctrl-C sent to a command does not reach them); all stopped on exit."""

    def __init__(self, folder: Path, n: int = 2, nanny: bool = False, worker_args=()):
        self.folder, self.n, self.nanny, self.worker_args = Path(folder), n, nanny, list(worker_args)
        self.procs: list[subprocess.Popen] = []
        self.logs: list = []
        self.scheduler = None
        self.workers: list[subprocess.Popen] = []
        self.address = None

    def _start(self, args, log):
        cmd = [str(Path(PY).parent / "dask"), *args]
        self.logs.append(open(self.folder / log, "w"))      # noqa: SIM115  (closed in __exit__)
        p = subprocess.Popen(cmd, stdout=self.logs[-1], stderr=subprocess.STDOUT, cwd=self.folder,
                             env={**ENV, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}, start_new_session=True)
        self.procs.append(p)
        return p

    def __enter__(self):
        self.folder.mkdir(parents=True, exist_ok=True)
        sfile = self.folder / "scheduler.json"
        try:
            self.scheduler = self._start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                          "--scheduler-file", str(sfile)], "scheduler.log")
            deadline = time.monotonic() + 60
            while self.address is None:
                if self.scheduler.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the dask scheduler did not start")
                with contextlib.suppress(FileNotFoundError, json.JSONDecodeError):
                    self.address = json.loads(sfile.read_text()).get("address")
                time.sleep(0.2)
            self.workers = [self._start(["worker", "--scheduler-file", str(sfile), "--host", "127.0.0.1",
                                         "--nthreads", "1", "--nworkers", "1", "--no-dashboard",
                                         "--nanny" if self.nanny else "--no-nanny", "--name", f"w{i}",
                                         *self.worker_args], f"worker{i}.log") for i in range(self.n)]
            from distributed import Client

            with Client(self.address, timeout="20s") as c:
                c.wait_for_workers(self.n, timeout=60)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def worker_pid(self, i: int) -> int:
        """The process that runs worker ``i``'s tasks (with a nanny: the nanny's child)."""
        w = self.workers[i]
        if not self.nanny:
            return w.pid
        kids = [k for k in children(w.pid) if "resource_tracker" not in _cmdline(k)]
        return kids[0] if kids else w.pid

    def __exit__(self, *exc):
        for p in reversed(self.procs):
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        for f in self.logs:
            f.close()


# ------------------------------------------------------------------------------------------- reading results

def auto_json(out: Path) -> dict | None:
    try:
        return json.loads((Path(out) / "auto.json").read_text())
    except (OSError, ValueError):
        return None


def n_finished(out: Path) -> int:
    """Candidates finished in ``out``: auto.json's record, else the candidate folders with their files."""
    rec = auto_json(out)
    if rec is not None:
        return sum(1 for c in rec.get("candidates", {}).values() if c.get("status") == "finished")
    return sum(1 for p in (Path(out) / "candidates").glob("*/oof.parquet") if (p.parent / "result.json").exists())


def session_of(out: Path, pid: int) -> dict | None:
    rec = auto_json(out) or {}
    return next((s for s in rec.get("sessions", []) if s.get("pid") == pid), None)


def submission_rows(out: Path) -> int | None:
    try:
        return len((Path(out) / "submission.csv").read_text().splitlines()) - 1
    except OSError:
        return None


def board(out: Path) -> list[dict]:
    try:
        with open(Path(out) / "leaderboard.csv") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def running_runs(case: Path) -> list[str]:
    """MLflow runs of the case's store still RUNNING."""
    db = Path(case) / "mlflow.db"
    if not db.exists():
        return []
    for _ in range(5):
        try:
            with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)) as con:
                return [n for (n,) in con.execute("select name from runs where status = 'RUNNING' "
                                                  "and lifecycle_stage = 'active'")]
        except sqlite3.Error:
            time.sleep(1)
    return []


def mlflow_running_like(case: Path, like: str) -> int:
    db = Path(case) / "mlflow.db"
    if not db.exists():
        return 0
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)) as con:
        return con.execute("select count(*) from runs where status = 'RUNNING' and name like ?", (like,)).fetchone()[0]


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (links followed) and its digest, but Hydra's ``.hydra/`` and ``*.log``."""
    found = {}
    for p in sorted(Path(folder).rglob("*")):
        rel = p.relative_to(folder)
        if p.is_file() and rel.parts[0] != ".hydra" and p.suffix != ".log":
            found[str(p.relative_to(folder))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return found


def changed_files(before: dict[str, str], folder: Path) -> list[str]:
    now = snapshot(folder) if Path(folder).exists() else {}
    return [f"{k} {'deleted' if k not in now else 'overwritten'}" for k, h in before.items() if now.get(k) != h]


def studies(storage: str) -> dict[str, int]:
    """Study name -> its finished (complete or pruned) trials."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    done = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    return {name: sum(t.state in done for t in optuna.load_study(study_name=name, storage=storage).trials)
            for name in optuna.get_all_study_names(storage)}


# ---------------------------------------------------------------------------------------------------- verdicts

def V(verdict: str, detail: str = "", r: Ran | None = None) -> dict:
    return {"verdict": verdict, "detail": detail, "exit": None if r is None else r.rc}


def raw_signs(r: Ran) -> str | None:
    """Why ``r`` is raw, or None: a timeout (hang) is answered first by the callers."""
    if "Traceback" in r.text:
        exc = [l for l in r.lines() if re.match(r"[\w.]*(Error|Exception|Interrupt|Exit|Terminated)(:|$)", l.strip())]
        line = exc[-1] if exc else next((l for l in r.lines() if "Error" in l), "")
        return f"Traceback on {'stderr' if 'Traceback' in r.err else 'stdout'}: {line.strip()[:160]}"
    m = OPTUNA_FAILED.search(r.text)
    if m:
        return f"Optuna: {m.group(0)[:160]}"
    return None


def last_err(r: Ran) -> str:
    lines = [l for l in r.err.splitlines() if l.strip()]
    return lines[-1].strip() if lines else ""


def refusal(r: Ran, made: bool = False, names: str | None = None) -> dict | None:
    """``r`` as a refusal: ``refused`` (one ``error:`` line, exit 2, nothing trained), ``hang``, ``raw``; or None
    when it exited 0 (the case decides what that means). ``made``: ``candidates/`` appeared."""
    if r.timed_out:
        return V("hang", f"no answer within {r.seconds:.0f} s", r)
    why = raw_signs(r)
    if why:
        return V("raw", why, r)
    if r.rc == 0:
        return None
    msg = last_err(r)
    if r.rc != 2 or not msg.startswith("error:"):
        return V("raw", f"exit {r.rc}: {msg[:200]}", r)
    if made:
        return V("raw", f"refused only after training began (candidates/ made): {msg[:200]}", r)
    detail = msg[:300]
    if names and not re.search(names, msg):
        detail += f"  [does not name {names}]"
    return V("refused", detail, r)


def after_checks(r: Ran, case: Path, out: Path | None) -> dict | None:
    """What every ended command must leave: no MLflow run RUNNING, no process running, a complete submission."""
    if out is not None and (Path(out) / "submission.csv").exists() and submission_rows(out) != N_TEST:
        return V("lost", f"submission.csv has {submission_rows(out)} rows, not {N_TEST}", r)
    left = running_runs(case)
    if left:
        return V("silent", f"MLflow runs left RUNNING: {left[:4]}", r)
    if r.leftovers:
        return V("silent", f"{len(r.leftovers)} process(es) still running 10 s after the command: "
                           f"{r.leftovers[0][:80]}", r)
    return None


def judge_run(r: Ran, case: Path, out: Path, submission: bool = True) -> dict:
    """A command that should have done its work: exit 0, and (``submission``) the blend's files."""
    if r.timed_out:
        return V("hang", f"no end within {r.seconds:.0f} s", r)
    v = refusal(r, made=False)
    if v is not None:
        if v["verdict"] == "refused":
            v["detail"] = "refused where it should run: " + v["detail"]
        return v
    if submission:
        if submission_rows(out) is None or not (Path(out) / "leaderboard.csv").exists():
            n = n_finished(out)
            if n:
                return V("lost", f"exit 0, {n} candidate(s) finished, but no submission.csv/leaderboard.csv", r)
            return V("silent", "exit 0 without a submission or anything finished", r)
    return after_checks(r, case, out) or V("good", "", r)


def judge_stop(r: Ran, case: Path, out: Path | None, sig: int, moment: str) -> dict:
    """A command stopped at a moment: exit 130 (SIGINT) or 143 (SIGTERM), the one line at the end of stderr, no
    traceback, and when a candidate had finished, the blend of what finished written."""
    if r.timed_out:
        return V("hang", f"no end within {r.seconds:.0f} s of a stop at {r.fired}", r)
    why = raw_signs(r)
    if why:
        return V("raw", why, r)
    if r.acted is not None and r.rc == 0 and r.seconds - r.acted > 1.0:
        return V("silent", f"{moment}: the stop sent at {r.acted:.1f} s was ignored: exit 0 at {r.seconds:.1f} s", r)
    if r.acted is None or r.rc == 0:
        return V("missed", f"{moment}: the command ended (exit {r.rc}) before the stop"
                           f"{'' if r.fired is None else f' (moment seen at {r.fired:.1f} s)'}", r)
    want = 130 if sig == signal.SIGINT else 143
    if r.rc != want:
        return V("raw", f"exit {r.rc}, not {want}: {last_err(r)[:160]}", r)
    tail = [l for l in r.err.splitlines() if l.strip()][-3:]
    if not any(STOP_LINE.match(l.strip()) for l in tail):
        return V("raw", f"stderr does not end with the stop line: {' | '.join(tail)[:200]}", r)
    at = f"stopped at {r.fired:.1f} s"
    if out is not None:
        n = n_finished(out)
        if n and (submission_rows(out) is None or not (Path(out) / "leaderboard.csv").exists()):
            return V("lost", f"{at}: {n} candidate(s) had finished, no submission.csv/leaderboard.csv", r)
        s = session_of(out, r.pid)
        if s is not None and s.get("status") != "stopped":
            return V("silent", f"{at}: auto.json says this session is {s.get('status')!r}, not 'stopped'", r)
        at += f", {n} finished"
    return after_checks(r, case, out) or V("good", at, r)


def merge(*verdicts: dict) -> dict:
    """The worst of several steps' verdicts."""
    order = ["raw", "lost", "silent", "hang", "missed", "skipped", "refused", "good"]
    return min(verdicts, key=lambda v: order.index(v["verdict"]))


# ---------------------------------------------------------------------------------------------------- the cases

@dataclass
class Case:
    name: str
    group: str
    good: str                       # what good means in this case
    fn: Callable
    expect: tuple = ("good",)
    needs: tuple = ()               # "dask", "catboost"
    quick: bool = False


CASES: list[Case] = []


def case(name, group, good, expect=("good",), needs=(), quick=False):
    def add(fn):
        CASES.append(Case(name, group, good, fn, tuple(expect), tuple(needs), quick))
        return fn
    return add


class Ctx:
    """A case's folder (the working directory of its commands), the data, its MLflow store, its runs."""

    def __init__(self, folder: Path, data: Path, scale: float):
        self.dir, self.data, self.scale = folder, data, scale
        self.runs: list[Ran] = []
        self.train, self.test = data / "train.csv", data / "test.csv"

    @property
    def store(self) -> str:
        return f"sqlite:///{self.dir}/mlflow.db"

    @property
    def storage(self) -> str:
        return f"sqlite:///{self.dir}/optuna.db"

    def data_args(self, train=None, test=None) -> list[str]:
        return ["data=csv", f"data.path={train or self.train}", f"data.test_path={test or self.test}",
                "data.target=score", "data.id=id"]

    def auto(self, out, T=30, pairs=TWO, extra=(), train=None, test=None) -> list:
        engines, objectives = pairs
        argv = [PY, RUN, "experiment=auto", f"auto.time_limit={T}", *self.data_args(train, test)]
        if engines:
            argv.append(f"auto.engines=[{','.join(engines)}]")
        if objectives:
            argv.append(f"auto.objectives=[{','.join(objectives)}]")
        return [*argv, f"tracking.uri={self.store}", f"hydra.run.dir={out}", *extra]

    def single(self, out, extra=()) -> list:
        return [PY, RUN, *self.data_args(), f"tracking.uri={self.store}", "tracking.explain=false",
                f"hydra.run.dir={out}", *extra]

    def tune(self, out, n=3, engine="lightgbm", storage=True, extra=()) -> list:
        return [PY, TUNE, f"engine={engine}", f"tune.n_trials={n}", *self.data_args(), f"tracking.uri={self.store}",
                "tracking.explain=false", f"hydra.run.dir={out}",
                *([f"tune.storage={self.storage}"] if storage else []), *extra]

    def run(self, argv, timeout=None, cwd=None, **kw) -> Ran:
        T = next((float(a.split("=", 1)[1]) for a in map(str, argv) if a.startswith("auto.time_limit=")
                  and re.fullmatch(r"[0-9.]+", a.split("=", 1)[1])), 30.0)
        r = run_proc(argv, cwd or self.dir, (timeout or T + 60) * self.scale, **kw)
        self.runs.append(r)
        return r

    def user_folder(self, name="mine") -> Path:
        """A folder of the user's own: their pipeline notes, a plot and a submission of theirs."""
        d = self.dir / name
        (d / "pipeline").mkdir(parents=True)
        (d / "plots").mkdir()
        (d / "pipeline" / "important.txt").write_text("my feature pipeline, three weeks of work\n")
        (d / "plots" / "mine.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(2048))
        (d / "submission.csv").write_text("id,score\n100000,3\n100001,0\n")
        return d


def _started(r: Ran) -> list[str]:
    return [m.group(1) for m in STARTED.finditer(r.out) if m.group(1) != "blend"]


# ---- stop: Ctrl-C and SIGTERM at each moment, on one machine and on a cluster

def _seen(pattern):
    return re.compile(pattern)


def _finished_file(out):
    return lambda t: any((Path(out) / "candidates").glob("*/result.json")) and n_finished(out) > 0


MOMENTS = {  # name: (trigger, delay, pairs, time limit, what the moment is)
    "starting": (lambda out: (lambda t: t > 0.8), 0.0, TWO, 30, "0.8 s in, the imports"),
    "store": (lambda out: _seen(r"Creating initial MLflow database tables"), 0.0, TWO, 30,
              "the MLflow store being created"),
    "first-candidate": (lambda out: _seen(r"auto: lightgbm-squared_error \(\d+ s left\)"), 0.5, TWO, 30,
                        "0.5 s into the first candidate, nothing finished"),
    "after-first": (lambda out: _seen(r"auto: (the other|xgboost-squared_error \(|lightgbm-extended_qwk \()"), 0.3,
                    TWO, 30, "just after the first candidate finished"),
    "screening": (lambda out: _seen(r"auto: screen [a-z]"), 0.05, TWO, 30, "a screen running"),
    "second-trial": (lambda out: _seen(r"auto: lightgbm-squared_error-trial-1 \("), 0.5, ONE, 35,
                     "0.5 s into the second tuning trial"),
    "blend": (lambda out: _seen(r"auto: blend \("), 0.1, TWO, 30, "the blend being fitted"),
    "blend-files": (lambda out: _seen(r"blend \(greedy\) of \d+ members"), 0.3, TWO, 30,
                    "the blend's files being written"),
    "mlflow-model": (lambda out: _seen(r"Validating input example"), 0.0, TWO, 30,
                     "the blend's MLflow model being logged"),
}
SIGNALS = {"int": (signal.SIGINT, ctrl_c), "term": (signal.SIGTERM, sigterm)}
GOOD_STOP = ("exit 130 (Ctrl-C) / 143 (SIGTERM), the one stop line last on stderr, no traceback, auto.json's "
             "session 'stopped', no MLflow run RUNNING, no process left; if a candidate had finished: "
             "submission.csv and leaderboard.csv written")


def _stop_case(moment, sig_name):
    trig, delay, pairs, T, what = MOMENTS[moment]
    sig, send = SIGNALS[sig_name]

    def fn(c: Ctx):
        out = c.dir / "out"
        r = c.run(c.auto(out, T, pairs), trigger=trig(out), delay=delay, action=send)
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
    r = c.run(c.auto(out, 30, TWO), trigger=_seen(r"blend \(greedy\) of \d+ members"), delay=0.2, action=twice)
    v = judge_stop(r, c.dir, out, signal.SIGINT, "blend-files")
    if v["verdict"] == "lost" and submission_rows(out) is None and not (out / "pipeline").exists():
        v = V("good", "no blend written (the second Ctrl-C stopped it), nothing half-written; " + v["detail"], r)
    return v


@case("stop-int-resume-candidate", "stop", "a resume stopped by Ctrl-C during its first new candidate: exit 130, "
      "one line, the previous submission.csv and leaderboard.csv still there and whole")
def _(c: Ctx):
    out = c.dir / "out"
    first = c.run(c.auto(out, 25, LX))
    if first.rc != 0:
        return merge(judge_run(first, c.dir, out), V("skipped", "the first run failed"))
    r = c.run(c.auto(out, 30, TWO), trigger=_seen(r"auto: \w+-extended_qwk \("), delay=0.5, action=ctrl_c)
    return judge_stop(r, c.dir, out, signal.SIGINT, "resume's first new candidate")


@case("stop-int-resume-blend", "stop", "a resume stopped by Ctrl-C while its blend's files are written: exit 130, "
      "one line, a whole submission.csv (the previous or the new) and leaderboard.csv")
def _(c: Ctx):
    out = c.dir / "out"
    first = c.run(c.auto(out, 25, LX))
    if first.rc != 0:
        return merge(judge_run(first, c.dir, out), V("skipped", "the first run failed"))
    r = c.run(c.auto(out, 30, TWO), trigger=_seen(r"blend \(greedy\) of \d+ members"), delay=0.3, action=ctrl_c)
    return judge_stop(r, c.dir, out, signal.SIGINT, "resume's blend files")


CLUSTER_MOMENTS = {
    "first-candidate": (lambda out: _seen(r"auto: lightgbm-squared_error \(\d+ s left\)"), 2.0, TWO, 40,
                        "2 s into the first candidates on the workers"),
    "after-first": (lambda out: _finished_file(out), 0.5, TWO, 40, "0.5 s after the first candidate finished"),
    "tuning": (lambda out: _seen(r"auto: tuning "), 2.0, LX, 45, "2 s into tuning on the workers"),
    "blend": (lambda out: _seen(r"auto: blend \("), 0.1, TWO, 40, "the blend being fitted"),
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
                  trigger=_seen(r"auto: lightgbm-squared_error \("), delay=2.0, action=ctrl_c)
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


# ---- cluster: LocalCluster, your own scheduler, rows, killed workers and schedulers, memory limits

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
    r = c.run(c.auto(out, 45, TWO, ["cluster=local"]), trigger=_seen(r"auto: lightgbm-squared_error \("), delay=3.0,
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
                      trigger=_seen(r"auto: lightgbm-squared_error \("), delay=3.0,
                      action=lambda p: os.kill(victim, signal.SIGKILL))
        if r.acted is None:
            return V("missed", "the first candidate never started", r)
        return _lost_line(judge_run(r, c.dir, out), r, WORKER_LOST, "worker")


_kill_own_worker_case(False)
_kill_own_worker_case(True)


@case("cluster-rows-kill-worker", "cluster", "cluster=local cluster.parallel=rows, a worker killed 3 s into an "
      "XGBoost candidate trained across the rows: exit 0 within the limit, a line that the worker was lost, "
      "submission.csv", needs=("dask",))
def _(c: Ctx):
    out = c.dir / "out"
    kill = KillLocalWorker()
    r = c.run(c.auto(out, 45, LX, ["cluster=local", "cluster.parallel=rows"]), trigger=_seen(r"rows across"),
              delay=3.0, action=kill)
    if not kill.killed:
        return merge(judge_run(r, c.dir, out), V("missed", "no worker killed during a job across the rows"))
    return _lost_line(judge_run(r, c.dir, out), r, WORKER_LOST, "worker")


@case("cluster-address-kill-scheduler", "cluster", "your own scheduler killed (SIGKILL) once a candidate has "
      "finished: the command ends within its limit, exit 0, a line that the scheduler was lost, submission.csv of "
      "what finished", needs=("dask",))
def _(c: Ctx):
    out = c.dir / "out"
    with OwnDask(c.dir / "dask") as d:
        r = c.run(c.auto(out, 45, TWO, [f"cluster.address={d.address}"]), trigger=_finished_file(out), delay=0.5,
                  action=lambda p: d.scheduler.send_signal(signal.SIGKILL))
    if r.acted is None:
        return V("missed", "no candidate finished", r)
    return _lost_line(judge_run(r, c.dir, out), r, SCHEDULER_LOST, "scheduler")


@case("cluster-address-kill-all-workers", "cluster", "both of your own workers (no nanny) killed once a candidate has "
      "finished: the command ends within its limit, exit 0, a line that the workers were lost, submission.csv of "
      "what finished", needs=("dask",))
def _(c: Ctx):
    out = c.dir / "out"
    with OwnDask(c.dir / "dask") as d:
        def kill_all(p):
            for w in d.workers:
                w.send_signal(signal.SIGKILL)
        r = c.run(c.auto(out, 45, TWO, [f"cluster.address={d.address}"]), trigger=_finished_file(out), delay=0.5,
                  action=kill_all)
    if r.acted is None:
        return V("missed", "no candidate finished", r)
    return _lost_line(judge_run(r, c.dir, out), r, WORKER_LOST, "workers")


def _refusal_case(name, group, good, argv_of, names=None, expect=("refused",), needs=(), slow_after=None,
                  accept=None):
    """A case whose promise is a refusal in one line before training. ``accept(r, c)``: the verdict of an exit 0
    (default: silent, a bad setting accepted without a word)."""
    @case(name, group, good, expect=expect, needs=needs, quick=True)
    def _(c: Ctx):
        out = c.dir / "out"
        argv = argv_of(c, out)
        had = (out / "candidates").exists()
        r = c.run(argv, timeout=60)
        v = refusal(r, made=(out / "candidates").exists() and not had, names=names)
        if v is None:
            v = accept(r, c, out) if accept else V("silent", "exit 0: the setting was accepted without a word", r)
        if slow_after and v["verdict"] == "refused" and r.seconds > slow_after:
            v["detail"] = f"slow refusal ({r.seconds:.0f} s) " + v["detail"]
        if v["verdict"] == "refused" and "candidates run on the Dask cluster" in r.out:
            v["detail"] = "refused only after the cluster started: " + v["detail"]
        return v


_refusal_case("cluster-memory-local-200MB", "cluster", "cluster=local cluster.memory_limit=200MB (below what a "
              "worker with the engines needs): refused in one line naming cluster.memory_limit before the cluster "
              "starts", lambda c, out: c.auto(out, 30, TWO, ["cluster=local", "cluster.memory_limit=200MB"]),
              names="memory_limit", needs=("dask",),
              accept=lambda r, c, out: judge_run(r, c.dir, out))
_refusal_case("cluster-memory-lots", "cluster", "cluster.memory_limit=lots: refused in one line naming it",
              lambda c, out: c.auto(out, 30, TWO, ["cluster=local", "cluster.memory_limit=lots"]),
              names="memory_limit", needs=("dask",))
_refusal_case("cluster-memory-negative", "cluster", "cluster.memory_limit=-1GB: refused in one line naming it",
              lambda c, out: c.auto(out, 30, TWO, ["cluster=local", "cluster.memory_limit=-1GB"]),
              names="memory_limit", needs=("dask",))
_refusal_case("cluster-n-workers-zero", "cluster", "cluster=local cluster.n_workers=0: refused in one line",
              lambda c, out: c.auto(out, 30, TWO, ["cluster=local", "cluster.n_workers=0"]),
              names="n_workers", needs=("dask",))
_refusal_case("cluster-threads-zero", "cluster", "cluster=local cluster.threads_per_worker=0: refused in one line",
              lambda c, out: c.auto(out, 30, TWO, ["cluster=local", "cluster.threads_per_worker=0"]),
              names="threads_per_worker", needs=("dask",))
_refusal_case("cluster-address-nothing", "cluster", "cluster.address=tcp://127.0.0.1:9 (nothing listens): refused "
              "in one line, within ~10 s (else 'slow refusal' in the detail)",
              lambda c, out: c.auto(out, 30, TWO, ["cluster.address=tcp://127.0.0.1:9"]), names="cluster.address",
              needs=("dask",), slow_after=10)
_refusal_case("cluster-address-garbage", "cluster", "cluster.address=not-an-address: refused in one line",
              lambda c, out: c.auto(out, 30, TWO, ["cluster.address=not-an-address"]), names="cluster.address",
              needs=("dask",), slow_after=10)
_refusal_case("cluster-parallel-bogus", "cluster", "cluster=local cluster.parallel=everything: refused in one line",
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


# ---- resume: the same directory again

def _reuse_check(first: Ran, second: Ran, out: Path) -> dict | None:
    """The default candidates that finished in ``first`` reused in ``second``, not run again."""
    rec = auto_json(out) or {}
    done = [n for n in _started(first) if "-trial-" not in n
            and (rec.get("candidates", {}).get(n, {}).get("status") == "finished")]
    again = [n for n in done if n in _started(second)]
    if again:
        return V("silent", f"default candidate(s) run again after a resume: {again}", second)
    missing = [n for n in done if n not in REUSED.findall(second.out)]
    if missing:
        return V("silent", f"finished candidate(s) neither reused nor run: {missing}", second)
    return None


def _tuning_check(first: Ran, second: Ran) -> dict | None:
    """The second run's study of a pair the first run tuned goes on (N > 0 trials so far)."""
    tuned = set(TRIAL.findall(first.out))
    for pair, n in TUNING.findall(second.out):
        if pair in tuned and int(n) == 0:
            return V("silent", f"{pair}'s study restarted at 0 trials after the first run tuned it", second)
    return None


@case("resume-same", "resume", "the same command twice on one hydra.run.dir: exit 0 both, every finished candidate "
      "'reused' (none run again), submission.csv")
def _(c: Ctx):
    out = c.dir / "out"
    a = c.run(c.auto(out, 30, TWO))
    b = c.run(c.auto(out, 30, TWO))
    return merge(judge_run(a, c.dir, out), judge_run(b, c.dir, out), _reuse_check(a, b, out) or V("good"))


@case("resume-same-cluster", "resume", "the same cluster=local command twice: exit 0 both, finished candidates "
      "reused, submission.csv", needs=("dask",))
def _(c: Ctx):
    out = c.dir / "out"
    a = c.run(c.auto(out, 40, TWO, ["cluster=local"]))
    b = c.run(c.auto(out, 40, TWO, ["cluster=local"]))
    return merge(judge_run(a, c.dir, out), judge_run(b, c.dir, out), _reuse_check(a, b, out) or V("good"))


def _cross_case(name, first_extra, second_extra, good):
    @case(name, "resume", good, needs=("dask",))
    def _(c: Ctx):
        out = c.dir / "out"
        a = c.run(c.auto(out, 35, LX, first_extra))
        b = c.run(c.auto(out, 40, LX, second_extra))
        return merge(judge_run(a, c.dir, out), judge_run(b, c.dir, out),
                     _reuse_check(a, b, out) or _tuning_check(a, b) or
                     V("good", f"first tuned {sorted(set(TRIAL.findall(a.out)))}; second: "
                               f"{TUNING.findall(b.out)}"))


_cross_case("resume-local-then-cluster", [], ["cluster=local"], "first on one machine (it tunes), then cluster=local "
            "on the same directory: default candidates reused (not run again), the tuning study goes on (the second "
            "run's 'tuning <pair> (N trial(s) in its study so far)' has N > 0)")
_cross_case("resume-cluster-then-local", ["cluster=local"], [], "first on cluster=local (it tunes), then on one "
            "machine: default candidates reused, the tuning study goes on (N > 0)")


def _tune_cross_case(name, first_extra, second_extra, good):
    @case(name, "resume", good, needs=("dask",))
    def _(c: Ctx):
        a = c.run(c.tune(c.dir / "t1", 3, extra=first_extra), timeout=90)
        b = c.run(c.tune(c.dir / "t2", 5, extra=second_extra), timeout=90)
        v = merge(judge_run(a, c.dir, None, submission=False), judge_run(b, c.dir, None, submission=False))
        if v["verdict"] != "good":
            return v
        found = studies(c.storage)
        if len(found) != 1:
            return V("silent", f"the second invocation began another study: {found}", b)
        (study, n), = found.items()
        if n < 5:
            return V("silent", f"study {study} holds {n} finished trials, not 5", b)
        return V("good", f"{study}: {n} trials", b)


_tune_cross_case("resume-tune-local-then-cluster", [], ["cluster=local"], "tune.py tune.storage=<file> "
                 "tune.n_trials=3, then cluster=local tune.n_trials=5: one study in the storage, >= 5 finished trials")
_tune_cross_case("resume-tune-cluster-then-local", ["cluster=local"], [], "tune.py cluster=local tune.n_trials=3, "
                 "then on one machine tune.n_trials=5: one study in the storage, >= 5 finished trials")


def _swap_case(name, variant, which, good):
    """A run, then its train.csv (or test.csv) replaced at the same path: the resume is refused in one line."""
    @case(name, "resume", good, expect=("refused",))
    def _(c: Ctx):
        out = c.dir / "out"
        train, test = c.dir / "train.csv", c.dir / "test.csv"
        shutil.copy(c.train, train)
        shutil.copy(c.test, test)
        a = c.run(c.auto(out, 25, ONE, train=train, test=test))
        shutil.copy(c.data / variant, train if which == "train" else test)
        b = c.run(c.auto(out, 25, ONE, train=train, test=test))
        v = refusal(b, names="data.path" if which == "train" else "data.test_path")
        if v is None:
            v = V("silent", f"the resume on other rows ran: reused {REUSED.findall(b.out)}, "
                            f"tuning {TUNING.findall(b.out)}", b)
        elif v["verdict"] == "refused" and _started(b):
            v = V("raw", f"refused only after starting {_started(b)}: {v['detail']}", b)
        first = judge_run(a, c.dir, out)
        return v if first["verdict"] == "good" else merge(first, v)


_swap_case("resume-other-labels", "train_other_labels.csv", "train", "train.csv replaced by the same features with "
           "other labels, same path: the resume refused in one line naming data.path, before any training")
_swap_case("resume-minus-one-row", "train_minus_one.csv", "train", "train.csv replaced by itself less one row: the "
           "resume refused in one line naming data.path")
_swap_case("resume-other-test", "test_other.csv", "test", "test.csv replaced by 590 of its rows: the resume refused "
           "in one line naming data.test_path")


def _no_record_case(name, variant, good):
    """A run that tunes, train.csv replaced, auto.json moved away, then the command again."""
    @case(name, "resume", good, expect=("good", "refused"))
    def _(c: Ctx):
        out = c.dir / "out"
        train = c.dir / "train.csv"
        shutil.copy(c.train, train)
        a = c.run(c.auto(out, 35, ONE, train=train))
        if not TRIAL.findall(a.out):
            return merge(judge_run(a, c.dir, out), V("missed", "the first run tuned nothing", a))
        shutil.copy(c.data / variant, train)
        (out / "auto.json").rename(c.dir / "auto.json.moved")
        b = c.run(c.auto(out, 30, ONE, train=train))
        v = refusal(b, made=False)
        if v is not None:
            return merge(judge_run(a, c.dir, out), v)
        old = [(p, n) for p, n in TUNING.findall(b.out) if int(n) > 0]
        warned = re.search(r"set aside|other (data|rows)|another data|does not match|fingerprint", b.out, re.IGNORECASE)
        if old and not warned:
            return V("silent", f"tuned in the old data's study without a word: {old}", b)
        if REUSED.findall(b.out):
            return V("silent", f"reused the old data's candidates: {REUSED.findall(b.out)}", b)
        return merge(judge_run(a, c.dir, out), judge_run(b, c.dir, out))


_no_record_case("resume-other-labels-no-auto-json", "train_other_labels.csv", "a run that tuned; train.csv replaced "
                "by other labels and auto.json moved away; the command again: it does not tune in the old data's "
                "study (its 'N trial(s) in its study so far' is 0, or a line says the study was set aside) nor reuse "
                "old candidates; or a refusal in one line")
_no_record_case("resume-minus-one-row-no-auto-json", "train_minus_one.csv", "as above with one row removed: no tuning "
                "in the old study, no old candidate reused")


def _damage_case(name, damage, good):
    @case(name, "resume", good)
    def _(c: Ctx):
        out = c.dir / "out"
        a = c.run(c.auto(out, 25, LX))
        if n_finished(out) == 0:
            return merge(judge_run(a, c.dir, out), V("missed", "nothing finished to damage", a))
        done = [n for n, rec in auto_json(out)["candidates"].items() if rec.get("status") == "finished"]
        hit = [n for n in damage(c, out) if n in done]
        b = c.run(c.auto(out, 25, LX))
        v = merge(judge_run(a, c.dir, out), judge_run(b, c.dir, out))
        if v["verdict"] != "good":
            return v
        named = set(AGAIN.findall(b.out)) | set(re.findall(r"auto: ([\w.-]+) is left out of the blend", b.out))
        missing = [n for n in hit if n not in named]
        if missing:
            return V("silent", f"damaged candidate(s) without a 'runs again' line: {missing}; reused "
                               f"{REUSED.findall(b.out)}", b)
        return V("good", next((l for l in b.lines() if "runs again" in l or "left out of the blend" in l),
                              "").strip()[-140:], b)


def _truncate(c, out):
    hit = []
    for p in sorted((out / "candidates").glob("*/oof.parquet")):
        p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
        hit.append(p.parent.name)
    return hit


def _delete(c, out):
    shutil.rmtree(out / "candidates" / "lightgbm-squared_error")
    return ["lightgbm-squared_error"]


def _symlink(c, out):
    p = out / "candidates" / "lightgbm-squared_error" / "oof.parquet"
    copy = c.dir / "elsewhere.parquet"
    shutil.copy(p, copy)
    p.unlink()
    p.symlink_to(copy)           # the same bytes, through a link
    return ["lightgbm-squared_error"]


_damage_case("resume-damaged-oof", _truncate, "every candidates/*/oof.parquet truncated to half, then the command "
             "again: a line '<candidate> runs again' for each, exit 0, submission.csv")
_damage_case("resume-deleted-candidate", _delete, "candidates/lightgbm-squared_error deleted, then the command "
             "again: 'lightgbm-squared_error runs again', exit 0")
_damage_case("resume-symlinked-oof", _symlink, "a candidate's oof.parquet replaced by a symbolic link to a copy of "
             "the same bytes: 'runs again', exit 0")


@case("resume-record-points-outside", "resume", "auto.json edited so that a finished candidate's folder is "
      "'../victim' (a folder beside the output holding a copy of its files and a file of the user's): the record is "
      "not followed (the candidate runs again, or a refusal in one line), the victim folder untouched",
      expect=("good", "refused"))
def _(c: Ctx):
    out = c.dir / "out"
    a = c.run(c.auto(out, 25, LX))
    rec = auto_json(out)
    if not rec or rec.get("candidates", {}).get("lightgbm-squared_error", {}).get("status") != "finished":
        return merge(judge_run(a, c.dir, out), V("missed", "lightgbm-squared_error did not finish", a))
    victim = c.dir / "victim"
    shutil.copytree(out / "candidates" / "lightgbm-squared_error", victim)
    (victim / "keep.txt").write_text("the user's\n")
    rec["candidates"]["lightgbm-squared_error"]["dir"] = "../victim"
    (out / "auto.json").write_text(json.dumps(rec, indent=1))
    before = snapshot(victim)
    b = c.run(c.auto(out, 25, LX))
    gone = changed_files(before, victim)
    if gone:
        return V("lost", f"the folder a tampered record named was touched: {gone[:3]}", b)
    v = refusal(b)
    if v is not None:
        return v
    if "lightgbm-squared_error" in REUSED.findall(b.out):
        return V("silent", "reused a candidate from a folder outside candidates/", b)
    return judge_run(b, c.dir, out)


@case("resume-corrupt-auto-json", "resume", "auto.json cut in half, then the command again: refused in one line "
      "naming auto.json, or a run that says (a line naming auto.json) that it starts over",
      expect=("good", "refused"))
def _(c: Ctx):
    out = c.dir / "out"
    a = c.run(c.auto(out, 25, LX))
    p = out / "auto.json"
    if not p.exists():
        return merge(judge_run(a, c.dir, out), V("missed", "no auto.json", a))
    p.write_text(p.read_text()[: p.stat().st_size // 2])
    b = c.run(c.auto(out, 25, LX))
    v = refusal(b, names="auto.json")
    if v is not None:
        return v
    if "auto.json" not in b.out + b.err:
        return V("silent", "a damaged auto.json passed without a word", b)
    return judge_run(b, c.dir, out)


def _kill9_case(name, cluster, good):
    @case(name, "resume", good, needs=("dask",) if cluster else ())
    def _(c: Ctx):
        out = c.dir / "out"
        extra = ["cluster=local"] if cluster else []
        T = 40 if cluster else 35
        kill = ((lambda p: p.send_signal(signal.SIGKILL)) if cluster    # the client alone: its workers orphaned
                else (lambda p: os.killpg(p.pid, signal.SIGKILL)))
        a = c.run(c.auto(out, T, TWO, extra), trigger=_finished_file(out), delay=0.5, action=kill)
        if a.acted is None or a.rc != -signal.SIGKILL:
            return V("missed", f"not killed (exit {a.rc})", a)
        orphans = a.leftovers
        b = c.run(c.auto(out, T, TWO, extra))
        v = judge_run(b, c.dir, out)
        if v["verdict"] != "good":
            return v
        s = session_of(out, a.pid)
        if s is None or s.get("status") == "running":
            return V("silent", f"auto.json still says the killed session is "
                               f"{None if s is None else s.get('status')!r} after the resume", b)
        if orphans:
            return V("silent", f"{len(orphans)} process(es) of the killed client still ran 10 s later: "
                               f"{orphans[0][:80]}", b)
        return _reuse_check(a, b, out) or V("good", f"the killed session: {s.get('status')}", b)


_kill9_case("resume-kill9", False, "kill -9 of the command once a candidate finished, then the same command: exit 0, "
            "finished candidates reused, auto.json's killed session no longer 'running', no MLflow run RUNNING")
_kill9_case("resume-kill9-cluster-client", True, "cluster=local, kill -9 of the client process alone once a candidate "
            "finished: its LocalCluster workers end within 10 s; the same command resumes (exit 0, reuse, the killed "
            "session no longer 'running', no MLflow run RUNNING)")


@case("resume-while-running", "resume", "a second command into the directory a first one is writing: the second "
      "refused at once in one line naming the first (in use), the first ends exit 0 with its submission.csv",
      expect=("refused",))
def _(c: Ctx):
    out = c.dir / "out"
    second = []
    a = c.run(c.auto(out, 35, TWO), trigger=_seen(r"auto: lightgbm-squared_error \("), delay=0.5,
              action=lambda p: second.append(run_proc(c.auto(out, 35, TWO), c.dir, 95)))
    if not second:
        return V("missed", "the first command's candidate never started", a)
    b = second[0]
    c.runs.append(b)
    first = judge_run(a, c.dir, out)
    v = refusal(b, names="in use")
    if v is None:
        return V("silent", "two commands wrote one directory at once without a word", b)
    return v if first["verdict"] == "good" else merge(first, v)


_refusal_case("resume-time-limit-tiny", "resume", "a resume with auto.time_limit=3 (too short to start a candidate): "
              "refused at once in one line with the least that can start one",
              lambda c, out: (c.run(c.auto(out, 25, ONE)), c.auto(out, 3, ONE))[1], names="time_limit")


@case("resume-fewer-engines", "resume", "a run on LightGBM and XGBoost, then the same directory with "
      "auto.engines=[lightgbm]: exit 0, LightGBM reused, XGBoost's candidate 'set aside' in leaderboard.csv")
def _(c: Ctx):
    out = c.dir / "out"
    a = c.run(c.auto(out, 25, LX))
    b = c.run(c.auto(out, 25, ONE))
    v = merge(judge_run(a, c.dir, out), judge_run(b, c.dir, out))
    if v["verdict"] != "good":
        return v
    status = {r["candidate"]: r["status"] for r in board(out)}
    if status.get("xgboost-squared_error") not in ("set aside", None):
        return V("silent", f"xgboost-squared_error is {status.get('xgboost-squared_error')!r}, not 'set aside'", b)
    if "lightgbm-squared_error" in _started(b):
        return V("silent", "lightgbm-squared_error run again", b)
    return V("good", "", b)


# ---- folder: hydra.run.dir= a folder of the user's own

def _folder_case(name, good, argv_of, prepare=None, expect=("refused",)):
    @case(name, "folder", good, expect=expect, quick=True)
    def _(c: Ctx):
        target = prepare(c) if prepare else c.user_folder()
        watched = target.resolve() if target.is_symlink() else target
        before = snapshot(watched) if watched.is_dir() else {watched.name: hashlib.sha256(
            watched.read_bytes()).hexdigest()}
        existed_candidates = (watched / "candidates").exists() if watched.is_dir() else False
        r = c.run(argv_of(c, target), timeout=90)
        gone = (changed_files(before, watched) if watched.is_dir() else
                ([] if watched.is_file() and hashlib.sha256(watched.read_bytes()).hexdigest() ==
                 before[watched.name] else [f"{watched.name} overwritten or deleted"]))
        if gone:
            return V("lost", f"the user's files: {', '.join(gone[:4])} (exit {r.rc})", r)
        made = watched.is_dir() and (watched / "candidates").exists() and not existed_candidates
        v = refusal(r, made=made)
        return v or after_checks(r, c.dir, None) or V("good", "ran, the user's files untouched", r)


def _single_run(c, name="run1", extra=()):
    r = c.run(c.single(c.dir / name, extra), timeout=90)
    if r.rc != 0:
        raise RuntimeError(f"the single run failed: {last_err(r)}")
    return c.dir / name


def _two_runs(c) -> str:
    """Two finished runs to blend (a blend needs two members)."""
    return f"[{_single_run(c)},{_single_run(c, 'run2', ['objective=extended_qwk'])}]"


def _symlinked(c):
    c.user_folder()
    (c.dir / "link").symlink_to(c.dir / "mine")
    return c.dir / "link"


def _a_file(c):
    p = c.dir / "notes.txt"
    p.write_text("my notes\n")
    return p


_folder_case("folder-auto-user-files", "experiment=auto hydra.run.dir=<a folder holding the user's "
             "pipeline/important.txt, plots/mine.png and submission.csv>: refused in one line before any training, "
             "their files untouched (else lost)", lambda c, d: c.auto(d, 25, ONE))
_folder_case("folder-auto-symlink", "the same through a symbolic link to that folder: refused, files untouched",
             lambda c, d: c.auto(d, 25, ONE), prepare=_symlinked)
_folder_case("folder-auto-file", "hydra.run.dir=<a file of the user's>: refused in one line, the file untouched",
             lambda c, d: c.auto(d, 25, ONE), prepare=_a_file)
_folder_case("folder-run-user-files", "experiments/run.py (a single run) into the user's folder: refused in one "
             "line, their files untouched", lambda c, d: c.single(d))
_folder_case("folder-blend-user-files", "experiments/blend.py runs=[<two finished runs>] into the user's folder: "
             "refused in one line, their files untouched",
             lambda c, d: [PY, BLEND, f"runs={_two_runs(c)}", f"tracking.uri={c.store}", f"hydra.run.dir={d}"])
_folder_case("folder-auto-into-a-run", "experiment=auto into a finished single run's folder: refused in one line, "
             "the run's submission.csv, oof.parquet and pipeline untouched", lambda c, d: c.auto(d, 25, ONE),
             prepare=_single_run)
_folder_case("folder-tune-user-files", "experiments/tune.py hydra.run.dir=<the user's folder>: refused in one line, "
             "or it runs without touching their files", lambda c, d: c.tune(d, 2), expect=("refused", "good"))


# ---- tune: Ctrl-C in a trial, the printed best command, the default storage, resumes

def _trial_stop_case(name, sig_name, cluster, good):
    sig, send = SIGNALS[sig_name]

    @case(name, "tune", good, needs=("dask",) if cluster else ())
    def _(c: Ctx):
        out = c.dir / "out"
        pattern = r"auto: tuning " if not cluster else r"auto: tuning [\w-]+ \("
        r = c.run(c.auto(out, 45 if cluster else 35, LX if cluster else ONE, ["cluster=local"] if cluster else []),
                  trigger=_seen(pattern), delay=2.0, action=send)
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
        return judge_run(b, c.dir, out)


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
                   _seen(r"trial 1: fold 2/5"))
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

_refusal_case("tune-n-trials-zero", "tune", "tune.py tune.n_trials=0: refused in one line, or exit 0 with nothing "
              "run and no traceback", lambda c, out: c.tune(out, 0), names="n_trials", expect=("refused", "good"),
              accept=lambda r, c, out: judge_run(r, c.dir, None, submission=False))
_refusal_case("tune-storage-relative", "tune", "tune.storage=sqlite:///optuna.db (a relative path): refused in one "
              "line naming tune.storage", lambda c, out: [*c.tune(out, 2, storage=False),
                                                         "tune.storage=sqlite:///optuna.db"], names="tune.storage")
_refusal_case("tune-storage-directory", "tune", "tune.storage=sqlite:///<a directory>: refused in one line",
              lambda c, out: [*c.tune(out, 2, storage=False), f"tune.storage=sqlite:///{c.dir}"],
              names="tune.storage")
_refusal_case("tune-cluster-address-nothing", "tune", "tune.py cluster.address=tcp://127.0.0.1:9: refused in one "
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


# ---- screening

def _screen_case(name, good, T, pairs, extra, check=None, needs=(), expect=("good",)):
    @case(name, "screening", good, needs=needs, expect=expect)
    def _(c: Ctx):
        out = c.dir / "out"
        r = c.run(c.auto(out, T, pairs, extra))
        v = judge_run(r, c.dir, out)
        if v["verdict"] == "good" and check:
            v = check(r) or v
        if v["verdict"] == "good":
            v["detail"] = f"{n_finished(out)} finished, {len(re.findall('auto: screened', r.out))} screened"
        return v


_screen_case("screening-always", "auto.screen=always: exit 0, submission.csv, 'screened' lines", 30, TWO,
             ["auto.screen=always"],
             check=lambda r: None if "auto: screened" in r.out else V("silent", "auto.screen=always screened nothing",
                                                                      r))
_screen_case("screening-never", "auto.screen=never: exit 0, submission.csv, no screen", 30, TWO, ["auto.screen=never"],
             check=lambda r: V("silent", "auto.screen=never screened", r) if "auto: screened" in r.out else None)
_screen_case("screening-catboost", "auto.engines=[lightgbm,catboost]: exit 0, submission.csv", 40,
             (["lightgbm", "catboost"], ["squared_error"]), [], needs=("catboost",))
_screen_case("screening-always-catboost", "auto.engines=[lightgbm,xgboost,catboost] auto.screen=always: exit 0, "
             "submission.csv", 35, (["lightgbm", "xgboost", "catboost"], ["squared_error", "extended_qwk"]),
             ["auto.screen=always"], needs=("catboost",))
_screen_case("screening-never-catboost-only", "auto.engines=[catboost] auto.screen=never: exit 0, submission.csv "
             "(the first candidate always returns a complete run)", 30, (["catboost"], ["squared_error"]),
             ["auto.screen=never"], needs=("catboost",))
_screen_case("screening-every-engine", "no auto.engines or auto.objectives (every engine and objective) at 45 s: "
             "exit 0, submission.csv", 45, (None, None), [])
_screen_case("screening-always-cluster", "cluster=local auto.screen=always: exit 0, submission.csv", 40, TWO,
             ["cluster=local", "auto.screen=always"], needs=("dask",))
_screen_case("screening-tiny-budget", "auto.time_limit=12 auto.screen=always: exit 0 with submission.csv, or refused "
             "in one line as too short", 12, TWO, ["auto.screen=always"], expect=("good", "refused"))
_refusal_case("screening-bogus", "screening", "auto.screen=sometimes: refused in one line naming auto.screen",
              lambda c, out: c.auto(out, 30, TWO, ["auto.screen=sometimes"]), names="screen")


# ---- settings at their edges

for _name, _value, _good in [
        ("zero", "0", "refused in one line"), ("nan", "nan", "refused in one line"),
        ("inf", "inf", "refused in one line (an endless budget)"), ("word", "ten", "refused in one line"),
        ("tiny", "2", "refused in one line with the least that can start a candidate")]:
    _refusal_case(f"settings-time-limit-{_name}", "settings", f"auto.time_limit={_value}: {_good}",
                  lambda c, out, v=_value: [a if not str(a).startswith("auto.time_limit=") else f"auto.time_limit={v}"
                                            for a in c.auto(out, 30, ONE)], names="time_limit")
_refusal_case("settings-engines-empty", "settings", "auto.engines=[]: refused in one line naming auto.engines",
              lambda c, out: [*c.auto(out, 25, (None, ["squared_error"])), "auto.engines=[]"], names="engines")
_refusal_case("settings-engine-unknown", "settings", "auto.engines=[lightgbm,gbm]: refused in one line naming the "
              "engine", lambda c, out: c.auto(out, 25, (["lightgbm", "gbm"], ["squared_error"])), names="gbm")


@case("settings-engines-duplicate", "settings", "auto.engines=[lightgbm,lightgbm]: each candidate once (exit 0, "
      "submission.csv), or refused in one line", expect=("good", "refused"))
def _(c: Ctx):
    out = c.dir / "out"
    r = c.run(c.auto(out, 25, (["lightgbm", "lightgbm"], ["squared_error"])))
    v = refusal(r)
    if v is not None:
        return v
    twice = _started(r).count("lightgbm-squared_error")
    return V("silent", f"lightgbm-squared_error started {twice} times", r) if twice > 1 else judge_run(r, c.dir, out)


# ---- api: qwkboost.auto from a script

API_SCRIPT = """\
import pandas as pd
import qwkboost as qb

train = pd.read_csv({train!r})
test = pd.read_csv({test!r})
{guard}result = qb.auto(train.drop(columns="score"), train["score"], test, id="id", time_limit=20,
{indent}                 engines=["lightgbm"], cluster="local", output_dir={out!r}, tracking_uri={store!r})
{indent}print(result.leaderboard[["candidate", "status", "worker"]].to_string(index=False))
"""


def _api_case(name, guard, good, expect):
    @case(name, "api", good, expect=expect, needs=("dask",))
    def _(c: Ctx):
        out = c.dir / "out"
        script = c.dir / "auto_script.py"
        script.write_text(API_SCRIPT.format(train=str(c.train), test=str(c.test), out=str(out), store=c.store,
                                            guard='if __name__ == "__main__":\n    ' if guard else "",
                                            indent="    " if guard else ""))
        r = c.run([PY, script], timeout=90)
        if r.timed_out:
            return V("hang", f"no end within {r.seconds:.0f} s", r)
        why = raw_signs(r)
        if why:
            return V("raw", why, r)
        if r.rc == 0:
            return judge_run(r, c.dir, out)
        lines = [l for l in r.err.splitlines() if l.strip()]
        if len(lines) <= 5 and "__main__" in r.err:
            return V("refused", lines[-1][:200], r)
        return V("raw", f"exit {r.rc}, {len(lines)} lines on stderr: {last_err(r)[:160]}", r)


_api_case("api-no-main-guard", False, "a script calling qb.auto(..., cluster='local') at module level, no `if "
          "__name__ == '__main__':`: it works (exit 0, submission.csv), or says in one line (stderr under 5 lines, no "
          "traceback) that the call must be under `if __name__ == '__main__':`", ("good", "refused"))
_api_case("api-main-guard", True, "the same script under `if __name__ == '__main__':`: exit 0, submission.csv",
          ("good",))


# ------------------------------------------------------------------------------------------------------- driver

def _have(need: str) -> bool:
    if need == "dask":
        return importlib.util.find_spec("distributed") is not None and (Path(PY).parent / "dask").exists()
    return importlib.util.find_spec(need) is not None


def run_case(cs: Case, work: Path, data: Path, scale: float) -> dict:
    folder = work / "cases" / cs.name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    c = Ctx(folder, data, scale)
    t0 = time.monotonic()
    missing = [n for n in cs.needs if not _have(n)]
    if missing:
        v = V("skipped", f"needs {', '.join(missing)}")
    else:
        try:
            v = cs.fn(c)
        except Exception as exc:                          # the sweep's own step failed: say so, go on
            v = V("skipped", f"the case's setup failed: {type(exc).__name__}: {exc}"[:300])
    last = c.runs[-1] if c.runs else None
    return {"case": cs.name, "group": cs.group, "verdict": v["verdict"], "ok": v["verdict"] in cs.expect,
            "expect": list(cs.expect), "seconds": round(time.monotonic() - t0, 1),
            "exit": v["exit"] if v.get("exit") is not None else (last.rc if last else None), "detail": v.get("detail", ""), "good": cs.good,
            "commands": [" ".join(shlex.quote(a) for a in r.argv[1:]).replace(str(ROOT) + "/", "")[:600]
                         for r in c.runs],
            "stderr_tail": (last.err[-1500:] if last else ""), "folder": str(folder)}


VERDICTS = ["raw", "lost", "silent", "hang", "missed", "skipped", "refused", "good"]


def write_report(path: Path, rows: list[dict], meta: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({**meta, "counts": counts, "not_ok": sum(not r["ok"] for r in rows), "cases": rows},
                              indent=1))
    os.replace(tmp, path)
    groups = sorted({r["group"] for r in rows})
    md = ["# Edge sweep: the one command and tune.py at their edges", "",
          (f"`{meta['command']}`, {meta['started']}, {meta['machine'].get('cpu')} ({meta['machine'].get('nproc')} "
           f"cores), {meta['seconds']:.0f} s. Verdicts: see `benchmarks/edge_sweep.py`. "
           f"{sum(r['ok'] for r in rows)} of {len(rows)} cases as expected."), "",
          "| group | " + " | ".join(VERDICTS) + " |", "|---|" + "---:|" * len(VERDICTS)]
    for g in groups + ["all"]:
        sel = [r for r in rows if g in ("all", r["group"])]
        md.append(f"| {g} | " + " | ".join(str(sum(r['verdict'] == v for r in sel) or "") for v in VERDICTS) + " |")
    md += ["", "| case | group | verdict | ok | expected | s | exit | detail |", "|---|---|---|---|---|---:|---:|---|"]
    for r in rows:
        detail = r["detail"].replace("|", "\\|").replace("\n", " ")[:300]
        md.append(f"| {r['case']} | {r['group']} | **{r['verdict']}** | {'yes' if r['ok'] else 'NO'} | "
                  f"{'/'.join(r['expect'])} | {r['seconds']:.0f} | {r['exit']} | {detail} |")
    path.with_suffix(".md").write_text("\n".join(md) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", help="run the cases whose name holds any of these substrings")
    ap.add_argument("--quick", action="store_true", help="only the short cases (refusals, folders)")
    ap.add_argument("--jobs", type=int, default=1, help="cases side by side (1: timings as a user sees them)")
    ap.add_argument("--out", default=str(HERE / "results" / "edge_sweep.json"))
    ap.add_argument("--work", help="the work folder (default: a new temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (data and every case's folder)")
    ap.add_argument("--timeout-scale", type=float, default=1.0, help="multiply every timeout (a slow machine)")
    ap.add_argument("--list", action="store_true", help="list the cases and what good means in each, then exit")
    args = ap.parse_args()

    chosen = [cs for cs in CASES if (not args.only or any(s in cs.name for s in args.only))
              and (not args.quick or cs.quick)]
    if args.list:
        for cs in chosen:
            print(f"{cs.name:42s} [{cs.group}; expect {'/'.join(cs.expect)}] {cs.good}")
        print(f"{len(chosen)} cases")
        return
    if not chosen:
        sys.exit(f"no case matches {args.only}")
    work = Path(args.work or tempfile.mkdtemp(prefix="edge_sweep_")).resolve()
    data = work / "data"
    if not (data / "train.csv").exists():
        write_data(data)
    meta = {"command": " ".join(["python", "benchmarks/edge_sweep.py", *sys.argv[1:]]),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": machine(), "work": str(work)}
    print(f"{len(chosen)} case(s); work folder {work}", flush=True)
    t0 = time.monotonic()
    rows: list[dict] = []
    lock = threading.Lock()

    def one(cs):
        row = run_case(cs, work, data, args.timeout_scale)
        with lock:
            rows.append(row)
            rows.sort(key=lambda r: [c.name for c in chosen].index(r["case"]))
            print(f"[{len(rows)}/{len(chosen)}] {row['case']:42s} {row['verdict']:8s}{'' if row['ok'] else '!'} "
                  f"{row['seconds']:5.0f} s  exit {row['exit']}  {row['detail'][:150]}", flush=True)
            write_report(Path(args.out), rows, {**meta, "seconds": time.monotonic() - t0})

    try:
        if args.jobs == 1:
            for cs in chosen:
                one(cs)
        else:
            with ThreadPoolExecutor(args.jobs) as pool:
                list(pool.map(one, chosen))
    finally:
        if not args.keep and not args.work:
            shutil.rmtree(work, ignore_errors=True)
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    print("  ".join(f"{v} {n}" for v, n in counts.items() if n), f"; {sum(not r['ok'] for r in rows)} not as "
          f"expected; {args.out}", flush=True)


if __name__ == "__main__":
    main()
