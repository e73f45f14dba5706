"""The trained :class:`Model` every engine returns, and its persistence (:mod:`qwkboost.engines.modelfile`)."""

from __future__ import annotations

import hashlib
import json
import numbers
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np

from qwkboost.data.features import EncodedFeatures, FeatureSchema
from qwkboost.engines.modelfile import ZIP_MAGIC, read_compact, ubjson_depth, write_compact
from qwkboost.engines.registry import ENGINES, get_engine
from qwkboost.objectives import Objective, check_trusted_modules, saved_objective
from qwkboost.objectives import get as get_objective
from qwkboost.validation import (MAX_JSON_DEPTH, check_features, check_int, file_kind, json_depth, parse_json,
                                 read_regular, shown)

__all__ = ["Model", "load_model", "check_model_file", "FORMAT_VERSION"]

#: 2 added feature names, the label offset and a checksum of the booster text;
#: 3 the feature schema (names, categorical columns and their categories);
#: 4 the compact form: a zip of the fields and the engine's own booster format (a ``.json`` path still writes 3).
FORMAT_VERSION = 4
#: The version a model saved to a ``.json`` path carries: one JSON file, the booster as text.
JSON_FORMAT_VERSION = 3


class Model:
    r"""A boosted model with its objective and starting score.

    Scores are in label space: :math:`F(x) = F_0 + \sum_{t \le T} f_t(x)`, where
    :math:`F_0` is the objective's initial score and :math:`T` the best
    iteration. Every engine's adapter adds :math:`F_0` back at prediction, so
    nobody shifts labels by hand.

    Attributes
    ----------
    engine : str
        ``"xgboost"``, ``"lightgbm"``, ``"native"`` or ``"catboost"``.
    objective : Objective
        The fitted objective.
    init_score : float
        :math:`F_0`, on the labels' scale.
    booster : object
        The engine's own model (``xgboost.Booster``, ``lightgbm.Booster``, ``catboost.CatBoost`` or
        ``qwkboost.native.NativeBooster``); ``None`` after zero rounds on LightGBM and CatBoost.
        It scores labels minus ``label_offset``.
    num_rounds : int
        Boosting rounds trained.
    best_iteration : int
        Number of rounds :meth:`predict` uses by default (1-based, as in
        LightGBM): the best round under early stopping, else ``num_rounds``.
    evals_result : dict
        Learning curves, ``{"train": {metric: [...]}, "valid": {metric: [...]}}``.
    schema : FeatureSchema
        The feature columns: names (when trained on a DataFrame; :meth:`predict`
        matches by them), and the categorical ones with their categories.
    n_features : int
    feature_names : list of str or None
    label_offset : float
        What the engine's labels were shifted by (see :func:`qwkboost.engines.label_offset`).
    """

    def __init__(self, engine: str, objective: Objective, init_score: float, booster: Any,
                 num_rounds: int, best_iteration: int, evals_result: dict | None = None,
                 n_features: int | None = None, feature_names: list[str] | None = None,
                 label_offset: float = 0.0, schema: FeatureSchema | None = None):
        self.engine = engine
        self.objective = objective
        self.n_outputs = int(getattr(objective, "n_outputs_", 1))
        self.init_score = float(init_score) if self.n_outputs == 1 else np.asarray(init_score, dtype=np.float64)
        self.booster = booster
        self.num_rounds = int(num_rounds)
        self.best_iteration = int(best_iteration)
        self.evals_result = evals_result or {}
        if schema is None:
            schema = None if n_features is None else FeatureSchema.numeric(n_features, feature_names)
        self.schema = schema
        self.label_offset = float(label_offset)

    @property
    def n_features(self) -> int | None:
        return None if self.schema is None else self.schema.n_features

    @property
    def feature_names(self) -> list[str] | None:
        return None if self.schema is None else self.schema.names

    @property
    def learning_curve(self) -> dict[str, list[float]]:
        """Metric per round for each eval set, e.g. ``{"train": [...], "valid": [...]}``."""
        name = self.objective.metric_name
        return {k: list(v.get(name, [])) for k, v in self.evals_result.items()}

    def predict(self, X, num_iteration: int | None = None) -> np.ndarray:
        """One continuous ordinal score per row, in label space, from the first ``num_iteration`` rounds
        (default: best): the score itself, or the objective's decoded score (the expected class) for an
        objective with several outputs.

        A DataFrame's columns are matched to the training columns by name.

        Raises
        ------
        ValueError
            If ``X`` is malformed, lacks a training column or has the wrong
            number of features, or ``num_iteration`` is out of range.
        """
        return self.objective.decode(self.predict_raw(X, num_iteration))

    def predict_proba(self, X, num_iteration: int | None = None) -> np.ndarray:
        """Class probabilities ``(n, K)`` of a probabilistic objective (``multiclass``, ...)."""
        return self.objective.predict_proba(self.predict_raw(X, num_iteration))

    def predict_raw(self, X, num_iteration: int | None = None) -> np.ndarray:
        """The raw scores: ``(n,)``, or ``(n, n_outputs)`` for an objective with several outputs."""
        if isinstance(X, EncodedFeatures):
            if self.schema is not None and X.schema.n_features != self.schema.n_features:
                raise ValueError(f"X has {X.schema.n_features} features but the model was trained on "
                                 f"{self.schema.n_features}")
            X = X.X
        else:
            X = check_features(X, "X") if self.schema is None else self.schema.encode(X, "X")
        n_iter = self.best_iteration if num_iteration is None else \
            check_int(num_iteration, "num_iteration", 0, self.num_rounds)
        if n_iter == 0 or self.booster is None:
            return np.full(X.shape[0], self.init_score) if self.n_outputs == 1 else \
                np.tile(self.init_score, (X.shape[0], 1))
        raw = get_engine(self.engine).predict(self.booster, X, n_iter=n_iter,
                                              init_score=self.init_score - self.label_offset)
        return raw + self.label_offset if self.label_offset else raw

    def predict_raw_from(self, X: EncodedFeatures, raw: np.ndarray | None, num_iteration: int) -> np.ndarray:
        """:meth:`predict_raw` at ``num_iteration`` from ``raw``, the rows' raw scores at :attr:`best_iteration`
        (``None``: unknown): an engine that predicts a span of rounds (``predict_span``) predicts only the rounds
        between the two, added or taken away; any other predicts all of them. The same scores up to rounding.
        """
        span = getattr(get_engine(self.engine), "predict_span", None)
        n_iter = check_int(num_iteration, "num_iteration", 0, self.num_rounds)
        if raw is None or span is None or self.booster is None or not n_iter or not self.best_iteration:
            return self.predict_raw(X, n_iter)
        if n_iter == self.best_iteration:
            return raw
        lo, hi = sorted((n_iter, self.best_iteration))
        step = span(self.booster, X.X, start=lo, stop=hi)
        return raw + step if n_iter > self.best_iteration else raw - step

    def save(self, path) -> Path:
        """Write the model to one file (no pickle); return the path.

        A path ending in ``.json`` gets one JSON file, the booster as the engine's text (readable, large); any other
        path the compact form, a zip of the fields and the engine's own binary booster (XGBoost's UBJSON, CatBoost's
        ``.cbm``), deflated: 3.5 to 16 times smaller, and XGBoost's read 15 times faster
        (:mod:`qwkboost.engines.modelfile`).
        :func:`load_model` reads either.
        """
        path = Path(path)
        compact = path.suffix.lower() != ".json"
        adapter = get_engine(self.engine)
        payload = {
            "format": "qwkboost-model",
            "format_version": FORMAT_VERSION if compact else JSON_FORMAT_VERSION,
            "engine": self.engine,
            "objective": {
                "name": self.objective.name,
                "class": f"{type(self.objective).__module__}:{type(self.objective).__qualname__}",
                "params": self.objective.get_params(),
                "state": self.objective.get_state(),
            },
            "init_score": self.init_score if self.n_outputs == 1 else self.init_score.tolist(),
            "label_offset": self.label_offset,
            "num_rounds": self.num_rounds,
            "best_iteration": self.best_iteration,
            "n_features": self.n_features,
            "feature_names": self.feature_names,
            "features": None if self.schema is None else self.schema.to_dict(),
            "evals_result": self.evals_result,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        if compact:
            raw = None if self.booster is None else adapter.to_bytes(self.booster)
            payload["booster_file"] = None if raw is None else f"booster.{adapter.booster_suffix}"
            payload["booster_sha256"] = None if raw is None else hashlib.sha256(raw).hexdigest()
            write_compact(path, json.dumps(payload).encode(), raw, adapter.booster_suffix)
        else:
            text = None if self.booster is None else adapter.dump(self.booster)
            payload["booster"] = text
            payload["booster_sha256"] = None if text is None else hashlib.sha256(text.encode()).hexdigest()
            path.write_text(json.dumps(payload))
        return path

    def __repr__(self) -> str:
        return (f"Model(engine={self.engine!r}, objective={self.objective.name!r}, "
                f"init_score={np.round(self.init_score, 6)}, best_iteration={self.best_iteration}/{self.num_rounds})")


def _field(payload: dict, key: str, kind, where: str, optional: bool = False):
    if key not in payload:
        if optional:
            return None
        raise ValueError(f"{where} is not a valid qwkboost model file: it lacks {key!r}")
    v = payload[key]
    if v is None and optional:
        return None
    ok = {"int": isinstance(v, numbers.Integral) and not isinstance(v, bool),
          "number": isinstance(v, numbers.Real) and not isinstance(v, bool) and np.isfinite(v),
          "str": isinstance(v, str), "dict": isinstance(v, dict)}[kind]
    if not ok:
        raise ValueError(f"{where} is not a valid qwkboost model file: {key!r} must be a finite {kind}; got {shown(v)}")
    return v


def load_model(path, trusted_modules=None) -> Model:
    """Load a model written by :meth:`Model.save`.

    Every field is checked before the engine parses its booster: a truncated,
    edited, foreign or malformed file (not JSON, nested too deeply, too large, a
    field of the wrong type) gives a :class:`ValueError` of one line naming it,
    never a crash or a model that predicts NaN.

    Loading imports no module the file names, so it runs no code from it: the objective must be registered in
    this process (qwkboost's own are; import or register yours first), or its module allowed in
    ``trusted_modules``. The class the file names is checked first as an exact import path of ASCII Python
    identifiers (``"pkg.module:Class"``; no space, no empty part, no look-alike letter), and is refused in one
    line otherwise; what is checked is what is imported. Only a regular file is read (a FIFO or a device is
    refused without being opened).

    Parameters
    ----------
    path : str or Path
    trusted_modules : list of str, optional
        Modules whose objectives may be imported by the path the file names (``"mypkg"`` allows ``mypkg`` and
        every module under it), each written exactly as imported. Default: none. Allow only modules you trust:
        importing one runs its code.

    Raises
    ------
    ValueError
        If the file is not a valid qwkboost model, or its objective is neither registered in this process nor
        in a module allowed by ``trusted_modules``.
    """
    if not isinstance(path, (str, Path)):
        raise ValueError(f"path must be a file path (str or pathlib.Path); got {path!r}")
    trusted = check_trusted_modules(trusted_modules)
    path = Path(path)
    where = f"path {str(path)!r}"
    try:
        mode = os.stat(path).st_mode        # opens nothing: a FIFO is refused, not waited on
    except FileNotFoundError:
        raise ValueError(f"{where} does not exist") from None
    except OSError as exc:
        raise ValueError(f"{where} cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        raise ValueError(f"{where} is not a file (it is {file_kind(mode)}, not a regular file)")
    return _read_model(path, where, trusted, build=True)


def check_model_file(path, trusted_modules=None) -> None:
    """Refuse a model file as :func:`load_model` would, without building its booster: the file's JSON, its fields,
    its objective (registered, or its module allowed in ``trusted_modules``; no module is imported otherwise) and
    the booster text's nesting. For copying a model on (a blend's pipeline) without the seconds that parsing a
    large booster takes.

    Raises
    ------
    ValueError
        As :func:`load_model` does.
    """
    path = Path(path)
    _read_model(path, f"path {str(path)!r}", check_trusted_modules(trusted_modules), build=False)


def _read_model(path: Path, where: str, trusted: tuple[str, ...], build: bool) -> Model | None:
    """A model file read and turned into a model (``build=False``: checked only); any malformation is one
    ``ValueError`` naming the file."""
    data = read_regular(path, where, "a qwkboost model file")
    if data[:4] == ZIP_MAGIC:
        payload, raw, member = read_compact(data, where)
    else:
        payload, raw, member = parse_json(data, where, "a qwkboost model file"), None, None
    try:
        return _model_of(payload, where, trusted, build=build, compact=(raw, member) if data[:4] == ZIP_MAGIC
                         else None)
    except ValueError as exc:
        if where in str(exc):
            raise
        raise ValueError(f"{where}: {exc}") from None
    except (RecursionError, MemoryError, TypeError, KeyError, AttributeError, IndexError, OverflowError) as exc:
        reason = str(exc).splitlines()[0][:200] if str(exc) else ""
        raise ValueError(f"{where} is not a valid qwkboost model file ({type(exc).__name__}"
                         f"{': ' + reason if reason else ''})") from None


def _model_of(payload, where: str, trusted: tuple[str, ...], build: bool = True,
              compact: tuple[bytes | None, str | None] | None = None) -> Model | None:
    """The model of a model file's parsed JSON (see :func:`load_model`); ``build=False`` checks everything up to
    the booster's parsing and returns ``None``. ``compact``: a compact file's booster bytes and member name (its
    JSON is then the archive's header)."""
    if not isinstance(payload, dict) or payload.get("format") != "qwkboost-model":
        raise ValueError(f"{where} is not a qwkboost model file")
    version = payload.get("format_version")
    if version not in ((FORMAT_VERSION,) if compact else (1, 2, JSON_FORMAT_VERSION)):
        raise ValueError(f"{where} has model format version {shown(version)}; this qwkboost reads "
                         + (f"{FORMAT_VERSION} in a compact file" if compact else
                            f"1 to {JSON_FORMAT_VERSION} in a JSON file"))
    engine = _field(payload, "engine", "str", where)
    if engine not in ENGINES:
        raise ValueError(f"{where} names an unknown engine {shown(engine)}")
    raw_init = payload.get("init_score")
    if isinstance(raw_init, list):          # an objective with several outputs: one initial score each
        if not raw_init or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v)
                                   for v in raw_init):
            raise ValueError(f"{where} is not a valid qwkboost model file: 'init_score' must be finite numbers")
        init_score = raw_init
    else:
        init_score = _field(payload, "init_score", "number", where)
    num_rounds = _field(payload, "num_rounds", "int", where)
    best = _field(payload, "best_iteration", "int", where)
    if not 0 <= best <= num_rounds:
        raise ValueError(f"{where}: best_iteration {best} is not in [0, num_rounds={num_rounds}]")
    n_features = _field(payload, "n_features", "int", where, optional=True)
    if n_features is not None and n_features < 1:
        raise ValueError(f"{where}: n_features must be >= 1; got {n_features}")
    names = payload.get("feature_names")
    if names is not None and (not isinstance(names, list) or not all(isinstance(c, str) for c in names)
                              or (n_features is not None and len(names) != n_features)):
        raise ValueError(f"{where}: feature_names must be a list of {n_features} strings")
    offset = _field(payload, "label_offset", "number", where, optional=True) or 0.0
    spec = _field(payload, "objective", "dict", where)
    if not isinstance(spec.get("name"), str) or not isinstance(spec.get("params", {}), dict) \
            or not isinstance(spec.get("state", {}), dict):
        raise ValueError(f"{where}: 'objective' must hold a name, params and state")
    ref = saved_objective(spec["name"], spec.get("class"), trusted, where)
    objective = get_objective(ref, **spec.get("params", {})).set_state(spec.get("state", {}))
    lacking = [k for k in objective.state if not hasattr(objective, k)]
    if lacking:
        raise ValueError(f"{where}: the objective's state lacks {lacking}")
    adapter = get_engine(engine)
    data = _booster_data(payload, where, adapter, compact)
    if not build:
        return None
    try:
        booster = None if data is None else (adapter.from_bytes(data) if compact else adapter.load(data))
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    if booster is None and num_rounds > 0:
        raise ValueError(f"{where}: {num_rounds} rounds but no booster")
    if booster is not None:
        rounds, width = adapter.shape(booster)
        if rounds != num_rounds:
            raise ValueError(f"{where}: num_rounds is {num_rounds}, but the booster holds {rounds} rounds")
        if n_features is not None and width != n_features:
            raise ValueError(f"{where}: n_features is {n_features}, but the booster was trained on {width}")
    schema = None
    if payload.get("features") is not None:
        schema = FeatureSchema.from_dict(payload["features"], f"{where}: 'features'")
        if n_features is not None and schema.n_features != n_features:
            raise ValueError(f"{where}: 'features' describes {schema.n_features} columns, n_features is {n_features}")
    elif n_features is not None:
        schema = FeatureSchema.numeric(n_features, names)
    k = int(getattr(objective, "n_outputs_", 1))
    if (k > 1) != isinstance(init_score, list) or (k > 1 and len(init_score) != k):
        raise ValueError(f"{where}: 'init_score' must be {'one number' if k == 1 else f'{k} numbers'} for "
                         f"objective {objective.name!r}")
    evals = payload.get("evals_result")
    return Model(engine, objective, init_score, booster, num_rounds, best, evals if isinstance(evals, dict) else {},
                 label_offset=offset, schema=schema)


def _booster_data(payload: dict, where: str, adapter, compact) -> bytes | str | None:
    """A model file's booster, checked against its checksum and its nesting bounded: a compact file's bytes (its
    member named as the engine writes it), else the JSON's text; ``None`` for a model without one."""
    if compact:
        data, member = compact
        named = payload.get("booster_file")
        if named != member or (member is not None and member != f"booster.{adapter.booster_suffix}"):
            raise ValueError(f"{where}: its header names the booster {shown(named)}, the archive holds {shown(member)}"
                             f" (a {adapter.name} booster is 'booster.{adapter.booster_suffix}')")
    else:
        data = payload.get("booster")
        if data is not None and not isinstance(data, str):
            raise ValueError(f"{where}: 'booster' must be the engine's model text")
    if data is None:
        return None
    digest = payload.get("booster_sha256")
    raw = data if compact else data.encode()
    if (digest is not None or compact) and hashlib.sha256(raw).hexdigest() != digest:
        raise ValueError(f"{where}: the booster does not match its checksum (the file was truncated or edited)")
    # an engine's own parser may recurse without limit (XGBoost's ends the process)
    if compact and member.endswith(".ubj"):
        try:
            depth = ubjson_depth(data, MAX_JSON_DEPTH)
        except ValueError as exc:
            raise ValueError(f"{where}: the booster is not UBJSON an engine wrote ({exc})") from None
    else:
        text = data.decode("utf-8", "replace") if compact else data
        depth = json_depth(text) if text.lstrip()[:1] in ("{", "[") else 0
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"{where}: the booster nests deeper than {MAX_JSON_DEPTH} levels; it is not a model an "
                         "engine wrote")
    return data
