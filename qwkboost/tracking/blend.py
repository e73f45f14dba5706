r"""A fitted blend as a pipeline: from a table of features to classes, as the blend's submission was made.

Each member is a run's :class:`~qwkboost.tracking.pipeline.FittedPipeline`; the blend
scores a table with every member (columns matched by name, each member taking
the columns it was trained on) and combines the scores as it was fitted
(:class:`BlendFit`; :mod:`qwkboost.blending.methods` fits it): weights or ranks, then its cut
points, or each member's cut points and the median class. Like a run's pipeline it is what a run saves and
:func:`~qwkboost.tracking.loading.load_run` reads, so it sits here, below the blending stage that fits it. On disk
it is a directory with
``pipeline.json`` (format ``qwkboost-blend``) and one pipeline directory per
member; :func:`qwkboost.load_run` and ``experiments/predict.py`` read it, and
it is served as an MLflow pyfunc model like a single run.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from qwkboost.data.labels import ClassLabels
from qwkboost.evaluation.thresholds import apply_thresholds
from qwkboost.explanations.explanation import Ensemble
from qwkboost.tracking.files import link_or_copy, run_path
from qwkboost.tracking.pipeline import (
    PIPELINE_FILE,
    FittedPipeline,
    check_fields,
    check_pipeline_dir,
    file_name,
    read_pipeline_json,
)
from qwkboost.validation import named_file_errors, shown

__all__ = ["FittedBlend", "BLEND_FORMAT", "BLEND_METHODS", "WEIGHTED_SUMS", "BlendFit", "apply_rank", "vote"]

BLEND_FORMAT = "qwkboost-blend"
FORMAT_VERSION = 1
#: The blend methods (:mod:`qwkboost.blending.methods` fits them).
BLEND_METHODS = ("weights", "mean", "rank_mean", "greedy", "vote")
#: The methods whose score is a weighted sum of the members' scores (so zero-weight members can be left out).
WEIGHTED_SUMS = ("weights", "mean", "greedy")


def apply_rank(scores: np.ndarray, quantiles: np.ndarray) -> np.ndarray:
    r"""Scores mapped to :math:`[0, 1]` by the distribution whose quantiles are given.

    Ties in the quantiles (a score many rows share) map to the middle of their run.
    """
    q = np.asarray(quantiles, dtype=float)
    p = np.linspace(0.0, 1.0, q.size)
    lo = np.interp(scores, q, p, left=0.0, right=1.0)
    hi = -np.interp(-np.asarray(scores, dtype=float), -q[::-1], -p[::-1], left=-1.0, right=-0.0)
    return 0.5 * (lo + hi)


def vote(classes: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The median of the members' classes (columns) per row.

    With an even number of members whose two middle classes differ, the one
    nearer the members' mean score wins (the higher on a tie), so no side is
    favoured by construction.
    """
    med = np.median(classes, axis=1)
    half = med != np.floor(med)
    out = np.floor(med)
    if half.any():
        mean = scores.mean(axis=1)
        out[half] = np.where(mean[half] >= med[half], np.ceil(med[half]), np.floor(med[half]))
    return out.astype(np.int64)


@dataclass
class BlendFit:
    """What one fit of a blend learned, on the index scale (classes 0..K-1): :meth:`score` and
    :meth:`classes` apply it to the members' scores ``S`` (one column per member)."""

    method: str
    weights: np.ndarray                    # (M,); the mean's equal weights for mean and rank_mean
    cuts: np.ndarray | None                # the blend's cut points (None for vote)
    member_cuts: np.ndarray | None         # (M, K-1) for vote
    quantiles: np.ndarray | None           # (M, N_QUANTILES) for rank_mean

    def score(self, S: np.ndarray) -> np.ndarray:
        if self.method == "rank_mean":
            S = np.column_stack([apply_rank(S[:, j], q) for j, q in enumerate(self.quantiles)])
        if self.method == "vote":
            return self.classes(S).astype(float)
        return S @ self.weights

    def classes(self, S: np.ndarray) -> np.ndarray:
        if self.method == "vote":
            c = np.column_stack([apply_thresholds(S[:, j], cuts) for j, cuts in enumerate(self.member_cuts)])
            return vote(c, S)
        return apply_thresholds(self.score(S), self.cuts)


@dataclass
class FittedBlend:
    """Member pipelines and how their scores are combined.

    Attributes
    ----------
    members : list of FittedPipeline
    method : str
        ``weights``, ``mean``, ``rank_mean`` or ``vote``.
    weights : ndarray of shape (M,)
    classes : ndarray
        The classes, on the labels' own scale.
    cuts : ndarray or None
        The blend's cut points on the index scale 0..K-1 (on [0, 1] for ``rank_mean``); ``None`` for ``vote``.
    member_cuts : ndarray of shape (M, K-1) or None
        Each member's cut points on the index scale, for ``vote``.
    quantiles : ndarray of shape (M, Q) or None
        Each member's out-of-fold score quantiles (index scale), for ``rank_mean``.
    labels : list or None
        The class labels in order when they are words (``classes`` are then their indices).
    """

    members: list[FittedPipeline]
    method: str
    weights: np.ndarray
    classes: np.ndarray
    cuts: np.ndarray | None = None
    member_cuts: np.ndarray | None = None
    quantiles: np.ndarray | None = None
    id_name: str | None = None
    target: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    labels: list | None = None

    is_ordinal = True

    @classmethod
    def from_result(cls, result, trusted_modules=None) -> "FittedBlend":
        """The pipeline of a :class:`~qwkboost.blending.fit.BlendResult` whose members all have pipelines
        (``trusted_modules`` as :func:`qwkboost.load_model` takes it)."""
        parts = _kept_parts(result)
        members = [FittedPipeline.load(m.pipeline_dir, trusted_modules) for m in parts.pop("members")]
        return cls(members, **parts)

    @staticmethod
    def write_result(result, path, trusted_modules=None) -> Path:
        """Write the pipeline of ``result`` into directory ``path`` as :meth:`save` writes it, each member's
        pipeline directory linked file for file (:func:`~qwkboost.tracking.files.link_or_copy`: a copy across file
        systems) once its files pass the checks of loading
        (:func:`~qwkboost.tracking.pipeline.check_pipeline_dir`; ``trusted_modules`` as :func:`qwkboost.load_model`
        takes it) but without building the engines' boosters: at competition size they run to megabytes a
        member, and building them back costs seconds. Only the files checked are linked: the member's
        ``pipeline.json`` and the fold model files it lists."""
        parts = _kept_parts(result)
        files = [check_pipeline_dir(m.pipeline_dir, trusted_modules) for m in parts["members"]]
        d = Path(path)
        d.mkdir(parents=True, exist_ok=True)
        names = []
        for i, (m, folds) in enumerate(zip(parts.pop("members"), files)):
            sub = d / f"member_{i}"
            if sub.exists():
                shutil.rmtree(sub)
            sub.mkdir()
            for name in (PIPELINE_FILE, *folds):        # the files checked, and nothing else the folder holds
                link_or_copy(Path(m.pipeline_dir) / name, sub / name)
            names.append(sub.name)
        (d / PIPELINE_FILE).write_text(json.dumps(_payload(method=parts["method"], members=names, **{
            k: v for k, v in parts.items() if k != "method"})))
        return d

    @property
    def _fit(self):
        return BlendFit(self.method, self.weights, self.cuts, self.member_cuts, self.quantiles)

    @property
    def user_columns(self) -> list[str]:
        """The user's columns of the runs blended (:attr:`FittedPipeline.user_columns`)."""
        return list(dict.fromkeys(c for m in self.members for c in m.user_columns))

    @property
    def schema(self):
        """The first member's feature schema (members may use different columns; each encodes its own)."""
        return self.members[0].schema

    def _scores(self, X, name: str = "X") -> np.ndarray:
        lo = float(self.classes[0])
        return np.column_stack([m.predict_score(X, name) for m in self.members]) - lo

    def predict_score(self, X, name: str = "X") -> np.ndarray:
        """The blended score: on the labels' scale (``[0, 1]`` for ``rank_mean``; the vote for ``vote``);
        ``name``: what messages call ``X``."""
        s = self._fit.score(self._scores(X, name))
        return s if self.method == "rank_mean" else s + float(self.classes[0])

    def _decode(self, idx) -> np.ndarray:
        if self.labels is not None:
            return ClassLabels(tuple(self.labels)).decode(idx)
        return self.classes[np.asarray(idx, dtype=np.int64)]

    def predict(self, X) -> np.ndarray:
        """Classes on the labels' own scale (the user's labels when they are words)."""
        return self._decode(self._fit.classes(self._scores(X)))

    def classify(self, score: np.ndarray) -> np.ndarray:
        """Classes of scores made by :meth:`predict_score`."""
        if self.method == "vote":
            vote = np.asarray(score, dtype=float)
            return self._decode(vote - float(self.classes[0])) if self.labels is not None else vote
        shift = 0.0 if self.method == "rank_mean" else float(self.classes[0])
        return self._decode(apply_thresholds(np.asarray(score) - shift, self.cuts))

    def explain_parts(self):
        """The blend for :func:`~qwkboost.explanations.explanation.explain`: every member's fold models, each weighing the member's weight
        over its number of folds (``weights`` and ``mean``: the blend's score is the weighted sum of the members'
        scores); the cut points on the score's scale.

        Raises
        ------
        ValueError
            For ``rank_mean`` and ``vote`` (not a weighted sum of scores), or a member whose score is not its raw
            score (a class objective's expected class), naming it.
        """
        if self.method not in ("weights", "mean", "greedy"):
            raise ValueError(f"a {self.method} blend is not a weighted sum of its members' scores, so their SHAP "
                             "values do not add up to it; explain a weights or mean blend, or its members one by one")
        names = self.info.get("members") or [f"member {i}" for i in range(len(self.members))]
        for name, m in zip(names, self.members):
            if not m.scores_are_raw():
                raise ValueError(f"member {name!r} scores rows with its objective's expected class, not its raw "
                                 "score; SHAP values in the score space do not add up to it (explain it alone)")
        parts = [(model, float(w) / len(m.models)) for m, w in zip(self.members, self.weights) for model in m.models]
        lo = float(self.classes[0])
        return Ensemble(parts, None if self.cuts is None else np.asarray(self.cuts) + lo, self.classes, self.labels,
                        dict(self.info))

    def save(self, path) -> Path:
        """Write the blend into directory ``path`` (created), each member in ``member_<i>/``; return it."""
        d = Path(path)
        d.mkdir(parents=True, exist_ok=True)
        names = []
        for i, m in enumerate(self.members):
            sub = d / f"member_{i}"
            if sub.exists():
                shutil.rmtree(sub)
            m.save(sub)
            names.append(sub.name)
        payload = _payload(self.method, names, self.weights, self.classes, self.cuts, self.member_cuts,
                           self.quantiles, self.id_name, self.target, self.info, self.labels)
        (d / PIPELINE_FILE).write_text(json.dumps(payload))
        return d

    @classmethod
    def load(cls, path, trusted_modules=None) -> "FittedBlend":
        """Read a blend directory written by :meth:`save` (a malformed file is refused in one line naming it);
        ``trusted_modules`` as :func:`qwkboost.load_model` takes it."""
        d = Path(path)
        where = f"blend pipeline {str(d)!r}"
        payload = read_pipeline_json(d, where, "a qwkboost blend file")
        with named_file_errors(where, str(d), PIPELINE_FILE, "a valid qwkboost blend file"):
            return cls._of(payload, d, where, trusted_modules)

    @classmethod
    def _of(cls, payload, d: Path, where: str, trusted_modules) -> "FittedBlend":
        if not isinstance(payload, dict) or payload.get("format") != BLEND_FORMAT \
                or payload.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{where} is not a qwkboost blend of format version {FORMAT_VERSION}")
        if payload.get("method") not in BLEND_METHODS:
            raise ValueError(f"{where}: unknown blend method {shown(payload.get('method'))}")
        names = payload.get("members")
        if not isinstance(names, list) or not names or not all(isinstance(x, str) for x in names):
            raise ValueError(f"{where}: 'members' must list the member directories")
        check_fields(payload, where)
        dirs = [file_name(run_path(d, x, f"{PIPELINE_FILE} 'members' entry", where, kind="dir"), x, where)
                for x in names]
        members = [FittedPipeline.load(x, trusted_modules) for x in dirs]

        def arr(key):
            v = payload.get(key)
            return None if v is None else np.asarray(v, dtype=float)

        blend = cls(members, payload["method"], arr("weights"), arr("classes"), arr("cuts"), arr("member_cuts"),
                    arr("quantiles"), payload.get("id_name"), payload.get("target"), payload.get("info") or {},
                    payload.get("labels"))
        m = len(members)
        if blend.weights is None or blend.weights.shape != (m,) or blend.classes is None:
            raise ValueError(f"{where}: weights must hold one value per member, and classes must be given")
        return blend

    def __repr__(self) -> str:
        return (f"FittedBlend({self.method}, {len(self.members)} members, "
                f"weights={np.round(self.weights, 3).tolist()}, classes={self.classes.tolist()})")


def _kept_parts(result) -> dict:
    """What a blend's pipeline holds of ``result``: its members (those of weight above 0 when the blend is a
    weighted sum, a greedy blend's unchosen ones left out: the same scores, less to load), their weights and
    quantiles, and the blend's cut points, classes, columns and labels."""
    fit = result.fit_info
    weights = np.asarray(fit.weights, dtype=float)
    keep = np.flatnonzero(weights > 0) if result.method in WEIGHTED_SUMS else np.arange(weights.size)
    chosen = [result.members[j] for j in keep]
    ref = result.members[0]
    return {"members": chosen, "method": result.method, "weights": weights[keep],
            "classes": np.asarray(result.classes, dtype=float), "cuts": fit.cuts, "member_cuts": fit.member_cuts,
            "quantiles": None if fit.quantiles is None else fit.quantiles[keep], "id_name": ref.id_name,
            "target": ref.target, "info": {"blend": result.method, "members": [m.name for m in chosen],
                                           "sources": [m.source for m in chosen]}, "labels": ref.labels}


def _payload(method, members, weights, classes, cuts, member_cuts, quantiles, id_name, target, info, labels) -> dict:
    """``pipeline.json`` of a blend."""
    def arr(a):
        return None if a is None else np.asarray(a).tolist()

    return {"format": BLEND_FORMAT, "format_version": FORMAT_VERSION, "method": method, "members": members,
            "weights": arr(weights), "classes": arr(classes), "cuts": arr(cuts), "member_cuts": arr(member_cuts),
            "quantiles": arr(quantiles), "id_name": id_name, "target": target, "info": info, "labels": labels}
