"""A study's tuning kept once per key (``tuned_once``): parallel cells wait for the first and reuse its result, a
crash while writing leaves no torn file."""

import json
import multiprocessing
import time

import pytest

from qwkboost.study.cache import CellCache, replaced
from qwkboost.study.tuning import tuned_once


def _tune_in(directory, marker, out):
    def tune():
        with open(marker, "a") as fh:
            fh.write("tuned\n")
        time.sleep(0.5)                 # long enough for the other process to be waiting on the lock
        return {"params": {"max_depth": 3}, "best_oof": 0.5}

    out.put(tuned_once(str(directory), "k", tune))


def test_parallel_cells_tune_once_and_the_others_reuse_it(tmp_path):
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_tune_in, args=(tmp_path / "tuning", tmp_path / "marker", out)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert (tmp_path / "marker").read_text() == "tuned\n"
    assert sorted(r.get("reused", False) for r in results) == [False, True]
    assert all(r["params"] == {"max_depth": 3} for r in results)
    assert json.loads((tmp_path / "tuning" / "k.json").read_text()) == {"params": {"max_depth": 3}, "best_oof": 0.5}
    # a later call reads the kept result without tuning again
    assert tuned_once(str(tmp_path / "tuning"), "k", lambda: pytest.fail("tuned again")) == \
        {"params": {"max_depth": 3}, "best_oof": 0.5, "reused": True}
    assert tuned_once(None, "k", lambda: {"fresh": 1}) == {"fresh": 1}


def test_a_failed_write_leaves_the_previous_file_and_no_temporary_one(tmp_path):
    path = tmp_path / "cell.json"
    path.write_text('{"old": 1}')
    with pytest.raises(RuntimeError):
        with replaced(path) as tmp:
            tmp.write_text('{"new"')
            raise RuntimeError("killed while writing")
    assert json.loads(path.read_text()) == {"old": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cell.json"]
    cache = CellCache(tmp_path / "cache")
    cache.put("abc", {"label": "x", "qwk": 0.5})
    assert cache.get("abc") == {"label": "x", "qwk": 0.5}
    assert sorted(p.name for p in (tmp_path / "cache" / "cells").iterdir()) == ["abc.json"]
