"""Where a budget's candidate trains on a cluster: whole on one worker while its data fits, else each fold's rows
across the workers where its engine's Dask interface trains it exactly, else nowhere, with the reason."""

import pytest

from qwkboost.autoblend.api import candidate_config
from qwkboost.autoblend.placement import MEMORY, PROCESS_BYTES, data_bytes, n_categories, need, place
from qwkboost.runs.experiment import load_dataset
from conftest import TINY


@pytest.fixture(scope="module")
def ds():
    return load_dataset(TINY["data"], 0)


def _cfg(engine, objective="squared_error"):
    return candidate_config(engine, objective, n_splits=3)


def test_every_engine_s_memory_need_is_measured_and_grows_with_the_data_and_its_categories(ds):
    assert set(MEMORY) == {"xgboost", "lightgbm", "catboost", "native"}
    for engine, (per_byte, fixed, per_category) in MEMORY.items():
        assert per_byte > 1.0 and fixed > 0 and per_category > 0   # an engine holds at least its features
        assert need(engine, 0) == PROCESS_BYTES + fixed
        assert need(engine, 2 * data_bytes(ds)) - need(engine, data_bytes(ds)) == per_byte * data_bytes(ds)
        assert need(engine, 0, 1000) - need(engine, 0) == 1000 * per_category


def test_a_candidate_on_id_columns_needs_more_than_on_numbers_of_the_same_size(tmp_path):
    import numpy as np
    import pandas as pd

    from qwkboost.data.files import from_file

    rng = np.random.default_rng(0)
    ids = pd.DataFrame({"user": [f"u{i}" for i in rng.integers(0, 3000, 4000)], "x": rng.normal(size=4000),
                        "y": rng.integers(1, 5, 4000)})
    ids.to_csv(tmp_path / "ids.csv", index=False)
    ids.assign(user=rng.normal(size=4000)).to_csv(tmp_path / "numbers.csv", index=False)
    with_ids, numeric = (from_file(str(tmp_path / f), "y", test_size=0.25, seed=0) for f in ("ids.csv", "numbers.csv"))
    assert n_categories(with_ids) > 1500 and n_categories(numeric) == 0       # the training rows' ids
    assert data_bytes(with_ids) == data_bytes(numeric)
    for engine in MEMORY:
        assert need(engine, data_bytes(with_ids), n_categories(with_ids)) > need(engine, data_bytes(numeric))


@pytest.mark.parametrize("engine", ["xgboost", "lightgbm", "catboost", "native"])
def test_a_candidate_whose_data_fits_one_worker_runs_whole_there(ds, engine):
    assert place(_cfg(engine), ds, need(engine, data_bytes(ds)), 2).how == "whole"
    assert place(_cfg(engine), ds, None, 2).how == "whole"      # workers with no memory limit


def test_data_bytes_are_the_training_and_test_features(ds):
    assert data_bytes(ds) == ds.X_train.nbytes + ds.X_test.nbytes > 0


@pytest.mark.parametrize("objective", ["squared_error", "extended_qwk", "ordinal_logit"])
def test_data_too_large_for_a_worker_trains_across_the_workers_rows_on_xgboost(ds, objective):
    small = need("xgboost", data_bytes(ds)) - 1
    where = place(_cfg("xgboost", objective), ds, small, 3)
    assert where.how == "rows" and where.rows
    assert "does not fit one worker" in where.why and "across the 3 workers" in where.why


@pytest.mark.parametrize("engine, words", [
    ("lightgbm", "lightgbm.dask scores eval sets and stops early on each worker's own rows"),
    ("catboost", "engine 'catboost' has no Dask interface"),
    ("native", "engine 'native' has no Dask interface"),
])
def test_data_too_large_for_a_worker_on_an_engine_that_cannot_share_rows_is_left_out_saying_why(ds, engine, words):
    where = place(_cfg(engine), ds, 1000, 2)
    assert where.how == "none" and not where.rows
    assert "does not fit one worker" in where.why and words in where.why and "\n" not in where.why


def test_rows_on_request_go_across_the_workers_where_the_engine_can_and_whole_elsewhere(ds):
    assert place(_cfg("xgboost"), ds, None, 2, parallel="rows").how == "rows"
    lgb = place(_cfg("lightgbm"), ds, None, 2, parallel="rows")
    assert lgb.how == "whole" and lgb.why.startswith("whole on one worker: lightgbm.dask")
    # asked for rows, too large for one worker and unable to share rows: nowhere
    assert place(_cfg("catboost"), ds, 1000, 2, parallel="rows").how == "none"
