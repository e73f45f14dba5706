"""One progress line for a time budget: what runs now, what is done, and the time left."""

from __future__ import annotations

import logging
import time

from qwkboost.autoblend.budget import Budget

__all__ = ["Progress"]

log = logging.getLogger("qwkboost.autoblend")


class Progress:
    """A bar over the budget's seconds (on a terminal; elsewhere one log line per step).

    ``auto  41%|████      | 246/600 s, xgboost-squared_error fold 3/5 round 340 · 3 done, best 0.6412 · 354 s left``
    """

    def __init__(self, budget: Budget, enabled: bool):
        from tqdm.auto import tqdm  # slow to import: tqdm

        self.budget, self.enabled = budget, enabled
        self.doing, self.best, self.done, self.kept = "starting", None, 0, None
        self._shown = 0.0
        self.bar = tqdm(total=max(int(round(budget.time_limit)), 1), unit="s", desc="auto", disable=not enabled,
                        dynamic_ncols=True, leave=True,
                        bar_format="{desc} {percentage:3.0f}%|{bar}| {n}/{total} s{postfix}")

    def _line(self) -> str:
        best = "" if self.best is None else f", best {self.best:.4f}"
        kept = "" if not self.kept else f" ({self.kept:.0f} kept for the blend)"
        return f"{self.doing} · {self.done} done{best} · {max(self.budget.left, 0):.0f} s left{kept}"

    def _show(self) -> None:
        self._shown = time.monotonic()
        self.bar.n = min(int(self.budget.elapsed), self.bar.total)
        self.bar.set_postfix_str(self._line(), refresh=True)

    def step(self, doing: str, kept: float | None = None) -> None:
        """A new step starts (a candidate, a trial, the blend); ``kept``: of the seconds left, those a candidate
        leaves for the end (:func:`~qwkboost.autoblend.costs.reserve`), so that its own share is seen."""
        self.doing, self.kept = doing, kept
        if self.enabled:
            self._show()
        else:
            log.info("auto: %s (%.0f s left%s)", doing, max(self.budget.left, 0),
                     f", {kept:.0f} s of them kept for the blend" if kept else "")

    def finished(self, score: float | None) -> None:
        """A candidate finished; ``score`` is the best estimate so far (nested out-of-fold QWK)."""
        self.done += 1
        if score is not None and (self.best is None or score > self.best):
            self.best = score
        if self.enabled:
            self._show()

    def tick(self, fold: int, rnd: int, n_folds: int) -> None:
        """A round ended in fold ``fold``: the line is redrawn at most twice a second."""
        if self.enabled and time.monotonic() - self._shown > 0.5:
            self.doing = f"{self.doing.split(' fold ')[0]} fold {fold + 1}/{n_folds} round {rnd + 1}"
            self._show()

    def close(self) -> None:
        if self.enabled:
            self._show()
        self.bar.close()
