"""What the one command decides and writes, pinned before ``autoblend/`` is rebuilt (issue 56: behaviour
unchanged).

On two packaged sets, with a budget far larger than the work (tuning and screening off, so that every default
candidate finishes whatever the machine's speed) and one thread per engine (so that sums add up in one order),
the leaderboard, ``auto.json``'s candidates, the blend's members and weights and ``submission.csv`` are compared
with golden files made by the code before the change. Timings, run ids and paths are left out: they are not
decisions.

Write the golden files again (only when a change of behaviour is meant, and say so in its commit)::

    python tests/autoblend/test_behaviour_kept.py --write
"""

import hashlib
import json
import sys
from pathlib import Path

import pandas as pd
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from conftest import run_in_process  # noqa: E402

GOLDEN = HERE / "golden"
SETS = ("swd", "era")
OVERRIDES = ["experiment=auto", "auto.time_limit=900", "auto.tune=false", "auto.screen=never",
             "auto.engines=[lightgbm,xgboost]", "auto.objectives=[squared_error,extended_qwk]", "cv.n_splits=3",
             "n_jobs=1", "tracking.uri=null"]
#: What a run's clock, its MLflow store or its folder decide, not the plan.
BOARD_KEEP = ["candidate", "engine", "objective", "status", "capped_folds", "oof_qwk", "nested_oof_qwk", "test_qwk",
              "weight", "why", "note"]
#: ``config_hash`` hashes the data's path too (the checkout's, for a packaged set): pinned on a fixed config below.
RECORD_DROP = {"started_at", "seconds", "estimate", "run_id", "fit_seconds", "predict_seconds", "pipeline_mb", "files", "config_hash"}
FILES_KEEP = ("oof.parquet", "predictions.parquet", "submission.csv")
MEMBER_DROP = {"source", "run_id"}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def summarise(out: Path) -> dict:
    """The decisions and outputs of the auto run in ``out``, in a form that compares exactly."""
    board = pd.read_csv(out / "leaderboard.csv")
    board = board[[c for c in BOARD_KEEP if c in board.columns]].sort_values("candidate")
    auto = json.loads((out / "auto.json").read_text())
    records = {}
    for name, rec in sorted(auto["candidates"].items()):
        # a key set to null and a key left out read the same (a record writes only the fields it has)
        kept = {k: v for k, v in rec.items() if k not in RECORD_DROP and v is not None}
        kept["files"] = {f: rec.get("files", {}).get(f, [None, None])[1] for f in FILES_KEEP}
        records[name] = kept
    blend = json.loads((out / "blend.json").read_text())
    members = [{k: v for k, v in m.items() if k not in MEMBER_DROP} for m in blend["members"]]
    return {"leaderboard": json.loads(board.to_json(orient="records")),
            "candidates": records,
            "blend": {"method": blend["method"], "thresholds": blend["thresholds"], "members": members},
            "outputs": {k: auto["outputs"][k] for k in ("kind", "nested_oof_qwk", "members")},
            "submission": _digest(out / "submission.csv"),
            "submission_counts": pd.read_csv(out / "submission.csv").iloc[:, 1].value_counts().sort_index()
            .to_dict()}


def _run(name: str, out: Path) -> dict:
    run_in_process([*OVERRIDES, f"data={name}"], out)
    return json.loads(json.dumps(summarise(out), sort_keys=True, default=str))


@pytest.mark.parametrize("name", SETS)
def test_the_plan_and_its_outputs_are_the_golden_ones(name, tmp_path):
    golden = json.loads((GOLDEN / f"{name}.json").read_text())
    golden["candidates"] = {n: {k: v for k, v in r.items() if v is not None} for n, r in golden["candidates"].items()}
    got = _run(name, tmp_path / "out")
    for part in golden:
        assert got[part] == golden[part], f"{name}: {part} differs from tests/autoblend/golden/{name}.json"


def test_a_candidates_config_hash_is_the_one_before():
    """A directory made before the rebuild resumes after it: the hash of a candidate's configuration is the same
    function of the same settings (the cluster, tracking and auto settings left out; the legacy hash with the
    cluster in it, for directories older still)."""
    from qwkboost.autoblend.state import config_hash, legacy_config_hash

    cfg = {"data": {"name": "csv", "path": "train.csv", "target": "score"},
           "engine": {"name": "lightgbm", "params": {"learning_rate": 0.05}, "search_space": {"x": 1}},
           "objective": {"name": "extended_qwk", "params": {}}, "cv": {"n_splits": 5}, "seed": 0,
           "thresholds": {"method": "exact"}, "tracking": {"uri": None}, "n_jobs": None, "auto": {"time_limit": 60},
           "cluster": {"address": None}}
    assert (config_hash(cfg), legacy_config_hash(cfg)) == ("c484573dcea0", "e92c6426240e")


if __name__ == "__main__":
    import tempfile

    if sys.argv[1:] != ["--write"]:
        sys.exit(__doc__)
    GOLDEN.mkdir(exist_ok=True)
    for name in SETS:
        with tempfile.TemporaryDirectory() as tmp:
            summary = _run(name, Path(tmp) / "out")
        (GOLDEN / f"{name}.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
        print(f"wrote {GOLDEN / f'{name}.json'}")
