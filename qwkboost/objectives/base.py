r"""The :class:`Objective` contract every engine consumes.

An objective is defined once, in label space, and all engines call the same
four things:

* :meth:`Objective.fit` -- statistics of the training labels;
* :meth:`Objective.init_score` -- the constant the boosting starts from;
* :meth:`Objective.grad_hess` -- :math:`g_k = \partial L / \partial F_k` and a
  positive :math:`h_k` for every row;
* :meth:`Objective.metric` -- the evaluation metric used for early stopping.

:meth:`Objective.loss` is the scalar the gradient descends; the native engine
uses it for line searches.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any, ClassVar

import numpy as np

__all__ = ["Objective"]


class Objective:
    """Base class for boosting objectives.

    Subclasses implement :meth:`grad_hess`; everything else has a default.
    Constructor arguments are the objective's *parameters* (saved with a
    model); attributes ending in ``_`` set by :meth:`fit` are its *state*.

    Attributes
    ----------
    name : str
        Registry name, set by :func:`qwkboost.objectives.register`.
    metric_name : str
        Name of :meth:`metric` in learning curves and logs.
    higher_is_better : bool
        Direction of :meth:`metric` for early stopping.
    """

    name: ClassVar[str] = "custom"
    metric_name: ClassVar[str] = "rmse"
    higher_is_better: ClassVar[bool] = False

    # -- fitting -----------------------------------------------------------------
    def fit(self, y: np.ndarray) -> "Objective":
        """Fit label statistics on the training labels; return ``self``."""
        self.init_score_ = float(self.init_score(y))
        return self

    def init_score(self, y: np.ndarray) -> float:
        """Constant starting score :math:`F_0`. Default: the label mean."""
        return float(np.mean(y))

    # -- boosting ----------------------------------------------------------------
    def grad_hess(self, y: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Gradient and hessian of the loss with respect to the raw score."""
        raise NotImplementedError(f"{type(self).__name__} must implement grad_hess(y, score)")

    def metric(self, y: np.ndarray, score: np.ndarray) -> float:
        """Evaluation metric for early stopping. Default: RMSE."""
        r = np.asarray(score, dtype=np.float64) - y
        return float(np.sqrt(r @ r / r.size))

    def loss(self, y: np.ndarray, score: np.ndarray) -> float:
        """Scalar minimised by :meth:`grad_hess`. Default: the metric, negated if higher is better."""
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
        """Fitted statistics (attributes ending in ``_``), JSON-friendly."""
        return {k: _plain(v) for k, v in vars(self).items() if k.endswith("_") and not k.startswith("_")}

    def set_state(self, state: dict[str, Any]) -> "Objective":
        """Restore statistics saved by :meth:`get_state`."""
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


def _plain(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return v
