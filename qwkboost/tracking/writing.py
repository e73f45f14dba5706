"""Writing outputs so that the last good ones survive.

* **Staged, then swapped in.** A new set of outputs is written into a folder beside the old one
  (:func:`staged`) and moved into place entry by entry only once all of it is written: a failure, a Ctrl-C or a
  full disk while writing leaves the previous ``submission.csv``, ``oof.parquet`` and ``pipeline/`` as they were.
  Each move is one ``rename`` on the same file system (atomic on POSIX), a folder such as ``pipeline/`` included.
* **One writer per directory.** :class:`OutputLock` holds an operating-system lock on the directory (released by
  the kernel if the process dies), so a second command into the same directory is refused with one line naming
  the first (its process, host, start and command line) instead of both training and one crashing.
* **A folder of the user's is never written into.** A command writes only into a folder that is new, empty but for
  Hydra's own files, or already its own (:func:`claim`, which marks it): a folder holding anything else is refused
  in one line before any work, since outputs swapped in there would replace or remove the user's files.
* **A manifest tells a damaged file.** :func:`manifest` records every file's size and SHA-256 digest when a run
  finishes; :func:`manifest_problem` names the first file since deleted, truncated, replaced, turned into a
  symbolic link or a FIFO, before anything is reused. Digests cost about 0.1 s per 100 MB.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import socket
import stat
import sys
import time
from pathlib import Path
from typing import Callable, Iterator, Mapping

from filelock import FileLock, Timeout

from qwkboost.exceptions import ConfigError
from qwkboost.tracking.files import run_path
from qwkboost.tracking.interrupt import held_stops, is_alive, process_tag

__all__ = ["staged", "OutputLock", "manifest", "manifest_problem", "claim", "hydra_entries", "LOCK_FILE", "OWNER_FILE",
           "KINDS"]

LOCK_FILE = ".qwkboost.lock"
#: Who holds the lock: written beside the lock file once it is held (the lock file itself is truncated by every
#: attempt to take it).
HOLDER_FILE = ".qwkboost.lock.json"
_STAGING = ".staging-"
_OLD = ".old-"
#: Which command's outputs a folder holds: written by :func:`claim` when a command first writes there.
OWNER_FILE = ".qwkboost.json"
#: What Hydra writes into a job's folder before the command starts: its configs (and, beside them, its job's log).
HYDRA_DIR = ".hydra"
#: The commands that own an output folder: what they are called in a message, and the record each one writes there
#: (what marks a folder of an earlier qwkboost as theirs, before :data:`OWNER_FILE`).
KINDS = {"auto": ("a time budget (experiment=auto)", "auto.json"), "run": ("a run", "result.json"),
         "table": ("the QWK table", "qwk_table.csv"), "blend": ("a blend", "blend.json"),
         "study": ("the study (experiment=study)", "study.md")}


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _clear_stale(directory: Path) -> None:
    """Remove staging and swapped-out folders that a killed process left (their process tag is gone)."""
    for p in directory.iterdir():
        if not p.name.startswith((_STAGING, _OLD)):
            continue
        tag = p.name.split("-", 1)[1].rsplit("-", 1)[0].replace("+", ":")
        if is_alive(tag) is False:
            _remove(p)


@contextlib.contextmanager
def staged(directory: str | os.PathLike, remove: tuple[str, ...] = (),
           swapped: Callable[[], None] | None = None) -> Iterator[Path]:
    """A new folder inside ``directory`` to write a set of outputs into, swapped in when the block ends cleanly.

    Every entry written into the folder replaces the entry of the same name in ``directory`` (a file by
    ``os.replace``; a folder by renaming the old one aside, the new one in, then removing the old); the entries
    named in ``remove`` that the new set lacks are removed after the swap (an earlier blend's ``blend.json`` when
    the new output is one run's). If the block raises (Ctrl-C included), the folder is removed and ``directory`` is
    left as it was.

    Parameters
    ----------
    directory : path
        The outputs' directory (created if missing).
    remove : tuple of str
        Names of older outputs that must not outlive the swap.
    swapped : callable, optional
        Called once the new entries are in place, before a stop held during the swap is acted on: what records
        that the outputs are now these (:func:`~qwkboost.tracking.interrupt.held_stops`).
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    _clear_stale(d)
    token = f"{process_tag().replace(':', '+')}-{secrets.token_hex(3)}"
    tmp = d / f"{_STAGING}{token}"
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = d / f"{_OLD}{token}"
    new = sorted(tmp.iterdir())
    names = {e.name for e in new}
    with held_stops(all_of_them=True):      # stops wait for the swap: never half the new entries and half the old
        _swap(d, tmp, old, new, names, remove)
        if swapped is not None:
            swapped()


def _swap(d: Path, tmp: Path, old: Path, new: list[Path], names: set, remove: tuple[str, ...]) -> None:
    """Move the staged entries ``new`` into ``d`` (the old ones aside into ``old``, then removed), and remove the
    entries named in ``remove`` that the new set lacks."""
    try:
        for entry in new:
            target = d / entry.name
            if (entry.is_dir() or target.is_dir()) and (target.exists() or target.is_symlink()):
                old.mkdir(exist_ok=True)
                os.replace(target, old / entry.name)
            os.replace(entry, target)
        for name in remove:
            if name not in names:
                _remove(d / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def _housekeeping(name: str, hydra: tuple[str, ...] | None, guess: bool) -> bool:
    """Whether a folder's entry is qwkboost's own bookkeeping or Hydra's (never the user's): ``hydra`` names Hydra's
    entries where the command knows them; else (``None``) ``.hydra/`` and, beside it (``guess``), a ``.log``."""
    if name in (LOCK_FILE, HOLDER_FILE, OWNER_FILE) or name.startswith((_STAGING, _OLD)):
        return True
    if hydra is not None:
        return name in hydra
    return name == HYDRA_DIR or (guess and name.endswith(".log"))


def hydra_entries(hc) -> tuple[str, ...]:
    """What Hydra writes into a job's folder before the command starts, from its runtime config ``hc``
    (``HydraConfig.get()``): its configs' folder (``hydra.output_subdir``, ``.hydra`` unless set otherwise or off)
    and its job's log (``<job name>.log``)."""
    subdir = getattr(hc, "output_subdir", HYDRA_DIR)
    return tuple(n for n in (subdir, f"{hc.job.name}.log") if n)


def _owner(directory: Path) -> str | None:
    try:
        kind = json.loads((directory / OWNER_FILE).read_text()).get("kind")
    except (OSError, ValueError, AttributeError):
        return None
    return kind if kind in KINDS else None


def claim(directory: str | os.PathLike, kind: str, key: str = "the output directory",
          hydra: tuple[str, ...] | None = None) -> Path:
    """Take ``directory`` for the outputs of ``kind`` (a key of :data:`KINDS`), before any work.

    A folder is ``kind``'s when it is new, when it holds nothing but Hydra's files (``.hydra/`` and its job's
    ``.log``) and qwkboost's bookkeeping, or when it is already ``kind``'s (its :data:`OWNER_FILE`, or the record
    ``kind`` writes: ``auto.json``, ``result.json``, ...). It is then marked as ``kind``'s (:data:`OWNER_FILE`), so a
    later command knows it, even one that finds its record gone.

    Parameters
    ----------
    directory : path
        Created if missing.
    kind : {"auto", "run", "table", "blend", "study"}
    key : str
        How the user names the folder (``hydra.run.dir``, ``output_dir``), for the message.
    hydra : tuple of str, optional
        The entries Hydra made in the folder (:func:`hydra_entries`); default: ``.hydra/`` and a ``.log`` beside it.

    Returns
    -------
    Path

    Raises
    ------
    ConfigError
        In one line naming ``key``: for a folder that holds another command's outputs, or files qwkboost did not
        write (the first few named), which its outputs could replace or remove.
    """
    d = Path(directory)
    what = KINDS[kind][0]
    fix = f"give a new folder ({key}=...)"
    if d.exists() and not d.is_dir():
        raise ConfigError(f"{key}={str(d)!r} is a file, not a folder; {fix}")
    owner = _owner(d) if d.exists() else None
    if owner is None and d.exists():
        # an earlier qwkboost's folder: the record it holds says whose (auto's first: it holds a blend's too)
        owner = next((k for k, (_, r) in KINDS.items() if (d / r).exists()), None)
        if owner is None:
            guess = (d / HYDRA_DIR).is_dir()
            entries = sorted(e.name + ("/" if e.is_dir() else "") for e in d.iterdir()
                             if not _housekeeping(e.name, hydra, guess))
            if entries:
                shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
                raise ConfigError(f"{key}={str(d)!r} holds files qwkboost did not write ({shown}); {what} writes only "
                                  f"into a new folder or one of its own, since its outputs would replace or remove "
                                  f"them: {fix}")
    if owner is not None and owner != kind:
        raise ConfigError(f"{key}={str(d)!r} holds the outputs of {KINDS[owner][0]}, not of {what}, which would "
                          f"replace or remove them: {fix}")
    try:
        d.mkdir(parents=True, exist_ok=True)
        if not (d / OWNER_FILE).exists():
            tmp = d / f"{OWNER_FILE}.{os.getpid()}"
            tmp.write_text(json.dumps({"kind": kind, "created": time.strftime("%Y-%m-%d %H:%M:%S")}))
            os.replace(tmp, d / OWNER_FILE)
    except OSError as exc:
        raise ConfigError(f"{key}={str(d)!r} cannot be written ({exc.strerror or exc}); give a directory you can "
                          "write to") from None
    return d


class OutputLock:
    """One command writing ``directory`` at a time: an operating-system lock on ``<directory>/.qwkboost.lock``
    (``filelock``), held from ``__enter__`` to ``__exit__`` and released by the kernel if the process dies.

    Parameters
    ----------
    directory : path
        Created if missing.
    key : str
        How the user named the directory (``hydra.run.dir``, ``output_dir``), for the messages.

    Raises
    ------
    ConfigError
        On entering, if another process holds the lock (naming it), or if the directory cannot be created or
        written (naming ``key``).
    """

    def __init__(self, directory: str | os.PathLike, key: str = "the output directory"):
        self.directory, self.key = Path(directory), key
        self._lock: FileLock | None = None

    def __enter__(self) -> "OutputLock":
        d = self.directory
        try:
            d.mkdir(parents=True, exist_ok=True)
            lock = FileLock(d / LOCK_FILE, timeout=0)
            lock.acquire()
        except Timeout:
            raise ConfigError(f"{self.key}={str(d)!r} is in use by another qwkboost command ({self._holder()}); "
                              "wait for it to end, or give another directory") from None
        except OSError as exc:
            raise ConfigError(f"{self.key}={str(d)!r} cannot be written ({exc.strerror or exc}); give a directory "
                              "you can write to") from None
        self._lock = lock
        holder = {"process": process_tag(), "host": socket.gethostname(), "pid": os.getpid(),
                  "started": time.strftime("%Y-%m-%d %H:%M:%S"), "command": " ".join(sys.argv)}
        tmp = d / f"{HOLDER_FILE}.{os.getpid()}"
        tmp.write_text(json.dumps(holder))
        os.replace(tmp, d / HOLDER_FILE)
        return self

    def _holder(self) -> str:
        try:
            h = json.loads((self.directory / HOLDER_FILE).read_text())
            return f"pid {h['pid']} on {h['host']}, since {h['started']}: {h['command'][:200]}"
        except (OSError, ValueError, KeyError, TypeError):
            return "its process could not be named"

    def __exit__(self, *exc) -> None:
        if self._lock is not None:
            (self.directory / HOLDER_FILE).unlink(missing_ok=True)
            self._lock.release()
            self._lock = None


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def manifest(directory: str | os.PathLike) -> dict[str, list]:
    """Every regular file under ``directory``: its path relative to it (``/``-separated) -> ``[size, digest]``
    (the first 16 hex digits of its SHA-256). Symbolic links and other non-regular entries are left out, so a
    manifest never vouches for them."""
    root = Path(directory)
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(n for n in dirnames if not os.path.islink(os.path.join(dirpath, n)))
        for name in sorted(filenames):
            p = Path(dirpath, name)
            st = p.lstat()
            if stat.S_ISREG(st.st_mode):
                out[p.relative_to(root).as_posix()] = [st.st_size, _digest(p)]
    return out


def manifest_problem(directory: str | os.PathLike, recorded: Mapping[str, list]) -> str | None:
    """The first way ``directory`` differs from its :func:`manifest` ``recorded`` (a recorded path that leaves the
    directory, a file missing or not a regular file, resized or rewritten), or ``None`` when every recorded file is
    as it was. Paths are checked by :func:`qwkboost.tracking.files.run_path` (nothing is opened that is not a
    regular file inside the directory); files added since are not looked at."""
    where = f"{Path(directory).name}/"
    try:
        run_path(Path(directory).parent, Path(directory).name, "folder", "the run", kind="dir")
        for rel, (size, digest) in recorded.items():
            p = run_path(directory, rel, "file", where)
            if p.stat().st_size != size:
                return f"{rel} changed size ({size} -> {p.stat().st_size} bytes)"
            if _digest(p) != digest:
                return f"{rel} changed (its content differs)"
    except ValueError as exc:
        return str(exc).removeprefix(f"{where}: ").removeprefix("the run: ")
    return None
