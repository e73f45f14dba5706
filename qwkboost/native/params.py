"""Parameters of the native engine: one table of name, default, check, meaning and aliases.

:data:`PARAMS` is the only list. It drives :func:`resolve_params` (defaults,
aliases such as ``eta`` and ``lambda``, a check of every value, unknown names
refused with the valid ones) and the scikit-learn estimator
(:class:`qwkboost.native.NativeGBDTRegressor`), whose every argument is a row
here. Names follow XGBoost's where XGBoost has one, so one config drives every
engine.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from qwkboost.native.binning import MAX_BINS

__all__ = ["Param", "PARAMS", "DEFAULTS", "ALIASES", "CHOICES", "resolve_params", "parse_monotone"]


@dataclass(frozen=True)
class Param:
    """One parameter: its name, default, a check that returns the value to use, and what it does."""

    name: str
    default: Any
    check: Callable[[str, Any], Any]
    doc: str
    aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()


def _real(lo=None, hi=None, lo_open=False):
    return lambda name, v: _number(name, v, lo, hi, lo_open=lo_open)


def _int(lo=None, hi=None):
    return lambda name, v: _number(name, v, lo, hi, integer=True)


def _choice(name, v, choices):
    if v not in choices:
        raise ValueError(f"{name} must be one of {choices}; got {v!r}")
    return v


def _bool(name, v):
    if not isinstance(v, (bool, np.bool_)):
        raise ValueError(f"{name} must be true or false; got {v!r}")
    return bool(v)


def _n_jobs(name, v):
    if v is None:
        return None
    v = _number(name, v, integer=True)
    if v == 0 or v < -1:
        raise ValueError(f"{name} must be a positive integer, or -1 or None for every core; got {v!r}")
    return v


def _choices(*options):
    return dict(check=lambda name, v: _choice(name, v, options), choices=options)


PARAMS: tuple[Param, ...] = (
    Param("learning_rate", 0.3, _real(0.0, lo_open=True), "shrinkage of every tree", ("eta",)),
    Param("max_depth", 6, _int(), "depth limit (<= 0: none, with lossguide or max_leaves)"),
    Param("max_leaves", 0, _int(0), "leaf limit (0: none)", ("num_leaves",)),
    Param("grow_policy", "depthwise", doc="level by level, or best leaf first (LightGBM's)",
          **_choices("depthwise", "lossguide")),
    Param("reg_lambda", 1.0, _real(0.0), "L2 penalty on leaf weights", ("lambda",)),
    Param("reg_alpha", 0.0, _real(0.0), "L1 penalty on leaf weights", ("alpha",)),
    Param("gamma", 0.0, _real(0.0), "least gain a split must have", ("min_split_loss",)),
    Param("prune", "post", doc="gamma after growth (post) or while growing (pre)", **_choices("post", "pre")),
    Param("min_child_weight", 1.0, _real(0.0), "least hessian sum per child"),
    Param("min_samples_leaf", 1, _int(1), "least rows per child"),
    Param("subsample", 1.0, _real(0.0, 1.0, lo_open=True), "share of rows per tree"),
    Param("colsample_bytree", 1.0, _real(0.0, 1.0, lo_open=True), "share of features per tree"),
    Param("sampling_method", "uniform", doc="row sampling: uniform, or GOSS", **_choices("uniform", "goss")),
    Param("top_rate", 0.2, _real(0.0, 1.0), "GOSS: share of rows with the largest gradients kept"),
    Param("other_rate", 0.1, _real(0.0, 1.0, lo_open=True), "GOSS: share of the other rows sampled"),
    Param("cat_smooth", 10.0, _real(0.0), "categorical splits: categories ordered by G / (H + cat_smooth); "
          "a node's categories with fewer rows stay right (LightGBM's)"),
    Param("cat_l2", 10.0, _real(0.0), "categorical splits: extra L2 penalty on the children (LightGBM's)"),
    Param("max_cat_threshold", 32, _int(1), "categorical splits: most categories sent left (LightGBM's)"),
    Param("max_cat_to_onehot", 4, _int(1), "categorical splits: one category against the rest for features with "
          "at most this many categories (LightGBM's)"),
    Param("min_data_per_group", 100, _int(1), "categorical splits: least rows per group of categories (LightGBM's)"),
    Param("monotone_constraints", None, lambda name, v: v, "+1, -1 or 0 per feature (checked against X)"),
    Param("max_bin", MAX_BINS, _int(2, MAX_BINS), "value bins per numeric feature; for a categorical one, "
          "the least number of levels kept (LightGBM's)"),
    Param("min_data_in_bin", 3, _int(1), "categorical features with more levels than max_bin: least rows of a "
          "level with a bin of its own (LightGBM's)"),
    Param("bin_construct_sample_cnt", 200_000, _int(1), "rows the bins are fitted on"),
    Param("enable_bundle", True, _bool, "exclusive feature bundling of sparse features"),
    Param("max_conflict_rate", 0.0, _real(0.0, 1.0), "share of rows two bundled features may share"),
    Param("refit", "none", doc="line search on the true loss after each tree: none, leaves, step, or auto "
          "(leaves when the objective's hessian is a stand-in, see Objective.hessian_kind)",
          **_choices("none", "leaves", "step", "auto")),
    Param("refit_iter", 3, _int(1), "Newton steps of refit='leaves'"),
    Param("n_jobs", None, _n_jobs, "threads for large nodes (None or -1: every core)", ("nthread",)),
)

DEFAULTS: dict = {p.name: p.default for p in PARAMS}
ALIASES: dict = {a: p.name for p in PARAMS for a in p.aliases}
CHOICES: dict = {p.name: p.choices for p in PARAMS if p.choices}
_BY_NAME = {p.name: p for p in PARAMS}


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
    """Defaults plus ``params``, aliases mapped, every value checked (:data:`PARAMS`).

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
    for p in PARAMS:
        out[p.name] = p.check(p.name, out[p.name])
    if out["max_leaves"] == 1:
        raise ValueError("max_leaves must be 0 (no limit) or >= 2")
    if out["top_rate"] + out["other_rate"] > 1.0:
        raise ValueError("top_rate + other_rate must be <= 1")
    if out["max_depth"] <= 0 and out["grow_policy"] == "depthwise" and out["max_leaves"] == 0:
        raise ValueError("max_depth <= 0 (no depth limit) needs grow_policy='lossguide' or max_leaves > 0")
    if n_features is not None:
        out["monotone_constraints"] = parse_monotone(out["monotone_constraints"], n_features)
    return out
