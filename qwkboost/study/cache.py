"""The study's cache: finished cells (and the scores blends need) on disk, so a killed study resumes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np

__all__ = ["CellCache"]


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
        path = self.scores / f"{key}.npz"
        tmp = path.with_name(f"{key}.tmp{os.getpid()}.npz")
        np.savez_compressed(tmp, oof=scores["oof"], test=scores["test"])
        os.replace(tmp, path)

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
        path = self.cells / f"{key}.json"
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(record, indent=1, default=float))
        os.replace(tmp, path)
        with open(self.journal, "a") as fh:
            fh.write(json.dumps({"key": key, "label": record.get("label"), "pid": os.getpid(),
                                 "time": time.time()}) + "\n")
