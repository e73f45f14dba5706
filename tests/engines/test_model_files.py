"""The compact model file (a zip of the fields and the engine's own booster format) on every engine: what it holds,
that it predicts as the model did, that the JSON form still reads, and what a crafted or damaged archive gets."""

import json
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import qwkboost as qb
from model_files import edit_header, members, write_members
from qwkboost.engines.modelfile import ubjson_depth
from qwkboost.tracking.pipeline import FittedPipeline

ENGINES = ["xgboost", "lightgbm", "native", "catboost"]
SUFFIX = {"xgboost": "ubj", "lightgbm": "txt", "native": "json", "catboost": "cbm"}


@pytest.fixture(scope="module", params=ENGINES)
def trained(request, small_quartiles):
    ds = small_quartiles
    objective = "multiclass" if request.param == "xgboost" else "extended_qwk"
    return request.param, qb.train(ds.X_train, ds.y_train, request.param, objective, num_boost_round=8), ds.X_test


def test_a_compact_file_holds_the_header_and_the_engines_own_booster(trained, tmp_path):
    engine, model, X = trained
    path = model.save(tmp_path / "m.zip")
    assert set(members(path)) == {"model.json", f"booster.{SUFFIX[engine]}"}
    header = json.loads(members(path)["model.json"])
    assert header["format_version"] == 4 and header["booster_file"] == f"booster.{SUFFIX[engine]}"
    again = qb.load_model(path)
    np.testing.assert_array_equal(again.predict_raw(X), model.predict_raw(X))
    assert again.best_iteration == model.best_iteration and again.evals_result == model.evals_result
    # the same model writes the same bytes (no time stamp)
    assert model.save(tmp_path / "again.zip").read_bytes() == path.read_bytes()


def test_a_json_path_still_writes_and_reads_the_json_form(trained, tmp_path):
    engine, model, X = trained
    path = model.save(tmp_path / "m.json")
    payload = json.loads(path.read_text())
    assert payload["format_version"] == 3 and isinstance(payload["booster"], str)
    np.testing.assert_array_equal(qb.load_model(path).predict_raw(X), model.predict_raw(X))


def test_a_compact_xgboost_file_is_several_times_smaller(small_quartiles, tmp_path):
    ds = small_quartiles
    model = qb.train(ds.X_train, ds.y_train, "xgboost", "squared_error", params={"max_depth": 8},
                     num_boost_round=60)
    small, large = model.save(tmp_path / "m.zip").stat().st_size, model.save(tmp_path / "m.json").stat().st_size
    assert small * 4 < large, (small, large)


def test_a_pipeline_writes_zip_folds_and_reads_an_older_ones_json_folds(small_quartiles, tmp_path):
    ds = small_quartiles
    models = [qb.train(ds.X_train, ds.y_train, "lightgbm", "squared_error", num_boost_round=5, seed=k)
              for k in range(2)]
    pipe = FittedPipeline(models, models[0].schema, cuts=[1.5], classes=[1, 2])
    d = pipe.save(tmp_path / "new")
    assert sorted(p.name for p in d.iterdir()) == ["fold_0.zip", "fold_1.zip", "pipeline.json"]
    # as a pipeline written before the compact form: JSON folds, listed by name
    old = tmp_path / "old"
    old.mkdir()
    for k, m in enumerate(models):
        m.save(old / f"fold_{k}.json")
    meta = json.loads((d / "pipeline.json").read_text())
    (old / "pipeline.json").write_text(json.dumps({**meta, "models": ["fold_0.json", "fold_1.json"]}))
    np.testing.assert_array_equal(FittedPipeline.load(old).predict_score(ds.X_test),
                                  FittedPipeline.load(d).predict_score(ds.X_test))


# -- crafted or damaged archives -----------------------------------------------------------------------------------

@pytest.fixture
def xgb_file(small_quartiles, tmp_path):
    ds = small_quartiles
    return qb.train(ds.X_train, ds.y_train, "xgboost", "squared_error", num_boost_round=3).save(tmp_path / "m.zip")


def _refused(path, *words):
    with pytest.raises(ValueError) as err:
        qb.load_model(path)
    text = str(err.value)
    assert "\n" not in text and str(path) in text and all(w in text for w in words), text


def _ubj_nest(n: int) -> bytes:
    key = b"L" + struct.pack(">q", 1) + b"a"
    return b"{" + (key + b"{") * n + b"}" * (n + 1)


def test_a_ubjson_nesting_bomb_is_refused_before_xgboost_reads_it(xgb_file):
    """XGBoost's UBJSON reader recurses once a level: a million levels end the process (it does, in a child)."""
    bomb = _ubj_nest(1_000_000)
    child = subprocess.run([sys.executable, "-c", "import sys, xgboost as x; x.Booster().load_model(bytearray("
                            "sys.stdin.buffer.read()))"], input=bomb, capture_output=True, timeout=120)
    assert child.returncode < 0 or child.returncode > 128, "XGBoost read the bomb; the check guards nothing"
    import hashlib
    content = members(xgb_file)
    content["booster.ubj"] = bomb
    write_members(xgb_file, content)
    edit_header(xgb_file, lambda h: h.update(booster_sha256=hashlib.sha256(bomb).hexdigest()))
    _refused(xgb_file, "nests deeper than 64 levels")


def test_ubjson_depth_walks_what_xgboost_writes_and_refuses_what_it_does_not(xgb_file):
    assert ubjson_depth(members(xgb_file)["booster.ubj"], 64) < 10
    assert ubjson_depth(_ubj_nest(100), 64) == 65
    for bad, why in ((b"[i", "ends in the middle"), (b"[]]", "follow its value"), (b"[q]", "unknown marker"),
                     (b"[$d#L" + struct.pack(">q", 10 ** 9) + b"1234", "ends in the middle")):
        with pytest.raises(ValueError, match=why):
            ubjson_depth(bad, 64)


@pytest.mark.parametrize("damage, words", [
    (lambda p: write_members(p, {**members(p), "extra.txt": b"x"}), ["a zip archive of", "extra.txt"]),
    (lambda p: write_members(p, {"model.json": members(p)["model.json"], "booster.txt": members(p)["booster.ubj"]}),
     ["names the booster 'booster.ubj'", "holds 'booster.txt'"]),
    (lambda p: edit_header(p, lambda h: h.update(booster_sha256="0" * 64)), ["does not match its checksum"]),
    (lambda p: edit_header(p, lambda h: h.update(format_version=3)), ["reads 4 in a compact file"]),
    (lambda p: p.write_bytes(p.read_bytes()[:-30]), ["damaged zip archive"]),
])
def test_a_crafted_or_damaged_archive_is_refused_in_one_line(xgb_file, damage, words):
    damage(xgb_file)
    _refused(xgb_file, *words)


def test_a_flipped_byte_in_the_booster_fails_zips_checksum(xgb_file):
    data = bytearray(xgb_file.read_bytes())
    with zipfile.ZipFile(xgb_file) as zf:
        info = zf.getinfo("booster.ubj")
    at = info.header_offset + 30 + len(info.filename) + 5    # inside its compressed bytes
    data[at] ^= 0xFF
    xgb_file.write_bytes(bytes(data))
    _refused(xgb_file, "booster.ubj")
