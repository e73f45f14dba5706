"""What the deciding functions of a time budget are handed: a typed :class:`Context`, not the driver.

The driver (:class:`~qwkboost.autoblend.driver.AutoRun`) makes one per invocation once the directory's record is
open, and hands it down: the loop (:mod:`~qwkboost.autoblend.loop`), its sources
(:mod:`~qwkboost.autoblend.schedule`, :mod:`~qwkboost.autoblend.tuning`), the jobs module
(:mod:`~qwkboost.autoblend.jobs`), "does it fit" (:mod:`~qwkboost.autoblend.fit`) and the end
(:mod:`~qwkboost.autoblend.finish`). None of them calls back into the driver.

Who writes what: the records only through :class:`~qwkboost.autoblend.state.AutoState`'s ``record_*`` methods,
called from :mod:`~qwkboost.autoblend.jobs` and :mod:`~qwkboost.autoblend.schedule` (screens); the cost model's
measurements only from :mod:`~qwkboost.autoblend.jobs` and the screens; :attr:`Context.closing` only from the driver
and :mod:`~qwkboost.autoblend.finish`. Everything else is read.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from pathlib import Path

from qwkboost.autoblend.budget import Budget
from qwkboost.autoblend.costs import CostModel
from qwkboost.autoblend.executor import Executor
from qwkboost.autoblend.progress import Progress
from qwkboost.autoblend.ranking import DataShape, diverse_pool
from qwkboost.autoblend.settings import AutoSettings
from qwkboost.autoblend.state import AutoState, CandidateRecord
from qwkboost.data.dataset import Dataset
from qwkboost.data.fingerprint import DataFingerprint

__all__ = ["Context", "Closing"]

log = logging.getLogger("qwkboost.autoblend")


@dataclass
class Closing:
    """What the end of an invocation reports in ``auto.json``'s session record.

    Attributes
    ----------
    facts : dict
        When the work ended, the reserve then, the time left unused, the pairs not run, a lost cluster's message.
    members : int
        The blend's pool size (0 until written).
    written : bool
        Whether this invocation's outputs were swapped in (a stop after that leaves them whole).
    """

    facts: dict = field(default_factory=dict)
    members: int = 0
    written: bool = False


@dataclass
class Context:
    """One invocation of a time budget, as the functions that decide see it.

    Attributes
    ----------
    settings : AutoSettings
    configs : dict
        ``(engine, objective) -> config`` in the ranked order.
    why : dict
        ``(engine, objective) -> the reason for its place`` (:func:`~qwkboost.autoblend.ranking.rank`).
    ds : Dataset
    shape : DataShape
    out : Path
        The output directory.
    budget : Budget
        The command's clock (it keeps nothing back itself: :mod:`~qwkboost.autoblend.fit` computes the reserve).
    state : AutoState
        The directory's record.
    cost : CostModel
    executor : Executor
    progress : Progress
    experiment_id, parent_id : str or None
        The MLflow experiment and the budget's parent run (``None``: nothing logged).
    n_folds : int
        Folds of a candidate's cross-validation (over all repeats).
    eval_seconds : float
        Seconds to score one blend on these rows (:func:`~qwkboost.autoblend.costs.time_one_blend_score`).
    fingerprint : DataFingerprint
        The rows this invocation read.
    data_names : (str, str)
        How messages name the training and the test data.
    closing : Closing
    """

    settings: AutoSettings
    configs: dict
    why: dict
    ds: Dataset
    shape: DataShape
    out: Path
    budget: Budget
    state: AutoState
    cost: CostModel
    executor: Executor
    progress: Progress
    experiment_id: str | None
    n_folds: int
    eval_seconds: float
    fingerprint: DataFingerprint
    data_names: tuple[str, str]
    parent_id: str | None = None
    closing: Closing = field(default_factory=Closing)
    _checked: dict = field(default_factory=dict, repr=False)      # candidate -> its damage, read once

    @property
    def base(self) -> dict:
        """The first candidate's config (what every candidate shares: data, folds, cut points, seed)."""
        return next(iter(self.configs.values()))

    def allowed(self, rec: CandidateRecord) -> bool:
        """Whether a candidate's engine and objective are among this invocation's (``auto.engines``,
        ``auto.objectives``): a resume that narrows them blends none of the others."""
        return rec.pair in self.configs

    def finished(self) -> list[tuple[str, CandidateRecord]]:
        """The finished candidates this invocation allows (files unchecked)."""
        return [(n, r) for n, r in self.state.candidates.items() if r.finished and self.allowed(r)]

    def n_finished(self) -> int:
        return len(self.finished())

    def config_of(self, rec: CandidateRecord) -> dict | None:
        """The config a candidate's record ran with: its pair's, with the engine parameters it changed (a faster
        variant's learning rate, a trial's draw); ``None`` for a pair this invocation does not run."""
        if rec.pair not in self.configs:
            return None
        cfg = copy.deepcopy(self.configs[rec.pair])
        cfg["engine"]["params"] = {**(cfg["engine"].get("params") or {}), **(rec.params or {})}
        return cfg

    def damage(self, name: str) -> str | None:
        """:meth:`~qwkboost.autoblend.state.AutoState.damage`, read once per invocation: a candidate checked when
        it was reused, or written by this invocation (:meth:`checked`), is not digested again for the blend."""
        if name not in self._checked:
            self._checked[name] = self.state.damage(name)
        return self._checked[name]

    def checked(self, name: str) -> None:
        """Candidate ``name``'s files were just written: as :meth:`damage` would find them."""
        self._checked[name] = None

    def members(self) -> list[tuple[str, CandidateRecord]]:
        """The blend's pool: the finished candidates this invocation allows whose files are as they were left
        (:meth:`damage`), at most ``auto.max_members`` (:func:`~qwkboost.autoblend.ranking.diverse_pool`: each
        (engine, objective) pair's best run first, then each pair's second best, and so on, so that tuning trials
        of one pair cannot crowd the other pairs out of the pool)."""
        done = []
        for n, r in self.finished():
            if r.models_dropped:        # auto.keep=blend: nothing to serve
                continue
            damage = self.damage(n)
            if damage is not None:
                log.warning("auto: %s is left out of the blend: %s", n, damage)
                continue
            done.append((n, r))
        return diverse_pool(done, self.settings.max_members)

    def pool(self) -> list[CandidateRecord]:
        """The blend's pool as it stands, files unchecked (what :func:`~qwkboost.autoblend.fit.room` keeps
        time for)."""
        return [r for _, r in diverse_pool([(n, r) for n, r in self.finished() if not r.models_dropped],
                                           self.settings.max_members)]
