"""Members of a blend: read from frames and directories of other tools' files, aligned by id, refused when they
do not belong together."""

import numpy as np
import pandas as pd
import pytest

from qwkboost.blending import BlendInputError, Member, align, blend, read_members


def _frames(n=400, seed=0, folds=4, shuffle=False, proba=False, noise=0.7):
    rs = np.random.RandomState(seed)
    y = rs.randint(1, 5, n)
    oof = pd.DataFrame({"id": np.arange(n), "label": y, "fold": np.arange(n) % folds})
    score = y + rs.normal(0, noise, n)
    yt = rs.randint(1, 5, 200)
    test = pd.DataFrame({"id": np.arange(n, n + 200)})
    ts = yt + rs.normal(0, noise, 200)
    if proba:
        for frame, s in ((oof, score), (test, ts)):
            logits = -((np.arange(1, 5)[None, :] - s[:, None]) ** 2)
            p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
            for c in range(4):
                frame[f"proba_{c + 1}"] = p[:, c]
    else:
        oof["score"], test["score"] = score, ts
    test["label"] = yt
    if shuffle:
        oof = oof.sample(frac=1.0, random_state=seed)
        test = test.sample(frac=1.0, random_state=seed)
    return oof, test


def test_probabilities_become_the_expected_class():
    oof, test = _frames(proba=True)
    m = Member.from_frames("nn", oof, test)
    p = oof[[f"proba_{c}" for c in range(1, 5)]].to_numpy()
    np.testing.assert_allclose(m.oof, p @ np.arange(1, 5))
    assert m.folds.shape == (1, 400) and m.y_test is not None


def test_rows_in_another_order_are_put_back_by_id():
    a = Member.from_frames("a", *_frames(seed=0))
    oof, test = _frames(seed=0)
    oof["score"] = oof["score"] + 0.1
    b_sorted = Member.from_frames("b", oof, test)
    b_shuffled = Member.from_frames("b", oof.sample(frac=1.0, random_state=1), test.sample(frac=1.0, random_state=2))
    r1, r2 = blend([a, b_sorted]), blend([a, b_shuffled])
    np.testing.assert_array_equal(r1.test_class, r2.test_class)
    np.testing.assert_array_equal(r1.oof_class, r2.oof_class)
    assert r1.metrics == r2.metrics


def _pair(**change):
    a = Member.from_frames("a", *_frames(seed=0))
    oof, test = _frames(seed=0)
    for key, fn in change.items():
        fn(oof, test)
    return a, Member.from_frames("b", oof, test)


@pytest.mark.parametrize("change, match", [
    ({"ids": lambda o, t: o.__setitem__("id", o["id"] + 1)}, "members 'a' and 'b' have different training ids"),
    ({"ids": lambda o, t: t.__setitem__("id", t["id"] * 2)}, "have different test ids"),
    ({"labels": lambda o, t: o.__setitem__("label", np.r_[o["label"].iloc[:-1] % 4 + 1, o["label"].iloc[-1]])},
     "members 'a' and 'b' have different labels"),
    ({"folds": lambda o, t: o.__setitem__("fold", np.arange(len(o)) % 5)}, "were cross-validated on different folds"),
    ({"weights": lambda o, t: o.__setitem__("weight", 1.0)}, "have different row weights"),
])
def test_members_that_do_not_belong_together_are_refused(change, match):
    with pytest.raises(BlendInputError, match=match):
        align(_pair(**change))


def test_folds_may_be_numbered_differently_and_unchecked_knowingly():
    a, b = _pair(folds=lambda o, t: o.__setitem__("fold", (o["fold"] + 1) % 4))    # the same partition
    assert len(align([a, b])) == 2
    oof, test = _frames(seed=0)
    no_folds = Member.from_frames("c", oof.drop(columns=["fold"]), test)
    with pytest.raises(BlendInputError, match="member 'c' .* records no CV folds"):
        align([a, no_folds])
    assert len(align([a, no_folds], check_folds=False)) == 2


def test_other_tools_files_in_a_directory(tmp_path):
    for name, seed in (("nn", 0), ("gbm", 0)):
        d = tmp_path / name
        d.mkdir()
        oof, test = _frames(seed=seed, proba=name == "nn", noise=0.6 if name == "nn" else 0.8)
        oof.to_csv(d / "oof.csv", index=False)
        test.drop(columns=["label"]).to_csv(d / "test.csv", index=False)
    members = read_members([tmp_path / "nn", str(tmp_path / "gbm")])
    assert [m.name for m in members] == ["nn", "gbm"]
    result = blend(members)
    assert result.test_qwk is None and len(result.test_class) == 200
    # a directory of such directories stands for all of them
    assert [m.name for m in read_members([tmp_path])] == ["gbm", "nn"]


@pytest.mark.parametrize("runs, match", [
    (["nowhere"], r"runs\[0\]='nowhere' is neither a directory nor an MLflow run id"),
    ([None], r"runs\[0\]='None' is neither"),
])
def test_unknown_runs_are_named(runs, match):
    with pytest.raises(BlendInputError, match=match):
        read_members(runs)


def test_unreadable_and_lonely_members(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(BlendInputError, match="is a directory with neither predictions"):
        read_members([tmp_path / "empty"])
    f = tmp_path / "x.csv"
    f.write_text("a\n1\n")
    with pytest.raises(BlendInputError, match="is a file; give a run's output directory"):
        read_members([f])
    d = tmp_path / "bad"
    d.mkdir()
    (d / "oof.csv").write_text("id,label,score\n1,2,\x00\x00")
    (d / "test.csv").write_text("id,score\n")
    with pytest.raises(BlendInputError, match="score"):
        read_members([d])
    oof, test = _frames()
    with pytest.raises(BlendInputError, match="a blend needs at least two members; got 1"):
        blend([Member.from_frames("a", oof, test)])
    with pytest.raises(BlendInputError, match="neither a 'score' column nor class probabilities"):
        Member.from_frames("a", oof.drop(columns=["score"]), test)
    with pytest.raises(BlendInputError, match="blend method='median' is unknown"):
        blend([Member.from_frames("a", oof, test)] * 2, method="median")


def test_the_first_members_repeated_test_ids_are_refused():
    oof, test = _frames(seed=0)
    test.loc[1, "id"] = test.loc[0, "id"]
    a = Member.from_frames("a", oof, test)
    with pytest.raises(BlendInputError, match="member 'a' repeats test ids"):
        align([a, Member.from_frames("b", *_frames(seed=0))])


def test_members_given_as_objects_keep_distinct_names_and_a_generator_loses_none():
    a1, a2 = Member.from_frames("a", *_frames(seed=0)), Member.from_frames("a", *_frames(seed=1))
    a2.oof, a2.test = a2.oof.copy(), a2.test.copy()
    a2.y, a2.ids = a1.y, a1.ids                      # the same rows and labels, other scores
    r = blend(m for m in [a1, a2])
    assert [m.name for m in r.members] == ["a", "a (2)"]
    assert set(r.summary()["weights"]) == {"a", "a (2)"}


def test_a_cv_result_without_folds_is_refused_by_name():
    from qwkboost.cv.crossval import CVResult

    oof, test = _frames(seed=0)
    cv = CVResult(oof=oof["score"].to_numpy(), test=test["score"].to_numpy(), models=[], folds=[], fit_seconds=0.0)
    cv.fold_of = None
    m = Member.from_cv("cv", cv, oof["label"].to_numpy(), oof["id"].to_numpy(), test["id"].to_numpy())
    assert m.folds is None
    with pytest.raises(BlendInputError, match="records no CV folds"):
        align([m, Member.from_frames("b", *_frames(seed=0))])


def test_unchecked_members_without_folds_and_a_rare_class_still_blend():
    """check_folds=false and no member knows its folds: the nested estimate uses its own 5 folds, plain K-fold
    where a class has fewer than 5 rows (the stratified split would refuse it, naming cv settings a blend has not)."""
    oof, test = _frames(seed=0)
    oof = oof.drop(columns="fold")
    oof.loc[:2, "label"] = 5                                   # a class of 3 rows
    a = Member.from_frames("a", oof, test)
    oof_b = oof.copy()
    oof_b["score"] = oof_b["score"] + 0.2
    r = blend([a, Member.from_frames("b", oof_b, test)], check_folds=False)
    assert r.nested_oof_qwk <= r.oof_qwk + 1e-12
