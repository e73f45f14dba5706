r"""SHAP values and importances of a model, a run's fold ensemble or a blend, in the objective's score space.

Every engine gives its own TreeSHAP through :meth:`qwkboost.engines.base.Engine.contributions` (XGBoost's
``pred_contribs``, LightGBM's ``pred_contrib``, CatBoost's ``ShapValues``, the native engine's
:mod:`qwkboost.native.treeshap`); this module is the one place that adds what the engines do not know of: the
objective's initial score :math:`F_0` and the label offset go into the bias, so that for every row

.. math:: \sum_j \phi_j(x) + b(x) = F(x) = F_0 + \sum_t f_t(x),

the model's raw score (:meth:`qwkboost.Model.predict_raw`; one per output for objectives with several). An
ensemble :math:`F = \sum_m w_m F_m` (a run's folds, :math:`w_m = 1/K`; a blend's members, their weights times
:math:`1/K_m`) has, by the linearity of Shapley values, :math:`\phi = \sum_m w_m \phi^{(m)}` and
:math:`b = \sum_m w_m b^{(m)}`, each member's values mapped to the ensemble's columns by name.

Importances: the normalised mean :math:`|\phi_j|` over the rows explained, and the normalised total split gain
of the trees (per output for objectives with several; CatBoost keeps no split gains and gives its
``PredictionValuesChange``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from qwkboost.data.columns import give_way
from qwkboost.data.features import EncodedFeatures
from qwkboost.engines.model import Model
from qwkboost.engines.registry import get_engine

__all__ = ["Explanation", "Ensemble", "explain", "explain_model", "explain_parts", "model_contributions", "output_names",
           "sample_rows"]


def model_contributions(model: Model, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(values, bias)`` of one model on rows ``X`` already encoded by its schema: :math:`F_0` and the label
    offset in the bias, so that ``values.sum(axis=1) + bias == model.predict_raw(X)``."""
    n, k = X.shape[0], model.n_outputs
    shape = (n, X.shape[1]) if k == 1 else (n, X.shape[1], k)
    if model.best_iteration == 0 or model.booster is None:
        bias = np.full(n, model.init_score) if k == 1 else np.tile(model.init_score, (n, 1))
        return np.zeros(shape), bias
    values, bias = get_engine(model.engine).contributions(model.booster, X, n_iter=model.best_iteration,
                                                          init_score=model.init_score - model.label_offset)
    return np.asarray(values, dtype=np.float64), np.asarray(bias, dtype=np.float64) + model.label_offset


def _model_gains(model: Model) -> np.ndarray:
    k = model.n_outputs
    if model.best_iteration == 0 or model.booster is None:
        return np.zeros(model.n_features if k == 1 else (model.n_features, k))
    return np.asarray(get_engine(model.engine).gains(model.booster, n_iter=model.best_iteration, n_outputs=k),
                      dtype=np.float64)


def _names(model: Model) -> list[str]:
    return list(model.feature_names) if model.feature_names else [f"f{j}" for j in range(model.n_features)]


@dataclass
class Explanation:
    """SHAP values of some rows, in the objective's score space.

    Attributes
    ----------
    values : ndarray of shape (n, n_features), or (n, n_features, n_outputs)
    bias : ndarray of shape (n,), or (n, n_outputs)
        ``values.sum(axis=1) + bias`` is the raw score of each row (:attr:`score`).
    feature_names : list of str
    data : DataFrame or None
        The rows explained, as given (for plots and tables).
    gain : ndarray of shape (n_features,) or (n_features, n_outputs)
        Total split gain per feature (CatBoost: its ``PredictionValuesChange``), weighted as the values are.
    outputs : list or None
        The outputs' names (classes) for an objective with several outputs.
    cuts, classes, labels : ndarray, ndarray, list or None
        The cut points, on the score's scale, with the classes they separate (and the user's labels, when
        words): the ordinal view (:mod:`qwkboost.explanations.ordinal`). ``None`` when the score is not cut directly
        (a class objective's raw scores) or for a lone model.
    info : dict
        What was explained (engine, objective, members).
    """

    values: np.ndarray
    bias: np.ndarray
    feature_names: list[str]
    data: Any = None
    gain: np.ndarray | None = None
    outputs: list | None = None
    cuts: np.ndarray | None = None
    classes: np.ndarray | None = None
    labels: list | None = None
    info: dict = field(default_factory=dict)

    @property
    def score(self) -> np.ndarray:
        """The raw score each row's values add up to: ``values.sum(axis=1) + bias``."""
        return self.values.sum(axis=1) + self.bias

    @property
    def n_outputs(self) -> int:
        return 1 if self.values.ndim == 2 else self.values.shape[2]

    def importance(self):
        """A DataFrame, one row per feature (per feature and output with several outputs), largest first:
        ``mean_abs_shap`` (in score units), ``shap_share`` (normalised to 1) and ``gain_share`` (normalised)."""
        import pandas as pd  # slow to import: pandas

        mean_abs = np.abs(self.values).mean(axis=0)
        gain = np.zeros_like(mean_abs) if self.gain is None else np.asarray(self.gain, dtype=np.float64)

        def share(a):
            total = a.sum(axis=0)
            return np.divide(a, total, out=np.zeros_like(a), where=total > 0)

        if self.n_outputs == 1:
            table = pd.DataFrame({"feature": self.feature_names, "mean_abs_shap": mean_abs,
                                  "shap_share": share(mean_abs), "gain_share": share(gain)})
            return table.sort_values("mean_abs_shap", ascending=False, kind="stable").reset_index(drop=True)
        outputs = self.outputs if self.outputs is not None else list(range(self.n_outputs))
        parts = [pd.DataFrame({"feature": self.feature_names, "output": o, "mean_abs_shap": mean_abs[:, k],
                               "shap_share": share(mean_abs)[:, k], "gain_share": share(gain)[:, k]})
                 for k, o in enumerate(outputs)]
        table = pd.concat(parts, ignore_index=True)
        return table.sort_values(["output", "mean_abs_shap"], ascending=[True, False], kind="stable") \
            .reset_index(drop=True)

    def frame(self, ids=None, id_name: str | None = None, reserved=()):
        """The values as a DataFrame: the rows' ids, one column per feature (``<feature>@<output>`` with several
        outputs), ``bias`` and ``score``.

        Your columns keep their names: the id column ``id_name`` and the features. qwkboost's own columns
        (``bias``, ``score``, and ``row``, the rows' positions, when no ``id_name`` is given) take the suffix
        ``_qwkboost`` where one of yours has that name (:mod:`qwkboost.data.columns`): a feature called ``score``
        keeps its SHAP values under ``score``, beside the model's ``score_qwkboost``. ``reserved``: further
        names of yours to keep clear of (a run's label, entity and weight columns), so that qwkboost's columns are
        named as in the run's other files.

        Raises
        ------
        ValueError
            If ``id_name`` is also a feature's name (one column cannot hold both).
        """
        import pandas as pd  # slow to import: pandas

        n = self.values.shape[0]
        outputs = None if self.n_outputs == 1 else \
            (self.outputs if self.outputs is not None else list(range(self.n_outputs)))

        def forms(name: str) -> list[str]:
            return [name] if outputs is None else [f"{name}@{o}" for o in outputs]

        features = [c for f in self.feature_names for c in forms(f)]
        if id_name is not None and id_name in features:
            raise ValueError(f"the id column {id_name!r} is also a feature's column; name the rows by another column")
        taken = set(features) | ({id_name} if id_name is not None else set()) | {str(r) for r in reserved if r}
        id_col = id_name if id_name is not None else give_way("row", taken)
        bias, score = give_way("bias", taken, forms), give_way("score", taken, forms)
        cols: dict = {id_col: np.arange(n) if ids is None else np.asarray(ids)}
        if outputs is None:
            cols.update({f: self.values[:, j] for j, f in enumerate(self.feature_names)})
            cols[bias], cols[score] = self.bias, self.score
        else:
            for k, o in enumerate(outputs):
                cols.update({f"{f}@{o}": self.values[:, j, k] for j, f in enumerate(self.feature_names)})
                cols[f"{bias}@{o}"], cols[f"{score}@{o}"] = self.bias[:, k], self.score[:, k]
        return pd.DataFrame(cols)


def explain_parts(parts: Sequence[tuple[Model, float]], X, *, outputs=None, info=None, name: str = "X") -> Explanation:
    """The explanation of :math:`\\sum_m w_m F_m` on rows ``X`` (a DataFrame, matched to each model's columns by
    name, or an array in the first model's columns): see the module's notes. ``name`` is what messages call
    ``X`` (``"data.path='new.csv'"``).

    Raises
    ------
    ValueError
        For no models, or models with different numbers of outputs.
    """
    parts = [(m, float(w)) for m, w in parts]
    if not parts:
        raise ValueError("nothing to explain: no models")
    ks = {m.n_outputs for m, _ in parts}
    if len(ks) > 1:
        raise ValueError(f"the models have different numbers of outputs ({sorted(ks)}); their SHAP values do not add")
    k = ks.pop()
    names: list[str] = []
    for m, _ in parts:
        names += [f for f in _names(m) if f not in names]
    col = {f: j for j, f in enumerate(names)}
    n = len(X)
    values = np.zeros((n, len(names)) if k == 1 else (n, len(names), k))
    bias = np.zeros(n if k == 1 else (n, k))
    gain = np.zeros(len(names) if k == 1 else (len(names), k))

    for m, w in parts:
        if isinstance(X, EncodedFeatures):
            Xe = X.X
        else:
            Xe = m.schema.encode(X, name) if m.schema is not None else np.asarray(X, dtype=np.float64)
        v, b = model_contributions(m, Xe)
        idx = [col[f] for f in _names(m)]
        values[:, idx] += w * v
        bias += w * b
        gain[idx] += w * _model_gains(m)
    data = X.schema.decode(X.X) if isinstance(X, EncodedFeatures) else X if hasattr(X, "columns") else None
    return Explanation(values, bias, names, data, gain, outputs, info=info or {})


def explain_model(model: Model, X, name: str = "X") -> Explanation:
    """The explanation of one model on rows ``X`` (``name``: what messages call them)."""
    return explain_parts([(model, 1.0)], X, outputs=output_names(model),
                         info={"engine": model.engine, "objective": model.objective.name}, name=name)


def output_names(model: Model) -> list | None:
    """The classes a model's outputs stand for (objectives with several outputs), else ``None``."""
    if model.n_outputs == 1:
        return None
    lo = float(getattr(model.objective, "lo_", 0.0))
    return [float(lo + k) for k in range(model.n_outputs)]


@dataclass
class Ensemble:
    """What a run or a blend is to its explanation: models and weights, and the cut points of its score.

    Attributes
    ----------
    parts : list of (Model, float)
        The score is :math:`\\sum_m w_m F_m` of the models' raw scores.
    cuts, classes, labels
        The cut points on the score's scale with the classes (and the user's labels) they separate; ``None``
        when the score is not cut directly.
    info : dict
    """

    parts: list
    cuts: np.ndarray | None = None
    classes: np.ndarray | None = None
    labels: list | None = None
    info: dict = field(default_factory=dict)


def sample_rows(X, max_rows: int | None, seed: int = 0):
    """``X``, or ``max_rows`` of its rows drawn with ``seed`` (in their order), and their positions."""

    n = X.X.shape[0] if isinstance(X, EncodedFeatures) else len(X)
    if max_rows is None or n <= max_rows:
        return X, np.arange(n)
    pos = np.sort(np.random.RandomState(seed).choice(n, int(max_rows), replace=False))
    if isinstance(X, EncodedFeatures):
        return EncodedFeatures(X.X[pos], X.schema), pos
    return (X.iloc[pos] if hasattr(X, "iloc") else np.asarray(X)[pos]), pos


def explain(obj, X, *, max_rows: int | None = 2000, seed: int = 0, name: str = "X") -> Explanation:
    r"""SHAP values and importances of a model, a run or a blend on rows ``X``, in the objective's score space.

    Parameters
    ----------
    obj : Model, FittedPipeline, FittedBlend or QWKClassifier
        A trained model; a run's pipeline (``qb.load_run(...)``: its fold models, each weighing :math:`1/K`);
        a blend's pipeline (method ``weights`` or ``mean``: each member's folds weighing its weight over
        :math:`K`); a fitted :class:`~qwkboost.QWKClassifier`.
    X : DataFrame or array
        The rows to explain; columns are matched to each model's by name.
    max_rows : int or None, default 2000
        Explain at most this many rows, drawn with ``seed`` (``None``: every row).
    seed : int, default 0
    name : str, default "X"
        What messages call the rows (``experiments/explain.py`` names the user's file).

    Returns
    -------
    Explanation
        ``values.sum(axis=1) + bias`` equals the raw score of every row: the model's
        :meth:`~qwkboost.Model.predict_raw`, the run's or blend's score.

    Raises
    ------
    ValueError
        For a blend whose score is not a weighted sum of its members' scores (``rank_mean``, ``vote``), or
        members whose score is not their raw score (class objectives), naming them.
    TypeError
        For anything else.
    """
    X, _ = sample_rows(X, max_rows, seed)
    if isinstance(obj, Model):
        return explain_model(obj, X, name)
    if hasattr(obj, "pipeline_"):
        obj = obj.pipeline_
    ensemble = getattr(obj, "explain_parts", None)
    if ensemble is None:
        raise TypeError(f"cannot explain a {type(obj).__name__}; give a Model, a run's pipeline (qb.load_run), a "
                        "blend's pipeline or a fitted QWKClassifier")
    ens = ensemble()
    exp = explain_parts(ens.parts, X, outputs=output_names(ens.parts[0][0]), info=ens.info, name=name)
    exp.cuts, exp.classes, exp.labels = ens.cuts, ens.classes, ens.labels
    return exp
