r"""The fitted pipeline of a run: from a table of features to classes on the labels' own scale.

A run cross-validates :math:`K` fold models and fits cut points on their
out-of-fold scores. Its :class:`FittedPipeline` holds all of it, so that new
rows are scored exactly as the run scored its test set:

.. math:: s(x) = \frac1K \sum_{k=1}^K F^{(k)}(x), \qquad
          \hat y(x) = \text{class}_j \text{ for } c_{j-1} \le s(x) < c_j,

with the cut points :math:`c_j` on the labels' scale (:func:`qwkboost.evaluation.thresholds.apply_thresholds`).
The feature schema (names, types, categories) encodes the table first, so
columns are matched by name and unseen categories are missing values.

On disk a pipeline is a directory: ``pipeline.json`` plus one compact model file
per fold, ``fold_<k>.zip`` (:meth:`qwkboost.Model.save`; pipelines written before
list ``fold_<k>.json`` files, which load as they did). Every run writes one to its output
directory and logs it to MLflow (artifact ``pipeline``, and as an MLflow
``pyfunc`` model); :func:`qwkboost.tracking.loading.load_run` loads either.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from qwkboost.data.features import EncodedFeatures, FeatureSchema
from qwkboost.data.labels import ClassLabels
from qwkboost.engines.model import Model, check_model_file, load_model
from qwkboost.evaluation.thresholds import apply_thresholds
from qwkboost.explanations.explanation import Ensemble
from qwkboost.objectives import Objective
from qwkboost.tracking.files import run_path
from qwkboost.validation import named_file_errors, read_json, shown

__all__ = ["FittedPipeline", "PIPELINE_FILE", "FORMAT", "check_fields", "check_pipeline_dir", "read_pipeline_json",
           "model_files", "file_name"]

PIPELINE_FILE = "pipeline.json"
FORMAT = "qwkboost-pipeline"
FORMAT_VERSION = 1


def check_fields(payload: dict, where: str) -> None:
    """The fields a run's and a blend's ``pipeline.json`` share, of the types they must have.

    Raises
    ------
    ValueError
        Naming the field.
    """
    for key, ok, kind in (("id_name", lambda v: v is None or isinstance(v, str), "a column name or null"),
                          ("target", lambda v: v is None or isinstance(v, str), "a column name or null"),
                          ("info", lambda v: v is None or isinstance(v, dict), "a mapping"),
                          ("labels", lambda v: v is None or (isinstance(v, list) and all(
                              isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in v)),
                           "a list of labels or null")):
        if not ok(payload.get(key)):
            raise ValueError(f"{where}: {key!r} must be {kind}; got {shown(payload.get(key))}")


@dataclass
class FittedPipeline:
    """Fold models averaged, cut points and classes: a run's predictions for new rows.

    Attributes
    ----------
    models : list of Model
        The fold models; the score is their mean.
    schema : FeatureSchema
        The feature columns (names, types, categories) the models were trained on.
    cuts : ndarray or None
        Cut points on the labels' scale, between consecutive ``classes``; ``None`` for a regression target.
    classes : ndarray or None
        The classes, on the labels' own scale.
    id_name, target : str or None
        The id and label columns of the training file (names of the submission's columns).
    info : dict
        Engine, objective, threshold method, run id: what made it.
    labels : list or None
        The user's class labels in order, when they are words (``data.classes``): ``classes`` are then the
        indices :math:`0..K-1` and :meth:`predict` gives the labels.
    """

    models: list[Model]
    schema: FeatureSchema
    cuts: np.ndarray | None = None
    classes: np.ndarray | None = None
    id_name: str | None = None
    target: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    labels: list | None = None

    averaging = "mean"

    def __post_init__(self):
        if not self.models:
            raise ValueError("a pipeline needs at least one model")
        if (self.cuts is None) != (self.classes is None):
            raise ValueError("cuts and classes come together (both None for a regression target)")
        if self.cuts is not None:
            self.cuts = np.asarray(self.cuts, dtype=np.float64)
            self.classes = np.asarray(self.classes, dtype=np.float64)
            if self.cuts.size != self.classes.size - 1 or np.any(np.diff(self.cuts) < 0):
                raise ValueError(f"{self.classes.size} classes need {self.classes.size - 1} non-decreasing cut "
                                 f"points; got {self.cuts.tolist()}")
        if self.labels is not None:
            self.labels = ClassLabels(tuple(self.labels)).to_list()
            if self.classes is None or len(self.labels) != self.classes.size:
                n = 0 if self.classes is None else self.classes.size
                raise ValueError(f"labels {self.labels} must name each of the {n} classes")

    @property
    def is_ordinal(self) -> bool:
        return self.classes is not None

    @property
    def user_columns(self) -> list[str]:
        """The run's columns of the user's: its label, and its id, entity and weight columns when it had them
        (files written from it keep clear of their names: :mod:`qwkboost.data.columns`)."""
        return list(dict.fromkeys(v for v in [self.target, *(self.info.get("columns") or {}).values()]
                                  if isinstance(v, str) and v))

    def encode(self, X, name: str = "X") -> EncodedFeatures:
        """``X`` encoded once for every fold model (columns by name, categories to codes); messages call it
        ``name``."""
        if isinstance(X, EncodedFeatures):
            return X
        return EncodedFeatures(self.schema.encode(X, name), self.schema)

    def predict_score(self, X, name: str = "X") -> np.ndarray:
        """The mean of the fold models' scores, on the labels' scale (``name``: what messages call ``X``)."""
        enc = self.encode(X, name)
        return np.mean([m.predict(enc) for m in self.models], axis=0)

    def predict(self, X) -> np.ndarray:
        """Classes on the labels' own scale (the score itself for a regression target)."""
        return self.classify(self.predict_score(X))

    def classify(self, score: np.ndarray) -> np.ndarray:
        """Classes of scores made by :meth:`predict_score` (the scores themselves for a regression target): the
        user's labels when they are words, else values on the labels' own scale."""
        if self.cuts is None:
            return score
        idx = apply_thresholds(score, self.cuts)
        return ClassLabels(tuple(self.labels)).decode(idx) if self.labels is not None else self.classes[idx]

    def scores_are_raw(self) -> bool:
        """Whether the score (:meth:`predict_score`) is the fold models' raw score: every objective decodes its
        score as itself (not ``ordinal_logit``, ``multiclass`` or ``soft_qwk``, whose score is an expected class)."""

        return all(m.n_outputs == 1 and type(m.objective).decode is Objective.decode for m in self.models)

    def explain_parts(self):
        """The run for :func:`~qwkboost.explanations.explanation.explain`: its fold models, each weighing :math:`1/K`; the cut points when
        they cut the raw score."""

        raw = self.scores_are_raw()
        return Ensemble([(m, 1.0 / len(self.models)) for m in self.models],
                        self.cuts if raw else None, self.classes if raw else None,
                        self.labels if raw else None, dict(self.info))

    # -- persistence -----------------------------------------------------------
    def save(self, path) -> Path:
        """Write the pipeline into directory ``path`` (created); return it."""
        d = Path(path)
        d.mkdir(parents=True, exist_ok=True)
        files = []
        for k, m in enumerate(self.models):
            m.save(d / f"fold_{k}.zip")
            files.append(f"fold_{k}.zip")
        payload = {"format": FORMAT, "format_version": FORMAT_VERSION, "models": files,
                   "averaging": self.averaging, "features": self.schema.to_dict(),
                   "cuts": None if self.cuts is None else self.cuts.tolist(),
                   "classes": None if self.classes is None else self.classes.tolist(),
                   "id_name": self.id_name, "target": self.target, "info": self.info, "labels": self.labels}
        (d / PIPELINE_FILE).write_text(json.dumps(payload, indent=1))
        return d

    @classmethod
    def load(cls, path, trusted_modules=None) -> "FittedPipeline":
        """Read a pipeline directory written by :meth:`save` (every field checked; a malformed file is refused in
        one line naming it). ``trusted_modules``: as :func:`qwkboost.load_model` takes it (no module a file names
        is imported unless allowed there)."""
        d = Path(path)
        where = f"pipeline {str(d)!r}"
        payload = read_pipeline_json(d, where)
        with named_file_errors(where, str(d), PIPELINE_FILE, "a valid qwkboost pipeline file"):
            return cls._of(payload, d, where, trusted_modules)

    @classmethod
    def _of(cls, payload, d: Path, where: str, trusted_modules) -> "FittedPipeline":
        if not isinstance(payload, dict) or payload.get("format") != FORMAT:
            raise ValueError(f"{where}: {PIPELINE_FILE} is not a qwkboost pipeline")
        if payload.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{where} has pipeline format {shown(payload.get('format_version'))}; this qwkboost "
                             f"reads {FORMAT_VERSION}")
        if payload.get("averaging") != cls.averaging:
            raise ValueError(f"{where}: unknown averaging {shown(payload.get('averaging'))}")
        files = payload.get("models")
        models = [load_model(p, trusted_modules) for p in model_files(payload, d, where)]
        schema = FeatureSchema.from_dict(payload.get("features"), f"{where}: 'features'")
        for x, m in zip(files, models):
            if m.n_features != schema.n_features:
                raise ValueError(f"{where}: {x} has {m.n_features} features, the pipeline {schema.n_features}")
        check_fields(payload, where)
        return cls(models, schema, payload.get("cuts"), payload.get("classes"), payload.get("id_name"),
                   payload.get("target"), payload.get("info") or {}, payload.get("labels"))

    def __repr__(self) -> str:
        i = self.info
        return (f"FittedPipeline({len(self.models)} {i.get('engine', '?')} models, objective={i.get('objective')!r}, "
                f"classes={None if self.classes is None else self.classes.tolist()})")


def check_pipeline_dir(path, trusted_modules=None) -> list[str]:
    """Refuse a pipeline directory as :meth:`FittedPipeline.load` would, without building its models' boosters
    (:func:`qwkboost.engines.model.check_model_file`): its ``pipeline.json``, the fold model files it lists (each a
    regular file inside the directory), their objectives (no module imported unless allowed in
    ``trusted_modules``) and their boosters' nesting. Returns the fold model files' names, as listed.

    Raises
    ------
    ValueError
        Naming the directory or the file.
    """

    d = Path(path)
    where = f"pipeline {str(d)!r}"
    payload = read_pipeline_json(d, where)
    with named_file_errors(where, str(d), PIPELINE_FILE, "a valid qwkboost pipeline file"):
        if not isinstance(payload, dict) or payload.get("format") != FORMAT:
            raise ValueError(f"{where}: {PIPELINE_FILE} is not a qwkboost pipeline")
        files = model_files(payload, d, where)
        for p in files:
            check_model_file(p, trusted_modules)
        return [p.name for p in files]


def read_pipeline_json(d: Path, where: str, kind: str = "a qwkboost pipeline file"):
    """The JSON of directory ``d``'s ``pipeline.json`` (a run's or a blend's), read as a run's file
    (:func:`~qwkboost.tracking.files.run_path`: a regular file inside ``d``).

    Raises
    ------
    ValueError
        Naming ``where``: no such file, a symlink out of ``d``, a FIFO or a directory, or not JSON.
    """
    if not os.path.lexists(d / PIPELINE_FILE):
        raise ValueError(f"{where} has no {PIPELINE_FILE}; is it a run's output directory or its 'pipeline' folder?")
    f = run_path(d, PIPELINE_FILE, "file", where)
    return read_json(f, f"{where}: {PIPELINE_FILE}", kind)


def model_files(payload: dict, d: Path, where: str) -> list[Path]:
    """The fold model files a pipeline's ``pipeline.json`` lists in ``'models'``, each a regular file inside
    ``d`` (:func:`~qwkboost.tracking.files.run_path`).

    Raises
    ------
    ValueError
        Naming the field and the file.
    """
    files = payload.get("models")
    if not isinstance(files, list) or not files or not all(isinstance(x, str) for x in files):
        raise ValueError(f"{where}: 'models' must list the fold model files")
    return [file_name(run_path(d, x, f"{PIPELINE_FILE} 'models' entry", where), x, where) for x in files]


def file_name(path: Path, name: str, where: str) -> Path:
    """``path``, when ``name`` (read from ``pipeline.json``, already checked by
    :func:`~qwkboost.tracking.files.run_path`) is a name in the directory itself, as qwkboost writes them."""
    if "/" in name or "\\" in name:
        raise ValueError(f"{where}: {PIPELINE_FILE} names {ascii(name)}, not a name in the directory itself")
    return path
