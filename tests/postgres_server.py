"""A throwaway PostgreSQL server for tests: Debian's server binaries, a temporary cluster on loopback.

The cluster lives in a temporary directory, trusts local and loopback
connections, listens on 127.0.0.1 only (its socket in the same directory), and
is stopped and removed afterwards. PostgreSQL refuses to run as root, so as
root the server runs as the ``postgres`` system user (Debian's package creates
it). Used through the ``postgres_url`` fixture of ``conftest.py``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

__all__ = ["find_bindir", "free_port", "missing_reason", "running_postgres"]

INSTALL_HINT = "apt-get install postgresql"
SERVER_USER = "postgres"


def find_bindir() -> Path | None:
    """The directory of ``initdb``, ``pg_ctl`` and ``createdb``: on ``PATH``, else the newest
    ``/usr/lib/postgresql/*/bin``; ``None`` if neither has them."""
    on_path = {shutil.which(b) and Path(shutil.which(b)).parent for b in ("initdb", "pg_ctl", "createdb")}
    if len(on_path) == 1 and None not in on_path:
        return on_path.pop()

    def major(d: str) -> float:
        try:
            return float(Path(d).parent.name)
        except ValueError:
            return -1.0
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=major, reverse=True):
        if all(os.access(Path(d) / b, os.X_OK) for b in ("initdb", "pg_ctl", "createdb")):
            return Path(d)
    return None


def _as_server_user() -> list[str] | None:
    """The prefix that runs a command as a user PostgreSQL accepts: none needed unless root; ``None`` if impossible."""
    if os.geteuid() != 0:
        return []                       # any user but root may run the server
    try:
        pwd.getpwnam(SERVER_USER)
    except KeyError:
        return None
    runuser = shutil.which("runuser")
    return [runuser, "-u", SERVER_USER, "--"] if runuser else None


def missing_reason() -> str | None:
    """Why a server cannot be started here, or ``None`` if it can."""
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        return ("psycopg2 (the PostgreSQL driver) is not installed; install the extra: pip install -e '.[cluster]'")
    if find_bindir() is None:
        return (f"PostgreSQL server binaries not found (initdb, pg_ctl, createdb on PATH or in "
                f"/usr/lib/postgresql/*/bin; {INSTALL_HINT})")
    if _as_server_user() is None:
        return (f"running as root, and no '{SERVER_USER}' user or no runuser to run PostgreSQL as (it refuses "
                f"to run as root); {INSTALL_HINT} creates the user, util-linux has runuser")
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(cmd: list[str], what: str, timeout: float = 120) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
    return proc.stdout


@contextlib.contextmanager
def running_postgres(dbname: str = "qwkboost_test") -> Iterator[str]:
    """Start a server on a free loopback port, create ``dbname``, yield its SQLAlchemy URL; always stop and remove it.

    Yields
    ------
    str
        ``postgresql+psycopg2://postgres@127.0.0.1:PORT/dbname`` (trust authentication, no password).

    Raises
    ------
    RuntimeError
        If ``initdb``, ``pg_ctl start`` or ``createdb`` fails, with its output.
    """
    reason = missing_reason()
    if reason:
        raise RuntimeError(reason)
    bindir, runas = find_bindir(), _as_server_user()
    # under /tmp, not pytest's tmp_path: that is private to root (0700), which the postgres user cannot enter
    base = Path(tempfile.mkdtemp(prefix="qwkboost-pg-"))
    data, log = base / "data", base / "server.log"
    if runas:
        pw = pwd.getpwnam(SERVER_USER)
        os.chown(base, pw.pw_uid, pw.pw_gid)
    try:
        _run([*runas, str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
              "--encoding=UTF8", "--no-sync"], "initdb")
        for _ in range(5):              # another process may take the free port before the server does
            port = free_port()
            log.unlink(missing_ok=True)
            opts = f"-h 127.0.0.1 -p {port} -k {base} -c fsync=off -c full_page_writes=off"
            proc = subprocess.run([*runas, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", opts,
                                   "-w", "-t", "60", "start"], capture_output=True, text=True, timeout=120)
            if proc.returncode == 0:
                break
            text = log.read_text() if log.exists() else ""
            if "could not bind" not in text and "Address already in use" not in text:
                raise RuntimeError(f"pg_ctl start failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}\n"
                                   f"{text[-2000:]}")
        else:
            raise RuntimeError(f"pg_ctl start found no free port in 5 tries:\n{log.read_text()[-2000:]}")
        _run([str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", dbname], "createdb")
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/{dbname}"
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run([*runas, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                           capture_output=True, timeout=120)
        shutil.rmtree(base, ignore_errors=True)

