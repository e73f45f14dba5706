"""Reading a run's files: every path a file names resolved inside its run directory, and only regular files read.

A run's files name other files: a pipeline's ``pipeline.json`` its fold model files, a blend's ``pipeline.json``
its members' directories, ``auto.json`` its candidates' directories. A crafted or damaged directory could name
``../elsewhere``, an absolute path, or a symlink leading out of the directory (another run's fold mixed into this
pipeline), or hold a FIFO or a device where a file is expected (reading it would wait forever).
:func:`run_path` refuses each in one line naming the directory, the field and the name, looking at the path
with ``os.stat`` only (it opens nothing), before any loader reads it. Symlinks that stay inside the directory
are followed; none leading out is, and no option allows one: nothing qwkboost writes needs it.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path, PurePosixPath, PureWindowsPath

from qwkboost.validation import file_kind

__all__ = ["run_path", "link_or_copy"]


def link_or_copy(src, dst) -> None:
    """``dst`` made a hard link to ``src`` (one file on disk under two names: instant, no space), else, across file
    systems or where links are refused, a copy. qwkboost never rewrites a file it wrote in place (outputs are
    swapped in whole), so what one name holds the other keeps."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def run_path(root, name, field: str, where: str | None = None, kind: str = "file") -> Path:
    """``root / name``, once ``name`` (a relative path read from one of the run's files, or a name its format
    fixes) is known to stay inside the directory ``root`` and to be a regular file (``kind="file"``) or a
    directory (``kind="dir"``).

    Parameters
    ----------
    root : str or Path
        The run directory (a path the user gave, or one ``run_path`` returned).
    name : str
        The path as the file holds it, e.g. ``pipeline.json``'s ``"fold_0.json"`` or ``auto.json``'s
        ``"candidates/xgboost-extended_qwk-0"``.
    field : str
        What names it, for messages: ``"'models' entry"``, ``"auto.json 'dir'"``, ``"file"``...
    where : str, optional
        How messages name the directory; default ``"directory '<root>'"``.
    kind : {"file", "dir"}

    Returns
    -------
    Path
        ``Path(root) / name`` (the path as given, for messages; it resolves inside ``root``).

    Raises
    ------
    ValueError
        In one line ``"<where>: <field> '<name>' <problem>"``, for a name that is not a string, is empty, absolute
        or holds ``..`` or a NUL; a path that leads out of ``root`` (through a symlink); one that does not exist;
        one that is not a regular file (a FIFO, a device, a directory) or not a directory, as ``kind`` asks.
    """
    if kind not in ("file", "dir"):
        raise ValueError(f"kind must be 'file' or 'dir'; got {kind!r}")
    where = where or f"directory {str(root)!r}"

    def refuse(problem: str):
        text = ascii(name) if isinstance(name, str) else repr(name)
        return ValueError(f"{where}: {field} {text if len(text) <= 200 else text[:197] + '...'} {problem}")

    if not isinstance(name, str) or not name or name == "." or "\x00" in name:
        raise refuse("is not a relative path inside the directory")
    if os.path.isabs(name) or PureWindowsPath(name).anchor:
        raise refuse("is an absolute path; a run's files name paths inside its directory")
    if ".." in PurePosixPath(name.replace("\\", "/")).parts:
        raise refuse("holds '..'; a run's files name paths inside its directory")
    try:
        top = Path(root).resolve(strict=True)
        real = (Path(root) / name).resolve()        # every symlink followed, to where it leads
    except FileNotFoundError:
        raise ValueError(f"{where} does not exist") from None
    except (OSError, RuntimeError) as exc:          # a symlink loop: RuntimeError before Python 3.13
        raise refuse(f"cannot be resolved ({getattr(exc, 'strerror', None) or exc})") from None
    if not real.is_relative_to(top):
        raise refuse(f"leads out of the directory (a symlink to {str(real)!r}); a run's files stay inside it")
    try:
        mode = os.stat(real).st_mode                # opens nothing: a FIFO is not waited on
    except FileNotFoundError:
        raise refuse("does not exist") from None
    except OSError as exc:
        raise refuse(f"cannot be read ({exc.strerror or exc})") from None
    if kind == "file" and not stat.S_ISREG(mode):
        raise refuse(f"is {file_kind(mode)}, not a regular file")
    if kind == "dir" and not stat.S_ISDIR(mode):
        raise refuse(f"is {file_kind(mode)}, not a directory")
    return Path(root) / name
