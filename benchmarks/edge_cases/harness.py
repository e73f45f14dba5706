"""The sweep's machinery: the data, the commands run and watched, Dask processes of the user's own, what a run
left behind, and the verdicts."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]          # the project: benchmarks/edge_cases/ is two floors down
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
    """Run ``argv`` in its own session, its output read line by line.

    Parameters
    ----------
    argv : list
        The command.
    cwd : str or Path
        Its working directory.
    timeout : float
        Seconds; past them its session is killed (``timed_out``).
    trigger : re.Pattern or callable, optional
        A regex on a line of output, or a callable of the seconds elapsed polled every 0.1 s.
    delay : float
        Seconds from the trigger's first hold to the action.
    action : callable, optional
        ``action(popen)``: run ``delay`` s after the trigger, unless the process has ended by then.
    env : dict, optional
        The environment (default ``ENV``).

    Returns
    -------
    Ran
        The process as it ended, with its session's processes still alive 10 s later (then killed).
    """
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


SIGNALS = {"int": (signal.SIGINT, ctrl_c), "term": (signal.SIGTERM, sigterm)}   # in a case's name: (signal, sender)


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
    """``r`` as a refusal: ``refused`` (one ``error:`` line, exit 2, nothing trained), ``hang``, ``raw``.

    Parameters
    ----------
    r : Ran
    made : bool
        ``candidates/`` appeared: a refusal after that is raw.
    names : str, optional
        A regex the ``error:`` line should match; if it does not, the detail says so.

    Returns
    -------
    dict or None
        The verdict (:func:`V`), or None when ``r`` exited 0 (the case decides what that means).
    """
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
    """A command that should have done its work: exit 0, and (``submission``) the blend's files.

    Parameters
    ----------
    r : Ran
    case : Path
        The case's folder (its MLflow store).
    out : Path or None
        The command's output folder.
    submission : bool
        Whether ``submission.csv`` and ``leaderboard.csv`` are owed.

    Returns
    -------
    dict
        The verdict (:func:`V`).
    """
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
    traceback, and when a candidate had finished, the blend of what finished written.

    Parameters
    ----------
    r : Ran
    case : Path
        The case's folder (its MLflow store).
    out : Path or None
        The command's output folder (None: a command without one, ``tune.py``).
    sig : int
        The signal sent.
    moment : str
        The moment, for the detail.

    Returns
    -------
    dict
        The verdict (:func:`V`).
    """
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
    tail = [l for l in r.err.splitlines() if l.strip()][-3:]
    said = any(STOP_LINE.match(l.strip()) for l in tail)
    # a second signal while the interpreter exits, after the stop line (Python has given the signal back its default
    # action by then), ends the process by that signal: a shell reports it as the same 128 + N
    if r.rc != want and not (said and r.rc == -sig):
        return V("raw", f"exit {r.rc}, not {want}: {last_err(r)[:160]}", r)
    if not said:
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


# ------------------------------------------------------------------------------------------------- log watching

def started(r: Ran) -> list[str]:
    """The candidates (and trials) ``r`` started, in order, the blend left out."""
    return [m.group(1) for m in STARTED.finditer(r.out) if m.group(1) != "blend"]


def seen(pattern):
    """A trigger for :func:`run_proc`: a line of output matching ``pattern``."""
    return re.compile(pattern)


def finished_file(out):
    """A trigger for :func:`run_proc`: a candidate under ``out`` has finished (its files written)."""
    return lambda t: any((Path(out) / "candidates").glob("*/result.json")) and n_finished(out) > 0
