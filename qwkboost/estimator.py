"""One scikit-learn estimator for the whole job, on every engine: :class:`QWKClassifier`.

``fit`` cross-validates the engine on the chosen objective (early stopping on
each validation fold), fits cut points on the out-of-fold scores, and keeps the
fold models. ``predict`` averages the fold models' scores and cuts them:
classes on the labels' own scale. ``score`` is QWK. It works in ``Pipeline``,
``cross_val_score`` and ``GridSearchCV``, and takes ``sample_weight``.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from qwkboost import defaults
from qwkboost.cv.crossval import cross_validate
from qwkboost.data.dataset import class_range
from qwkboost.data.features import EncodedFeatures, FeatureSchema
from qwkboost.data.labels import ClassLabels, warn_given_order
from qwkboost.engines.registry import ENGINES
from qwkboost.evaluation.metrics import qwk
from qwkboost.evaluation.thresholds import METHODS, apply_thresholds, fit_thresholds
from qwkboost.tracking.pipeline import FittedPipeline
from qwkboost.validation import check_int, check_mapping, check_seed, check_weight, shown

__all__ = ["QWKClassifier"]


class QWKClassifier(ClassifierMixin, BaseEstimator):
    """Ordinal classifier: boosted scores on a QWK objective, cut into classes at out-of-fold cut points.

    Parameters
    ----------
    engine : {"lightgbm", "xgboost", "native", "catboost"}, optional
        ``None``: the project's default engine (:func:`qwkboost.defaults.default_engine`).
    objective : str, optional
        A registered objective (or an import path, see :func:`qwkboost.objectives.get`); ``None``: the project's
        default (:func:`qwkboost.defaults.default_objective`).
    params : dict, optional
        The engine's own parameters; ``None``: qwkboost's defaults for the engine and objective
        (:func:`qwkboost.defaults.engine_params`), as :func:`qwkboost.train` takes them.
    objective_params : dict, optional
    num_boost_round : int, default 1000
        Rounds per fold, at most; each fold early-stops on its validation rows.
    early_stopping_rounds : int, default 50
    early_stopping_min_delta : float, optional
        The smallest gain of the validation metric that counts as an improvement
        (see :func:`qwkboost.train`); ``None``: the objective's own.
    n_splits : int, default 5
        Folds of the internal cross-validation (stratified by label). On data with
        fewer rows in some class, the folds are as many as that class has rows
        (at least 2), with a warning.
    n_repeats : int, default 1
        K-fold splits with different seeds (as scikit-learn's ``RepeatedStratifiedKFold``):
        out-of-fold scores are averaged over them, and every fold model is kept.
    thresholds : {"exact", "nelder_mead", "distribution", "round"}, default "exact"
        How the cut points are fitted on the out-of-fold scores.
    categorical : list, optional
        Further categorical columns; string and ``category`` columns of a DataFrame are categorical anyway.
    random_state : int, default 0
        Fold assignment and engine seeds.
    n_jobs : int, optional
        Engine threads (default: the cores free when training starts).
    classes : list, optional
        The classes in order, lowest first (as scikit-learn's ``OrdinalEncoder(categories=...)``), for labels
        that are words: ``classes=["low", "medium", "high"]``. A label of ``y`` outside it is refused, naming
        it; a class that ``y`` never holds stays a class of the scale. Default: the order of an ordered pandas
        ``Categorical`` ``y``; else numbers on their own scale, and words in sorted order, with a warning.

    Attributes
    ----------
    classes_ : ndarray
        The classes in their order: ``classes`` when given; for numbers, every whole
        number from the lowest label to the highest (QWK weighs label differences, so
        an unseen value in between is a class); for other labels, the order of an
        ordered ``Categorical``, else the sorted distinct labels.
    pipeline_ : FittedPipeline
        The fold models, their average, the cut points and the feature schema.
    oof_score_ : ndarray
        Out-of-fold scores of the training rows.
    n_features_in_, feature_names_in_
        As in scikit-learn.

    Notes
    -----
    Labels are ordinal. Numbers keep their scale; other labels (strings) are
    ranked in their order (``classes``), one step apart.
    """

    def __init__(self, engine=None, objective=None, params=None, objective_params=None,
                 num_boost_round=1000, early_stopping_rounds=50, n_splits=5, thresholds="exact", categorical=None,
                 random_state=0, n_jobs=None, n_repeats=1, early_stopping_min_delta=None, classes=None):
        self.engine = engine
        self.objective = objective
        self.params = params
        self.objective_params = objective_params
        self.num_boost_round = num_boost_round
        self.early_stopping_rounds = early_stopping_rounds
        self.n_splits = n_splits
        self.thresholds = thresholds
        self.categorical = categorical
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.n_repeats = n_repeats
        self.early_stopping_min_delta = early_stopping_min_delta
        self.classes = classes

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    # -- input -----------------------------------------------------------------
    def _features(self, X, reset: bool):
        """Arrays through scikit-learn's checks; a DataFrame with text or category columns as it is."""
        frame = hasattr(X, "dtypes") and hasattr(X, "columns")
        if frame and (self.categorical or any(t.kind not in "biuf" for t in X.dtypes)):
            validate_data(self, X, reset=reset, skip_check_array=True)
            return X
        return validate_data(self, X, reset=reset, ensure_all_finite="allow-nan", dtype=np.float64)

    def _positions(self, y) -> np.ndarray:
        """Labels as points of the ordinal scale (their values, or their rank among ``classes_``)."""
        if self._numeric:
            return np.asarray(y, dtype=np.float64)
        return ClassLabels(tuple(self.classes_)).encode(y, "y")

    def _order(self, y_raw, labels: np.ndarray) -> ClassLabels | None:
        """The classes' order: ``classes``, an ordered Categorical's, or ``None`` (numbers, or sorted words)."""
        import pandas as pd  # slow to import: pandas

        if self.classes is not None:
            given = ClassLabels.of(self.classes, "classes")
            warn_given_order(given, y_raw, "classes", "y")
            return given
        dtype = getattr(y_raw, "dtype", None)
        if isinstance(dtype, pd.CategoricalDtype) and dtype.ordered:
            return ClassLabels(tuple(dtype.categories))
        if labels.dtype.kind not in "biuf":
            warnings.warn(f"y holds labels that are words, ranked here in sorted order ({', '.join(map(str, labels[:6]))}"
                          f"{', ...' if labels.size > 6 else ''}); if your scale runs otherwise, give classes=[...] "
                          "lowest first, or an ordered pandas Categorical", UserWarning, stacklevel=3)
        return None

    # -- fitting ---------------------------------------------------------------
    def fit(self, X, y, sample_weight=None, groups=None):
        """Cross-validate, fit cut points on the out-of-fold scores, keep the fold models; return ``self``.

        ``groups`` gives the entity of every row (a user, a patient): an entity's
        rows stay in one fold, as with scikit-learn's ``StratifiedGroupKFold``.
        """
        engine = defaults.default_engine() if self.engine is None else self.engine
        objective = defaults.default_objective() if self.objective is None else self.objective
        if engine not in ENGINES:
            raise ValueError(f"engine={engine!r} is unknown; choose one of: {', '.join(ENGINES)}")
        if self.thresholds not in METHODS:
            raise ValueError(f"thresholds={self.thresholds!r} is unknown; choose one of: {', '.join(METHODS)}")
        n_splits = check_int(self.n_splits, "n_splits", 2)
        n_repeats = check_int(self.n_repeats, "n_repeats", 1)
        seed = check_seed(self.random_state, "random_state")
        X = self._features(X, reset=True)
        y_raw = y
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        w0 = None if sample_weight is None else check_weight(sample_weight, len(y))
        labels, counts = np.unique(y if w0 is None else y[w0 > 0], return_counts=True)
        if labels.size < 2:
            raise ValueError(f"y has only one class ({shown(labels[0])}"
                             + ("" if w0 is None else " among the rows of positive weight")
                             + "); an ordinal classifier needs at least 2 classes")
        order = self._order(y_raw, labels)
        self._numeric = order is None and labels.dtype.kind in "biuf"
        if self._numeric and np.any(labels != np.round(labels)):
            raise ValueError("numeric labels must be whole numbers (ordinal classes)")
        if order is not None:
            self.classes_ = order.decode(np.arange(order.n_classes))
        else:
            self.classes_ = class_range(labels.astype(np.float64)) if self._numeric else labels
        if self._numeric and labels.dtype.kind in "biu":
            self.classes_ = self.classes_.astype(labels.dtype)
        pos = self._positions(y)
        w = check_weight(sample_weight, pos.size)
        if counts.min() < n_splits:
            k = max(2, int(counts.min()))
            warnings.warn(f"n_splits={n_splits} exceeds the rows of the rarest class ({counts.min()}); using "
                          f"{k} folds" + ("" if counts.min() >= 2 else ", not stratified"), UserWarning)
            n_splits = k
        if isinstance(X, np.ndarray) and hasattr(self, "feature_names_in_"):    # a numeric DataFrame keeps its names
            import pandas as pd  # slow to import: pandas

            X = pd.DataFrame(X, columns=self.feature_names_in_)
        schema, Xe = FeatureSchema.fit_encode(X, self.categorical, "X")
        cv = cross_validate(Xe, pos, None, engine=engine, objective=objective,
                            params=None if self.params is None else check_mapping(self.params, "params"),
                            objective_params=None if self.objective_params is None else
                            check_mapping(self.objective_params, "objective_params"),
                            num_boost_round=self.num_boost_round, early_stopping_rounds=self.early_stopping_rounds,
                            n_splits=n_splits, stratified=bool(counts.min() >= 2), seed=seed, progress=False,
                            n_jobs=self.n_jobs, schema=schema, sample_weight=w, groups=groups, repeats=n_repeats,
                            early_stopping_min_delta=self.early_stopping_min_delta)
        scale = np.arange(len(self.classes_), dtype=np.float64) if not self._numeric else \
            self.classes_.astype(np.float64)
        lo, k = float(scale[0]), scale.size
        idx = (pos - lo).astype(np.int64)
        if self.thresholds == "round":
            cuts = scale[:-1] + 0.5
        else:
            cuts = fit_thresholds(self.thresholds, cv.oof - lo, idx, n_classes=k, sample_weight=w) + lo
        self.pipeline_ = FittedPipeline(cv.models, schema, cuts, scale,
                                        info={"engine": engine, "objective": str(objective),
                                              "thresholds": self.thresholds},
                                        labels=None if self._numeric else list(self.classes_))
        self.oof_score_ = cv.oof
        return self

    # -- prediction ------------------------------------------------------------
    def _encoded(self, X) -> EncodedFeatures:
        check_is_fitted(self, "pipeline_")
        X = self._features(X, reset=False)
        return EncodedFeatures(self.pipeline_.schema.encode(X, "X"), self.pipeline_.schema)

    def predict_score(self, X) -> np.ndarray:
        """The fold models' mean score, on the labels' scale (ranks for non-numeric labels)."""
        enc = self._encoded(X)
        return self.pipeline_.predict_score(enc)

    def predict(self, X) -> np.ndarray:
        """Classes on the labels' own scale."""
        s = self.predict_score(X)
        idx = apply_thresholds(s, self.pipeline_.cuts)
        return self.classes_[idx]

    def score(self, X, y, sample_weight=None) -> float:
        """Quadratic weighted kappa of :meth:`predict` against ``y``."""
        check_is_fitted(self, "pipeline_")
        pred = self._positions(self.predict(X))
        truth = self._positions(column_or_1d(y))
        base = float(min(pred.min(), truth.min()))
        return qwk((truth - base).astype(np.int64), (pred - base).astype(np.int64), sample_weight=sample_weight)
