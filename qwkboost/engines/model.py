"""The trained :class:`Model` every engine returns, and its JSON persistence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from qwkboost.objectives import Objective, get as get_objective
from qwkboost.validation import check_features

__all__ = ["Model", "load_model", "FORMAT_VERSION"]

FORMAT_VERSION = 1


class Model:
    r"""A boosted model with its objective and starting score.

    Scores are in label space: :math:`F(x) = F_0 + \sum_{t \le T} f_t(x)`, where
    :math:`F_0` is the objective's initial score and :math:`T` the best
    iteration. Every engine's adapter adds :math:`F_0` back at prediction, so
    nobody shifts labels by hand.

    Attributes
    ----------
    engine : str
        ``"xgboost"``, ``"lightgbm"`` or ``"native"``.
    objective : Objective
        The fitted objective.
    init_score : float
        :math:`F_0`.
    booster : object
        The engine's own model (``xgboost.Booster``, ``lightgbm.Booster`` or
        ``qwkboost.native.NativeBooster``); ``None`` after zero rounds on LightGBM.
    num_rounds : int
        Boosting rounds trained.
    best_iteration : int
        Number of rounds :meth:`predict` uses by default (1-based, as in
        LightGBM): the best round under early stopping, else ``num_rounds``.
    evals_result : dict
        Learning curves, ``{"train": {metric: [...]}, "valid": {metric: [...]}}``.
    """

    def __init__(self, engine: str, objective: Objective, init_score: float, booster: Any,
                 num_rounds: int, best_iteration: int, evals_result: dict | None = None,
                 n_features: int | None = None):
        self.engine = engine
        self.objective = objective
        self.init_score = float(init_score)
        self.booster = booster
        self.num_rounds = int(num_rounds)
        self.best_iteration = int(best_iteration)
        self.evals_result = evals_result or {}
        self.n_features = n_features

    @property
    def learning_curve(self) -> dict[str, list[float]]:
        """Metric per round for each eval set, e.g. ``{"train": [...], "valid": [...]}``."""
        name = self.objective.metric_name
        return {k: list(v.get(name, [])) for k, v in self.evals_result.items()}

    def predict(self, X, num_iteration: int | None = None) -> np.ndarray:
        """Scores in label space using the first ``num_iteration`` rounds (default: best).

        Raises
        ------
        ValueError
            If ``X`` is malformed or has the wrong number of features, or
            ``num_iteration`` is out of range.
        """
        from qwkboost.engines import get_engine

        X = check_features(X)
        if self.n_features is not None and X.shape[1] != self.n_features:
            raise ValueError(f"X has {X.shape[1]} features but the model was trained on {self.n_features}")
        n_iter = self.best_iteration if num_iteration is None else int(num_iteration)
        if not 0 <= n_iter <= self.num_rounds:
            raise ValueError(f"num_iteration must be in [0, {self.num_rounds}]; got {num_iteration}")
        if n_iter == 0 or self.booster is None:
            return np.full(X.shape[0], self.init_score)
        return get_engine(self.engine).predict_raw(self.booster, X, n_iter, self.init_score)

    def save(self, path) -> Path:
        """Write the model as one JSON file (no pickle); return the path."""
        from qwkboost.engines import get_engine

        path = Path(path)
        payload = {
            "format": "qwkboost-model",
            "format_version": FORMAT_VERSION,
            "engine": self.engine,
            "objective": {
                "name": self.objective.name,
                "params": self.objective.get_params(),
                "state": self.objective.get_state(),
            },
            "init_score": self.init_score,
            "num_rounds": self.num_rounds,
            "best_iteration": self.best_iteration,
            "n_features": self.n_features,
            "evals_result": self.evals_result,
            "booster": None if self.booster is None else get_engine(self.engine).dump(self.booster),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload))
        return path

    def __repr__(self) -> str:
        return (f"Model(engine={self.engine!r}, objective={self.objective.name!r}, "
                f"init_score={self.init_score:.6g}, best_iteration={self.best_iteration}/{self.num_rounds})")


def load_model(path) -> Model:
    """Load a model written by :meth:`Model.save`.

    Raises
    ------
    ValueError
        If the file is not a qwkboost model, or its objective is not registered
        in this process (register custom objectives before loading).
    """
    from qwkboost.engines import get_engine

    path = Path(path)
    if not path.exists():
        raise ValueError(f"path {str(path)!r} does not exist")
    try:
        payload = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"path {str(path)!r} is not a qwkboost model file (invalid JSON: {exc})") from None
    if not isinstance(payload, dict) or payload.get("format") != "qwkboost-model":
        raise ValueError(f"path {str(path)!r} is not a qwkboost model file")
    spec = payload["objective"]
    objective = get_objective(spec["name"], **spec["params"]).set_state(spec["state"])
    engine = get_engine(payload["engine"])
    booster = None if payload["booster"] is None else engine.load(payload["booster"])
    return Model(payload["engine"], objective, payload["init_score"], booster, payload["num_rounds"],
                 payload["best_iteration"], payload.get("evals_result"), payload.get("n_features"))
