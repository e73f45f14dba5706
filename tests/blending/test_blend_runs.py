"""Blending real runs: three engines and objectives on a competition-shaped file, read from their output
directories, their MLflow runs and their parent run; the submission, the honest estimate, the files, the MLflow
run and the servable blend; and the command as users type it."""

import os
import subprocess
import sys
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest

from conftest import csv_cfg
from qwkboost import load_run, tracking
from qwkboost.blending import FittedBlend, blend, log_blend, write_blend
from qwkboost.runs.experiment import run_experiment

ROOT = Path(__file__).resolve().parents[2]
MEMBERS = [("lightgbm", "squared_error"), ("xgboost", "extended_qwk"), ("native", "multiclass")]


@pytest.fixture(scope="module")
def runs(entity_csv, mlflow_store, tmp_path_factory):
    """Three grouped runs under one parent MLflow run (as a multirun makes them), and one plain run."""
    train, test = entity_csv
    out = tmp_path_factory.mktemp("blend_runs")
    exp = tracking.setup(mlflow_store, "blend_runs")
    rows, dirs = [], []
    with tracking.run(exp, "sweep") as parent:
        for i, (engine, objective) in enumerate(MEMBERS):
            dirs.append(out / "sweep" / str(i))
            rows.append(run_experiment(csv_cfg(train, test, engine, objective, group="entity"), exp,
                                       parent_run_id=parent.info.run_id, run_name=f"{engine}/{objective}",
                                       output_dir=dirs[-1]))
    plain = out / "plain"
    with pytest.warns(UserWarning, match="identical"):
        run_experiment(csv_cfg(train, test), output_dir=plain)
    return {"dirs": dirs, "rows": rows, "parent": parent.info.run_id, "plain": plain, "exp": exp,
            "store": mlflow_store, "test": test}


def test_the_blend_submission_is_as_good_as_the_best_member_and_honest(runs, tmp_path):
    r = blend([str(d) for d in runs["dirs"]])
    best = max(row["qwk_thresholds"] for row in runs["rows"])
    assert r.test_qwk >= best - 0.01
    assert r.nested_oof_qwk <= r.oof_qwk
    assert r.metrics["best_member_test_qwk"] == pytest.approx(best)
    picked = r.member_table["nested_oof_qwk"].idxmax()           # the member one would pick without test labels
    assert r.metrics["chosen_member_test_qwk"] == pytest.approx(r.member_table.loc[picked, "test_qwk"])
    assert np.all(r.weights >= 0) and r.weights.sum() == pytest.approx(1.0)
    files = write_blend(r, tmp_path)
    assert {f.name for f in files} == {"oof.parquet", "predictions.parquet", "submission.csv", "blend.json",
                                       "blend.png"}
    sub = pd.read_csv(tmp_path / "submission.csv")
    assert list(sub.columns) == ["id", "label"] and set(sub["label"]) <= {1, 2, 3, 4}
    np.testing.assert_array_equal(sub["id"], pd.read_csv(runs["test"])["id"])
    info = pd.read_json(tmp_path / "blend.json", typ="series")
    for key in ("members", "weights", "cuts", "oof_qwk", "nested_oof_qwk"):
        assert key in info
    # beside the blend's score, every member's, in blend.json's order: the weighted sum gives the blend's score
    oof, pred = pd.read_parquet(tmp_path / "oof.parquet"), pd.read_parquet(tmp_path / "predictions.parquet")
    cols = [f"member_{i}" for i in range(len(r.members))]
    np.testing.assert_allclose(oof[cols].to_numpy() @ r.weights, oof["score"], rtol=1e-12)
    np.testing.assert_allclose(pred[cols].to_numpy() @ r.weights, pred["score"], rtol=1e-12)
    # the pipeline scores new rows exactly as the submission was made
    pipe = load_run(tmp_path)
    assert isinstance(pipe, FittedBlend)
    np.testing.assert_array_equal(pipe.predict(pd.read_csv(runs["test"])), sub["label"])


def test_members_from_mlflow_runs_and_a_parent_run_equal_those_from_directories(runs):
    by_dir = blend([str(d) for d in runs["dirs"]])
    by_ids = blend([row["run_id"] for row in runs["rows"]], tracking_uri=runs["store"])
    by_parent = blend([runs["parent"]], tracking_uri=runs["store"])
    by_sweep_dir = blend([str(runs["dirs"][0].parent)])
    for other in (by_ids, by_parent, by_sweep_dir):
        np.testing.assert_array_equal(other.test_class, by_dir.test_class)
        assert other.metrics == pytest.approx(by_dir.metrics)
    assert [m.name for m in by_parent.members] == [f"{e}/{o}" for e, o in MEMBERS]


def test_runs_on_other_folds_are_refused_by_name(runs):
    with pytest.raises(ValueError, match=r"\(.*plain\) and .* were cross-validated on different folds"):
        blend([str(runs["plain"]), str(runs["dirs"][0])])


def test_the_blend_is_one_mlflow_run_with_its_members_and_a_servable_model(runs, tmp_path):
    r = blend([row["run_id"] for row in runs["rows"]], tracking_uri=runs["store"])
    write_blend(r, tmp_path)
    run_id = log_blend(r, tmp_path, runs["exp"], "blend/weights")
    client = mlflow.MlflowClient(runs["store"])
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["blend.member_runs"] == ",".join(row["run_id"] for row in runs["rows"])
    assert run.data.metrics["nested_oof_qwk"] == pytest.approx(r.nested_oof_qwk)
    # one vocabulary: kind, weights and member figures named by the member, a description of what it is
    assert run.data.tags["kind"] == "blend" and run.data.tags["mlflow.note.content"].startswith(f"{r.method} blend")
    for m, w in zip(r.members, r.weights):       # lightgbm/squared_error: weight.lightgbm-squared_error
        assert run.data.metrics[f"weight.{m.name.replace('/', '-')}"] == pytest.approx(w)
        assert f"member.{m.name.replace('/', '-')}.oof_qwk" in run.data.metrics
    assert not any(k.startswith(("weight.0", "member.0")) for k in run.data.metrics)
    arts = {a.path for a in client.list_artifacts(run_id)}
    assert {"blend.json", "plots", "predictions"} <= arts and "pipeline" not in arts     # once: in the model
    # the servable blend: named for what it is, tagged, linked to the run's final figures
    from model_files import logged_model

    logged = logged_model(client, run_id)
    assert logged.name == "blend" and logged.tags["kind"] == "blend"
    assert logged.tags["mlflow.note.content"] == run.data.tags["mlflow.note.content"]       # its description
    linked = {m.key: m.value for m in logged.metrics}
    assert linked["nested_oof_qwk"] == pytest.approx(run.data.metrics["nested_oof_qwk"])
    assert linked["oof_qwk"] == pytest.approx(run.data.metrics["oof_qwk"])
    model = mlflow.pyfunc.load_model(f"models:/{logged.model_id}")
    test = pd.read_csv(runs["test"])
    served = model.predict(test.drop(columns=["label"]).head(50))
    np.testing.assert_array_equal(served["class"], r.test_class[:50])


def test_blend_command(runs, tmp_path):
    env = {**os.environ, "CI": "true"}
    dirs = ",".join(str(d) for d in runs["dirs"])
    proc = subprocess.run([sys.executable, str(ROOT / "experiments" / "blend.py"), f"runs=[{dirs}]",
                           "method=rank_mean", f"tracking.uri={runs['store']}", "tracking.log_pyfunc=false"],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "blend (rank_mean): OOF QWK" in proc.stdout
    out = next((tmp_path / "outputs" / "blend").glob("*/*"))
    assert (out / "submission.csv").is_file() and (out / "pipeline" / "pipeline.json").is_file()
    bad = subprocess.run([sys.executable, str(ROOT / "experiments" / "blend.py"), f"runs=[{runs['dirs'][0]}]"],
                         cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == ["error: a blend needs at least two members; got 1 (lightgbm/"
                                               "squared_error)"]
