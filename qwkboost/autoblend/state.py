"""What a budget's output directory remembers between invocations (``auto.json``), so that the same command run
again reuses the finished candidates and spends its new budget on others.

Each candidate is kept with the hash of its configuration; a candidate is reused only when the configuration it
would run with now hashes the same (another ``engine.params`` or ``cv.n_splits`` reruns it). The directory as a
whole belongs to one data set and split: a different ``data``, ``cv``, ``seed`` or ``thresholds`` is refused,
naming the keys that differ.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from qwkboost.exceptions import ConfigError

__all__ = ["AutoState", "STATE_FILE", "config_hash", "shared_part"]

STATE_FILE = "auto.json"
#: The config keys every candidate of one directory shares (its data, folds and decoding).
SHARED_KEYS = ("data", "cv", "seed", "thresholds")
#: Config keys that never change a candidate's result.
_UNHASHED = ("tracking", "run_name", "n_jobs", "hydra", "auto")


def config_hash(cfg: Mapping[str, Any]) -> str:
    """A 12-hex-digit hash of what changes a candidate's result."""
    kept = {k: v for k, v in cfg.items() if k not in _UNHASHED}
    if isinstance(kept.get("engine"), Mapping):
        kept["engine"] = {k: v for k, v in kept["engine"].items() if k != "search_space"}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:12]


def shared_part(cfg: Mapping[str, Any]) -> dict:
    """The part of a configuration every candidate of a directory shares (:data:`SHARED_KEYS`)."""
    return json.loads(json.dumps({k: cfg.get(k) for k in SHARED_KEYS}, sort_keys=True, default=str))


def _diff(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _diff(a.get(k), b.get(k), f"{prefix}{k}.")]
    return [] if a == b else [f"{prefix[:-1]}: {a!r} -> {b!r}"]


@dataclass
class AutoState:
    """The record of one output directory: the shared configuration, the MLflow parent run, every candidate and
    every invocation (its budget and the time it took)."""

    directory: Path
    shared: dict
    parent_run_id: str | None = None
    candidates: dict[str, dict] = field(default_factory=dict)
    sessions: list[dict] = field(default_factory=list)

    @classmethod
    def open(cls, directory: str | os.PathLike, shared: dict) -> "AutoState":
        """The directory's record, or a new one.

        Raises
        ------
        ConfigError
            If the directory holds the record of another data set, split or decoding, or a record that cannot be
            read.
        """
        d = Path(directory)
        path = d / STATE_FILE
        if not path.exists():
            return cls(d, shared)
        try:
            raw = json.loads(path.read_text())
            stored, candidates, sessions = raw["shared"], dict(raw["candidates"]), list(raw["sessions"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path} cannot be read ({exc}); move it away to start this directory afresh") from None
        if stored != shared:
            diff = _diff(stored, shared)
            raise ConfigError(f"{d} holds a time budget's candidates for another configuration "
                              f"({'; '.join(diff[:6])}); give another output directory (hydra.run.dir=...), or the "
                              "same settings to resume it")
        return cls(d, shared, raw.get("parent_run_id"), candidates, sessions)

    def finished(self, name: str, cfg_hash: str) -> dict | None:
        """The record of candidate ``name`` if it finished with a configuration hashing to ``cfg_hash`` and its
        files are still there."""
        rec = self.candidates.get(name)
        if rec is None or rec.get("status") != "finished" or rec.get("config_hash") != cfg_hash:
            return None
        return rec if (self.directory / rec["dir"] / "oof.parquet").exists() else None

    def save(self) -> None:
        """Write the record atomically (a kill while writing leaves the previous one)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / STATE_FILE
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"shared": self.shared, "parent_run_id": self.parent_run_id,
                                   "candidates": self.candidates, "sessions": self.sessions}, indent=1,
                                  default=str))
        os.replace(tmp, path)
