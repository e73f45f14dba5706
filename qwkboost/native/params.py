"""Parameters of the native engine: names follow XGBoost's where XGBoost has one.

:func:`resolve_params` fills defaults, maps aliases (``eta``, ``lambda``,
``alpha``, ``min_split_loss``, ``nthread``), checks every value and rejects
unknown names with the list of valid ones, so one config can drive every
engine without silent typos.
"""

from __future__ import annotations

import numbers

import numpy as np

from qwkboost.native.binning import MAX_BINS

__all__ = ["DEFAULTS", "ALIASES", "resolve_params", "parse_monotone"]

DEFAULTS: dict = {
    "learning_rate": 0.3,
    "max_depth": 6,
    "max_leaves": 0,
    "grow_policy": "depthwise",
    "reg_lambda": 1.0,
    "reg_alpha": 0.0,
    "gamma": 0.0,
    "prune": "post",
    "min_child_weight": 1.0,
    "min_samples_leaf": 1,
    "subsample": 1.0,
    "colsample_bytree": 1.0,
    "sampling_method": "uniform",
    "top_rate": 0.2,
    "other_rate": 0.1,
    "monotone_constraints": None,
    "max_bin": MAX_BINS,
    "bin_construct_sample_cnt": 200_000,
    "enable_bundle": True,
    "max_conflict_rate": 0.0,
    "refit": "none",
    "refit_iter": 3,
    "n_jobs": None,
}

ALIASES = {"eta": "learning_rate", "lambda": "reg_lambda", "alpha": "reg_alpha",
           "min_split_loss": "gamma", "nthread": "n_jobs", "num_leaves": "max_leaves"}

CHOICES = {"grow_policy": ("depthwise", "lossguide"), "prune": ("post", "pre"),
           "sampling_method": ("uniform", "goss"), "refit": ("none", "leaves", "step")}


def parse_monotone(value, n_features: int) -> np.ndarray | None:
    """Constraint per feature from a sequence, a ``{index: c}`` dict or XGBoost's ``"(1,0,-1)"`` string.

    Raises
    ------
    ValueError
        For a wrong length, an index out of range or a value outside {-1, 0, 1}.
    """
    if value is None:
        return None
    if isinstance(value, str):
        s = value.strip().strip("()[]")
        try:
            value = [int(v) for v in s.split(",") if v.strip()] if s else []
        except ValueError:
            raise ValueError(f"monotone_constraints must list -1, 0 or +1 per feature, e.g. \"(1,0,-1)\"; "
                             f"got {value!r}") from None
    if isinstance(value, dict):
        out = np.zeros(n_features, dtype=np.int64)
        for k, v in value.items():
            if not (isinstance(k, numbers.Integral) and 0 <= k < n_features):
                raise ValueError(f"monotone_constraints: feature index {k!r} is not in [0, {n_features})")
            out[k] = v
    else:
        out = np.asarray(list(value))
        if out.ndim != 1 or out.size != n_features:
            raise ValueError(f"monotone_constraints has length {out.size} but X has {n_features} features; "
                             "give one constraint (-1, 0 or +1) per feature")
    if not np.all(np.isin(out, (-1, 0, 1))):
        raise ValueError(f"monotone_constraints values must be -1, 0 or +1; got {np.asarray(out).tolist()}")
    out = out.astype(np.int64)
    return out if np.any(out != 0) else None


def _number(name, v, lo=None, hi=None, integer=False, lo_open=False):
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or (integer and int(v) != v):
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{name} must be {kind}; got {v!r}")
    v = int(v) if integer else float(v)
    if not np.isfinite(v):
        raise ValueError(f"{name} must be finite; got {v!r}")
    if lo is not None and (v < lo or (lo_open and v == lo)):
        raise ValueError(f"{name} must be {'>' if lo_open else '>='} {lo}; got {v!r}")
    if hi is not None and v > hi:
        raise ValueError(f"{name} must be <= {hi}; got {v!r}")
    return v


def resolve_params(params: dict | None, n_features: int | None = None) -> dict:
    """Defaults plus ``params``, aliases mapped, every value checked.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the valid names) or a bad value.
    """
    params = dict(params or {})
    out = dict(DEFAULTS)
    given = set()
    for k, v in params.items():
        key = ALIASES.get(k, k)
        if key not in DEFAULTS:
            valid = sorted(DEFAULTS) + sorted(f"{a} (= {b})" for a, b in ALIASES.items())
            raise ValueError(f"unknown native-engine parameter {k!r}; valid parameters: {', '.join(valid)}")
        if key in given:
            raise ValueError(f"parameter {key!r} is given twice (through an alias)")
        given.add(key)
        out[key] = v
    for k, choices in CHOICES.items():
        if out[k] not in choices:
            raise ValueError(f"{k} must be one of {choices}; got {out[k]!r}")
    out["learning_rate"] = _number("learning_rate", out["learning_rate"], 0.0, lo_open=True)
    out["max_depth"] = _number("max_depth", out["max_depth"], integer=True)
    out["max_leaves"] = _number("max_leaves", out["max_leaves"], 0, integer=True)
    if out["max_leaves"] == 1:
        raise ValueError("max_leaves must be 0 (no limit) or >= 2")
    out["reg_lambda"] = _number("reg_lambda", out["reg_lambda"], 0.0)
    out["reg_alpha"] = _number("reg_alpha", out["reg_alpha"], 0.0)
    out["gamma"] = _number("gamma", out["gamma"], 0.0)
    out["min_child_weight"] = _number("min_child_weight", out["min_child_weight"], 0.0)
    out["min_samples_leaf"] = _number("min_samples_leaf", out["min_samples_leaf"], 1, integer=True)
    out["subsample"] = _number("subsample", out["subsample"], 0.0, 1.0, lo_open=True)
    out["colsample_bytree"] = _number("colsample_bytree", out["colsample_bytree"], 0.0, 1.0, lo_open=True)
    out["top_rate"] = _number("top_rate", out["top_rate"], 0.0, 1.0)
    out["other_rate"] = _number("other_rate", out["other_rate"], 0.0, 1.0, lo_open=True)
    if out["top_rate"] + out["other_rate"] > 1.0:
        raise ValueError("top_rate + other_rate must be <= 1")
    out["max_bin"] = _number("max_bin", out["max_bin"], 2, MAX_BINS, integer=True)
    out["bin_construct_sample_cnt"] = _number("bin_construct_sample_cnt", out["bin_construct_sample_cnt"], 1,
                                              integer=True)
    if not isinstance(out["enable_bundle"], (bool, np.bool_)):
        raise ValueError(f"enable_bundle must be true or false; got {out['enable_bundle']!r}")
    out["enable_bundle"] = bool(out["enable_bundle"])
    out["max_conflict_rate"] = _number("max_conflict_rate", out["max_conflict_rate"], 0.0, 1.0)
    out["refit_iter"] = _number("refit_iter", out["refit_iter"], 1, integer=True)
    if out["n_jobs"] is not None:
        out["n_jobs"] = _number("n_jobs", out["n_jobs"], integer=True)
        if out["n_jobs"] == 0 or out["n_jobs"] < -1:
            raise ValueError(f"n_jobs must be a positive integer, or -1 or None for every core; got {out['n_jobs']!r}")
    if out["max_depth"] <= 0 and out["grow_policy"] == "depthwise" and out["max_leaves"] == 0:
        raise ValueError("max_depth <= 0 (no depth limit) needs grow_policy='lossguide' or max_leaves > 0")
    if n_features is not None:
        out["monotone_constraints"] = parse_monotone(out["monotone_constraints"], n_features)
    return out
