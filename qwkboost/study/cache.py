"""The study's cache: finished cells (and the scores blends need) on disk, so a killed study resumes."""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np

__all__ = ["CellCache", "replaced"]


@contextmanager
def replaced(path: Path) -> Iterator[Path]:
    """A temporary file beside ``path`` to write; it replaces ``path`` in one step when the block ends (a process
    killed while writing leaves the previous file, or none), and is removed if the block fails."""
    tmp = path.with_name(f"{path.stem}.tmp{os.getpid()}{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class CellCache:
    """Finished cells on disk, one JSON file each, written atomically; and a journal of every computation.

    The cells a blend needs also keep their out-of-fold and test scores, in
    ``scores/<key>.npz``.
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.cells = self.root / "cells"
        self.cells.mkdir(parents=True, exist_ok=True)
        self.scores = self.root / "scores"
        self.journal = self.root / "computed.jsonl"

    def get_scores(self, key: str) -> dict | None:
        """A cell's kept scores (``oof``, ``test``), or ``None``."""
        path = self.scores / f"{key}.npz"
        try:
            with np.load(path) as z:
                return {"oof": z["oof"], "test": z["test"]}
        except (OSError, ValueError, KeyError):
            return None

    def put_scores(self, key: str, scores: dict) -> None:
        self.scores.mkdir(exist_ok=True)
        with replaced(self.scores / f"{key}.npz") as tmp:
            np.savez_compressed(tmp, oof=scores["oof"], test=scores["test"])

    def get(self, key: str) -> dict | None:
        path = self.cells / f"{key}.json"
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return None      # a torn file from a crash: computed again

    def record_command(self, fingerprint: str, wall: float, computed: int, reused: int) -> list[dict]:
        """Append this command's wall time to the study's history; return every command of the study so far."""
        path = self.root / "commands.jsonl"
        with open(path, "a") as fh:
            fh.write(json.dumps({"study": fingerprint, "wall": wall, "computed": computed, "reused": reused,
                                 "time": time.time()}) + "\n")
        return [r for r in map(json.loads, path.read_text().splitlines()) if r["study"] == fingerprint]

    def put(self, key: str, record: dict) -> None:
        with replaced(self.cells / f"{key}.json") as tmp:
            tmp.write_text(json.dumps(record, indent=1, default=float))
        with open(self.journal, "a") as fh:
            fh.write(json.dumps({"key": key, "label": record.get("label"), "pid": os.getpid(),
                                 "time": time.time()}) + "\n")
