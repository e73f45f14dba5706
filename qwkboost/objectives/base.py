r"""The :class:`Objective` contract every engine consumes.

An objective is defined once, in label space, and all engines call the same
four things:

* :meth:`Objective.fit` -- statistics of the training labels;
* :meth:`Objective.init_score` -- the constant the boosting starts from;
* :meth:`Objective.grad_hess` -- :math:`g_k = \partial L / \partial F_k` and a
  positive :math:`h_k` for every row;
* :meth:`Objective.metric` -- the evaluation metric used for early stopping.

**Several outputs.** An objective may score each row with ``K`` outputs (class
scores): it sets ``n_outputs_`` in :meth:`Objective.fit`, its initial score is
a vector of length ``K``, and scores, gradients and hessians are ``(n, K)``
arrays. :meth:`Objective.decode` turns scores into one continuous ordinal
score per row (the expected class for a probabilistic objective; the score
itself for a one-output objective): cross-validation, cut points, QWK and
plots all work on it. Probabilistic objectives also give
:meth:`Objective.predict_proba`.

**What the hessian is.** ``hessian_kind`` says whether :meth:`grad_hess`'s
hessian is ``"exact"`` (the loss's true diagonal curvature), ``"constant"`` or
``"approximate"`` (a positive stand-in), so that engines need not guess it
from the values.

:meth:`Objective.loss` is the scalar the gradient descends; the native engine
uses it for line searches.

**Rows or sums.** ``gradient_needs`` says what a row's gradient depends on:
``"rows"`` -- only its own label and score (given the fitted state), so any
subset of rows can be processed alone; ``"sums"`` -- also sums over every
training row (extended QWK's numerator and denominator); ``None`` (the default) -- the objective does not say,
and no engine computes its rows apart where that could change the gradient (see
:mod:`qwkboost.engines.base`). A distributed engine
gives such an objective an :attr:`Objective.allreduce` (the sum of an array
over all workers), and the objective passes its partial sums through
:meth:`Objective.global_sums`; on one machine that is the identity, and the
code path is unchanged. ``allreduce_ready`` says whether an objective that
needs sums does so (one that does not cannot train distributed). The metric
is made global the same way: :meth:`Objective.metric_sums` gives sums over a
worker's rows from which :meth:`Objective.metric_from_sums` computes the metric
of all rows, once the sums are added over the workers.

**Once a round, then row by row.** An objective that needs sums (or a state it learns while boosting, such
as ordinal logit's cut points) may say what they are: :meth:`Objective.round_state` computes them once a
round at every training row's scores, and advances what the objective learns exactly as :meth:`grad_hess`
would. Given them, each row's gradient depends only on its own label and score, so an engine that asks for its
rows in blocks (CatBoost) computes every block alone (:mod:`qwkboost.engines.catboost_kernels`). The default,
``None``, says the objective has no such form; engines then call :meth:`grad_hess` on every row.

**Sample weights.** Each method may take ``sample_weight`` (one weight per
row). The built-in objectives weigh every sum by it, so that with integer
weights they equal the data with rows repeated. An objective whose
``grad_hess`` has no ``sample_weight`` argument still trains with weights:
the engines multiply its gradients and hessians by them, which is right for a
loss that is a sum over rows (not for one like extended QWK, whose rows meet
in its sums); its ``metric`` and ``loss`` are then unweighted.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any, ClassVar

import numpy as np

from qwkboost.evaluation.metrics import rmse_fast

__all__ = ["Objective", "takes_weight"]


def takes_weight(method) -> bool:
    """Whether an objective method accepts ``sample_weight``."""
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
    return "sample_weight" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


class Objective:
    """Base class for boosting objectives.

    Subclasses implement :meth:`grad_hess`; everything else has a default.
    Constructor arguments are the objective's *parameters* (saved with a
    model); the attributes named in ``state`` and set by :meth:`fit` are its
    *state*, saved with a model and the only attributes a model file restores.

    Attributes
    ----------
    name : str
        Registry name, set by :func:`qwkboost.objectives.register`.
    metric_name : str
        Name of :meth:`metric` in learning curves and logs.
    higher_is_better : bool
        Direction of :meth:`metric` for early stopping.
    ordinal : bool
        Needs whole-numbered ordinal labels (refused on a regression target).
    state : tuple of str
        Fitted attributes (numbers) saved with a model; extend it in a
        subclass whose :meth:`fit` sets more.
    hessian_kind : {"exact", "constant", "approximate"}
        What :meth:`grad_hess`'s hessian is (see the module docstring).
    n_outputs_ : int
        Scores per row, set by :meth:`fit` (1 unless the objective has several outputs).
    """

    name: ClassVar[str] = "custom"
    metric_name: ClassVar[str] = "rmse"
    higher_is_better: ClassVar[bool] = False
    ordinal: ClassVar[bool] = False
    state: ClassVar[tuple[str, ...]] = ("init_score_",)
    hessian_kind: ClassVar[str] = "exact"
    n_outputs_: int = 1
    #: Whether labels far from zero may be centred before the engines see them (see
    #: :func:`qwkboost.engines.label_offset`); class objectives index their labels themselves.
    centre_labels: ClassVar[bool] = True
    #: What a row's gradient needs: "rows" (its own label and score), "sums" (over every training row), or None
    #: when the objective does not say (read by every engine alike: :mod:`qwkboost.engines.base`).
    gradient_needs: ClassVar[str | None] = None
    #: Whether an objective that needs sums takes them through :meth:`global_sums`.
    allreduce_ready: ClassVar[bool] = False
    #: Set by a distributed engine: sums a float array over all workers. ``None`` on one machine.
    allreduce = None

    def global_sums(self, *sums: float) -> tuple[float, ...]:
        """Sums over every training row from this worker's partial ``sums`` (the identity on one machine)."""
        if self.allreduce is None:
            return sums
        return tuple(float(v) for v in self.allreduce(np.asarray(sums, dtype=np.float64)))

    def round_state(self, y: np.ndarray, score: np.ndarray, sample_weight: np.ndarray | None = None) -> dict | None:
        """The quantities that, with the fitted state, make each row's gradient this round depend only on its own
        label and score, computed at every training row's ``score``; it takes the place of this round's
        :meth:`grad_hess` call (what the objective learns while boosting advances as there). ``None`` (the
        default): the objective has no row-local form."""
        return None

    # -- fitting -----------------------------------------------------------------
    def fit(self, y: np.ndarray, sample_weight: np.ndarray | None = None) -> "Objective":
        """Fit label statistics on the training labels; return ``self``."""
        if sample_weight is not None and takes_weight(self.init_score):
            self.init_score_ = float(self.init_score(y, sample_weight=sample_weight))
        else:
            self.init_score_ = float(self.init_score(y))
        return self

    def init_score(self, y: np.ndarray, sample_weight: np.ndarray | None = None) -> float:
        """Constant starting score :math:`F_0`. Default: the (weighted) label mean."""
        return float(np.average(y, weights=sample_weight))

    def finish(self, best_iteration: int) -> None:
        """Called once training ends, with the rounds the model keeps (1-based); an objective that learns
        parameters while boosting keeps those of that round. Default: nothing."""

    def learned(self) -> dict | None:
        """What this objective learned while boosting, as JSON-ready numbers, before :meth:`finish`: a cluster's
        worker boosts its own copy and ships this back with the model (:meth:`take_learned`). Default ``None``:
        nothing is learned while boosting."""
        return None

    def take_learned(self, learned: dict) -> None:
        """Take :meth:`learned` from a copy that boosted elsewhere. Default: nothing to take."""

    # -- several outputs ---------------------------------------------------------
    def decode(self, score: np.ndarray) -> np.ndarray:
        """One continuous ordinal score per row from the raw scores. Default: the score itself."""
        return score

    def predict_proba(self, score: np.ndarray) -> np.ndarray:
        """Class probabilities ``(n, K)`` from raw scores; only probabilistic objectives have them."""
        raise NotImplementedError(f"objective {self.name!r} gives no class probabilities")

    # -- boosting ----------------------------------------------------------------
    def grad_hess(self, y: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Gradient and hessian of the loss with respect to the raw score."""
        raise NotImplementedError(f"{type(self).__name__} must implement grad_hess(y, score)")

    def metric(self, y: np.ndarray, score: np.ndarray, sample_weight: np.ndarray | None = None) -> float:
        """Evaluation metric for early stopping. Default: (weighted) RMSE."""

        return rmse_fast(y, np.asarray(score, dtype=np.float64), sample_weight)

    def metric_sums(self, y: np.ndarray, score: np.ndarray, sample_weight: np.ndarray | None = None):
        r"""Sums over rows from which :meth:`metric_from_sums` computes :meth:`metric`, or ``None``.

        The sums of two sets of rows add up to the sums of their union, so a
        distributed engine all-reduces them and every worker scores all rows.
        Default (the RMSE): :math:`(\sum_k w_k, \sum_k w_k (\hat y_k - y_k)^2)`; ``None`` for a
        subclass that overrides :meth:`metric` without this method.
        """
        if type(self).metric is not Objective.metric:
            return None
        r = np.asarray(score, dtype=np.float64) - y
        if sample_weight is None:
            return np.array([float(r.size), float(r @ r)])
        return np.array([float(sample_weight.sum()), float(sample_weight @ (r * r))])

    @classmethod
    def metric_adds_up(cls) -> bool:
        """Whether :meth:`metric_sums` gives this class's :meth:`metric`: it is defined by the class that
        defines :meth:`metric`, or by a subclass of it (a subclass that changes the metric inherits no sums)."""
        def owner(name):
            return next(c for c in cls.__mro__ if name in vars(c))
        return issubclass(owner("metric_sums"), owner("metric"))

    def metric_from_sums(self, sums: np.ndarray) -> float:
        r"""The metric from :meth:`metric_sums` added over every row. Default: :math:`\sqrt{S_1 / S_0}`."""
        return float(np.sqrt(sums[1] / sums[0]))

    def default_min_delta(self, learning_rate: float) -> float:
        """The smallest gain of :meth:`metric` that early stopping counts as an improvement when the caller gives
        none (``early_stopping_min_delta``), at the engine's ``learning_rate``. Default 0: any strict gain, the
        engines' own rule."""
        return 0.0

    def loss(self, y: np.ndarray, score: np.ndarray, sample_weight: np.ndarray | None = None) -> float:
        """Scalar minimised by :meth:`grad_hess`. Default: the metric, negated if higher is better."""
        if sample_weight is not None and takes_weight(self.metric):
            m = self.metric(y, score, sample_weight=sample_weight)
        else:
            m = self.metric(y, score)
        return -m if self.higher_is_better else m

    # -- persistence -------------------------------------------------------------
    def get_params(self) -> dict[str, Any]:
        """Constructor parameters, read from ``__init__``'s signature."""
        sig = inspect.signature(type(self).__init__)
        return {
            k: getattr(self, k)
            for k, p in sig.parameters.items()
            if k != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        }

    def get_state(self) -> dict[str, Any]:
        """The fitted attributes named in ``state``, JSON-friendly."""
        return {k: _plain(getattr(self, k)) for k in self.state if hasattr(self, k)}

    def set_state(self, state: dict[str, Any]) -> "Objective":
        """Restore statistics saved by :meth:`get_state`.

        Only the attributes declared in ``state`` are set, and only to finite
        numbers (or lists of them): a model file cannot replace a method or
        set anything else.

        Raises
        ------
        ValueError
            For an undeclared name or a value that is not a finite number.
        """
        if not isinstance(state, dict):
            raise ValueError(f"objective state must be a mapping; got {type(state).__name__}")
        unknown = sorted(set(state) - set(self.state))
        if unknown:
            raise ValueError(f"objective {self.name!r} has no fitted attribute(s) {unknown}; "
                             f"its state is {list(self.state)}")
        for k, v in state.items():
            if not _is_numbers(v):
                raise ValueError(f"objective state {k!r} must be a finite number (or a list of them); got {v!r}")
        for k, v in state.items():
            setattr(self, k, v)
        return self

    def clone(self) -> "Objective":
        """An unfitted copy with the same parameters."""
        return type(self)(**copy.deepcopy(self.get_params()))

    @property
    def is_fitted(self) -> bool:
        return hasattr(self, "init_score_")

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


def _is_numbers(v) -> bool:
    if isinstance(v, (list, tuple)):
        return all(_is_numbers(x) for x in v)
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and bool(np.isfinite(v))


def _plain(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return v
