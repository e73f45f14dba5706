"""Ctrl-C and SIGTERM at the first moments of every ``experiments/*.py`` command, before its slow imports have
finished: exit status 130 (143 for SIGTERM), one line, no traceback.

A real process and a real signal. To stop it during its imports whatever the machine's speed, a
``sitecustomize`` on ``PYTHONPATH`` makes one import wait (``STALL_ON``, a module the command imports
after its first statement) and leaves a marker file when it does; the signal is sent once the marker is there.
Stops during training are tested in ``tests/runs/test_run_cli.py``.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

STALL = '''
import os
import sys
import time


class _Stall:
    """Waits once, at the first import of the module named by STALL_ON, after leaving the marker file."""

    done = False

    def find_spec(self, name, path=None, target=None):
        if name == os.environ.get("STALL_ON") and not self.done:
            self.done = True
            open(os.environ["STALL_MARKER"], "w").close()
            end = time.monotonic() + 120
            while time.monotonic() < end:
                time.sleep(0.01)
        return None


sys.meta_path.insert(0, _Stall())
'''


def _default_sigint():
    # a test suite started as a background job hands its children SIGINT ignored; a terminal's command has it
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stopped_while_importing(tmp_path, script, module, how):
    (tmp_path / "sitecustomize.py").write_text(STALL)
    marker = tmp_path / "stalled"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "STALL_ON": module, "STALL_MARKER": str(marker)}
    p = subprocess.Popen([sys.executable, str(ROOT / "experiments" / script)], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    try:
        while not marker.exists():
            assert p.poll() is None, f"{script} ended before importing {module}: {p.communicate()[1][-2000:]}"
            time.sleep(0.02)
        p.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    return p.returncode, err


@pytest.mark.parametrize("script, module, how", [
    ("run.py", "hydra", "ctrl-c"),
    ("run.py", "qwkboost.commands", "sigterm"),
    ("tune.py", "hydra", "ctrl-c"),
    ("blend.py", "qwkboost.blending", "ctrl-c"),
    ("predict.py", "pandas", "sigterm"),
    ("explain.py", "hydra", "ctrl-c"),
    ("demo.py", "numpy", "ctrl-c"),
    ("ui.py", "argparse", "sigterm"),
    ("extract_ordinal_datasets.py", "zipfile", "ctrl-c"),
])
def test_a_stop_during_the_imports_is_one_line(tmp_path, script, module, how):
    code, err = _stopped_while_importing(tmp_path, script, module, how)
    assert code == (143 if how == "sigterm" else 130), err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    stop = "terminated (SIGTERM)" if how == "sigterm" else "interrupted (Ctrl-C)"
    assert err.strip().splitlines() == [f"experiments/{script}: {stop} while starting; nothing had run"]


DROPPED = '''
import os
import signal
import time

from qwkboost.tracking.interrupt import main_guard


class Dropper:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)     # the handler runs here, inside a finalizer: Python drops what it raises


with main_guard("mine.py", tracked=False):
    Dropper()
    print("went on", flush=True)
'''


def test_a_stop_python_drops_in_a_finalizer_still_ends_the_command_stopped(tmp_path):
    """A Ctrl-C that lands while objects are freed is raised inside a finalizer, where Python drops it ("Exception
    ignored in ..."): the command then went on and ended with exit status 0 as if it had not been stopped (the
    sweep found it while a blend's files were written). It ends stopped now, with its one line."""
    (tmp_path / "mine.py").write_text(DROPPED)
    p = subprocess.run([sys.executable, str(tmp_path / "mine.py")], cwd=tmp_path, capture_output=True, text=True,
                       timeout=60, preexec_fn=_default_sigint)
    assert p.stdout.strip() == "went on"            # the finalizer's stop did not reach the code around it
    assert p.returncode == 130, p.stderr
    assert p.stderr.strip().splitlines() == ["mine.py: interrupted (Ctrl-C) as it ended; what it wrote is complete"]


ECHO = '''
import asyncio
import logging
import os
import signal
import sys
import threading
import time

from tornado.ioloop import IOLoop

from qwkboost.tracking.interrupt import main_guard

logging.basicConfig(stream=sys.stdout, format="%(name)s: %(message)s")
ready, loops = threading.Event(), []


def serve():                # an event loop in a thread, as a Dask client runs one
    asyncio.set_event_loop(asyncio.new_event_loop())
    loops.append(IOLoop.current())
    ready.set()
    loops[0].start()


def cancel():               # what Dask's sync schedules when a Ctrl-C lands before the call it waits on began
    raise NameError("cannot access free variable 'future' where it is not associated with a value")


threading.Thread(target=serve, daemon=True).start()
ready.wait()
with main_guard("mine.py", tracked=False):
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    except KeyboardInterrupt:
        loops[0].add_callback(cancel)
        time.sleep(0.5)
        raise
'''


def test_the_echo_of_a_stop_on_a_clients_event_loop_is_quiet(tmp_path):
    """A Ctrl-C while Dask's client waits on its event loop can make the loop log "Exception in callback" with a
    traceback (Dask's ``sync`` cancels a call whose future was not yet set; the sweep saw it as a tuning trial was
    sent to a cluster). After a stop that echo is quiet: the command's one line is all there is."""
    (tmp_path / "mine.py").write_text(ECHO)
    p = subprocess.run([sys.executable, str(tmp_path / "mine.py")], cwd=tmp_path, capture_output=True, text=True,
                       timeout=60, preexec_fn=_default_sigint)
    assert p.returncode == 130, p.stderr
    assert "Exception in callback" not in p.stdout + p.stderr and "Traceback" not in p.stdout + p.stderr, p.stdout
    assert p.stderr.strip().splitlines() == ["mine.py: interrupted (Ctrl-C)"]
