"""The engine contract: what :func:`qwkboost.train` asks of XGBoost, LightGBM, CatBoost and the native engine.

An engine is a class with the methods of :class:`Engine`; the registry
(:mod:`qwkboost.engines.registry`) names them. Data crosses the boundary as
named objects: the validation rows as an :class:`EvalSet`, the outcome of
training as a :class:`FitResult`.

Every engine trains on labels centred by :func:`qwkboost.engines.label_offset`
and calls the objective through :class:`qwkboost.engines.EngineObjective`, so
an engine never sees either detail. After each round it calls every callback
with a :class:`qwkboost.callback.CallbackEnv`, and stops when one raises
:class:`qwkboost.callback.EarlyStopException`.

What the other stages need to know about an engine is on its class, so that none of them names an engine: its
default learning rate, whether it checks the objective's outputs itself, the data it cannot train on
(:meth:`Engine.check_data`) and its Dask interface (:class:`DaskSupport`). Every engine reads an objective's
``gradient_needs`` alike: ``"rows"`` (each row's gradient from its own label and score), ``"sums"`` (sums over
every row), or ``None`` when the objective does not say, which no engine takes for ``"rows"`` where that would
change the gradient (CatBoost's blocks look such an objective's rows up; a cluster all-reduces its sums only
when it says ``"sums"``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Protocol, Sequence, runtime_checkable

import numpy as np

from qwkboost.callback import run_callbacks

__all__ = ["EvalSet", "RowScores", "FitResult", "DaskSupport", "Engine", "run_callbacks"]


@dataclass(frozen=True)
class EvalSet:
    """Validation rows, scored with the objective's metric after every round (weighted by ``weight``)."""

    X: np.ndarray
    y: np.ndarray
    weight: np.ndarray | None = None


@dataclass(frozen=True)
class RowScores:
    """Raw scores of rows an engine scored while it trained, after the first ``rounds`` rounds.

    LightGBM keeps its validation rows' scores up to date as it boosts, one tree at a time on their binned
    values; rows scored that way cost about a quarter of a prediction of them afterwards (a cross-validation on
    MovieLens on one core: 6.5 s more training against 25.7 s of predictions; ``benchmarks/lightgbm_scoring.py``).

    Attributes
    ----------
    rounds : int
        The rounds the scores hold (as ``num_iteration`` counts them).
    valid : ndarray or None
        The eval set's rows.
    rows : tuple of ndarray
        Each of the ``score_rows`` given to :meth:`Engine.fit`, in order.

    All are on the engine's scale, :math:`F_0` included (what :meth:`Engine.predict` returns).
    """

    rounds: int
    valid: np.ndarray | None
    rows: tuple[np.ndarray, ...] = ()


@dataclass(frozen=True)
class FitResult:
    """What an engine's :meth:`Engine.fit` returns.

    Attributes
    ----------
    booster : object
        The engine's own model; ``None`` after zero rounds on LightGBM.
    num_rounds : int
        Rounds trained (every one is kept).
    stopped_at_best : int or None
        The best round, 0-based, if a callback stopped training; else ``None``.
    evals_result : dict
        ``{"train": {metric: [...]}, "valid": {metric: [...]}}``.
    scores : tuple of RowScores
        Rows scored while training (an engine with ``scores_while_training``), at the round an
        :class:`~qwkboost.callback.EarlyStopping` among the callbacks held best and at the last round.
    """

    booster: Any
    num_rounds: int
    stopped_at_best: int | None = None
    evals_result: dict = field(default_factory=dict)
    scores: tuple[RowScores, ...] = ()


@dataclass(frozen=True)
class DaskSupport:
    """An engine's Dask interface (:attr:`Engine.dask`), as :func:`qwkboost.distributed.train_dask` uses it.

    Attributes
    ----------
    train : callable
        ``train(client, data, valid, objective, *, offset, params, num_boost_round, early_stopping_rounds, seed,
        min_delta, stop=None) -> FitResult``: boost on the rows of ``data`` (a
        :class:`~qwkboost.distributed.DaskData`), the fitted ``objective`` called on each worker's rows (labels
        centred by ``offset``); ``stop()``, called on each worker after each round, ends the training at the same
        round on all of them (an engine whose workers cannot agree refuses it).
    allreduce : bool
        Whether its workers add up partial sums over all of them: an objective whose gradient needs sums over
        every row (``gradient_needs == "sums"``) then trains as on one machine, and the metric of an eval set
        covers every worker's rows (so eval sets and early stopping are taken). Without it, each worker would see
        its own rows only: such objectives, eval sets and early stopping are refused.
    max_outputs : int or None
        The most scores per row it trains on a cluster; ``None``: as many as on one machine.
    categorical : bool
        Whether its workers split on category-code columns (``data.categorical``) as one process does.
    """

    train: Callable[..., "FitResult"]
    allreduce: bool
    max_outputs: int | None = None
    categorical: bool = False


@runtime_checkable
class Engine(Protocol):
    """The methods every engine implements (keyword-only beyond the data), and what the stages ask of it."""

    name: ClassVar[str]
    #: the engine's names for its thread count, e.g. ``("nthread", "n_jobs")``
    thread_params: ClassVar[tuple[str, ...]]
    #: the learning rate the engine's library uses when the parameters name none
    default_learning_rate: ClassVar[float]
    #: whether the engine checks the objective's gradients and hessians for finiteness in its own passes (else
    #: :class:`~qwkboost.engines.EngineObjective` checks them every round)
    checks_gradients: ClassVar[bool]
    #: whether :meth:`fit` takes ``score_rows``, rows it scores as it boosts (:class:`RowScores`)
    scores_while_training: ClassVar[bool]
    #: its Dask interface; ``None``: it trains on one machine
    dask: ClassVar[DaskSupport | None]

    def check_data(self, X: np.ndarray, params: dict) -> None:
        """Refuse, before any training, training rows the engine could not train on with ``params`` (``ValueError``
        naming the parameters to change); rows of a cross-validation fold are checked before the folds run."""

    def check_params(self, params: dict, *, n_features: int | None) -> None:
        """Refuse unknown names and bad values before training (``ValueError`` naming them); with
        ``n_features=None`` (a config checked before its data is read), the checks that need no data."""

    def check_objective(self, objective) -> None:
        """Refuse, before training, a fitted objective the engine cannot run (``ValueError`` naming the engines
        that run it)."""

    def with_threads(self, params: dict, n_threads: int) -> dict:
        """``params`` with ``n_threads`` set under the engine's own name, unless it names a thread count already
        (:func:`qwkboost.engines.threads.set_threads`); ``n_threads`` is
        :func:`qwkboost.engines.threads.engine_threads`'s, read as training starts."""

    def fit(self, X: np.ndarray, y: np.ndarray, *, objective, params: dict, num_boost_round: int,
            valid: EvalSet | None, callbacks: Sequence[Callable], seed: int,
            categorical: Sequence[int] = (), sample_weight: np.ndarray | None = None) -> FitResult:
        """Boost ``num_boost_round`` rounds from ``objective.init_score_``.

        ``categorical`` lists the columns of ``X`` that hold category codes
        (0, 1, ...; NaN missing), see :class:`qwkboost.data.features.FeatureSchema`.
        ``sample_weight`` weighs the training rows in the metric; the objective
        already weighs its gradients. Engines get no weights of their own, so that
        nothing is weighted twice. An engine with ``scores_while_training`` also takes ``score_rows``, a tuple of
        arrays laid out as ``X``, and returns their scores in :attr:`FitResult.scores`.
        """

    def predict(self, booster, X: np.ndarray, *, n_iter: int, init_score: float) -> np.ndarray:
        """Scores of the first ``n_iter`` rounds plus ``init_score`` (the engine's own labels' scale)."""

    def contributions(self, booster, X: np.ndarray, *, n_iter: int, init_score) -> tuple[np.ndarray, np.ndarray]:
        """SHAP values of the first ``n_iter`` rounds and the bias, ``(values, bias)``: ``values`` of shape
        ``(n, n_features)`` (``(n, n_features, K)`` with several outputs), ``bias`` of shape ``(n,)`` (``(n, K)``),
        such that ``values.sum(axis=1) + bias`` is :meth:`predict` with the same arguments."""

    def gains(self, booster, *, n_iter: int, n_outputs: int) -> np.ndarray:
        """Total split gain of each feature over the first ``n_iter`` rounds: ``(n_features,)``, or
        ``(n_features, n_outputs)`` with several outputs."""

    #: the file suffix of :meth:`to_bytes`'s format: ``"ubj"`` (XGBoost's UBJSON), ``"txt"`` (LightGBM's model
    #: string), ``"cbm"`` (CatBoost's binary), ``"json"`` (the native engine's)
    booster_suffix: ClassVar[str]

    def dump(self, booster) -> str:
        """The booster as text (a model file written as JSON: :meth:`qwkboost.Model.save` to a ``.json`` path)."""

    def load(self, text: str):
        """A booster from :meth:`dump`'s text (``ValueError`` if malformed)."""

    def to_bytes(self, booster) -> bytes:
        """The booster in the engine's own compact format (:attr:`booster_suffix`), as a compact model file holds it."""

    def from_bytes(self, data: bytes):
        """A booster from :meth:`to_bytes`'s bytes (``ValueError`` if malformed)."""

    def shape(self, booster) -> tuple[int, int]:
        """``(rounds, features)`` of a booster."""
