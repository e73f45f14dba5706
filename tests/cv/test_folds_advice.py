"""A refusal of the folds advises only settings that then work: ``cv.stratified=false`` for a class too rare to
stratify was advised and then failed (for an ordinal objective, a fold without the top label, after the first
candidates of ``experiment=auto`` had trained) with advice to set it back to true. Each piece of advice is
followed here and checked."""

import re

import numpy as np
import pytest

from qwkboost.cv.crossval import cross_validate
from qwkboost.cv.folds import check_fold_labels, check_folds, make_repeated_folds
from qwkboost.exceptions import ConfigError


def labels(counts, seed=0):
    """Labels 0..K-1 with these counts, shuffled."""
    y = np.repeat(np.arange(len(counts)), counts).astype(float)
    return np.random.RandomState(seed).permutation(y)


CASES = {
    "rare middle class": [60, 3, 60, 60],
    "rare top class": [60, 60, 60, 3],
    "two rows of the top class": [60, 60, 60, 2],
    "one row of the top class": [60, 60, 60, 1],
    "one row in the middle": [60, 1, 60, 60],
}


def _settings(advice: str, base: dict) -> list[dict]:
    """The settings each option of ``use A, or B and C`` names, on top of ``base``."""
    out = []
    for option in advice.removeprefix("use ").split(", or "):
        s = dict(base)
        for key, value in re.findall(r"cv\.(stratified|n_splits)=(\w+)", option):
            s[key] = value == "true" if key == "stratified" else int(value)
        out.append(s)
    return out


def _refusal(y, s):
    try:
        check_folds(y, **s)
    except ConfigError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("stratified", [True, False])
@pytest.mark.parametrize("ordinal", [True, False])
def test_every_advised_setting_works_and_no_advice_leads_back(case, stratified, ordinal):
    for seed in range(4):
        y = labels(CASES[case], seed)
        base = dict(n_splits=5, stratified=stratified, shuffle=True, seed=seed, ordinal=ordinal)
        message = _refusal(y, base)
        if message is None:
            continue
        advice = message.split("; ", 1)[1]
        if advice.startswith("use "):
            for s in _settings(advice, base):
                assert _refusal(y, s) is None, (message, s, _refusal(y, s))
        else:       # it says nothing works: nothing does
            assert advice.startswith("no number of folds works: label ")
            assert all(_refusal(y, {**base, "n_splits": k, "stratified": st}) is not None
                       for k in range(2, 6) for st in (True, False))


def test_the_rarest_class_message_and_the_fold_message_agree():
    y = labels(CASES["one row of the top class"])
    for stratified in (True, False):
        message = _refusal(y, dict(n_splits=5, stratified=stratified, shuffle=True, seed=0))
        assert "cv.stratified=" not in message      # neither sends the user to the other
        assert message.endswith("no number of folds works: label 3 has 1 training row; merge it with label 2 "
                                "(or drop its rows)")
    y = labels(CASES["rare top class"])
    assert _refusal(y, dict(n_splits=5, stratified=True, shuffle=True, seed=0)) == (
        "cv.n_splits=5 exceeds the smallest class count (3) of label 3; use cv.n_splits=3, or cv.stratified=false")


def test_without_the_settings_the_fold_check_advises_what_works_by_construction():
    """cross_validate's own check knows only the plan: stratified K-fold with no more folds than the rarest class
    has rows holds every label in every training part."""
    y = labels([60, 60, 60, 2])
    seed = next(s for s in range(50) if _refusal(y, dict(n_splits=5, stratified=False, shuffle=True, seed=s)))
    plan = make_repeated_folds(y, 5, False, True, seed)
    with pytest.raises(ConfigError, match=r"; use cv.stratified=true and cv.n_splits=2$"):
        check_fold_labels(y, plan, grouped=False)
    assert _refusal(y, dict(n_splits=2, stratified=True, shuffle=True, seed=seed)) is None


def test_the_advice_trains():
    """Followed, the advice of the rarest-class refusal trains an ordinal objective on every fold."""
    rs = np.random.RandomState(0)
    X = rs.randn(240, 3)
    y = np.digitize(X[:, 0] + 0.3 * rs.randn(240), [-0.7, 0.0, 0.7]).astype(float)
    y[np.flatnonzero(y == 3)[3:]] = 2          # three rows of the top label
    kw = dict(engine="lightgbm", objective="extended_qwk", params={"verbose": -1, "num_threads": 1},
              num_boost_round=20, early_stopping_rounds=None, n_splits=5, seed=0, progress=False)
    with pytest.raises(ConfigError) as refused:
        cross_validate(X, y, stratified=True, **kw)
    (s,) = [s for s in _settings(str(refused.value).split("; ", 1)[1], {"stratified": True, "n_splits": 5})
            if not s["stratified"]] or pytest.skip("no unstratified advice for this seed")
    cv = cross_validate(X, y, **{**kw, **s})
    assert len(cv.models) == 5


def test_messages_name_the_users_labels():
    words = np.array(["low", "mid", "high", "top"])
    y = labels(CASES["one row of the top class"])
    with pytest.raises(ConfigError, match=r"of label 'top'; no number of folds works: label 'top' has 1 training "
                                          r"row; merge it with label 'high' \(or drop its rows\)$"):
        check_folds(y, 5, True, True, 0, label_of=lambda v: words[int(v)])
