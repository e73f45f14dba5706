r"""A multi-seed study of ordinal methods: does optimising QWK directly beat squared error plus thresholds?

One *cell* is a regime (a data config), a seed, a method and an engine, run
through the project's protocol: stratified K-fold CV with early stopping, cut
points fitted on the out-of-fold scores, test QWK. A method is trained once per
cell and scored with each of its *decoders*: rounding, exact or
distribution-matching cut points (:mod:`qwkboost.evaluation.thresholds`), or the most
probable class (``argmax``, for methods with class probabilities). Every method
sees the same seeds, so methods are compared by per-seed differences
(:mod:`qwkboost.evaluation.stats`).

Cells are content-addressed: each is stored in ``study.cache_dir`` under a hash
of everything that decides its result, so running the same command again
reuses finished cells (a killed study resumes) and a changed setting computes
new ones. The report (``study.md``, ``study.csv``, ``cells.csv``, plots) is
written to the run's output directory, and MLflow holds a parent run with one
child per cell. A *blend* method (``members: [...]``) blends the out-of-fold and
test scores of other methods' cells on the same folds (:mod:`qwkboost.blending`),
and the report says whether it beats the best single method.

The parts: :mod:`~qwkboost.study.spec` (the settings), :mod:`~qwkboost.study.cells`
(building and computing cells), :mod:`~qwkboost.study.cache`,
:mod:`~qwkboost.study.tuning` (an equal Optuna budget for tuned methods),
:mod:`~qwkboost.study.report` (statistics, verdicts, ``study.md``),
:mod:`~qwkboost.study.plots` and :mod:`~qwkboost.study.runner`.
"""

from qwkboost.study.cells import (
           Cell,
           build_cells,
           cell_key,
           check_cells,
           run_blend_cell,
           run_cell,
           seeded,
)
from qwkboost.study.report import (
    blend_comparison,
    cells_frame,
    engine_comparison,
    render_report,
    summarise,
    tuning_comparison,
)
from qwkboost.study.runner import run_study
from qwkboost.study.spec import DECODERS, TEST_SEED_OFFSET, TUNED, MethodSpec, StudySpec
from qwkboost.study.tuning import tune_cell

__all__ = ["StudySpec", "MethodSpec", "Cell", "build_cells", "check_cells", "cell_key", "seeded", "run_cell",
           "run_blend_cell", "run_study", "summarise", "blend_comparison", "tuning_comparison", "engine_comparison",
           "cells_frame",
           "render_report", "tune_cell", "DECODERS", "TEST_SEED_OFFSET", "TUNED"]
