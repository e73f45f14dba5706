"""Training on a real Dask LocalCluster (2 worker processes) through xgboost.dask and lightgbm.dask.

The objective must stay one objective: label statistics from every row, gradient sums and the metric
all-reduced over the workers, so that two workers train what one process trains.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import qwkboost
from conftest import TINY_OVERRIDES, run_in_process
from qwkboost.distributed.training import ClusterSpec, DaskData, as_dask, connect, predict_dask, read_parquet, train_dask
from qwkboost.config import ConfigError
from qwkboost.data.sources import quartiles
from qwkboost.evaluation.metrics import qwk
from qwkboost.objectives.extended_qwk import ExtendedQWK

ROOT = Path(__file__).resolve().parents[2]
PARAMS = {"max_depth": 4, "learning_rate": 0.2}


@pytest.fixture(scope="module")
def data():
    """Quartile data with features on a 0.01 grid: fewer distinct values than bins, so the histogram cuts are
    the same however the rows are split, and any difference between 1 and 2 workers is the objective's."""
    ds = quartiles(n_train=12_000, n_test=6_000, seed=3)
    grid = lambda X: np.round(X, 2)
    order = np.argsort(ds.y_train, kind="stable")        # sorted: each worker holds different classes
    return grid(ds.X_train[order]), ds.y_train[order], grid(ds.X_test), ds.y_test


def _classes(score):
    return np.clip(np.round(score), 0, 3)


def test_two_workers_train_what_one_process_trains(client, data, tmp_path):
    X, y, Xt, yt = data
    one = qwkboost.train(X, y, engine="xgboost", objective="extended_qwk", params=PARAMS, num_boost_round=60, n_jobs=1)
    two = train_dask(client, X, y, engine="xgboost", objective="extended_qwk", params=PARAMS, num_boost_round=60)
    # the label statistics come from every label, not from a worker's (sorted) share
    for k in ("a_", "b_", "lo_", "hi_", "init_score_"):
        assert getattr(two.objective, k) == pytest.approx(getattr(one.objective, k), abs=1e-12), k
    p1, p2 = one.predict(Xt), two.predict(Xt)
    assert np.abs(p1 - p2).max() < 1e-3
    assert abs(qwk(yt, _classes(p1)) - qwk(yt, _classes(p2))) <= 0.002
    # a model from the cluster is an ordinary Model: it saves, loads and predicts on one machine
    two.save(tmp_path / "model.json")
    assert np.array_equal(qwkboost.load_model(tmp_path / "model.json").predict(Xt), p2)


def test_weights_early_stopping_and_a_global_metric(client, data):
    X, y, Xt, yt = data
    w = np.random.default_rng(0).uniform(0.5, 2.0, y.size)
    kw = dict(engine="xgboost", objective="extended_qwk", params=PARAMS, num_boost_round=80, early_stopping_rounds=10)
    one = qwkboost.train(X, y, eval_set=(Xt, yt), sample_weight=w, n_jobs=1, **kw)
    two = train_dask(client, X, y, eval_set=(Xt, yt), sample_weight=w, **kw)
    assert two.objective.a_ == pytest.approx(one.objective.a_, abs=1e-12)
    assert two.best_iteration == one.best_iteration
    # every round's validation metric is that of all validation rows, as on one machine
    c1, c2 = one.learning_curve["valid"], two.learning_curve["valid"]
    assert len(c1) == len(c2)
    assert np.abs(np.subtract(c1, c2)).max() < 1e-4
    last = two.objective.metric(yt, two.predict(Xt, num_iteration=two.num_rounds))
    assert c2[-1] == pytest.approx(last, abs=1e-5)


def test_several_outputs_on_xgboost_dask(client, data):
    X, y, Xt, yt = data
    one = qwkboost.train(X, y, engine="xgboost", objective="multiclass", params=PARAMS, num_boost_round=20, n_jobs=1)
    two = train_dask(client, X, y, engine="xgboost", objective="multiclass", params=PARAMS, num_boost_round=20)
    assert np.allclose(two.objective.init_score_, one.objective.init_score_)
    proba = two.predict_proba(Xt)
    assert proba.shape == (len(yt), 4) and np.allclose(proba.sum(axis=1), 1.0)
    assert np.abs(two.predict(Xt) - one.predict(Xt)).max() < 1e-3


def test_lightgbm_trains_per_row_objectives_and_refuses_the_rest(client, data):
    X, y, Xt, yt = data
    one = qwkboost.train(X, y, engine="lightgbm", objective="squared_error", params={"num_leaves": 15},
                         num_boost_round=40, n_jobs=1)
    two = train_dask(client, X, y, engine="lightgbm", objective="squared_error", params={"num_leaves": 15},
                     num_boost_round=40)
    assert two.init_score == pytest.approx(one.init_score)
    rmse = lambda m: float(np.sqrt(np.mean((m.predict(Xt) - yt) ** 2)))
    assert rmse(two) == pytest.approx(rmse(one), rel=0.02)
    # in-memory rows go to the same workers every time, so the same call trains the same model
    for _ in range(2):
        again = train_dask(client, X, y, engine="lightgbm", objective="squared_error", params={"num_leaves": 15},
                           num_boost_round=40)
        assert np.array_equal(again.predict(Xt), two.predict(Xt))
    with pytest.raises(ValueError, match="lightgbm.dask calls the objective on each worker's rows"):
        train_dask(client, X, y, engine="lightgbm", objective="extended_qwk")
    with pytest.raises(ValueError, match="early_stopping_rounds"):
        train_dask(client, X, y, engine="lightgbm", objective="squared_error", eval_set=(Xt, yt),
                   early_stopping_rounds=5)


def test_parquet_read_by_dask_trains_like_the_arrays(client, data, tmp_path):
    X, y, Xt, yt = data
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])]).assign(label=y)
    half = len(frame) // 2
    for i, part in enumerate((frame.iloc[:half], frame.iloc[half:])):
        part.to_parquet(tmp_path / f"train-{i}.parquet", index=False)
    parts = read_parquet(str(tmp_path / "train-*.parquet"), target="label")
    assert isinstance(parts, DaskData) and parts.feature_names == list(frame.columns[:-1])
    assert parts.X.chunks[0] == (half, len(frame) - half)
    from_files = train_dask(client, parts, engine="xgboost", params=PARAMS, num_boost_round=30)
    from_arrays = train_dask(client, as_dask(X, y, n_partitions=2), engine="xgboost", params=PARAMS,
                             num_boost_round=30)
    assert np.array_equal(from_files.predict(Xt), from_arrays.predict(Xt))
    # the model matches a DataFrame's columns by name, also reordered
    test = pd.DataFrame(Xt, columns=frame.columns[:-1])
    assert np.allclose(from_files.predict(test[test.columns[::-1]]), from_files.predict(Xt))
    assert np.allclose(predict_dask(from_files, Xt).compute(), from_files.predict(Xt))
    with pytest.raises(ValueError, match="target='y' is not a column"):
        read_parquet(str(tmp_path / "train-*.parquet"), target="y")


def test_bad_input_is_refused_before_training(client, data):
    X, y, _, _ = data
    ORDINAL = dict(engine="xgboost", objective="extended_qwk")
    with pytest.raises(ValueError, match="engine 'native' has no Dask interface"):
        train_dask(client, X, y, engine="native")
    with pytest.raises(ValueError, match=r"categorical columns \['a'\]: lightgbm.dask takes numeric features only"):
        train_dask(client, pd.DataFrame({"a": ["u", "v"] * 50, "b": np.arange(100.0)}), np.arange(100) % 2,
                   engine="lightgbm")
    bad = y.copy()
    bad[5] = np.nan
    with pytest.raises(ValueError, match="missing or infinite labels"):
        train_dask(client, X, bad, **ORDINAL)
    with pytest.raises(ValueError, match="whole-numbered"):
        train_dask(client, X, y + 0.5, **ORDINAL)
    with pytest.raises(ValueError, match="unknown xgboost parameter"):
        train_dask(client, X, y, engine="xgboost", params={"max_dept": 3})
    with pytest.raises(ValueError, match="sample_weight must be finite and >= 0"):
        train_dask(client, X, y, sample_weight=-np.ones(y.size))


def test_an_unreachable_scheduler_fails_fast():
    # an address where nothing listens is refused by the first connection, not after the client's retries (22 s)
    with pytest.raises(ConfigError, match=r"cluster.address=tcp://127.0.0.1:9: no Dask scheduler answers there "
                                          r"\(the connection was refused\)"):
        with connect(ClusterSpec(address="tcp://127.0.0.1:9"), timeout=30):
            pass


def test_cli_trains_every_fold_on_a_local_cluster(tmp_path, mlflow_store):
    import mlflow

    cmd = [sys.executable, str(ROOT / "experiments" / "run.py"), *TINY_OVERRIDES, "cluster=local", "engine=xgboost",
           "objective=extended_qwk", f"tracking.uri={mlflow_store}", "tracking.experiment_name=cluster_cli",
           f"hydra.run.dir={tmp_path}/out"]
    proc = subprocess.run(cmd, cwd=tmp_path, env={**os.environ, "CI": "true"}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert "training on the Dask cluster at 127.0.0.1 (LocalCluster) (2 workers)" in out
    client = mlflow.MlflowClient(mlflow_store)
    exp = client.get_experiment_by_name("cluster_cli")
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.tags["cluster"] == "local:2x1"
    assert run.data.metrics["test_qwk"] > 0.5
    # the native engine, and objectives lightgbm.dask would get wrong, are refused before training (in this
    # process: a ConfigError is the command's exit status 2, tests/runs/test_run_cli.py)
    for extra, msg in ((["engine=native"], "has no Dask interface"),
                       (["engine=lightgbm", "engine.early_stopping_rounds=null"], "lightgbm.dask calls the objective on each worker's rows")):
        with pytest.raises(ConfigError, match=msg):
            run_in_process([*cmd[2:-1], *extra], tmp_path / "bad")
    (only,) = client.search_runs([exp.experiment_id])            # nothing started a run
    assert only.info.run_id == run.info.run_id


def test_hydra_submitit_launcher_runs_a_sweep(tmp_path, mlflow_store):
    """SLURM's launcher, with submitit's local executor: each job a separate process, one parent run."""
    import mlflow

    cmd = [sys.executable, str(ROOT / "experiments" / "run.py"), "-m", "hydra/launcher=submitit_local",
           "hydra.launcher.timeout_min=10", *TINY_OVERRIDES, "engine=xgboost,lightgbm", f"tracking.uri={mlflow_store}",
           "tracking.experiment_name=submitit_sweep", f"hydra.sweep.dir={tmp_path}/sweep"]
    proc = subprocess.run(cmd, cwd=tmp_path, env={**os.environ, "CI": "true"}, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = mlflow.MlflowClient(mlflow_store)
    exp = client.get_experiment_by_name("submitit_sweep")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 2
    assert {r.data.tags["engine"] for r in children} == {"xgboost", "lightgbm"}
    assert all(r.info.status == "FINISHED" for r in runs)
    assert all(r.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for r in children)
    assert len(list((tmp_path / "sweep" / ".submitit").glob("*/*_result.pkl"))) == 2   # submitit ran the jobs


class RecordingQWK(ExtendedQWK):
    """Extended QWK that saves, on the worker, each round's labels, scores, gradients and hessians."""

    def __init__(self, record_dir: str = "", **kwargs):
        super().__init__(**kwargs)
        self.record_dir = record_dir

    def grad_hess(self, y, score, sample_weight=None):
        g, h = super().grad_hess(y, score, sample_weight)
        self.calls = getattr(self, "calls", 0) + 1
        np.savez(Path(self.record_dir) / f"{os.getpid()}-{self.calls}.npz", y=y, score=score, g=g, h=h,
                 w=np.zeros(0) if sample_weight is None else sample_weight)
        return g, h


@pytest.mark.parametrize("weighted", [False, True])
def test_every_rounds_gradients_on_the_workers_equal_one_process(client, data, tmp_path, weighted):
    """Inside a real xgboost.dask run: each worker's gradients, from all-reduced sums, equal the one-process
    gradients of all rows at the same scores, to 1e-10, at every round."""
    X, y, _, _ = data
    order = np.argsort(X[:, 0], kind="stable")     # the workers' rows differ (sorted by label they are symmetric)
    X, y = X[order], y[order]
    w = np.random.default_rng(1).uniform(0.5, 2.0, y.size) if weighted else None
    train_dask(client, X, y, engine="xgboost", objective=RecordingQWK(str(tmp_path)), params=PARAMS,
               num_boost_round=5, sample_weight=w)
    files = sorted(tmp_path.glob("*.npz"))
    pids = {f.name.split("-")[0] for f in files}
    assert len(pids) == 2 and len(files) == 10                  # two workers, five rounds each
    reference = RecordingQWK().fit(y, sample_weight=w)
    for rnd in range(1, 6):
        parts = [np.load(f) for f in files if f.stem.endswith(f"-{rnd}")]
        assert sum(p["y"].size for p in parts) == y.size        # the workers' rows are all the rows
        cat = {k: np.concatenate([p[k] for p in parts]) for k in ("y", "score", "g", "h", "w")}
        g, h = super(RecordingQWK, reference).grad_hess(cat["y"], cat["score"], cat["w"] if weighted else None)
        assert np.abs(cat["g"] - g).max() <= 1e-10 * max(1.0, np.abs(g).max())
        assert np.abs(cat["h"] - h).max() <= 1e-10 * max(1.0, np.abs(h).max())
    # a worker's own sums alone would give other gradients (not at round 1: every score is F0 = a there, and
    # n / g = 2 / b on any rows)
    own = parts[0]
    local = reference.clone()
    local.a_, local.b_, local.lo_, local.hi_ = reference.a_, reference.b_, reference.lo_, reference.hi_
    gl, _ = super(RecordingQWK, local).grad_hess(own["y"], own["score"], own["w"] if weighted else None)
    assert np.abs(gl - own["g"]).max() > 1e-3


def test_cli_stops_before_its_run_when_the_scheduler_does_not_answer(tmp_path, mlflow_store):
    """The command's config, run in this process: a ConfigError (the command's exit status 2 with the message
    alone on stderr, tests/runs/test_run_cli.py) and no run."""
    import mlflow

    with pytest.raises(ConfigError, match="cluster.address=tcp://127.0.0.1:9: no Dask scheduler answers there"):
        run_in_process([*TINY_OVERRIDES, "engine=xgboost", "cluster.address=tcp://127.0.0.1:9",
                        f"tracking.uri={mlflow_store}", "tracking.experiment_name=cluster_unreachable"], tmp_path / "out")
    exp = mlflow.MlflowClient(mlflow_store).get_experiment_by_name("cluster_unreachable")
    assert exp is None or not mlflow.MlflowClient(mlflow_store).search_runs([exp.experiment_id])
