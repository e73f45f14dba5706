"""The time budget end to end on real engines and a real MLflow store: the budget kept, the blend written, the
stop path, a resume, the refusals. Small data; the time bounds are generous (tests never time speed)."""

import json
import os
import signal
import threading
import time

import numpy as np
import pandas as pd
import pytest

import qwkboost as qb
from conftest import quartile_frames
from qwkboost.exceptions import ConfigError

SMALL = dict(engines=["lightgbm", "xgboost"], objectives=["squared_error", "extended_qwk"], n_splits=3, n_jobs=1,
             progress=False)


@pytest.fixture(scope="module")
def frames():
    return quartile_frames(seed=3)


@pytest.fixture(scope="module")
def finished(frames, tmp_path_factory):
    """Four candidates, no tuning, in a directory of their own (shared by the tests that read it)."""
    X, y, X_test, _ = frames
    out = tmp_path_factory.mktemp("auto") / "run"
    return qb.auto(X, y, X_test, time_limit=120, tune=False, output_dir=out, **SMALL), out


def test_every_candidate_finishes_and_the_blend_is_written_as_a_run_writes(finished, frames):
    result, out = finished
    X, y, X_test, y_test = frames
    board = result.leaderboard
    assert sorted(board.loc[board.status == "finished", "candidate"]) == [
        "lightgbm-extended_qwk", "lightgbm-squared_error", "xgboost-extended_qwk", "xgboost-squared_error"]
    assert board["weight"].sum() == pytest.approx(1.0)
    for f in ("submission.csv", "predictions.parquet", "oof.parquet", "leaderboard.csv", "blend.json", "auto.json"):
        assert (out / f).is_file(), f
    sub = pd.read_csv(out / "submission.csv")
    assert list(sub.columns) == ["row", "grade"] and len(sub) == len(X_test)
    np.testing.assert_array_equal(result.predict(X_test), sub["grade"].to_numpy())     # the pipeline is the blend
    m = result.metrics
    assert m["nested_oof_qwk"] <= m["oof_qwk"] + 1e-12 and 0.3 < m["nested_oof_qwk"] < 0.8
    assert m["seconds"] <= 120 and m["overrun"] == 0
    # the servable pipeline keeps only the members the selection chose
    chosen = int((board["weight"] > 0).sum())
    assert len(qb.load_run(out).members) == chosen if chosen > 1 else True


def test_run_again_on_the_same_directory_reuses_every_finished_candidate(finished, frames, caplog):
    result, out = finished
    X, y, X_test, _ = frames
    before = json.loads((out / "auto.json").read_text())["candidates"]
    caplog.set_level("INFO", logger="qwkboost.autoblend")
    again = qb.auto(X, y, X_test, time_limit=60, tune=False, output_dir=out, **SMALL)
    after = json.loads((out / "auto.json").read_text())
    assert {n: r["seconds"] for n, r in after["candidates"].items()} == {n: r["seconds"] for n, r in before.items()}
    assert sum("reused" in r.message for r in caplog.records) == 4
    assert len(after["sessions"]) == 2
    assert again.metrics["nested_oof_qwk"] == pytest.approx(result.metrics["nested_oof_qwk"])


def test_a_directory_of_another_configuration_is_refused(finished, frames):
    _, out = finished
    X, y, X_test, _ = frames
    with pytest.raises(ConfigError, match=r"holds a time budget's candidates for another configuration \(cv.n_splits"):
        qb.auto(X, y, X_test, time_limit=30, tune=False, output_dir=out, **{**SMALL, "n_splits": 4})


def test_a_short_budget_is_kept_and_tuning_fills_it(frames, tmp_path, caplog):
    X, y, X_test, _ = frames
    caplog.set_level("INFO", logger="qwkboost.autoblend")
    limit = 25.0
    t = time.monotonic()
    result = qb.auto(X, y, X_test, time_limit=limit, engines=["lightgbm"], objectives=["squared_error"], n_splits=3,
                     n_jobs=1, progress=False, output_dir=tmp_path / "short")
    wall = time.monotonic() - t
    assert result.metrics["seconds"] <= 1.25 * limit and wall <= 1.25 * limit + 5      # a generous bound
    trials = [c for c in result.leaderboard["candidate"] if "-trial-" in c]
    assert trials, "the time left after the one default candidate goes to tuning it"
    assert (tmp_path / "short" / "tuning.db").is_file()
    # a trial its pruner stopped is "pruned", one the time guard stopped "stopped": never confused
    board = result.leaderboard
    assert set(board["status"]) <= {"finished", "pruned", "stopped", "left out"}
    record = json.loads((tmp_path / "short" / "auto.json").read_text())["candidates"]
    for name, rec in record.items():
        assert (rec["status"] == "pruned") == rec.get("reason", "").startswith("pruned by"), (name, rec)
    # the closing line lists the members and the best finished runs, and counts long lists instead of printing them
    (closing,) = [r.message for r in caplog.records if r.message.startswith("auto: done in")]
    members = int((board["weight"] > 0).sum())
    assert len(closing.splitlines()) <= 3 + 15 + members + 4, closing      # title, header, rows, counts, file


def test_sigterm_writes_the_blend_of_what_finished(frames, tmp_path):
    from qwkboost.tracking.interrupt import Terminated, install_sigterm

    X, y, X_test, _ = frames
    out = tmp_path / "stopped"
    state = out / "auto.json"

    def stop_after_two():
        while time.monotonic() - t0 < 120:
            if state.exists():
                rec = json.loads(state.read_text()).get("candidates", {})
                if sum(r.get("status") == "finished" for r in rec.values()) >= 2:
                    os.kill(os.getpid(), signal.SIGTERM)
                    return
            time.sleep(0.05)

    old = signal.getsignal(signal.SIGTERM)
    install_sigterm()
    t0 = time.monotonic()
    threading.Thread(target=stop_after_two, daemon=True).start()
    try:
        with pytest.raises(Terminated):
            qb.auto(X, y, X_test, time_limit=300, output_dir=out, **SMALL)
    finally:
        signal.signal(signal.SIGTERM, old)
    record = json.loads(state.read_text())
    assert record["sessions"][-1]["stopped"] is True and record["sessions"][-1]["members"] >= 2
    assert len(pd.read_csv(out / "submission.csv")) == len(X_test)
    assert (out / "blend.json").is_file()


@pytest.mark.parametrize("kwargs, match", [
    (dict(engines=["lightgbm", "xgb"]), r"auto.engines has unknown name\(s\) \['xgb'\]"),
    (dict(X_test=None), r"X_test: give the rows to predict"),
    (dict(time_limit=-1), r"auto.time_limit must be a number of seconds > 0"),
    (dict(engines=["catboost"], objectives=["soft_qwk"]), r"no candidate of auto.engines and auto.objectives can "
                                                           r"run: catboost-soft_qwk"),
])
def test_bad_settings_are_refused_before_any_training(frames, tmp_path, kwargs, match):
    X, y, X_test, _ = frames
    with pytest.raises(ConfigError, match=match):
        qb.auto(X, y, **{"X_test": X_test, "time_limit": 30, "output_dir": tmp_path / "x", **kwargs})
    assert not (tmp_path / "x" / "candidates").exists()


def test_labels_as_a_column_name_and_words(tmp_path):
    from qwkboost.data import quartiles

    ds = quartiles(n_train=900, n_test=300, seed=4)
    words = np.array(["low", "mid", "high", "top"])
    train = pd.DataFrame(ds.X_train, columns=[f"f{j}" for j in range(ds.X_train.shape[1])]).assign(
        level=words[ds.y_train.astype(int)], key=np.arange(900) + 10_000)
    test = pd.DataFrame(ds.X_test, columns=[f"f{j}" for j in range(ds.X_train.shape[1])]).assign(key=np.arange(300))
    result = qb.auto(train, "level", test, id="key", classes=["low", "mid", "high", "top"], time_limit=60,
                     tune=False, engines=["lightgbm"], objectives=["squared_error", "extended_qwk"], n_splits=3,
                     n_jobs=1, progress=False, output_dir=tmp_path / "words")
    sub = pd.read_csv(tmp_path / "words" / "submission.csv")
    assert list(sub.columns) == ["key", "level"] and set(sub["level"]) <= set(words)
    np.testing.assert_array_equal(sub["key"], np.arange(300))
    assert set(result.predict(test.drop(columns=["key"]))) <= set(words)


def test_the_command_logs_one_parent_run_whose_children_are_the_candidates(frames, tmp_path, mlflow_store):
    import mlflow
    from conftest import run_in_process

    from model_files import logged_model

    X, y, X_test, y_test = frames
    X.assign(grade=y).to_csv(tmp_path / "train.csv", index_label="id")
    X_test.assign(grade=y_test).to_csv(tmp_path / "test.csv", index_label="id")
    run_in_process(["experiment=auto", "auto.time_limit=90", "auto.engines=[lightgbm]",
                    "auto.objectives=[squared_error,extended_qwk]", "auto.tune=false", "data=csv",
                    f"data.path={tmp_path / 'train.csv'}", f"data.test_path={tmp_path / 'test.csv'}",
                    "data.target=grade", "data.id=id", "cv.n_splits=3", "n_jobs=1", f"tracking.uri={mlflow_store}",
                    "tracking.experiment_name=auto_command"], tmp_path / "out")
    client = mlflow.MlflowClient(mlflow_store)
    exp = client.get_experiment_by_name("auto_command")
    runs = client.search_runs([exp.experiment_id])
    parent = [r for r in runs if r.data.tags.get("qwkboost.auto") == "parent"]
    assert len(parent) == 1 and parent[0].info.status == "FINISHED"
    pid = parent[0].info.run_id
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == pid]
    assert sorted(r.info.run_name for r in children) == ["lightgbm/extended_qwk", "lightgbm/squared_error"]
    assert {(r.data.tags["kind"], r.data.tags["candidate"]) for r in children} == {
        ("candidate", "lightgbm-extended_qwk"), ("candidate", "lightgbm-squared_error")}
    assert parent[0].data.tags["kind"] == "auto" and parent[0].data.tags["mlflow.note.content"].startswith("auto in ")
    assert all(r.info.status == "FINISHED" for r in children)
    assert parent[0].data.metrics["nested_oof_qwk"] > 0.3 and "seconds" in parent[0].data.metrics
    names = {a.path for a in client.list_artifacts(pid)}
    assert {"leaderboard.csv", "blend.json", "predictions"} <= names and "pipeline" not in names    # once: the model
    # the result's servable model, linked to the parent's figures; each of its members a model in its own run,
    # linked to that run's figures, its files not copied again
    served = logged_model(client, pid)
    assert served.tags["kind"] == "auto"
    linked = {m.key: m.value for m in served.metrics}
    assert len(linked) == len(served.metrics)                       # each figure linked once
    assert linked["nested_oof_qwk"] == pytest.approx(parent[0].data.metrics["nested_oof_qwk"])
    assert linked["seconds"] == parent[0].data.metrics["seconds"]
    board = pd.read_csv(tmp_path / "out" / "leaderboard.csv")
    weights = dict(zip(board["candidate"], board["weight"]))
    assert served.name == ("blend" if (board["weight"] > 0).sum() > 1 else board["candidate"][board["weight"] > 0].item())
    for r in children:
        records = client.search_logged_models([exp.experiment_id], filter_string=f"source_run_id = '{r.info.run_id}'")
        if weights[r.data.tags["candidate"]] == 0:
            assert records == []
            continue
        (member,) = records
        assert member.name == r.data.tags["candidate"] and member.tags["mlflow.model.isExternal"] == "true"
        assert member.tags["served_by"] == f"models:/{served.model_id}"
        assert float(member.tags["blend_weight"]) == pytest.approx(weights[r.data.tags["candidate"]], abs=1e-4)
        linked = {m.key: m.value for m in member.metrics}
        assert linked["oof_qwk"] == r.data.metrics["oof_qwk"] and not any(k.startswith("valid_") for k in linked)
        assert not client.list_logged_model_artifacts(member.model_id, "artifacts")     # kept once: in the blend
        assert len(client.get_metric_history(r.info.run_id, "oof_qwk")) == 1               # no point logged twice
    model = mlflow.pyfunc.load_model(f"models:/{served.model_id}")
    sub = pd.read_csv(tmp_path / "out" / "submission.csv")
    np.testing.assert_array_equal(model.predict(X_test.iloc[:50])["class"], sub["grade"].to_numpy()[:50])


def test_the_command_refuses_bad_settings_before_reading_the_data(tmp_path):
    from conftest import run_in_process

    for overrides, match in ((["auto.engines=[lightgbm,lgbm]"], r"auto.engines has unknown name"),
                             (["auto.objectives=[]"], r"auto.objectives must be a non-empty list"),
                             (["+auto.time_limt=3"], r"auto has no setting\(s\) \['time_limt'\]"),
                             (["data=csv", "data.path=/nonexistent.csv", "data.target=y"], r"does not exist")):
        with pytest.raises(ConfigError, match=match):
            run_in_process(["experiment=auto", *overrides], tmp_path / "out")
    assert not (tmp_path / "out" / "auto.json").exists()
