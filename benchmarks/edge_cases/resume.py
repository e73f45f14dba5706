"""The same directory again: resumes after a finished, damaged, tampered or killed run (group ``resume``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal

from .harness import (AGAIN, LX, ONE, REUSED, TRIAL, TUNING, TWO, Ran, V, auto_json, board, changed_files,
                      finished_file, judge_run, merge, n_finished, refusal, run_proc, seen, session_of, snapshot,
                      started, studies)
from .registry import Ctx, case, refusal_case


def _reuse_check(first: Ran, second: Ran, between: dict | None) -> dict | None:
    """The default candidates that finished in ``first`` (``between``: ``auto.json`` as ``first`` left it, read before
    ``second`` ran) reused in ``second``, not run again. One that ``first`` started but did not finish (stopped for
    time, or running when it was killed) is rightly run again."""
    rec = between or {}
    done = [n for n in started(first) if "-trial-" not in n
            and (rec.get("candidates", {}).get(n, {}).get("status") == "finished")]
    again = [n for n in done if n in started(second)]
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
    between = auto_json(out)
    b = c.run(c.auto(out, 30, TWO))
    return merge(judge_run(a, c.dir, out), judge_run(b, c.dir, out), _reuse_check(a, b, between) or V("good"))


@case("resume-same-cluster", "resume", "the same cluster=local command twice: exit 0 both, finished candidates "
      "reused, submission.csv", needs=("dask",))
def _(c: Ctx):
    out = c.dir / "out"
    a = c.run(c.auto(out, 40, TWO, ["cluster=local"]))
    between = auto_json(out)
    b = c.run(c.auto(out, 40, TWO, ["cluster=local"]))
    return merge(judge_run(a, c.dir, out), judge_run(b, c.dir, out), _reuse_check(a, b, between) or V("good"))


def _cross_case(name, first_extra, second_extra, good):
    @case(name, "resume", good, needs=("dask",))
    def _(c: Ctx):
        out = c.dir / "out"
        a = c.run(c.auto(out, 35, LX, first_extra))
        between = auto_json(out)
        b = c.run(c.auto(out, 40, LX, second_extra))
        return merge(judge_run(a, c.dir, out), judge_run(b, c.dir, out),
                     _reuse_check(a, b, between) or _tuning_check(a, b) or
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
        elif v["verdict"] == "refused" and started(b):
            v = V("raw", f"refused only after starting {started(b)}: {v['detail']}", b)
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
        a = c.run(c.auto(out, T, TWO, extra), trigger=finished_file(out), delay=0.5, action=kill)
        if a.acted is None or a.rc != -signal.SIGKILL:
            return V("missed", f"not killed (exit {a.rc})", a)
        orphans = a.leftovers
        between = auto_json(out)
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
        return _reuse_check(a, b, between) or V("good", f"the killed session: {s.get('status')}", b)


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
    a = c.run(c.auto(out, 35, TWO), trigger=seen(r"auto: lightgbm-squared_error \("), delay=0.5,
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


def _blends_again(r, c, out) -> dict:
    """A resume too short to start a candidate may blend what finished again, if a line says so."""
    if r.rc == 0 and re.search(r"cannot start a candidate.*blending again", r.out + r.err):
        return V("good", "no candidate started: a line says so, and the finished ones were blended again", r)
    return V("silent", "exit 0: the setting was accepted without a word", r)


refusal_case("resume-time-limit-tiny", "resume", "a resume with auto.time_limit=3 (too short to start a candidate): "
             "refused at once in one line with the least that can start one, or the finished candidates blended "
             "again with a line saying that no candidate can start",
             lambda c, out: (c.run(c.auto(out, 25, ONE)), c.auto(out, 3, ONE))[1], names="time_limit",
             expect=("refused", "good"), accept=_blends_again)


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
    if "lightgbm-squared_error" in started(b):
        return V("silent", "lightgbm-squared_error run again", b)
    return V("good", "", b)

