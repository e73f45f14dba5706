"""JSON save/load: no pickle, no training data needed, identical predictions."""

import json

import numpy as np
import pytest

import qwkboost as qb
from qwkboost.native.boosting import NativeBooster


@pytest.mark.parametrize("objective", ["squared_error", "extended_qwk"])
def test_model_round_trip(tmp_path, with_missing, objective):
    X, y = with_missing
    y = np.clip(np.round(y), 0, 4) if objective == "extended_qwk" else y
    m = qb.train(X, y, engine="native", objective=objective,
                 params={"max_depth": 4, "monotone_constraints": [1, 0, 0, 0], "subsample": 0.8},
                 num_boost_round=15, eval_set=(X[:200], y[:200]), early_stopping_rounds=3)
    path = m.save(tmp_path / "model.json")
    text = path.read_text()
    assert "pickle" not in text and b"\x80" not in path.read_bytes()
    payload = json.loads(text)
    assert json.loads(payload["booster"])["format"] == "qwkboost-native"
    again = qb.load_model(path)
    assert again.engine == "native" and again.best_iteration == m.best_iteration
    np.testing.assert_array_equal(again.predict(X), m.predict(X))
    np.testing.assert_array_equal(again.predict(X, num_iteration=2), m.predict(X, num_iteration=2))
    np.testing.assert_array_equal(again.booster.feature_importance("gain"), m.booster.feature_importance("gain"))


def test_booster_json_is_plain_and_versioned():
    X = np.random.RandomState(0).normal(size=(100, 2))
    b = qb.train(X, X[:, 0], engine="native", objective="squared_error", num_boost_round=2).booster
    d = json.loads(b.to_json())
    assert set(d) >= {"format", "format_version", "params", "bins", "trees", "init_score"}
    assert NativeBooster.from_json(b.to_json()).predict(X).tolist() == b.predict(X).tolist()
    with pytest.raises(ValueError, match="not a qwkboost native model"):
        NativeBooster.from_json('{"format": "other"}')
    with pytest.raises(ValueError, match="invalid JSON"):
        NativeBooster.from_json("{")
    d["format_version"] = 99
    with pytest.raises(ValueError, match="version"):
        NativeBooster.from_dict(d)


def test_feature_importances(chisq_small):
    X, y = chisq_small
    X = np.c_[X, np.zeros(len(X))]                    # a useless feature
    b = qb.train(X, y, engine="native", objective="squared_error", params={"max_depth": 3},
                 num_boost_round=10).booster
    gain, split = b.feature_importance("gain"), b.feature_importance("split")
    assert gain[-1] == 0 and split[-1] == 0
    assert split.sum() == sum(int((t.feature >= 0).sum()) for t in b.trees)
    assert gain.sum() == pytest.approx(sum(t.gain.sum() for t in b.trees))
    with pytest.raises(ValueError, match="importance_type"):
        b.feature_importance("cover")
