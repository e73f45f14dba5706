r"""How each objective reaches CatBoost: its own loss where it is the same model, else a Python loss whose blocks
are computed by a compiled kernel, directly, or looked up (:func:`path`).

**Paths** (the table of ``docs/guide/catboost.md``):

``"builtin"``
    ``squared_error`` trains with CatBoost's ``RMSE`` on the labels minus :math:`F_0`, ``multiclass`` with its
    ``MultiClass`` from the baseline :math:`F_{0,k} = \log\pi_k`: CatBoost's own C++ loss, no Python a block.
    Weights, the objective's metric (a Python ``eval_metric``, so early stopping and the learning curves are the
    objective's own) and :math:`F_0` in the saved model are as on the other paths.
``"kernel"``
    ``extended_qwk`` and ``ordinal_logit`` (logistic link): the round's state
    (:meth:`~qwkboost.objectives.Objective.round_state`) once a round from the metric's scores, then every block
    in a compiled kernel (:mod:`qwkboost.engines.catboost_kernels`); a round whose blocks were not at the
    metric's scores stops training.
``"rows"``
    An objective that declares ``gradient_needs = "rows"``: ``grad_hess`` on each block.
``"lookup"``
    Any other objective (a user's own, a subclass of a built-in one, ordinal logit's probit link): ``grad_hess``
    once a round on every row, each block looked up by (score, label).

A built-in path is taken only for the objective's exact class: a user's subclass may change anything, so it
takes a Python path.
"""

from __future__ import annotations

import threading

import numpy as np

from qwkboost.callback import EarlyStopException
from qwkboost.engines.base import EvalSet, run_callbacks
from qwkboost.evaluation.metrics import weighted_mean_var
from qwkboost.objectives import ExtendedQWK, Multiclass, OrdinalLogit, SquaredError
from qwkboost.objectives.ordinal_logit import EXP_CAP

__all__ = ["path", "MISMATCH", "needs_the_metrics_scores", "Rounds", "Loss", "KernelLoss", "Metric", "AfterIteration", "declares_rows", "BUILTIN"]

#: The objectives CatBoost has built in (exact classes), and its name for them.
BUILTIN = {SquaredError: "RMSE", Multiclass: "MultiClass"}
MISMATCH = ("catboost asked for derivatives at scores that are not the round's (its metric and its loss saw "
             "different scores); qwkboost cannot give its objective's gradient there. Report the catboost version "
             "and parameters")


def declares_rows(objective) -> bool:
    """Whether the objective says each row's gradient needs only that row (``gradient_needs = "rows"``; an
    objective that does not say is ``None``): its blocks are then computed directly, not looked up."""
    return objective.gradient_needs == "rows"


def _has_kernel(objective) -> bool:
    return type(objective) is ExtendedQWK or (type(objective) is OrdinalLogit and objective.link == "logit")


def path(objective) -> str:
    """``"builtin"``, ``"kernel"``, ``"rows"`` or ``"lookup"`` for a fitted objective (the module docstring)."""
    if type(objective) in BUILTIN:
        return "builtin"
    if _has_kernel(objective):
        return "kernel"
    return "rows" if declares_rows(objective) else "lookup"


def needs_the_metrics_scores(objective) -> bool:
    """Whether the blocks' gradients come from the scores CatBoost's metric saw (one order of rows with
    categorical columns: see ``fit``)."""
    return path(objective) in ("kernel", "lookup")


class _ScoreIndex:
    """Where each of a round's distinct scores is (a hash table: pandas' own, through its public ``Index`` when
    that is not importable)."""

    def __init__(self, scores: np.ndarray):
        try:
            from pandas._libs.hashtable import Float64HashTable  # slow to import: pandas

            self._table = Float64HashTable(scores.size)
            self._table.map_locations(scores)
            self.positions = self._table.lookup
        except (ImportError, AttributeError):
            import pandas as pd  # slow to import: pandas

            self.positions = pd.Index(scores).get_indexer


class Rounds:
    """The state shared by the loss, the metric and the callback: the scores a round starts from, the round's
    gradients (one objective call) or state (one :meth:`round_state` call), and the metric values CatBoost has
    just asked for."""

    def __init__(self, objective, y: np.ndarray, weight: np.ndarray | None, valid: EvalSet | None):
        self.objective = objective
        self.f0 = np.asarray(objective.init_score_, dtype=np.float64) if objective.n_outputs > 1 else \
            float(objective.init_score_)
        self.y = np.asarray(y, dtype=np.float64)
        self.weight = weight
        self.valid = valid
        self.approx = np.zeros(self.y.size)       # CatBoost's trees start at 0: the score is f0 + approx
        self.table = None
        self.evals: dict = {}
        self.rows = declares_rows(objective.objective)
        # labels as CatBoost hands them to the loss (float32), ranked: half of the table's key
        self.labels32 = self.y.astype(np.float32)
        self.labels = np.unique(self.labels32)
        self.label_rank = np.searchsorted(self.labels, self.labels32)
        # CatBoost asks for blocks from several threads at once: one at a time reaches the objective (whose
        # scratch buffers are shared), and the round's gradients are computed once
        self.lock = threading.Lock()

    def new_round(self, approx: np.ndarray) -> None:
        self.approx = approx
        self.table = None

    def _build(self) -> None:
        """This round's gradients and hessians at every training row, in a table indexed by (score, label): the
        score's place among the round's distinct scores (a hash index) and the label's rank."""
        g, h = self.objective.grad_hess(self.y, self.f0 + self.approx)
        a, lab = self.approx, self.label_rank
        if self.weight is not None:                 # per-row terms; the block's weights scale them back
            keep = self.weight > 0
            g = np.divide(g, self.weight, out=np.zeros_like(g), where=keep)[keep]
            h = np.divide(h, self.weight, out=np.zeros_like(h), where=keep)[keep]
            a, lab = a[keep], lab[keep]
        scores, rank = np.unique(a, return_inverse=True)
        L = self.labels.size
        G = np.full(scores.size * L, np.nan)        # NaN: no training row has this (score, label)
        H = np.empty(scores.size * L)
        cell = rank * L + lab
        G[cell], H[cell] = g, h
        self.table = (_ScoreIndex(scores), G, H)

    def _lookup(self, table, a: np.ndarray, t: np.ndarray):
        """``(g, h)`` of rows with scores ``a`` and labels ``t`` (float32, as CatBoost holds them) from a round's
        table."""
        index, G, H = table
        rank = index.positions(a)
        lab = np.searchsorted(self.labels, np.asarray(t, dtype=np.float32))
        cell = rank * self.labels.size + np.minimum(lab, self.labels.size - 1)
        g = G[cell]
        if (rank < 0).any() or np.isnan(g).any():
            raise RuntimeError(MISMATCH)
        return g, H[cell]

    def ders(self, approxes, targets, weights) -> np.ndarray:
        """CatBoost's derivatives for one block: :math:`(-g, -h)` of its rows, as an ``(n, 2)`` array.

        The objective is reached by one thread at a time; a round's table, once built, is only read."""
        a = np.asarray(approxes, dtype=np.float64)
        out = np.empty((a.size, 2))
        if self.rows:
            with self.lock:
                g, h = self.objective.grad_hess_rows(np.asarray(targets, dtype=np.float64), self.f0 + a)
        else:
            table = self.table
            if table is None:
                with self.lock:
                    if self.table is None:
                        self._build()
                    table = self.table
            if weights is None:
                g, h = self._lookup(table, a, targets)
            else:
                g = np.zeros(a.size)
                h = np.zeros(a.size)
                live = np.asarray(weights) > 0
                g[live], h[live] = self._lookup(table, a[live], np.asarray(targets)[live])
        if weights is not None:
            w = np.asarray(weights, dtype=np.float64)
            g, h = g * w, h * w
        np.negative(g, out=out[:, 0])
        np.negative(h, out=out[:, 1])
        return out


class _Shared:
    """CatBoost deep-copies its parameters before training; the loss and the metric must stay the objects
    that share the round's state with the callback, so a copy is the object itself. CatBoost's own numba
    compilation of their methods is not tried (``no_jit``): they read the round's state through ``self``."""

    no_jit = True

    def __deepcopy__(self, memo):
        return self


class Loss(_Shared):
    """CatBoost's Python loss: each block's derivatives from :class:`Rounds` (computed directly or looked up)."""

    def __init__(self, rounds: Rounds):
        self.rounds = rounds

    def calc_ders_range(self, approxes, targets, weights):
        return self.rounds.ders(approxes, targets, weights)


class KernelLoss(_Shared):
    """CatBoost's Python loss for an objective with a row-local form: the round's state once (at the round's
    first block, from the scores the metric saw), then each block in a compiled kernel, whose fingerprints of the
    blocks' (score, label) pairs :meth:`check_round` compares with the round's
    (:mod:`qwkboost.engines.catboost_kernels`)."""

    def __init__(self, rounds: Rounds):
        # numba takes half a second to import: only training with a kernel needs it (not predicting, not serving)
        from qwkboost.engines import catboost_kernels as kernels

        self.rounds = rounds
        obj = rounds.objective
        self.offset = float(obj.offset)
        self.label_bits = rounds.labels32.view(np.uint32)
        self.kernel = kernels.extended_qwk_block if type(obj.objective) is ExtendedQWK else kernels.ordinal_logit_block
        self.fingerprint, self.no_weights = kernels.fingerprint, kernels.EMPTY_WEIGHTS
        # extended QWK's metric, state and fingerprint in one compiled pass (not distributed: its sums are local)
        self.one_pass = None
        inner = obj.objective
        if type(inner) is ExtendedQWK and inner.allreduce is None:
            w = rounds.weight
            ma, mb = weighted_mean_var(rounds.y + self.offset, w)     # the metric's a, b: the labels' own
            self.one_pass = kernels.extended_qwk_round
            self.consts = np.array([rounds.f0, self.offset, inner.lo_, inner.hi_, inner.a_, inner.b_,
                                    float(inner.clip != "none"), ma, mb])
            self.weights64 = self.no_weights.astype(np.float64) if w is None else np.asarray(w, dtype=np.float64)
        self.metric_value = None    # the training rows' metric, when the one pass computed it
        self.args = None
        self.expected = None        # the fingerprint of the round's (score, label) pairs
        self.seen: list = []        # (rows, fingerprint) of each block of the round (list.append: thread-safe)

    def _prepare(self) -> tuple:
        """The kernel's arguments for this round from the objective's round state, and the round's fingerprint."""
        r = self.rounds
        obj = r.objective.objective
        if self.one_pass is not None:
            value, f, g, n, fp = self.one_pass(r.approx, r.y, self.weights64, self.label_bits, self.consts)
            self.metric_value, self.expected = float(value), int(fp)
            return (np.array([r.f0, self.offset, obj.lo_, obj.hi_, obj.a_, f, g, n, float(obj.clip != "none"),
                              float(obj.clip == "hold"), float(obj.hessian == "gauss_newton")]),)
        state = r.objective.round_state(r.y, r.f0 + r.approx)
        if type(obj) is ExtendedQWK:
            packed = (np.array([r.f0, self.offset, obj.lo_, obj.hi_, obj.a_, state["f"], state["g"], state["n"],
                                float(obj.clip != "none"), float(obj.clip == "hold"),
                                float(obj.hessian == "gauss_newton")]),)
        else:
            cuts = np.asarray(state["cuts"], dtype=np.float64)
            cap = EXP_CAP + float(cuts.min(initial=0.0))
            packed = (np.concatenate([[r.f0, obj.lo_ - self.offset, cap, -EXP_CAP - 10.0], np.exp(-cuts)]),)
        self.expected = int(self.fingerprint(r.approx.view(np.uint64), self.label_bits))
        return packed

    def prepare(self) -> tuple:
        """This round's kernel arguments, computed once (:meth:`_prepare`)."""
        with self.rounds.lock:
            if self.args is None:
                self.args = self._prepare()
            return self.args

    def calc_ders_range(self, approxes, targets, weights):
        args = self.args
        if args is None:                    # the first round (later ones are prepared after the iteration)
            args = self.prepare()
        out = np.empty((approxes.shape[0], 2))
        self.seen.append((approxes.shape[0], self.kernel(approxes, targets, self.no_weights if weights is None
                                                         else weights, *args, out)))
        return out

    def check_round(self) -> None:
        """Before the metric starts the next round: the round's blocks held every training row's (score, label)
        pair as many times as there were passes, and no other.

        Raises
        ------
        RuntimeError
            When they did not: CatBoost computed the round's tree on blocks at other scores than its metric saw.
        """
        seen, expected = self.seen, self.expected
        self.seen, self.args, self.expected = [], None, None
        if expected is None:
            return
        n = self.rounds.y.size
        rows = sum(k for k, _ in seen)
        passes = rows // n
        total = sum(int(f) for _, f in seen) % 2 ** 64
        if rows == 0 or rows != passes * n or total != (passes * expected) % 2 ** 64:
            raise RuntimeError(MISMATCH)


class Metric(_Shared):
    """CatBoost's Python ``eval_metric``: the objective's metric on the training rows, then on the eval rows,
    after every iteration; the training rows' scores become the next round's."""

    def __init__(self, rounds: Rounds, loss=None):
        self.rounds = rounds
        self.loss = loss
        self.calls = 0

    def is_max_optimal(self):
        return bool(self.rounds.objective.higher_is_better)

    def evaluate(self, approxes, target, weight):
        r = self.rounds
        a = np.array(approxes[0], dtype=np.float64)
        which = "train" if self.calls == 0 else "valid"
        self.calls += 1
        if which == "train":
            if a.shape[0] != r.y.size:
                raise RuntimeError(f"catboost scored {a.shape[0]} rows where the training set has {r.y.size}")
            if self.loss is not None:
                self.loss.check_round()
            r.new_round(a)
            if self.loss is not None and self.loss.one_pass is not None:
                self.loss.prepare()                 # the next round's state, and the metric, in one pass
                value = self.loss.metric_value
            else:
                value = r.objective.metric(r.y, r.f0 + a, r.weight)
        else:
            v = r.valid
            value = r.objective.metric(v.y, r.f0 + a, v.weight)
        r.evals[which] = {r.objective.metric_name: float(value)}
        return float(value), 1.0

    def get_final_error(self, error, weight):
        return error


class AfterIteration:
    """qwkboost's callbacks after every CatBoost iteration; an early stop ends training (``False``).

    Any other exception a callback raises (a deadline, a pruned trial) also ends training and is kept in
    ``raised``, to be raised again as itself once CatBoost returns (CatBoost would wrap it in its own error).

    ``builtin``: the name of CatBoost's own metric that is the objective's (``RMSE``, ``MultiClass``: the same
    formula, weights included), whose values CatBoost has computed in C++ for the training and eval rows; else
    the values come from the Python :class:`Metric`."""

    def __init__(self, rounds: Rounds, metric: Metric | None, callbacks, builtin: str | None = None):
        self.rounds, self.metric, self.callbacks, self.builtin = rounds, metric, callbacks, builtin
        self.history: dict = {}
        self.stopped_at_best = None
        self.raised: BaseException | None = None

    def after_iteration(self, info) -> bool:
        i = int(info.iteration) - 1
        if self.builtin is not None:
            name = self.rounds.objective.metric_name
            evals = {ours: {name: float(info.metrics[theirs][self.builtin][-1])}
                     for ours, theirs in (("train", "learn"), ("valid", "validation")) if theirs in info.metrics}
        else:
            evals = self.rounds.evals
            self.rounds.evals, self.metric.calls = {}, 0
        for name, values in evals.items():
            for metric, value in values.items():
                self.history.setdefault(name, {}).setdefault(metric, []).append(value)
        try:
            run_callbacks(self.callbacks, i, evals)
        except EarlyStopException as stop:
            self.stopped_at_best = stop.best_iteration
            return False
        except Exception as exc:      # noqa: BLE001 - raised again after fit, unwrapped
            self.raised = exc
            return False
        if self.metric is not None and self.metric.loss is not None:   # the next round's state, between iterations
            self.metric.loss.prepare()
        return True
