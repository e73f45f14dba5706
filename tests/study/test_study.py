"""The study (experiment=study): cells over seeds, the report and its statistics, MLflow runs, resumption after
a kill, and bad settings refused before any training."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from scipy import stats

from qwkboost.study import Cell, MethodSpec, StudySpec, cell_key, check_cells, seeded

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "CI": "true"}
SMALL = ["engine.num_boost_round=60", "engine.early_stopping_rounds=10", "engine.params.learning_rate=0.3",
         "cv.n_splits=3", "study.cap.n_train=600", "study.cap.n_test=600"]


def study_args(store, cache, *extra):
    # one MLflow experiment per test: the store is shared
    return ["experiment=study", *SMALL, f"tracking.uri={store}", f"tracking.experiment_name=study_{cache.parent.name}",
            f"study.cache_dir={cache}", *extra]


def study_cmd(store, cache, *extra):
    """``experiments/run.py experiment=study ...`` as a process."""
    return [sys.executable, str(ROOT / "experiments" / "run.py"), *study_args(store, cache, *extra)]


def study_runs(client, tmp_path):
    """The test's study runs: its one parent (FINISHED) and the children."""
    exp = client.get_experiment_by_name(f"study_{tmp_path.name}")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    return parents, [r for r in runs if "mlflow.parentRunId" in r.data.tags]


def output_dir(cwd: Path) -> Path:
    return sorted(p.parent for p in (cwd / "outputs").glob("*/*/study.md"))[-1]


def test_tiny_study_reports_paired_statistics_and_nests_runs(tmp_path, mlflow_store):
    """``experiments/run.py experiment=study ...`` in this process (:func:`conftest.run_in_process`)."""
    from conftest import run_in_process

    run_in_process(study_args(mlflow_store, tmp_path / "cache", "study.seeds=3", "study.regimes=[quartiles]",
                              "study.only=[squared_error,extended_qwk]"), tmp_path / "outputs" / "day" / "time")
    out = output_dir(tmp_path)
    cells = pd.read_csv(out / "cells.csv")
    summary = pd.read_csv(out / "study.csv")
    headline = pd.read_csv(out / "headline.csv")
    # 3 seeds x (squared error with 3 decoders + extended QWK with 2)
    assert len(cells) == 15 and set(cells["seed"]) == {0, 1, 2}
    assert set(summary["row"]) == {"squared_error+round", "squared_error+exact", "squared_error+distribution",
                                   "extended_qwk+round", "extended_qwk+exact"}
    assert (cells["qwk"] > 0.3).all()
    # the report's numbers are the paired statistics of the cells
    wide = cells.pivot(index="seed", columns="row", values="qwk")
    best = summary.loc[summary["is_best"], "row"].item()
    assert best == wide.mean().idxmax()
    for r in summary[~summary["is_best"]].itertuples():
        d = wide[r.row] - wide[best]
        assert r.diff == pytest.approx(d.mean())
        lo, hi = stats.t.interval(0.95, 2, d.mean(), stats.sem(d))
        assert (r.diff_low, r.diff_high) == pytest.approx((lo, hi))
        assert r.p == pytest.approx(1.0 if (d == 0).all() else stats.wilcoxon(wide[r.row], wide[best]).pvalue)
    h = headline.iloc[0]
    assert h["reference"] == "squared_error+exact" and h["best_eqwk"].startswith("extended_qwk+")
    assert h["diff"] == pytest.approx((wide[h["best_eqwk"]] - wide["squared_error+exact"]).mean())
    md = (out / "study.md").read_text()
    assert "## Verdict" in md and "## quartiles" in md and "Optimising QWK directly" in md
    # the headline is the same-engine comparison, not the best of several extended-QWK rows
    assert "Optimising QWK directly against squared error with exact cut points, on the same engine: " \
           "`extended_qwk` on " in md and "no row picked as the best of several" in md
    assert "With 3 seeds no difference can be significant" in md
    assert "Wall time of this command" in md and "median s per cell" in md
    for png in ("paired_differences.png", "ranking.png"):
        assert (out / "plots" / png).stat().st_size > 10_000
    # MLflow: one parent, a child per seed and method, with the cells' numbers
    client = mlflow.MlflowClient(mlflow_store)
    parents, children = study_runs(client, tmp_path)
    assert len(children) == 6 and all(r.info.status == "FINISHED" for r in children)
    for r in children:
        c = cells[(cells["key"] == r.data.tags["study.cell"]) & (cells["decoder"] == "exact")].iloc[0]
        assert r.data.metrics["test_qwk_exact"] == pytest.approx(c["qwk"])
        assert r.data.params["seed"] == str(c["seed"])
    assert {a.path for a in client.list_artifacts(parents[0].info.run_id)} >= {"study.md", "study.csv", "plots"}


def test_killed_study_resumes_without_running_a_cell_twice(tmp_path, mlflow_store, caplog):
    from conftest import run_in_process

    cache = tmp_path / "cache"
    extra = ("study.seeds=8", "study.regimes=[quartiles]", "study.only=[squared_error]", "study.n_jobs=1")
    args, cmd = study_args(mlflow_store, cache, *extra), study_cmd(mlflow_store, cache, *extra)
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    journal = cache / "computed.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if journal.exists() and len(journal.read_text().splitlines()) >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the study ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    first = [json.loads(line)["key"] for line in journal.read_text().splitlines()]
    assert 2 <= len(first) < 8
    # the same command again, and a third time, in this process (the kill needed a process); their output
    # directories sort after the killed command's outputs/<date>/<time>, as a later command's would
    with caplog.at_level("INFO", logger="qwkboost"):
        run_in_process(args, tmp_path / "outputs" / "again" / "1")
    assert f"{len(first)} reused" in caplog.text
    caplog.clear()
    keys = [json.loads(line)["key"] for line in journal.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 8          # none twice, none lost
    assert len(list((cache / "cells").glob("*.json"))) == 8
    assert len(pd.read_csv(output_dir(tmp_path) / "cells.csv")) == 8 * 3
    # the same parent run continues; one child per cell, none twice
    client = mlflow.MlflowClient(mlflow_store)
    parents, children = study_runs(client, tmp_path)
    assert sorted(r.data.tags["study.cell"] for r in children) == sorted(keys)
    # a third run computes nothing
    with caplog.at_level("INFO", logger="qwkboost"):
        run_in_process(args, tmp_path / "outputs" / "third" / "2")
    assert "8 reused from" in caplog.text and "0 to compute" in caplog.text
    assert len(journal.read_text().splitlines()) == 8
    # the killed command recorded nothing; the two that finished are in the report's time
    assert "The 2 commands that ran this study took" in (output_dir(tmp_path) / "study.md").read_text()


def test_a_cell_key_changes_with_what_decides_its_result_only():
    base = {"data": {"name": "quartiles", "n_train": 1000, "seed": 0, "test_seed": 1}, "engine": {"name": "xgboost"},
            "objective": {"name": "squared_error"}, "cv": {"n_splits": 5}, "seed": 0}
    m = MethodSpec("se", ("objective=squared_error",), ("exact",))
    k = cell_key(seeded(base, 0, None, None), m)
    assert k == cell_key({**seeded(base, 0, None, None), "tracking": {"uri": "x"}, "n_jobs": 2, "run_name": "r"}, m)
    assert k != cell_key(seeded(base, 1, None, None), m)
    assert k != cell_key(seeded(base, 0, 500, None), m)
    assert k != cell_key(seeded(base, 0, None, None), MethodSpec("se", m.overrides, ("exact", "round")))
    s = seeded(base, 7, 500, None)
    assert (s["seed"], s["data"]["seed"], s["data"]["test_seed"], s["data"]["n_train"]) == (7, 7, 100_007, 500)


GOOD = {"seeds": 2, "regimes": ["quartiles"], "engines": ["lightgbm"],
        "methods": {"se": {"overrides": ["objective=squared_error"], "decode": ["exact"]}}}


@pytest.mark.parametrize("patch,match", [
    ({"seed": 3}, r"study: unknown key\(s\) \['seed'\]"),
    ({"seeds": 0}, "study.seeds"),
    ({"regimes": []}, "study.regimes must list data configs"),
    ({"engines": ["h2o"]}, "study.engines must list engines"),
    ({"methods": {"se": {"overrides": ["objective=squared_error"], "decode": ["median"]}}},
     r"study.methods.se.decode: \['median'\] unknown"),
    ({"methods": {"se": {"decode": ["exact"]}}}, "study.methods.se.overrides must choose an objective"),
    ({"methods": {"p": {"peer": "catboost"}}}, "study peer 'catboost' is unknown"),
    ({"only": ["nope"]}, r"study.only: \['nope'\] not among study.methods \(se\)"),
    ({"cap": {"rows": 5}}, "study.cap must be null or"),
    ({"cap": {"n_train": 3}}, "study.cap.n_train"),
    ({"methods": {**GOOD["methods"], "b": {"members": ["se"]}}}, r"study.methods.b.members must name two or more"),
    ({"methods": {**GOOD["methods"], "b": {"members": ["se", "eq"]}}},
     r"study.methods.b.members: \['eq'\] are not methods of this study"),
    ({"methods": {**GOOD["methods"], "e": {"overrides": ["objective=extended_qwk"]},
                  "b": {"members": ["se", "e"], "blend_method": "median"}}}, "study.methods.b.blend_method='median'"),
    ({"methods": {**GOOD["methods"], "e": {"overrides": ["objective=extended_qwk"]},
                  "b": {"members": ["se", "e"], "decode": ["argmax"]}}}, "a blend is decoded by cut points"),
    ({"methods": {**GOOD["methods"], "p": {"peer": "ordered_model"}, "b": {"members": ["se", "p"]}}},
     r"study.methods.b.members: \['p'\] are peers or blends"),
    ({"methods": {**GOOD["methods"], "e": {"blend_method": "mean", "overrides": ["objective=extended_qwk"]}}},
     "study.methods.e.blend_method needs members"),
])
def test_bad_study_settings_are_refused(patch, match):
    with pytest.raises(ValueError, match=match):
        StudySpec.from_config({**GOOD, **patch})


def test_argmax_on_an_objective_without_probabilities_is_refused():
    m = MethodSpec("se", ("objective=squared_error",), ("argmax",))
    cell = Cell("quartiles", "lightgbm", m, 0, {"objective": {"name": "squared_error", "params": {}}})
    with pytest.raises(ValueError, match="study.methods.se.decode: 'argmax' needs class probabilities"):
        check_cells([cell])
    ok = MethodSpec("mc", ("objective=multiclass",), ("argmax",))
    check_cells([Cell("quartiles", "lightgbm", ok, 0, {"objective": {"name": "multiclass", "params": {}}})])


def test_bad_study_config_fails_before_training(tmp_path, mlflow_store):
    proc = subprocess.run(study_cmd(mlflow_store, tmp_path / "cache", "study.regimes=[quartiles,nowhere]"),
                          cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "nowhere" in proc.stdout + proc.stderr and "Traceback" not in proc.stdout + proc.stderr
    assert not (tmp_path / "cache" / "computed.jsonl").exists()


def test_a_blend_method_beside_its_members_reuses_their_scores(tmp_path):
    """In-process: the cells a blend needs keep their scores; the blend cells are computed after them, scored
    like any method, compared with the best single method, and reused on a second run."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from qwkboost.study import build_cells, run_study

    cache = tmp_path / "cache"
    study = {**GOOD, "seeds": 2, "cache_dir": str(cache), "n_jobs": 1, "cap": {"n_train": 600, "n_test": 600},
             "methods": {"se": {"overrides": ["objective=squared_error"], "decode": ["exact"]},
                         "mc": {"overrides": ["objective=multiclass"], "decode": ["exact"]},
                         "blend": {"members": ["se", "mc"], "blend_method": "weights", "decode": ["exact"]}}}
    spec = StudySpec.from_config(study)
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        def compose_(overrides):
            return OmegaConf.to_container(compose("config", overrides=[*SMALL[:4], *overrides]), resolve=True)

        cells = build_cells(spec, compose_)
    blends = [c for c in cells if c.method.is_blend]
    assert len(cells) == 6 and len(blends) == 2
    members = {c.key: c for c in cells if not c.method.is_blend}
    assert all(set(b.depends) <= set(members) and members[b.depends[0]].seed == b.seed for b in blends)
    summary, _ = run_study(spec, cells, None, tmp_path / "out")
    assert len(list((cache / "scores").glob("*.npz"))) == 4
    for b in blends:
        r = b.result
        assert r["qwk_oof_nested"]["exact"] <= r["qwk_oof"]["exact"] and 0.3 < r["qwk"]["exact"] < 1
        assert sum(r["weights"]["exact"].values()) == pytest.approx(1.0)
    table = pd.read_csv(tmp_path / "out" / "blends.csv")
    assert list(table["blend"]) == ["blend+exact"] and table["best_single"].iloc[0] in ("se+exact", "mc+exact")
    assert "## Blending" in (tmp_path / "out" / "study.md").read_text()
    assert "blend+exact" in set(summary["row"])
    for c in cells:
        c.result = None
    run_study(spec, cells, None, tmp_path / "out2")      # the same cells again: all from the cache
    assert all(c.result.get("reused") for c in cells)
