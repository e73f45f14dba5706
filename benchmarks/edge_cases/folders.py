"""``hydra.run.dir=`` a folder of the user's own (or a file of theirs, or a finished run's folder): nothing of
theirs touched, and but for ``tune.py`` a refusal in one line before training (group ``folder``)."""

from __future__ import annotations

import hashlib

from .harness import BLEND, ONE, PY, V, after_checks, changed_files, last_err, refusal, snapshot
from .registry import Ctx, case


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

