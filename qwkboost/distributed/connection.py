"""Where to train: a Dask scheduler's address or a ``LocalCluster`` on this machine (:class:`ClusterSpec`), and a
client connected to it (:func:`connect`)."""

from __future__ import annotations

import ast
import logging
import os
import signal
import socket
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from typing import Any, Iterator, Mapping
from urllib.parse import urlsplit

from qwkboost.exceptions import ConfigError
from qwkboost.validation import check_int

__all__ = ["ClusterSpec", "connect", "check_reachable_by_workers", "blind_workers", "sees_path", "TRACKING_FIX"]

#: What workers that cannot reach the MLflow store need.
TRACKING_FIX = "give an MLflow server the workers reach (tracking.uri=http://host:5000)"


@dataclass(frozen=True)
class ClusterSpec:
    """Where to train: a scheduler's ``address``, or a :class:`~distributed.LocalCluster` of ``n_workers``.

    Attributes
    ----------
    address : str or None
        ``tcp://host:8786`` of a running Dask scheduler; ``None`` starts a
        ``LocalCluster`` on this machine (on 127.0.0.1).
    n_workers, threads_per_worker : int
        Of the ``LocalCluster`` (ignored with ``address``).
    memory_limit : str
        Per worker, as Dask reads it (``"auto"``, ``"4GiB"``).
    parallel : {"runs", "rows"} or None
        What the workers share: ``runs``, whole cross-validated runs side by side, one per worker (``experiment=auto``'s
        candidates, ``tune.py``'s trials: their default); ``rows``, each fold's rows, trained across the workers
        through the engine's Dask interface (a single run's default and only way). ``None``: the command's default.
    """

    address: str | None = None
    n_workers: int = 2
    threads_per_worker: int = 1
    memory_limit: str = "auto"
    parallel: str | None = None

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None) -> "ClusterSpec | None":
        """The spec of a ``cluster`` config group, or ``None`` when no cluster is asked for.

        A cluster is asked for by ``cluster=local`` or by setting ``cluster.address``.
        """
        if not cfg:
            return None
        address = cfg.get("address")
        if cfg.get("name", "none") == "none" and not address:
            return None
        if address is not None and not (isinstance(address, str) and "://" in address):
            raise ValueError(f"cluster.address must be a scheduler address such as tcp://10.0.0.5:8786; "
                             f"got {address!r}")
        parallel = cfg.get("parallel")
        if parallel not in (None, "runs", "rows"):
            raise ValueError(f"cluster.parallel must be runs (whole runs side by side, one per worker) or rows (each "
                             f"fold's rows across the workers), or null for the command's default; got {parallel!r}")
        spec = cls(address=address or None,
                   n_workers=check_int(cfg.get("n_workers", 2), "cluster.n_workers", 1),
                   threads_per_worker=check_int(cfg.get("threads_per_worker", 1), "cluster.threads_per_worker", 1),
                   memory_limit=str(cfg.get("memory_limit", "auto")), parallel=parallel)
        spec.worker_memory()        # a limit Dask cannot read is refused here, not by a worker that fails to start
        return spec

    def worker_memory(self) -> int | None:
        """The bytes each worker of this spec's ``LocalCluster`` may use, read as Dask reads ``memory_limit``
        (``"auto"``: this machine's memory shared by the workers; a fraction of 1 or less: of this machine's
        memory); ``None``: no limit (``0``), or no ``LocalCluster`` (``address``).

        Raises
        ------
        ValueError
            Naming ``cluster.memory_limit``, for a value Dask cannot read or one below zero.
        """
        if self.address:
            return None
        try:
            from distributed.worker_memory import parse_memory_limit  # optional: distributed
        except ImportError:
            return None
        limit = self.memory_limit
        try:
            parsed = parse_memory_limit(limit, self.threads_per_worker, self.n_workers * self.threads_per_worker,
                                        logger=logging.getLogger("qwkboost.distributed"))
        except (ValueError, TypeError):
            parsed = -1
        if parsed is not None and parsed < 0:
            raise ValueError(f"cluster.memory_limit={limit!r} is not a size Dask can read: give one such as 4GiB or "
                             "500MB, auto (this machine's memory shared by the workers), a fraction of it such as "
                             "0.5, or 0 for no limit")
        return parsed


@contextmanager
def connect(spec: ClusterSpec | None = None, timeout: float = 10.0) -> Iterator[Any]:
    """A :class:`distributed.Client` on ``spec`` (default: a 2-worker ``LocalCluster``), closed on exit.

    Raises
    ------
    ConfigError
        If the scheduler at ``spec.address`` refuses the connection or does not answer within ``timeout`` seconds.

    Notes
    -----
    A ``LocalCluster`` started by a script's top-level code outside ``if __name__ == "__main__":`` starts its workers
    without importing the script again (:func:`_script_unseen`), so the script works as it would in a notebook.
    """
    from distributed import Client, LocalCluster  # optional: distributed

    spec = spec or ClusterSpec()
    # the scheduler's and workers' lifecycle lines would drown the run's own log at INFO
    for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.core"):
        logging.getLogger(name).setLevel(logging.WARNING)
    if spec.address:
        refusal = (f"cluster.address={spec.address}: no Dask scheduler answers there ({{}}); start one (dask "
                   f"scheduler; dask worker {spec.address}), or use cluster=local for a cluster on this machine")
        _check_listening(spec.address, timeout, refusal)
        try:
            client = Client(spec.address, timeout=f"{timeout}s")
        except (OSError, TimeoutError) as exc:
            raise ConfigError(refusal.format(type(exc).__name__)) from None
        try:
            yield client
        finally:
            _close(client)
        return
    # the nannies run in this process and start (and restart) the workers from it, for as long as the cluster lives
    with _script_unseen(_unguarded_script()):
        with _children_ignore_sigint():
            cluster = LocalCluster(n_workers=spec.n_workers, threads_per_worker=spec.threads_per_worker,
                                   processes=True, memory_limit=spec.memory_limit, host="127.0.0.1",
                                   dashboard_address=None)
        with cluster, Client(cluster) as client:
            yield client


def _close(client, timeout: float = 10.0) -> None:
    """Close ``client``; one whose scheduler was lost closes without waiting for it, and without an error that would
    hide the run's own end."""
    try:
        client.close(timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - the scheduler went away: there is nothing left to close
        logging.getLogger(__name__).debug("closing the Dask client: %s", exc)


def _check_listening(address: str, timeout: float, refusal: str) -> None:
    """Refuse at once an address where nothing listens (a refused TCP connection), rather than after the client's
    retries for ``timeout`` seconds (22 s were seen); an address that does not answer waits ``timeout`` seconds."""
    try:
        parts = urlsplit(address)
        host, port = parts.hostname, parts.port
    except ValueError:
        return
    if not parts.scheme.startswith("tcp") or not host or not port:
        return                      # another transport (tls://, ucx://, inproc://): the client says
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except ConnectionRefusedError:
        raise ConfigError(refusal.format("the connection was refused")) from None
    except OSError as exc:
        raise ConfigError(refusal.format(exc.strerror or type(exc).__name__)) from None


def _unguarded_script() -> tuple[str, int] | None:
    """The script and line whose top-level code, outside ``if __name__ == "__main__":``, is starting a
    ``LocalCluster`` now, or ``None`` (under the guard, in a function called from it, in an interactive session or a
    notebook, whose code nothing imports again, or where the script's source cannot be read)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_globals is getattr(main, "__dict__", None)
                                     and frame.f_code.co_name == "<module>"):
        frame = frame.f_back
    if frame is None or not path or os.path.abspath(frame.f_code.co_filename) != os.path.abspath(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None
    line = frame.f_lineno
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_main_test(node.test) and \
                any(n.lineno <= line <= (n.end_lineno or n.lineno) for n in node.body):
            return None
    return path, line


@contextmanager
def _script_unseen(where: tuple[str, int] | None) -> Iterator[None]:
    """While a ``LocalCluster`` started from a script's top level (``where``: the script and line) lives, its worker
    processes start, and restart, without importing the script again. Dask starts them with multiprocessing's
    *spawn*, which runs the main script again in each new process, as Python's ``multiprocessing`` guide says a
    script must allow for with ``if __name__ == "__main__":``; unguarded, that line would start a cluster again in
    every worker (each failing to start, after hundreds of lines of errors). Spawn leaves the new process's main
    module alone when the main module's spec is named ``__main__`` (as for a package's ``__main__.py``): so it is
    named, for the cluster's life, and the script's ``__file__`` stays as it was."""
    main = sys.modules.get("__main__")
    if where is None or main is None:
        yield
        return
    logging.getLogger(__name__).warning(
        "%s, line %d: a LocalCluster starts outside `if __name__ == \"__main__\":`; its workers start without "
        "importing the script again (objects defined in the script cannot be sent to them)", *where)
    saved = main.__spec__
    main.__spec__ = ModuleSpec("__main__", None)
    try:
        yield
    finally:
        main.__spec__ = saved


def _is_main_test(test) -> bool:
    """Whether ``test`` is ``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = (test.left, test.comparators[0])
    return any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides) and \
        any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides)


@contextmanager
def _children_ignore_sigint() -> Iterator[None]:
    """SIGINT ignored while the ``LocalCluster``'s processes start, so they inherit that: Ctrl-C reaches the whole
    process group of a terminal, and the workers must live on until the client has stopped their tasks (it then
    closes them). Python keeps an ignored SIGINT ignored in a new interpreter."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def sees_path(path: str) -> bool:
    """Whether ``path`` exists where this runs (on a worker, through :meth:`distributed.Client.run`)."""
    return os.path.exists(path)


def _local_path(uri: str) -> str | None:
    """The file or folder of this machine that ``uri`` names (an SQLite URL, a folder or ``file://`` URL); ``None``
    for a server's URL (``http://``, ``postgresql://``)."""
    if uri.startswith(("http://", "https://", "postgresql", "mysql", "databricks")):
        return None
    if uri.startswith("sqlite"):
        from sqlalchemy.engine import make_url  # slow to import: sqlalchemy

        return make_url(uri).database
    return uri.removeprefix("file://")


def blind_workers(client, uri: str) -> list[str]:
    """The workers of ``client`` that do not see ``uri``, a store of this machine (an SQLite URL, a folder or
    ``file://`` URL); none for a server's URL (``http://``, ``postgresql://``)."""
    path = _local_path(uri)
    if path is None:
        return []
    return [w for w, s in client.run(sees_path, str(path)).items() if not s]


def check_reachable_by_workers(client, uri: str, what: str, fix: str) -> None:
    """Refuse, in one line, a store of this machine (an SQLite URL, a folder or ``file://`` URL) that some worker
    of ``client`` does not see; a server's URL (``http://``, ``postgresql://``) is left to the server.

    Raises
    ------
    ConfigError
        Naming ``what``, the workers that do not see it, and ``fix``.
    """
    blind = blind_workers(client, uri)
    if blind:
        raise ConfigError(f"{what} is a file of this machine ({_local_path(uri)}) that the Dask worker(s) at "
                          f"{', '.join(blind)} do not see; {fix}")
