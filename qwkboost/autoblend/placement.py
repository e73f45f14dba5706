r"""Where a candidate trains on a Dask cluster: whole on one worker, or each fold's rows across every worker.

A budget on a cluster runs each candidate whole on one worker, side by side (:mod:`qwkboost.autoblend.dask_executor`).
That needs the worker to hold the data and the engine's copies of it while it trains. A candidate whose data does
not fit one worker, or every candidate with ``cluster.parallel=rows``, trains each fold's rows across the workers
instead, through its engine's Dask interface (:func:`~qwkboost.distributed.training.train_dask`), alone on the
cluster while it runs. Only an engine whose workers add up the objective's sums and the early-stopping metric over
every row trains a candidate that way exactly (XGBoost's); any other is left out when it does not fit, with the
reason, rather than trained on a different objective.

A worker's need is estimated as

.. math:: \text{need} = M_0 + c_e + m_e \cdot \text{bytes}(X_\text{train}, X_\text{test}) + l_e \cdot L,

with :math:`M_0` a worker process with the libraries loaded (:data:`PROCESS_BYTES`), :math:`L` the number of
categories over the categorical columns, and :math:`m_e`, :math:`c_e` and :math:`l_e` the engine's memory per byte
of features, its fixed part and its memory per category (:data:`MEMORY`). The first two are fitted by
``benchmarks/candidate_memory.py`` on 5 numeric columns, where per-row arrays weigh most (wider data needs less per
byte). The last is the largest left over on the packaged sets with id columns, InstEval and MovieLens
(``benchmarks/worker_memory.py``); CatBoost's grows with the rows (37 KB per category at 30,000 MovieLens rows,
119 KB at 75,000), so on large categorical data its estimate may still be short, and a worker lost to memory loses
only its candidate. A candidate fits when its need is within the fraction of the smallest worker's
``memory_limit`` at which Dask pauses a worker (``distributed.worker.memory.pause``, 0.8 by default).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from qwkboost.config import objective_ref
from qwkboost.data.dataset import Dataset
from qwkboost.distributed.training import check_dask_categorical, check_dask_objective, dask_support
from qwkboost.exceptions import ConfigError
from qwkboost.objectives import get as get_objective

__all__ = ["Placement", "WHOLE", "MEMORY", "PROCESS_BYTES", "need", "n_categories", "place", "data_bytes",
           "rows_refusal", "check_room", "pause_fraction"]

#: Memory of one candidate's 5-fold cross-validation on one thread beyond the process before it, by engine:
#: ``(bytes per byte of features, fixed bytes, bytes per category of the categorical columns)``; the first two
#: fitted at 50,000 and 200,000 rows (``benchmarks/results/candidate_memory.json``), the last the largest left over
#: on InstEval and MovieLens (``benchmarks/results/worker_memory.json``), all rounded up; the native engine's fixed
#: part raised to cover Diamonds' 125 MB over 9 numeric columns.
MEMORY: dict[str, tuple[float, int, int]] = {
    "xgboost": (15.0, 32 * 2**20, 32 * 2**10), "lightgbm": (19.0, 32 * 2**20, 8 * 2**10),
    "catboost": (25.0, 32 * 2**20, 128 * 2**10), "native": (18.0, 64 * 2**20, 16 * 2**10)}
#: The largest of each, for an engine not measured.
DEFAULT_MEMORY = tuple(max(m[i] for m in MEMORY.values()) for i in range(3))
#: A worker process with Python and the engines loaded, before any candidate (measured: 280 to 350 MB).
PROCESS_BYTES = 384 * 2**20


def need(engine: str, nbytes: int, categories: int = 0) -> float:
    """The bytes a worker needs to cross-validate a candidate of ``engine`` on ``nbytes`` of features whose
    categorical columns hold ``categories`` categories in all (module docstring)."""
    per_byte, fixed, per_category = MEMORY.get(engine, DEFAULT_MEMORY)
    return PROCESS_BYTES + fixed + per_byte * nbytes + per_category * categories


def n_categories(dataset: Dataset) -> int:
    """The categories over ``dataset``'s categorical columns."""
    return sum(len(c) for c in dataset.schema.categories.values())


@dataclass(frozen=True)
class Placement:
    """Where a candidate trains.

    Attributes
    ----------
    how : {"whole", "rows", "none"}
        ``whole``: the whole cross-validated run on one worker (or in this process); ``rows``: each fold's rows
        across every worker; ``none``: nowhere on this cluster (left out).
    why : str
        The reason, for the log and the leaderboard (empty for ``whole`` when nothing needed deciding).
    """

    how: str
    why: str = ""

    @property
    def rows(self) -> bool:
        return self.how == "rows"


#: A candidate trained whole where it runs.
WHOLE = Placement("whole")


def data_bytes(dataset: Dataset) -> int:
    """The bytes of ``dataset``'s features (training and test rows), what a worker holds before any engine copy."""
    return int(dataset.X_train.nbytes + (0 if dataset.X_test is None else dataset.X_test.nbytes))


def rows_refusal(config: Mapping, dataset: Dataset) -> str | None:
    """Why ``config``'s candidate cannot train its rows across workers exactly (its engine's Dask interface, its
    objective, early stopping, categorical columns); ``None`` if it can."""
    engine = config["engine"]["name"]
    try:
        dask_support(engine)
        obj = get_objective(objective_ref(config["objective"]), **(config["objective"].get("params") or {}))
        check_dask_objective(engine, obj, config["engine"].get("early_stopping_rounds") is not None)
        check_dask_categorical(engine, [dataset.schema.column_name(j) for j in dataset.schema.categorical])
    except ValueError as exc:
        return str(exc)
    return None


def place(config: Mapping, dataset: Dataset, worker_memory: float | None, n_workers: int,
          parallel: str = "runs") -> Placement:
    """Where ``config``'s candidate trains on a cluster of ``n_workers`` whose smallest worker may use
    ``worker_memory`` bytes before Dask pauses it (``None``: no limit), with ``cluster.parallel`` ``parallel``
    (module docstring). Across the rows, each worker holds its share of the features, :math:`1/n` of the bytes, and
    the rest of the need whole.

    Returns
    -------
    Placement
        ``rows`` when asked for (``parallel="rows"``) or when the data does not fit one worker, if the engine can and
        each worker's share fits; else ``whole`` when it fits, else ``none`` with the reason.
    """
    engine = config["engine"]["name"]
    nbytes, categories = data_bytes(dataset), n_categories(dataset)
    needed = need(engine, nbytes, categories)
    shared = need(engine, nbytes / max(n_workers, 1), categories)
    fits = worker_memory is None or needed <= worker_memory
    refusal = rows_refusal(config, dataset) if parallel == "rows" or not fits else None
    if refusal is None and worker_memory is not None and shared > worker_memory:
        refusal = (f"its share of the rows on each of the {n_workers} workers needs about {_size(shared)} with "
                   f"{engine}'s copies, and a worker has {_size(worker_memory)}")
    if parallel == "rows":
        if refusal is None:
            return Placement("rows", f"cluster.parallel=rows: each fold's rows across the {n_workers} workers")
        if fits:
            return Placement("whole", f"whole on one worker: {_first_sentence(refusal)}")
    if fits:
        return WHOLE
    size = f"about {_size(needed)} with {engine}'s copies, and a worker has {_size(worker_memory)}"
    if refusal is None:
        return Placement("rows", f"its data does not fit one worker ({size}): each fold's rows across the "
                                 f"{n_workers} workers")
    return Placement("none", f"its data does not fit one worker ({size}), and it cannot train across workers' "
                             f"rows: {_first_sentence(refusal)}")


def _size(nbytes: float) -> str:
    return f"{nbytes / 2**30:.1f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.0f} MiB"


def check_room(configs: Mapping[tuple[str, str], Mapping], dataset: Dataset, worker_memory: float | None,
               n_workers: int, parallel: str | None, what: str, fix: str) -> None:
    """Refuse, before any training, a cluster on which no candidate of ``configs`` fits (:func:`place`): its
    workers too small for a worker process with the engines and this data.

    Parameters
    ----------
    configs : mapping
        The candidates' configs.
    worker_memory, n_workers, parallel
        As in :func:`place`.
    what : str
        What set the workers' memory, for the message (``cluster.memory_limit='200MB'``, ``the workers at ...``).
    fix : str
        What gives the workers more, ending the message (``give cluster.memory_limit={}``, the size filled in).

    Raises
    ------
    ConfigError
        Naming ``what``, the memory a worker may use, the least a candidate needs, and the fix.
    """
    if worker_memory is None or not configs:
        return
    placed = {pair: place(cfg, dataset, worker_memory, n_workers, parallel or "runs") for pair, cfg in configs.items()}
    if any(p.how != "none" for p in placed.values()):
        return
    nbytes, categories = data_bytes(dataset), n_categories(dataset)
    least, pair = min((need(cfg["engine"]["name"], nbytes, categories), pair) for pair, cfg in configs.items())
    pause = pause_fraction()
    enough = 2 ** math.ceil(math.log2(least / pause / 2**20))      # MiB, a power of two
    raise ConfigError(f"{what} leaves each Dask worker {_size(worker_memory)} before Dask pauses it (at {pause:.0%}), "
                      f"and no candidate fits: the least, {pair[0]}-{pair[1]}, needs about {_size(least)} (a worker "
                      f"process with the engines takes {_size(PROCESS_BYTES)}); "
                      + fix.format(f"{enough // 1024}GiB" if enough >= 1024 else f"{enough}MiB"))


def pause_fraction() -> float:
    """The share of a worker's ``memory_limit`` at which Dask pauses it (``distributed.worker.memory.pause``)."""
    import dask  # optional: dask

    return float(dask.config.get("distributed.worker.memory.pause") or 1.0)


def _first_sentence(text: str) -> str:
    return text.split("; ")[0].split(". ")[0]
