"""What a budget's output directory remembers between invocations (``auto.json``), so that the same command run
again reuses the finished candidates and spends its new budget on others.

Each candidate is kept with the hash of its configuration and the manifest of its files (sizes and digests,
:func:`qwkboost.tracking.writing.manifest`); a candidate is reused only when the configuration it would run with
now hashes the same (another ``engine.params`` or ``cv.n_splits`` reruns it) and its files are as it left them
(a damaged one runs again, with a line saying why). The directory as a whole belongs to one data set and split: a
different ``data``, ``cv``, ``seed`` or ``thresholds`` is refused, naming the keys that differ, and so are other
rows under the same names (the data's fingerprint, :mod:`qwkboost.data.fingerprint`: a replaced ``train.csv`` or
``test.csv``, another frame in Python). Every invocation is recorded in ``sessions``, from its start; one whose
process was killed before it could close its record is marked ``killed`` by the next. Where candidates run (one
machine or a Dask cluster) is not part of their hash: a directory moves between the two and keeps them.

Who writes what: a candidate's record (:class:`CandidateRecord`) is written only by :class:`AutoState`'s
``record_*`` methods, which :mod:`~qwkboost.autoblend.jobs` (a candidate's start and end) and
:mod:`~qwkboost.autoblend.schedule` (its screen) call; the sessions by the driver; ``outputs`` by
:mod:`~qwkboost.autoblend.finish`. Everything else reads them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from enum import StrEnum
from pathlib import Path
from typing import Any, Mapping

from qwkboost.config import UNHASHED, config_hash
from qwkboost.data.fingerprint import DataFingerprint, check_same
from qwkboost.exceptions import ConfigError
from qwkboost.tracking.files import run_path
from qwkboost.tracking.writing import manifest_problem

__all__ = ["AutoState", "CandidateRecord", "STATE_FILE", "SessionStatus", "Status", "config_hash",
           "legacy_config_hash", "shared_part"]

STATE_FILE = "auto.json"


class Status(StrEnum):
    """A candidate's status: its value is what ``auto.json`` and ``leaderboard.csv`` hold (older files read the
    same)."""

    FINISHED = "finished"           #: its folds ran: it is reused and blended
    STOPPED = "stopped"             #: the time guard stopped it
    INTERRUPTED = "interrupted"     #: Ctrl-C or SIGTERM stopped it
    LOST = "lost"                   #: its Dask worker or scheduler was lost
    PRUNED = "pruned"               #: a tuning trial the pruner stopped after a fold
    NOT_CONVERGED = "not converged"  #: a fold reached its share of the time before early stopping (``why`` says next)
    LEFT_OUT = "left out"           #: not started: it would not fit, or could not run here (``why`` says)
    SCREENED = "screened"           #: scored on a sample only
    REPLACED = "replaced"           #: its faster variant finished in its place
    SET_ASIDE = "set aside"         #: not in this invocation's ``auto.engines`` or ``auto.objectives`` (leaderboard)


class SessionStatus(StrEnum):
    """An invocation's status in ``auto.json``'s ``sessions``."""

    RUNNING = "running"             #: begun, not yet ended (or killed before it could say so)
    FINISHED = "finished"
    STOPPED = "stopped"             #: Ctrl-C or SIGTERM
    FAILED = "failed"               #: an error ended it
    KILLED = "killed"               #: its process ended without closing its record (found by the next one)


@dataclass
class CandidateRecord:
    """What ``auto.json`` remembers of one candidate, and what the leaderboard, the blend and a resume read.

    Written only by :class:`AutoState`'s ``record_*`` methods; a field left ``None`` is not in the file (older
    files read the same, and keys this version does not know are kept in ``extra`` and written back).

    Attributes
    ----------
    status : Status
    engine, objective : str
    why : str
        The reason for its place in the order (the leaderboard's ``why``).
    reason : str
        Why it stopped, or why it could not run here (left out for room on a cluster's workers).
    estimate : float
        The seconds it was expected to take when it started (or when it was left out for time).
    estimate_kind : str
        What that estimate rested on (:meth:`~qwkboost.autoblend.costs.CostModel.kind`: measured, projected,
        bound, scaled).
    started_at, seconds : float
        When it started (seconds into the budget) and how long it ran.
    worker : str
        The Dask worker (or ``rows across N workers``) it ran on.
    params : dict
        The engine parameters it changed from its pair's (a faster variant's learning rate, a trial's draw).
    trial : int
        Its tuning trial's number (``None`` for a default candidate).
    dir, config_hash, files : str, str, dict
        Its folder (``candidates/<name>``), the hash of the config it ran with and its files' manifest.
    speedup : float
        A faster variant's expected speed-up (absent for 1).
    run_id : str
        Its MLflow run.
    capped_folds : int
        Folds that ended at their share of the time, before early stopping.
    pipeline_mb : float
        The size of its ``pipeline/`` (what the blend's files cost to write).
    models_dropped : bool
        Its fold models were deleted once the outputs were written (``auto.keep=blend``, not a member): it keeps its
        predictions and leaves the blend's pool.
    qwk_thresholds_oof, qwk_thresholds_oof_nested, qwk_thresholds : float
        Its out-of-fold QWK with cut points, its nested estimate, and its test QWK where the test rows have labels.
    best_iteration_mean, fit_seconds, predict_seconds : float
        Its folds' mean best round, their training seconds and their models' predicting seconds (out-of-fold and
        test rows).
    screen : dict
        Its screen (:meth:`qwkboost.autoblend.screening.Screen.to_dict` and the config hash it screened).
    extra : dict
        Keys of the file this version does not know.
    """

    status: Status | str
    engine: str | None = None
    objective: str | None = None
    why: str | None = None
    reason: str | None = None
    estimate: float | None = None
    estimate_kind: str | None = None
    started_at: float | None = None
    worker: str | None = None
    seconds: float | None = None
    params: dict | None = None
    trial: int | None = None
    dir: str | None = None
    config_hash: str | None = None
    speedup: float | None = None
    run_id: str | None = None
    capped_folds: int | None = None
    pipeline_mb: float | None = None
    models_dropped: bool | None = None
    files: dict | None = None
    qwk_thresholds_oof: float | None = None
    qwk_thresholds_oof_nested: float | None = None
    qwk_thresholds: float | None = None
    best_iteration_mean: float | None = None
    fit_seconds: float | None = None
    predict_seconds: float | None = None
    screen: dict | None = None
    extra: dict = field(default_factory=dict)

    @property
    def pair(self) -> tuple[str | None, str | None]:
        return self.engine, self.objective

    @property
    def finished(self) -> bool:
        return self.status == Status.FINISHED

    @property
    def nested(self) -> float:
        """The nested out-of-fold QWK; ``-inf`` when missing (it sorts last, never first)."""
        q = self.qwk_thresholds_oof_nested
        return float("-inf") if q is None or q != q else float(q)

    @property
    def screened(self) -> dict | None:
        """Its screen when it scored one (``qwk`` in it), else ``None``."""
        return self.screen if isinstance(self.screen, dict) and "qwk" in self.screen else None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "CandidateRecord":
        """A record read from ``auto.json`` (a status this version does not know stays a string)."""
        known = {f.name for f in fields(cls)} - {"extra"}
        rec = cls(**{"status": "", **{k: v for k, v in raw.items() if k in known}},
                  extra={k: v for k, v in raw.items() if k not in known})
        if rec.status in Status._value2member_map_:
            rec.status = Status(rec.status)
        return rec

    def to_dict(self) -> dict[str, Any]:
        """The record as ``auto.json`` holds it: its fields that are set, and the keys it did not know."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"
               and getattr(self, f.name) is not None}
        out["status"] = str(self.status)
        return {**out, **self.extra}


#: The config keys every candidate of one directory shares (its data, folds and decoding).
SHARED_KEYS = ("data", "cv", "seed", "thresholds")
def legacy_config_hash(cfg: Mapping[str, Any]) -> str:
    """The hash an earlier qwkboost gave ``cfg``, with its ``cluster`` settings in it
    (:func:`~qwkboost.config.config_hash`, the one hash of a config, which names a candidate here): what a directory
    made before they left the hash recorded, so that its candidates and studies are still found."""
    return config_hash(cfg, tuple(k for k in UNHASHED if k != "cluster"))


def shared_part(cfg: Mapping[str, Any]) -> dict:
    """The part of a configuration every candidate of a directory shares (:data:`SHARED_KEYS`)."""
    return json.loads(json.dumps({k: cfg.get(k) for k in SHARED_KEYS}, sort_keys=True, default=str))


def _diff(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _diff(a.get(k), b.get(k), f"{prefix}{k}.")]
    return [] if a == b else [f"{prefix[:-1]}: {a!r} -> {b!r}"]


@dataclass
class AutoState:
    """The record of one output directory: the shared configuration, the data's fingerprint, the MLflow parent
    run, every candidate and every invocation (its settings, its status, the time it took)."""

    directory: Path
    shared: dict
    data: dict | None = None
    parent_run_id: str | None = None
    #: Every candidate's record, by name (written only by the ``record_*`` methods).
    candidates: dict[str, CandidateRecord] = field(default_factory=dict)
    sessions: list[dict] = field(default_factory=list)
    #: What the directory's outputs are (``kind``: a blend or one candidate, ``nested_oof_qwk``, ``members``,
    #: ``written``): what a stop during the next blend names as it keeps them
    #: (:func:`~qwkboost.autoblend.finish.fall_back`).
    outputs: dict | None = None
    #: Whether the record was read from the directory (its data checked against this invocation's), not made anew.
    resumed: bool = False

    @classmethod
    def open(cls, directory: str | os.PathLike, shared: dict, data: DataFingerprint | None = None,
             files: tuple[str, str] = ("the training data", "the test data"),
             key: str = "hydra.run.dir") -> "AutoState":
        """The directory's record, or a new one.

        Parameters
        ----------
        directory : path
        shared : dict
            :func:`shared_part` of the configuration.
        data : DataFingerprint, optional
            The rows this invocation read; a record of other rows is refused.
        files : (str, str)
            How to name the training and test data in a message (``data.path='train.csv'``, ``X``).
        key : str
            How the user names the directory (``hydra.run.dir``, ``output_dir``).

        Raises
        ------
        ConfigError
            If the directory holds the record of another data set, split or decoding, of other rows under the same
            names, or a record that cannot be read.
        """
        d = Path(directory)
        path = d / STATE_FILE
        new = None if data is None else data.to_dict()
        if not path.exists():
            return cls(d, shared, new)
        try:
            raw = json.loads(path.read_text())
            stored, candidates, sessions = raw["shared"], dict(raw["candidates"]), list(raw["sessions"])
            if not all(isinstance(r, dict) for r in candidates.values()):
                raise TypeError("a candidate's record is not a mapping")
            candidates = {n: CandidateRecord.from_dict(r) for n, r in candidates.items()}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path} cannot be read ({exc}); move it away to start this directory afresh") from None
        again = f"give another output directory ({key}=...) to start afresh"
        if stored != shared:
            diff = _diff(stored, shared)
            raise ConfigError(f"{d} holds a time budget's candidates for another configuration "
                              f"({'; '.join(diff[:6])}); {again}, or the same settings to resume it")
        if data is not None:
            try:
                check_same(raw.get("data"), data, str(d), *files)
            except ValueError as exc:
                raise ConfigError(f"{exc}: its candidates and submission belong to that data; {again}") from None
        outputs = raw.get("outputs") if isinstance(raw.get("outputs"), dict) else None
        return cls(d, shared, new if new is not None else raw.get("data"), raw.get("parent_run_id"), candidates,
                   sessions, outputs, resumed=True)

    def migrate(self, config_of) -> int:
        """Give the finished records an earlier qwkboost hashed with their ``cluster`` settings today's hash
        (:func:`legacy_config_hash`), so that they are reused, not run again; ``config_of(record)`` is the config a
        record ran with (``None``: one this invocation does not know). Returns how many; saves if any."""
        n = 0
        for rec in self.candidates.values():
            cfg = config_of(rec) if rec.finished else None
            if cfg is not None and rec.config_hash == legacy_config_hash(cfg) != config_hash(cfg):
                rec.config_hash = config_hash(cfg)
                n += 1
        if n:
            self.save()
        return n

    def damage(self, name: str) -> str | None:
        """Why candidate ``name``'s files cannot be used as they are (its folder is not ``candidates/<name>``, a
        file is missing, changed, a link or not a regular file), or ``None`` when they are as it left them."""
        rec = self.candidates.get(name) or CandidateRecord(Status.LEFT_OUT)
        if rec.dir != f"candidates/{name}":
            return f"its record names the folder {rec.dir!r}, not candidates/{name}"
        files = rec.files
        if not isinstance(files, dict) or not files:
            return "its record has no manifest of its files (an older qwkboost wrote it)"
        try:
            folder = run_path(self.directory, rec.dir, "auto.json 'dir'", kind="dir")
        except ValueError as exc:
            return str(exc)
        return manifest_problem(folder, files)

    def finished(self, name: str, cfg_hash: str) -> CandidateRecord | None:
        """The record of candidate ``name`` if it finished with a configuration hashing to ``cfg_hash`` (its files
        unchecked: see :meth:`damage`)."""
        rec = self.candidates.get(name)
        if rec is None or not rec.finished or rec.config_hash != cfg_hash:
            return None
        return rec

    # ------------------------------------------------------------------ the one place a record is written
    def _screen_of(self, name: str, pair_name: str | None) -> dict | None:
        """The screen a candidate's new record keeps: its own old record's, else (a default candidate's faster
        variant) its pair's."""
        for n in (name, pair_name or name):
            s = getattr(self.candidates.get(n), "screen", None)
            if isinstance(s, dict):
                return s
        return None

    def record_left_out(self, name: str, pair: tuple[str, str], pair_name: str | None, why: str,
                        reason: str | None = None, estimate: float | None = None,
                        estimate_kind: str | None = None) -> None:
        """Candidate ``name`` was not started: ``reason`` (it cannot run here) or ``estimate`` (it would not fit).
        A finished record of the same name is kept (an earlier finish stays). Not saved: the next record saves."""
        if name in self.candidates and self.candidates[name].finished:
            return
        self.candidates[name] = CandidateRecord(Status.LEFT_OUT, *pair, why=why, reason=reason, estimate=estimate,
                                                estimate_kind=estimate_kind, screen=self._screen_of(name, pair_name))

    def record_stopped(self, name: str, pair: tuple[str, str], pair_name: str | None, status: Status, reason: str,
                       seconds: float, **started: Any) -> None:
        """Candidate ``name`` started and was stopped (``status``: stopped, interrupted, lost, pruned); saves."""
        self.candidates[name] = CandidateRecord(status, *pair, reason=reason, seconds=seconds,
                                                screen=self._screen_of(name, pair_name), **started)
        self.save()

    def record_finished(self, name: str, pair_name: str | None, rec: CandidateRecord) -> CandidateRecord:
        """Candidate ``name`` finished (``rec``, its screen added); its pair's own record, when ``name`` is a faster
        variant of it that had not finished, becomes ``replaced`` (or stays ``not converged``); saves."""
        rec.status, rec.screen = Status.FINISHED, self._screen_of(name, pair_name)
        self.candidates[name] = rec
        plain = self.candidates.get(pair_name) if pair_name and pair_name != name else None
        if plain is not None and not plain.finished:
            # one that did not converge as configured stays so (a resume reuses its restart, fit.fitted)
            plain.why = f"ran as {name}"
            if plain.status != Status.NOT_CONVERGED:
                plain.status = Status.REPLACED
        self.save()
        return rec

    def record_models_dropped(self, name: str) -> None:
        """Candidate ``name``'s fold models are to be deleted (``auto.keep=blend``): its manifest without them, so
        that its predictions still pass :meth:`damage`. Recorded before the files go, so a stop between the two
        leaves a record that asks for nothing missing."""
        rec = self.candidates[name]
        files = {k: v for k, v in (rec.files or {}).items() if not k.startswith("pipeline/")}
        self.candidates[name] = replace(rec, files=files, models_dropped=True, pipeline_mb=0.0)

    def record_screen(self, name: str, pair: tuple[str, str], screen: Mapping[str, Any]) -> None:
        """Candidate ``name``'s screen (a new record, ``screened``, when it has none); saves."""
        rec = self.candidates.setdefault(name, CandidateRecord(Status.SCREENED, *pair))
        rec.screen = dict(screen)
        self.save()

    def close_abandoned(self) -> list[dict]:
        """Mark ``killed`` the invocations still recorded as ``running``, and save: called under the directory's lock
        (:class:`~qwkboost.tracking.writing.OutputLock`), when no other command can be running here, so theirs ended
        without closing the record (``kill -9``, a machine lost). Returns them."""
        gone = [s for s in self.sessions if s.get("status") == SessionStatus.RUNNING]
        for s in gone:
            s.update(status=SessionStatus.KILLED,
                     reason="its process ended without closing this record (kill -9, a lost machine)")
        if gone:
            self.save()
        return gone

    def begin(self, settings: Mapping[str, Any]) -> dict:
        """Record a new invocation (status ``running``) and save; the record, to :meth:`end` later."""
        session = {"started": _now(), "settings": dict(settings), "status": SessionStatus.RUNNING, "pid": os.getpid()}
        self.sessions.append(session)
        self.save()
        return session

    def end(self, session: dict, status: str, **facts: Any) -> None:
        """Close an invocation's record with its status (``finished``, ``stopped``, ``killed``, ``failed``)."""
        session.update({"ended": _now(), "status": status, **facts})
        self.save()

    def save(self) -> None:
        """Write the record atomically (a kill while writing leaves the previous one)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / STATE_FILE
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"shared": self.shared, "data": self.data, "parent_run_id": self.parent_run_id,
                                   "candidates": {n: r.to_dict() for n, r in self.candidates.items()}, "sessions": self.sessions,
                                   "outputs": self.outputs}, indent=1,
                                  default=str))
        os.replace(tmp, path)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
