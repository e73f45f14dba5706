"""The paths a user walks after a first time budget: a resume with other engines, on changed data, on damaged or
moved files, a stop at any moment, a second command into the same directory. Real engines and a real MLflow
store; small data."""

import json
import logging
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import qwkboost as qb
from conftest import quartile_frames
from qwkboost.exceptions import ConfigError
from qwkboost.tracking.interrupt import Terminated, install_sigterm

KW = dict(engines=["lightgbm"], objectives=["squared_error", "extended_qwk"], n_splits=3, n_jobs=1, progress=False,
          tune=False)


@pytest.fixture(scope="module")
def frames():
    return quartile_frames(seed=5)


@pytest.fixture(scope="module")
def base(frames, tmp_path_factory):
    """A finished directory of two LightGBM candidates (no tracking), copied by the tests that change it."""
    X, y, X_test, _ = frames
    out = tmp_path_factory.mktemp("resume") / "base"
    qb.auto(X, y, X_test, time_limit=120, output_dir=out, **KW)
    return out


@pytest.fixture
def copy(base, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(base, out, symlinks=True)
    return out


class _StopAt(logging.Handler):
    """Sends this process SIGTERM when a log line starts with ``prefix``: a stop at a known moment."""

    def __init__(self, prefix):
        super().__init__()
        self.prefix = prefix

    def emit(self, record):
        if record.getMessage().startswith(self.prefix):
            os.kill(os.getpid(), signal.SIGTERM)


@pytest.fixture
def stop_at():
    """``stop_at(prefix)``: SIGTERM when the folds' or the blend's logger writes a line starting with ``prefix``.
    The handler sits on those loggers themselves, enabled at INFO, whatever an earlier test did to the logging
    configuration (Hydra's, pytest's)."""
    loggers = [logging.getLogger(n) for n in ("qwkboost.cv.crossval", "qwkboost.blending.fit", "qwkboost.autoblend")]
    saved = [(lg, lg.disabled, lg.level) for lg in loggers]
    handlers = []
    old = signal.getsignal(signal.SIGTERM)
    install_sigterm()

    def add(prefix):
        h = _StopAt(prefix)
        for lg in loggers:
            lg.disabled = False
            lg.setLevel(logging.INFO)
            lg.addHandler(h)
        handlers.append(h)

    yield add
    for lg, disabled, level in saved:
        for h in handlers:
            lg.removeHandler(h)
        lg.disabled, lg.level = disabled, level
    signal.signal(signal.SIGTERM, old)


def _sessions(out):
    return json.loads((out / "auto.json").read_text())["sessions"]


def test_a_resume_with_one_more_engine_ends_the_parent_run_finished_with_the_new_blend(frames, tmp_path,
                                                                                       mlflow_store, caplog):
    import mlflow

    caplog.set_level("INFO", logger="qwkboost.autoblend")
    X, y, X_test, _ = frames
    out = tmp_path / "run"
    first = qb.auto(X, y, X_test, time_limit=120, output_dir=out, tracking_uri=mlflow_store,
                    experiment_name="resume_more", **KW)
    again = qb.auto(X, y, X_test, time_limit=120, output_dir=out, tracking_uri=mlflow_store,
                    experiment_name="resume_more", max_members=3, **{**KW, "engines": ["lightgbm", "xgboost"]})
    client = mlflow.MlflowClient(mlflow_store)
    exp = client.get_experiment_by_name("resume_more")
    parents = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("qwkboost.auto") == "parent"]
    assert len(parents) == 1 and parents[0].info.run_id == first.run_id == again.run_id
    # each invocation printed the link to its run, as every command does
    assert caplog.text.count(f"MLflow run: http://127.0.0.1:5000/#/experiments/{exp.experiment_id}/runs/"
                             f"{first.run_id}?workflowType=machine_learning") == 2
    run = parents[0]
    assert run.info.status == "FINISHED"
    # the finished candidates, not the pool the blend chose from (auto.max_members)
    assert run.data.metrics["auto.n_finished"] == 4 and run.data.metrics["auto.pool_size"] == 3
    assert run.data.metrics["nested_oof_qwk"] == pytest.approx(again.metrics["nested_oof_qwk"])
    assert run.data.tags["blend.members"] == "3"
    # a servable model per invocation, each linked to its own invocation's figures (step 0, then step 1)
    models = sorted((m for m in client.search_logged_models([exp.experiment_id],
                                                            filter_string=f"source_run_id = '{first.run_id}'")),
                    key=lambda m: m.creation_timestamp)
    assert len(models) == 2
    for step, (model, result) in enumerate(zip(models, (first, again))):
        assert {m.step for m in model.metrics} == {step}
        linked = {m.key: m.value for m in model.metrics}
        assert len(linked) == len(model.metrics) and linked["nested_oof_qwk"] == pytest.approx(
            result.metrics["nested_oof_qwk"])
    # the new blend's members point at the new model
    members = [m for m in client.search_logged_models([exp.experiment_id])
               if m.tags.get("mlflow.model.isExternal") == "true" and float(m.tags["blend_weight"]) > 0
               and m.tags["served_by"] == f"models:/{models[1].model_id}"]
    board = again.leaderboard
    assert {m.name for m in members} == set(board.loc[board["weight"] > 0, "candidate"])
    assert [s["settings"]["engines"] for s in _sessions(out)] == [["lightgbm"], ["lightgbm", "xgboost"]]


def test_a_resume_that_narrows_the_engines_blends_only_what_they_allow(frames, copy, caplog):
    X, y, X_test, _ = frames
    caplog.set_level("INFO", logger="qwkboost.autoblend")
    result = qb.auto(X, y, X_test, time_limit=60, output_dir=copy, **{**KW, "objectives": ["squared_error"]})
    board = result.leaderboard.set_index("candidate")
    assert board.loc["lightgbm-extended_qwk", "status"] == "set aside"
    assert board.loc["lightgbm-extended_qwk", "weight"] == 0 and board.loc["lightgbm-squared_error", "weight"] == 1
    assert result.blend is None and not (copy / "blend.json").exists()
    assert qb.load_run(copy).info["objective"] == "squared_error"
    assert result.metrics["n_finished"] == 1
    (closing,) = [r.message for r in caplog.records if r.message.startswith("auto: done in")]
    assert "set aside (not in auto.engines, auto.objectives): lightgbm-extended_qwk" in closing


@pytest.mark.parametrize("change, match", [
    (lambda X, y, Xt: (X.assign(f0=X["f0"] + 1e-9), y, Xt), r"X holds other values \(1200 rows, as then\)"),
    (lambda X, y, Xt: (X.iloc[:-3], y.iloc[:-3], Xt), r"X holds other rows \(1200 rows then, 1197 now\)"),
    (lambda X, y, Xt: (X, y, Xt.iloc[::-1].reset_index(drop=True)), r"X_test holds other values"),
    (lambda X, y, Xt: (X[X.columns[::-1]], y, Xt[Xt.columns[::-1]]),
     r"the feature columns differ \(the same names in another order\)"),
])
def test_a_resume_on_other_data_is_refused_before_anything_changes(frames, copy, change, match):
    X, y, X_test, _ = frames
    before = {p: p.stat().st_mtime_ns for p in copy.rglob("*") if p.is_file()}
    X2, y2, Xt2 = change(X, y, X_test)
    with pytest.raises(ConfigError, match=match + r".*give another output directory \(output_dir=\.\.\.\)"):
        qb.auto(X2, y2, Xt2, time_limit=60, output_dir=copy, **KW)
    # on a cluster too, before connecting: no scheduler answers at this address, and the data is what is refused
    with pytest.raises(ConfigError, match=match):
        qb.auto(X2, y2, Xt2, time_limit=60, output_dir=copy, cluster="tcp://127.0.0.1:9", **KW)
    after = {p: p.stat().st_mtime_ns for p in copy.rglob("*") if p.is_file() and p.name != ".qwkboost.lock"}
    assert after == {p: t for p, t in before.items() if p.name != ".qwkboost.lock"}


def test_a_train_csv_replaced_at_the_same_path_is_refused_naming_it(frames, tmp_path):
    from conftest import run_in_process

    X, y, X_test, y_test = frames
    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    X.assign(grade=y).to_csv(train, index_label="id")
    X_test.assign(grade=y_test).to_csv(test, index_label="id")
    args = ["experiment=auto", "auto.time_limit=60", "auto.engines=[lightgbm]", "auto.objectives=[squared_error]",
            "auto.tune=false", "data=csv", f"data.path={train}", f"data.test_path={test}", "data.target=grade",
            "data.id=id", "cv.n_splits=3", "n_jobs=1", "tracking.uri=null"]
    run_in_process(args, tmp_path / "out")
    sub = (tmp_path / "out" / "submission.csv").read_bytes()
    X_test.iloc[:-10].assign(grade=y_test[:-10]).to_csv(test, index_label="id")
    with pytest.raises(ConfigError, match=rf"data.test_path='{test}' holds other rows \(600 rows then, 590 now\)"):
        run_in_process(args, tmp_path / "out")
    with pytest.raises(ConfigError, match=rf"data.test_path='{test}' holds other rows"):       # before connecting
        run_in_process([*args, "cluster.address=tcp://127.0.0.1:9"], tmp_path / "out")
    X.assign(grade=np.roll(y.to_numpy(), 1)).to_csv(train, index_label="id")
    with pytest.raises(ConfigError, match=rf"data.path='{train}' holds other values \(1200 rows, as then\)"):
        run_in_process(args, tmp_path / "out")
    assert (tmp_path / "out" / "submission.csv").read_bytes() == sub


def test_damaged_candidate_files_run_again_with_a_line_saying_why(frames, copy, caplog):
    X, y, X_test, _ = frames
    sq, eq = copy / "candidates" / "lightgbm-squared_error", copy / "candidates" / "lightgbm-extended_qwk"
    data = (sq / "oof.parquet").read_bytes()
    (sq / "oof.parquet").write_bytes(data[: len(data) // 2])
    fold = sorted((eq / "pipeline").glob("*.json"))[-1]
    fold.write_text(fold.read_text()[:100])
    caplog.set_level("INFO", logger="qwkboost.autoblend")
    result = qb.auto(X, y, X_test, time_limit=60, output_dir=copy, **KW)
    lines = [r.message for r in caplog.records if "runs again" in r.message]
    assert any(m.startswith("auto: lightgbm-squared_error runs again: oof.parquet changed size") for m in lines)
    assert any(m.startswith(f"auto: lightgbm-extended_qwk runs again: pipeline/{fold.name} changed size")
               for m in lines)
    assert (result.leaderboard["status"] == "finished").all()
    np.testing.assert_array_equal(result.predict(X_test), pd.read_csv(copy / "submission.csv")["grade"])


def test_a_deleted_prediction_file_runs_its_candidate_again(frames, copy, caplog):
    X, y, X_test, _ = frames
    (copy / "candidates" / "lightgbm-squared_error" / "predictions.parquet").unlink()
    caplog.set_level("INFO", logger="qwkboost.autoblend")
    qb.auto(X, y, X_test, time_limit=60, output_dir=copy, **KW)
    assert "auto: lightgbm-squared_error runs again: file 'predictions.parquet' does not exist" in caplog.messages


def test_paths_that_leave_the_run_directory_are_not_followed(frames, copy, tmp_path, caplog):
    X, y, X_test, _ = frames
    # a record whose folder climbs out, and a candidate folder that is a link to another directory
    state = json.loads((copy / "auto.json").read_text())
    state["candidates"]["lightgbm-squared_error"]["dir"] = "candidates/../../elsewhere"
    (copy / "auto.json").write_text(json.dumps(state))
    elsewhere = tmp_path / "other-run"
    shutil.move(copy / "candidates" / "lightgbm-extended_qwk", elsewhere)
    os.symlink(elsewhere, copy / "candidates" / "lightgbm-extended_qwk")
    kept = {p.relative_to(elsewhere): p.read_bytes() for p in elsewhere.rglob("*") if p.is_file()}
    caplog.set_level("INFO", logger="qwkboost.autoblend")
    qb.auto(X, y, X_test, time_limit=60, output_dir=copy, **KW)
    msgs = [m for m in caplog.messages if "runs again" in m]
    assert "auto: lightgbm-squared_error runs again: its record names the folder 'candidates/../../elsewhere', " \
           "not candidates/lightgbm-squared_error" in msgs
    assert any(m.startswith(f"auto: lightgbm-extended_qwk runs again: directory '{copy}': auto.json 'dir' "
                            "'candidates/lightgbm-extended_qwk' leads out of the directory (a symlink") for m in msgs)
    assert not (copy / "candidates" / "lightgbm-extended_qwk").is_symlink()
    assert {p.relative_to(elsewhere): p.read_bytes() for p in elsewhere.rglob("*") if p.is_file()} == kept


def test_a_stop_before_any_candidate_finished_is_a_stop_not_an_error(frames, tmp_path, stop_at, mlflow_store):
    import mlflow

    X, y, X_test, _ = frames
    out = tmp_path / "run"
    stop_at("lightgbm-squared_error: fold 1/3")
    with pytest.raises(Terminated):
        qb.auto(X, y, X_test, time_limit=120, output_dir=out, tracking_uri=mlflow_store,
                experiment_name="stop_first", **KW)
    (session,) = _sessions(out)
    assert session["status"] == "stopped" and session["members"] == 0
    client = mlflow.MlflowClient(mlflow_store)
    runs = client.search_runs([client.get_experiment_by_name("stop_first").experiment_id])
    assert {r.data.tags.get("qwkboost.auto", "child"): r.info.status for r in runs} == {"parent": "KILLED",
                                                                                        "child": "KILLED"}
    assert not (out / "submission.csv").exists()


def test_a_stop_during_the_blend_of_a_resume_keeps_the_last_good_outputs(frames, copy, stop_at):
    X, y, X_test, _ = frames
    old = {f: (copy / f).read_bytes() for f in ("submission.csv", "oof.parquet", "predictions.parquet",
                                                "blend.json", "pipeline/pipeline.json")}
    stop_at("blend (greedy) of 4 members")
    with pytest.raises(Terminated):
        qb.auto(X, y, X_test, time_limit=120, output_dir=copy, **{**KW, "engines": ["lightgbm", "xgboost"]})
    assert {f: (copy / f).read_bytes() for f in old} == old
    assert not [p.name for p in copy.iterdir() if p.name.startswith((".staging", ".old"))]
    assert _sessions(copy)[-1]["status"] == "stopped"
    assert len(qb.load_run(copy).members) >= 1


@pytest.mark.parametrize("moment", ["auto: blend (", "blend (greedy) of 2 members"])
def test_a_stop_during_the_first_blend_writes_the_best_finished_candidate(frames, tmp_path, stop_at, caplog, moment):
    """A stop as the blend starts, or once it is fitted: no earlier outputs to keep, so the best finished candidate
    is written as the submission, with a leaderboard naming it."""
    X, y, X_test, _ = frames
    out = tmp_path / "run"
    stop_at(moment)
    caplog.set_level("INFO", logger="qwkboost.autoblend")
    with pytest.raises(Terminated):
        qb.auto(X, y, X_test, time_limit=120, output_dir=out, **KW)
    board = pd.read_csv(out / "leaderboard.csv").set_index("candidate")
    assert (board["status"] == "finished").all() and len(board) == 2
    best = board["nested_oof_qwk"].idxmax()
    assert board.loc[best, "weight"] == 1 and board["weight"].sum() == 1
    assert (out / "submission.csv").read_bytes() == (out / "candidates" / best / "submission.csv").read_bytes()
    assert qb.load_run(out).info["objective"] == best.split("-", 1)[1]
    assert not (out / "blend.json").exists()
    assert not [p.name for p in out.iterdir() if p.name.startswith((".staging", ".old"))]
    assert _sessions(out)[-1]["status"] == "stopped"
    assert any(m.startswith(f"auto: stopped during the blend; wrote the best finished candidate, {best}")
               for m in caplog.messages)


def test_a_session_a_killed_process_left_running_is_marked_killed_by_the_next(frames, copy, caplog):
    """``kill -9`` leaves no chance to close ``auto.json``'s record: the next command into the directory (which holds
    its lock, so no other can be running) marks it killed."""
    X, y, X_test, _ = frames
    record = json.loads((copy / "auto.json").read_text())
    record["sessions"].append({"started": "2026-11-28T10:00:00+00:00", "settings": {}, "status": "running",
                               "pid": 2 ** 22 + 1})
    (copy / "auto.json").write_text(json.dumps(record))
    caplog.set_level("INFO", logger="qwkboost.autoblend")
    qb.auto(X, y, X_test, time_limit=60, output_dir=copy, **KW)
    sessions = _sessions(copy)
    assert [s["status"] for s in sessions] == ["finished", "killed", "finished"]
    assert "ended without closing" in sessions[1]["reason"]
    assert any("ended without closing its record in auto.json; it is marked killed" in m for m in caplog.messages)


def test_a_tuning_study_of_other_data_is_set_aside_not_continued(frames, tmp_path, caplog):
    """The refusal of a resume on other data says to start afresh; a user who moves ``auto.json`` away instead and
    runs on other labels gets a new study: the old data's trials stay in ``tuning.db``, set aside, with a line."""
    import optuna

    import hashlib

    X, y, X_test, _ = frames
    out = tmp_path / "run"
    kw = {**KW, "objectives": ["squared_error"]}
    qb.auto(X, y, X_test, time_limit=60, output_dir=out, **kw)
    # the study its tuning makes, with three trials (as many as its time would give: seeded, not waited for)
    record = json.loads((out / "auto.json").read_text())
    rows = hashlib.sha256(f"{record['data']['train']}:{record['data']['test']}".encode()).hexdigest()[:8]
    name = f"lightgbm-squared_error-{record['candidates']['lightgbm-squared_error']['config_hash']}-{rows}"
    old = optuna.create_study(study_name=name, storage=f"sqlite:///{out}/tuning.db", direction="maximize")
    old.set_user_attr("qwkboost.data", record["data"])
    for q in (0.60, 0.61, 0.62):
        old.add_trial(optuna.trial.create_trial(params={"learning_rate": 0.1}, value=q, distributions={
            "learning_rate": optuna.distributions.FloatDistribution(0.01, 0.3, log=True)}))
    before = optuna.get_all_study_summaries(f"sqlite:///{out}/tuning.db")
    kw["tune"] = True
    (out / "auto.json").rename(tmp_path / "auto.json.moved")
    caplog.set_level("INFO", logger="qwkboost.autoblend")
    qb.auto(X, pd.Series(np.roll(y.to_numpy(), 7), name=y.name), X_test, time_limit=12, output_dir=out, **kw)
    tuning = [m for m in caplog.messages if m.startswith("auto: tuning lightgbm-squared_error (")]
    assert tuning == ["auto: tuning lightgbm-squared_error (0 trial(s) in its study so far)"]
    assert any(m.startswith(f"auto: tuning.db holds {before[0].n_trials} trial(s) of lightgbm-squared_error in 1 "
                            "study(ies) of other data; they stay there, set aside") for m in caplog.messages)
    after = {s.study_name: s.n_trials for s in optuna.get_all_study_summaries(f"sqlite:///{out}/tuning.db")}
    assert after[before[0].study_name] == before[0].n_trials and len(after) == 2


def test_a_resume_too_short_to_start_a_candidate_says_it_blends_again(frames, copy, caplog):
    X, y, X_test, _ = frames
    caplog.set_level("INFO", logger="qwkboost.autoblend")
    result = qb.auto(X, y, X_test, time_limit=1, output_dir=copy, **KW)
    assert any(m.startswith("auto: auto.time_limit=1 s cannot start a candidate (give auto.time_limit=")
               and m.endswith("for that); blending again the 2 that finished") for m in caplog.messages)
    assert result.metrics["n_finished"] == 2 and (result.leaderboard["status"] == "finished").all()


def test_a_stopped_candidate_s_status_says_what_stopped_it():
    """The leaderboard tells the time guard's stop from a pruner's, a Ctrl-C's and a lost worker's."""
    from qwkboost.autoblend.budget import OUT_OF_TIME
    from qwkboost.autoblend.dask_executor import LOST_WORKER, STOPPED
    from qwkboost.autoblend.jobs import stop_status as _stop_status
    from qwkboost.autoblend.executor import Outcome

    statuses = [_stop_status(Outcome("c", None, "why", dict(tags))) for tags in
                (OUT_OF_TIME, {"qwkboost.trial_state": "PRUNED"}, STOPPED, LOST_WORKER)]
    assert statuses == ["stopped", "pruned", "interrupted", "lost"]


def test_records_an_earlier_qwkboost_hashed_with_the_cluster_settings_are_reused(tmp_path):
    """Before the cluster settings left the hash, a directory made without a cluster recorded them in it: such a
    record gets today's hash (and is reused, not run again); one of another configuration does not."""
    from qwkboost.autoblend.api import candidate_config
    from qwkboost.autoblend.state import AutoState, CandidateRecord, config_hash, legacy_config_hash

    cfg = {**candidate_config("lightgbm", "squared_error"),
           "cluster": {"name": "none", "address": None, "n_workers": 2, "parallel": None}}
    other = {**cfg, "seed": 1}
    state = AutoState(tmp_path, {}, candidates={
        "a": CandidateRecord("finished", params={}, config_hash=legacy_config_hash(cfg)),
        "b": CandidateRecord("finished", params={}, config_hash=legacy_config_hash(other))})
    assert state.migrate(lambda rec: cfg) == 1
    assert state.candidates["a"].config_hash == config_hash(cfg) != legacy_config_hash(cfg)
    assert state.candidates["b"].config_hash == legacy_config_hash(other)


def test_where_a_candidate_runs_is_not_part_of_its_hash_nor_of_its_study():
    """``cluster`` settings are where a candidate runs, not what it is: one machine and a cluster share its record
    and its study (a directory moves between them; tests/distributed has the moves themselves)."""
    from qwkboost.autoblend.api import candidate_config
    from qwkboost.autoblend.state import config_hash
    from qwkboost.autoblend.tuning import study_name
    from qwkboost.data.fingerprint import DataFingerprint

    cfg = candidate_config("lightgbm", "squared_error")
    none = {**cfg, "cluster": {"name": "none", "address": None, "n_workers": 2, "threads_per_worker": 1,
                               "memory_limit": "auto", "parallel": None}}
    local = {**none, "cluster": {**none["cluster"], "name": "local", "parallel": "rows"}}
    assert config_hash(cfg) == config_hash(none) == config_hash(local)
    data = DataFingerprint("a" * 16, "b" * 16, 10, 5, ("x",))
    assert study_name(("lightgbm", "squared_error"), none, data) == study_name(("lightgbm", "squared_error"), local,
                                                                               data)
    other = DataFingerprint("c" * 16, "b" * 16, 10, 5, ("x",))
    assert study_name(("lightgbm", "squared_error"), none, data) != study_name(("lightgbm", "squared_error"), none,
                                                                               other)


def test_a_second_command_into_the_same_directory_is_refused_naming_the_first(frames, copy):
    X, y, X_test, _ = frames
    holder = f"from qwkboost.tracking.writing import OutputLock\nimport sys\nwith OutputLock({str(copy)!r}):\n" \
             "    print('held', flush=True); sys.stdin.readline()\n"
    p = subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=rf"output_dir='{copy}' is in use by another qwkboost command "
                                              rf"\(pid {p.pid} on "):
            qb.auto(X, y, X_test, time_limit=60, output_dir=copy, **KW)
    finally:
        p.communicate("\n", timeout=60)


def test_a_time_limit_too_short_to_start_a_candidate_is_refused_at_once(frames, tmp_path, mlflow_store):
    import mlflow

    X, y, X_test, _ = frames
    with pytest.raises(ConfigError, match=r"auto.time_limit=1 s cannot start a candidate: reading the data took "
                                          r"[\d.]+ s and \d+ s are kept for the blend's files and its MLflow model; "
                                          r"give auto.time_limit=\d+ or more"):
        qb.auto(X, y, X_test, time_limit=1, output_dir=tmp_path / "short", tracking_uri=mlflow_store,
                experiment_name="too_short", **KW)
    exp = mlflow.MlflowClient(mlflow_store).get_experiment_by_name("too_short")
    assert exp is None or not mlflow.MlflowClient(mlflow_store).search_runs([exp.experiment_id])
    assert not (tmp_path / "short" / "auto.json").exists()


def test_one_fold_is_refused_before_any_training(frames, tmp_path):
    X, y, X_test, _ = frames
    with pytest.raises(ConfigError, match=r"n_splits must be an integer >= 2; got 1"):
        qb.auto(X, y, X_test, time_limit=30, output_dir=tmp_path / "x", **{**KW, "n_splits": 1})


def test_a_damaged_tuning_study_is_refused_before_any_training(frames, copy):
    X, y, X_test, _ = frames
    (copy / "tuning.db").write_bytes(b"SQLite format 3\x00" + b"\x07" * 4000)
    before = (copy / "submission.csv").read_bytes()
    with pytest.raises(ConfigError, match=r"auto's tuning study: .*tuning.db is damaged \(file is not a database\); "
                                          r"move it away"):
        qb.auto(X, y, X_test, time_limit=60, output_dir=copy, **{**KW, "tune": True})
    assert (copy / "submission.csv").read_bytes() == before
    assert [s["status"] for s in _sessions(copy)] == ["finished"]


def test_an_output_directory_that_cannot_be_written_is_one_line(frames, tmp_path):
    X, y, X_test, _ = frames
    (tmp_path / "afile").write_text("")
    with pytest.raises(ConfigError, match=r"output_dir='.*afile/out' cannot be written \(Not a directory\); give a "
                                          r"directory you can write to"):
        qb.auto(X, y, X_test, time_limit=30, output_dir=tmp_path / "afile" / "out", **KW)


def test_keep_blend_deletes_the_models_outside_the_blend_and_a_resume_leaves_them_out(frames, copy, caplog):
    """``keep="blend"``: a finished candidate outside the outputs loses its fold models, keeps its predictions and
    a record that says so; a resume neither runs it again nor finds it damaged, and serves without it."""
    X, y, X_test, _ = frames
    caplog.set_level("INFO", logger="qwkboost.autoblend")
    first = qb.auto(X, y, X_test, time_limit=60, output_dir=copy, **{**KW, "keep": "blend", "max_members": 1})
    (kept,) = [n for n, w in first.leaderboard.set_index("candidate")["weight"].items() if w > 0]
    (other,) = {"lightgbm-squared_error", "lightgbm-extended_qwk"} - {kept}
    assert not (copy / "candidates" / other / "pipeline").exists()
    assert (copy / "candidates" / other / "oof.parquet").is_file() and (copy / "candidates" / kept / "pipeline").is_dir()
    record = json.loads((copy / "auto.json").read_text())["candidates"]
    assert record[other]["models_dropped"] is True and "models_dropped" not in record[kept]
    assert any("auto.keep=blend: the fold models of 1 candidate(s) outside the blend deleted" in r.message
               for r in caplog.records)
    caplog.clear()
    again = qb.auto(X, y, X_test, time_limit=60, output_dir=copy, **{**KW, "keep": "blend"})
    assert not any("left out of the blend" in r.message or "run again" in r.message for r in caplog.records)
    assert again.metrics["n_finished"] == 2 and again.metrics["pool_size"] == 1
    np.testing.assert_array_equal(qb.load_run(copy).predict(X_test), first.pipeline.predict(X_test))


def test_keep_is_checked_before_any_training(frames, tmp_path):
    X, y, X_test, _ = frames
    with pytest.raises(ValueError, match="auto.keep='some' is unknown; choose one of: all, blend"):
        qb.auto(X, y, X_test, time_limit=60, output_dir=tmp_path / "o", **{**KW, "keep": "some"})
    assert not (tmp_path / "o").exists()
