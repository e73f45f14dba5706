"""The cases of ``benchmarks/edge_sweep.py`` and the machinery they run on: ``harness`` makes the data, runs and
watches the commands, starts Dask processes of the user's own and turns what a run left into a verdict;
``registry`` holds the list of cases and ``Ctx``, what each case is handed; the modules in ``GROUPS`` add the
cases, group by group, to ``CASES`` when imported, in the order the sweep runs them.
"""

from importlib import import_module

from .harness import PY, ROOT, V, write_data
from .registry import CASES, Case, Ctx

#: The modules of cases, in the sweep's order: importing each appends its cases to ``CASES``.
GROUPS = tuple(import_module(f"{__name__}.{name}") for name in ("stops", "cluster", "resume", "folders", "tuning",
                                                                 "misc"))

__all__ = ["CASES", "GROUPS", "PY", "ROOT", "Case", "Ctx", "V", "write_data"]
