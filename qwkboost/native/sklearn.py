"""A scikit-learn estimator around the native engine.

:class:`NativeGBDTRegressor` takes the engine's parameters (XGBoost names) as
constructor arguments, an objective by registry name, and ``n_estimators``
boosting rounds. NaN in ``X`` is a missing value (``allow_nan`` tag).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from qwkboost.native.boosting import train_booster
from qwkboost.native.params import DEFAULTS as D
from qwkboost.native.params import PARAMS
from qwkboost.objectives import get as get_objective
from qwkboost.validation import check_1d, check_int, check_same_length, check_seed

__all__ = ["NativeGBDTRegressor"]


class NativeGBDTRegressor(RegressorMixin, BaseEstimator):
    """Histogram gradient-boosted trees (NumPy), scikit-learn style.

    Every engine parameter of :data:`qwkboost.native.params.PARAMS` is an
    argument here, with the same default (listed below from that table).

    Parameters
    ----------
    objective : str, default "squared_error"
        A registered objective name (see :func:`qwkboost.objectives.available`).
    n_estimators : int, default 100
        Boosting rounds.
    random_state : int, default 0
        Seed of binning subsample and row/column sampling.
    categorical_features : list of int or str, or array of bool, optional
        Columns of category codes (whole numbers >= 0, NaN missing), by position, by name
        (with a DataFrame) or as a mask, as scikit-learn's ``HistGradientBoostingRegressor``
        takes them: split by category sets (:mod:`qwkboost.native.categorical`).

    Attributes
    ----------
    booster_ : NativeBooster
    objective_ : Objective
        The fitted objective.
    n_features_in_ : int
    feature_importances_ : ndarray
        Total split gain per feature, normalised to sum to 1.
    """

    def __init__(self, objective="squared_error", n_estimators=100, learning_rate=D["learning_rate"],
                 max_depth=D["max_depth"], max_leaves=D["max_leaves"], grow_policy=D["grow_policy"],
                 reg_lambda=D["reg_lambda"], reg_alpha=D["reg_alpha"], gamma=D["gamma"], prune=D["prune"],
                 min_child_weight=D["min_child_weight"], min_samples_leaf=D["min_samples_leaf"],
                 subsample=D["subsample"], colsample_bytree=D["colsample_bytree"],
                 sampling_method=D["sampling_method"], top_rate=D["top_rate"], other_rate=D["other_rate"],
                 cat_smooth=D["cat_smooth"], cat_l2=D["cat_l2"], max_cat_threshold=D["max_cat_threshold"],
                 max_cat_to_onehot=D["max_cat_to_onehot"], min_data_per_group=D["min_data_per_group"],
                 monotone_constraints=D["monotone_constraints"], max_bin=D["max_bin"],
                 min_data_in_bin=D["min_data_in_bin"],
                 bin_construct_sample_cnt=D["bin_construct_sample_cnt"], enable_bundle=D["enable_bundle"],
                 max_conflict_rate=D["max_conflict_rate"], refit=D["refit"], refit_iter=D["refit_iter"],
                 n_jobs=D["n_jobs"], random_state=0, categorical_features=None):
        self.objective = objective
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.max_leaves = max_leaves
        self.grow_policy = grow_policy
        self.reg_lambda = reg_lambda
        self.reg_alpha = reg_alpha
        self.gamma = gamma
        self.prune = prune
        self.min_child_weight = min_child_weight
        self.min_samples_leaf = min_samples_leaf
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.sampling_method = sampling_method
        self.top_rate = top_rate
        self.other_rate = other_rate
        self.cat_smooth = cat_smooth
        self.cat_l2 = cat_l2
        self.max_cat_threshold = max_cat_threshold
        self.max_cat_to_onehot = max_cat_to_onehot
        self.min_data_per_group = min_data_per_group
        self.monotone_constraints = monotone_constraints
        self.max_bin = max_bin
        self.min_data_in_bin = min_data_in_bin
        self.bin_construct_sample_cnt = bin_construct_sample_cnt
        self.enable_bundle = enable_bundle
        self.max_conflict_rate = max_conflict_rate
        self.refit = refit
        self.refit_iter = refit_iter
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.categorical_features = categorical_features

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def _engine_params(self) -> dict:
        return {p.name: getattr(self, p.name) for p in PARAMS}

    def _categorical(self, n_features: int) -> list[int]:
        """``categorical_features`` as column positions."""
        cf = self.categorical_features
        if cf is None:
            return []
        arr = np.asarray(cf)
        if arr.dtype == bool:
            if arr.shape != (n_features,):
                raise ValueError(f"categorical_features as a mask must have {n_features} entries; got {arr.shape}")
            return [int(j) for j in np.flatnonzero(arr)]
        names = getattr(self, "feature_names_in_", None)
        out = []
        for c in np.atleast_1d(arr).tolist():
            if isinstance(c, str):
                if names is None or c not in list(names):
                    raise ValueError(f"categorical_features: {c!r} is not a column name of X")
                out.append(list(names).index(c))
            elif isinstance(c, int) and 0 <= c < n_features:
                out.append(c)
            else:
                raise ValueError(f"categorical_features: {c!r} is not a column position in [0, {n_features})")
        return sorted(set(out))

    def fit(self, X, y, eval_set=None, early_stopping_rounds=None):
        """Fit on ``X`` (n_samples, n_features) and ``y``; return ``self``."""
        if y is not None and np.asarray(y).dtype.kind in "USO":
            check_1d(y, "y")        # labels that are words: named (a regressor needs numbers), not numpy's TypeError
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", dtype=np.float64, y_numeric=True)
        categorical = self._categorical(X.shape[1])
        n_estimators = check_int(self.n_estimators, "n_estimators", 0)
        obj = get_objective(self.objective)
        if obj.ordinal and np.any(y != np.round(y)):
            raise ValueError(f"objective {obj.name!r} needs whole-numbered ordinal labels; y holds fractional "
                             "values (use objective='squared_error' for a continuous target)")
        obj.fit(y)
        if isinstance(self.random_state, (int, np.integer)) and not isinstance(self.random_state, bool):
            seed = check_seed(self.random_state, "random_state")
        elif self.random_state is None or isinstance(self.random_state, np.random.RandomState):
            seed = int(check_random_state(self.random_state).randint(2**31 - 1))
        else:
            raise ValueError(f"random_state must be an integer, a numpy RandomState or None; got "
                             f"{self.random_state!r}")
        if early_stopping_rounds is not None:
            early_stopping_rounds = check_int(early_stopping_rounds, "early_stopping_rounds", 1)
            if eval_set is None:
                raise ValueError("early_stopping_rounds needs an eval_set to score")
        if eval_set is not None:
            if not (isinstance(eval_set, (tuple, list)) and len(eval_set) == 2):
                raise ValueError("eval_set must be a pair (X_val, y_val)")
            Xv, yv = eval_set
            Xv = validate_data(self, Xv, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
            yv = check_1d(yv, "eval_set y")
            check_same_length(Xv, yv, "eval_set X", "eval_set y")
            eval_set = (Xv, yv)
        names = getattr(self, "feature_names_in_", None)
        booster, _, best, evals = train_booster(X, y, obj, self._engine_params(), n_estimators,
                                                eval_set, early_stopping_rounds, (), seed, categorical=categorical,
                                                names=None if names is None else list(names))
        self.booster_ = booster
        self.objective_ = obj
        self.best_iteration_ = best
        self.evals_result_ = evals
        return self

    def predict(self, X):
        """Label-space scores of the best iteration."""
        check_is_fitted(self, "booster_")
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
        return self.booster_.predict(X, self.best_iteration_)

    def staged_predict(self, X):
        """Yield the prediction after each boosting round."""
        check_is_fitted(self, "booster_")
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
        yield from self.booster_.staged_predict(X)

    @property
    def feature_importances_(self) -> np.ndarray:
        check_is_fitted(self, "booster_")
        imp = self.booster_.feature_importance("gain")
        total = imp.sum()
        return imp / total if total > 0 else imp


NativeGBDTRegressor.__doc__ += "\n    Engine parameters (:data:`qwkboost.native.params.PARAMS`)::\n\n" + "\n".join(
    f"        {p.name:<26}{p.default!r:<12}{p.doc}" for p in PARAMS) + "\n"
