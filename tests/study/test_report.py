"""The study report's paired comparisons (blends against the best single method, tuned against default, extended
QWK against the reference on each engine), each against the paired statistics computed by hand."""

import numpy as np
import pandas as pd
import pytest

from qwkboost.evaluation.stats import paired_comparison
from qwkboost.study.report import blend_comparison, engine_comparison, tuning_comparison

SEEDS = range(6)


def _cells(rows) -> pd.DataFrame:
    """Cells as :func:`~qwkboost.study.report.cells_frame` gives them, from (engine, method, objective, blend, qwk
    per seed) rows (``None``: the seed has no result)."""
    out = []
    for engine, method, objective, blend, scores in rows:
        for seed, q in zip(SEEDS, scores):
            if q is None:
                continue
            out.append({"regime": "r", "engine": engine, "method": method, "decoder": "exact",
                        "objective": objective, "peer": False, "blend": blend, "seed": seed, "qwk": q,
                        "qwk_oof": q + 0.01, "qwk_oof_nested": q - 0.01, "tuned": method.endswith("_tuned"),
                        "tune_seconds": 2.0 if method.endswith("_tuned") else np.nan,
                        "tune_pruned": 1.0 if method.endswith("_tuned") else np.nan,
                        "row": f"{engine}:{method}+exact"})
    return pd.DataFrame(out)


def _fields(a, b) -> dict:
    pc = paired_comparison(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    return {"diff": pc.diff.mean, "diff_low": pc.diff.low, "diff_high": pc.diff.high, "p": pc.p_value,
            "wins": pc.wins, "losses": pc.losses, "n": pc.diff.n}


def _check(row: pd.Series, expected: dict):
    for k, v in expected.items():
        assert row[k] == pytest.approx(v), k


def test_a_blend_is_compared_with_the_best_single_method_on_the_seeds_every_row_has():
    single_a = [0.60, 0.61, 0.62, 0.60, 0.59, 0.61]
    single_b = [0.63, 0.64, None, 0.62, 0.63, 0.65]        # seed 2 missing: left out of every comparison
    blend = [0.64, 0.66, 0.60, 0.63, 0.66, 0.66]
    df = _cells([("e", "a", "squared_error", False, single_a), ("e", "b", "extended_qwk", False, single_b),
                 ("-", "blend", None, True, blend)])
    (row,) = [r for _, r in blend_comparison(df).iterrows()]
    keep = [0, 1, 3, 4, 5]
    _check(row, {**_fields([blend[i] for i in keep], [single_b[i] for i in keep]),
                 "blend_mean": np.mean([blend[i] for i in keep]), "single_mean": np.mean([single_b[i] for i in keep]),
                 "oof": np.mean(blend) + 0.01, "oof_nested": np.mean(blend) - 0.01})
    assert row["best_single"] == "e:b+exact" and row["n"] == 5
    assert blend_comparison(df[~df["blend"]]).empty


def test_a_tuned_method_is_compared_with_its_default_on_the_seeds_both_have():
    default = [0.60, 0.61, 0.62, 0.60, 0.59, 0.61]
    tuned = [0.62, 0.61, 0.65, None, 0.60, 0.64]
    other = [0.5, None, None, None, None, None]           # another row's missing seeds change nothing here
    df = _cells([("e", "squared_error", "squared_error", False, default),
                 ("e", "squared_error_tuned", "squared_error", False, tuned),
                 ("e", "ordinal_logit", "ordinal_logit", False, other)])
    (row,) = [r for _, r in tuning_comparison(df).iterrows()]
    keep = [0, 1, 2, 4, 5]
    _check(row, {**_fields([tuned[i] for i in keep], [default[i] for i in keep]),
                 "default_mean": np.mean([default[i] for i in keep]), "tuned_mean": np.mean([tuned[i] for i in keep]),
                 "tune_seconds": 2.0, "tune_pruned": 1.0})
    assert (row["method"], row["decoder"], row["n"]) == ("squared_error", "exact", 5)


def test_extended_qwk_is_compared_with_the_reference_on_each_engine_holm_corrected_over_regimes():
    ref = [0.60, 0.61, 0.62, 0.60, 0.59, 0.61]
    eq = [0.62, 0.63, 0.64, 0.62, 0.61, 0.63]
    df = _cells([(e, m, o, False, s) for e in ("x", "y") for m, o, s in
                 (("squared_error", "squared_error", ref), ("extended_qwk", "extended_qwk", eq))])
    res = engine_comparison(df)
    assert list(res["engine"]) == ["x", "y"] and set(res["reference"]) == {"squared_error"}
    for _, row in res.iterrows():
        _check(row, {**_fields(eq, ref), "ref_mean": np.mean(ref), "eqwk_mean": np.mean(eq)})
        assert row["p_holm"] == pytest.approx(row["p"]) and row["verdict"] in ("better", "no difference")
    assert engine_comparison(df.iloc[:0]).empty
