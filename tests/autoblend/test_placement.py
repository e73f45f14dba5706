"""Where a budget's candidate trains on a cluster: whole on one worker while its data fits, else each fold's rows
across the workers where its engine's Dask interface trains it exactly, else nowhere, with the reason."""

import pytest

from qwkboost.autoblend.api import candidate_config
from qwkboost.autoblend.placement import MEMORY, PROCESS_BYTES, data_bytes, need, place
from qwkboost.runs.experiment import load_dataset
from conftest import TINY


@pytest.fixture(scope="module")
def ds():
    return load_dataset(TINY["data"], 0)


def _cfg(engine, objective="squared_error"):
    return candidate_config(engine, objective, n_splits=3)


def test_every_engine_s_memory_need_is_measured_and_grows_with_the_data(ds):
    assert set(MEMORY) == {"xgboost", "lightgbm", "catboost", "native"}
    for engine, (per_byte, fixed) in MEMORY.items():
        assert per_byte > 1.0 and fixed > 0        # an engine holds at least the features it trains on
        assert need(engine, 0) == PROCESS_BYTES + fixed
        assert need(engine, 2 * data_bytes(ds)) - need(engine, data_bytes(ds)) == per_byte * data_bytes(ds)


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
