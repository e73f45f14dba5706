"""A budget's leaderboard (``leaderboard.csv``): every candidate of its directory, why it ran where it did, what
its screen and its cross-validation measured, and its weight in the blend; and what the closing log line shows
of it."""

from __future__ import annotations

from typing import Any, Mapping

from qwkboost.autoblend.state import CandidateRecord, Status

__all__ = ["leaderboard", "closing_rows", "SHOWN", "COLUMNS", "MISS", "MISS_SECONDS"]

#: The closing log line lists the blend's members and this many best finished candidates; lists longer than this
#: are counted (leaderboard.csv holds every row)
SHOWN = 15
#: A finished cross-validation that took more than this many times its estimate, or less than its inverse, and
#: at least :data:`MISS_SECONDS` more or less, is noted.
MISS = 2.0
MISS_SECONDS = 5.0
#: The columns of ``leaderboard.csv`` (``test_qwk`` only when the test rows have labels, ``worker``, the address of
#: the Dask worker a candidate ran on, only when one ran on a cluster). ``estimate_kind`` says what the estimate
#: rested on (:meth:`~qwkboost.autoblend.costs.CostModel.kind`), ``estimate_error`` the seconds a finished candidate
#: took over its estimate.
COLUMNS = ("candidate", "engine", "objective", "status", "seconds", "estimate_seconds", "estimate_kind",
           "estimate_error", "capped_folds", "oof_qwk", "nested_oof_qwk", "test_qwk", "weight", "screen_qwk",
           "screen_seconds", "screen_rows", "started_at", "worker", "why", "note")


def _note(r: CandidateRecord) -> str:
    """Why a candidate was left out other than for time (its data fits no worker of a cluster); or a finished
    candidate whose time missed its estimate by more than :data:`MISS` times (and :data:`MISS_SECONDS`), in either
    direction."""
    if r.status == Status.LEFT_OUT:
        return r.reason or ""
    est, took = r.estimate, r.seconds
    if not est or not took or not r.finished:
        return ""
    ratio = took / est
    if (ratio > MISS or ratio < 1 / MISS) and abs(took - est) >= MISS_SECONDS:
        return f"took {ratio:.1f}x its estimate ({took:.0f} s for {est:.0f} s)"
    return ""


def leaderboard(candidates: Mapping[str, CandidateRecord], weights: Mapping[str, float], allowed, test_labels: bool):
    """The leaderboard of ``candidates`` (``auto.json``'s records); ``allowed(record)`` says whether the current
    invocation's ``auto.engines`` and ``auto.objectives`` take a candidate (the others are ``set aside``)."""
    import pandas as pd  # slow to import: pandas

    rows = []
    for name, r in candidates.items():
        status = str(r.status) if allowed(r) else Status.SET_ASIDE.value    # not in this invocation's settings
        s = r.screen if isinstance(r.screen, Mapping) else {}
        rows.append({"candidate": name, "engine": r.engine, "objective": r.objective,
                     "status": status, "seconds": r.seconds, "estimate_seconds": r.estimate,
                     "estimate_kind": r.estimate_kind,
                     # measured over estimated, once it has run its folds
                     "estimate_error": round(r.seconds / r.estimate, 3) if r.finished and r.seconds and r.estimate
                     else None,
                     "capped_folds": r.capped_folds, "oof_qwk": r.qwk_thresholds_oof,
                     "nested_oof_qwk": r.qwk_thresholds_oof_nested,
                     "test_qwk": r.qwk_thresholds, "weight": weights.get(name, 0.0),
                     "screen_qwk": s.get("qwk"), "screen_seconds": s.get("seconds"), "screen_rows": s.get("rows"),
                     "started_at": r.started_at, "worker": r.worker, "why": r.why or "",
                     "note": _note(r)})
    on_cluster = any(r.worker for r in candidates.values())
    board = pd.DataFrame(rows, columns=[c for c in COLUMNS if (test_labels or c != "test_qwk")
                                        and (on_cluster or c != "worker")])
    return board.sort_values(["weight", "nested_oof_qwk", "screen_qwk"], ascending=False, na_position="last",
                             ignore_index=True)


def closing_rows(board) -> tuple[Any, str]:
    """What the closing log line shows of the leaderboard: the blend's members and the ``SHOWN`` best finished
    candidates as a table, and one line per other kind of row (names, or their count when there are more than
    ``SHOWN``); ``leaderboard.csv`` has every row."""
    finished = board[board["status"] == Status.FINISHED]
    best = finished.sort_values("nested_oof_qwk", ascending=False).index[:SHOWN]
    shown = finished[(finished["weight"] > 0) | finished.index.isin(best)]
    shown = shown[[c for c in ("candidate", "status", "seconds", "oof_qwk", "nested_oof_qwk", "test_qwk", "weight")
                   if c in shown.columns]]
    groups = (("finished, not shown", finished.loc[~finished.index.isin(shown.index), "candidate"]),
              ("screened only", board.loc[board["status"] == Status.SCREENED, "candidate"]),
              ("replaced by a faster variant", board.loc[board["status"] == Status.REPLACED, "candidate"]),
              ("stopped for time", board.loc[board["status"] == Status.STOPPED, "candidate"]),
              ("interrupted (Ctrl-C or SIGTERM)", board.loc[board["status"] == Status.INTERRUPTED, "candidate"]),
              ("lost with their Dask worker or scheduler", board.loc[board["status"] == Status.LOST, "candidate"]),
              ("tuning trials pruned", board.loc[board["status"] == Status.PRUNED, "candidate"]),
              ("left out for time",
               board.loc[(board["status"] == Status.LEFT_OUT) & (board["note"] == ""), "candidate"]),
              ("left out (too large for a worker: see the note in leaderboard.csv)",
               board.loc[(board["status"] == Status.LEFT_OUT) & (board["note"] != ""), "candidate"]),
              ("set aside (not in auto.engines, auto.objectives)",
               board.loc[board["status"] == Status.SET_ASIDE, "candidate"]))
    others = "".join(f"\n  {label}: " + (", ".join(names) if len(names) <= SHOWN else str(len(names)))
                     for label, names in groups if len(names))
    return shown, others
