"""An explanation's files: what a run logs to MLflow under ``explanations/`` and ``experiments/explain.py`` writes.

========================  ===================================================================================
``importance.csv``        per feature (and output): mean |SHAP value|, its share, the share of split gain
``importance.png``        the bars (:func:`qwkboost.explanations.plots.importance_bars`)
``summary.png``           the SHAP summary, a beeswarm (:func:`qwkboost.explanations.plots.beeswarm`)
``shap_values.parquet``   the rows' ids, their SHAP values, bias and score
``rows.png``              the ordinal view of three rows (when the score is cut directly)
``dependence.png``        the top feature's SHAP values with the cut points (likewise)
========================  ===================================================================================
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["write_report", "pick_rows", "DPI"]

#: Resolution of the pictures (a run's are looked at in the MLflow UI, at about 800 pixels wide).
DPI = 100


def pick_rows(exp, n: int = 3, seed: int = 0) -> list[int]:
    """Rows whose walk crosses the most cut points (the ordinal view's most telling), ties by ``seed``."""
    from qwkboost.explanations.ordinal import class_of  # slow to import: matplotlib

    start, end = class_of(exp, exp.bias), class_of(exp, exp.score)
    names = list(exp.labels) if exp.labels is not None else [f"{c:g}" for c in exp.classes]
    where = {c: k for k, c in enumerate(names)}
    moved = np.abs(np.array([where[e] for e in end]) - np.array([where[s] for s in start]))
    noise = np.random.RandomState(seed).uniform(0, 0.5, moved.size)
    return [int(i) for i in np.argsort(-(moved + noise))[:n]]


def write_report(exp, out, ids=None, id_name: str | None = None, pictures: bool = True, reserved=()) -> list[Path]:
    """Write the explanation's files (the module's table) into ``out``; return their paths. ``id_name``: the
    user's id column (``None``: the rows' positions, in qwkboost's ``row`` column); the values' table follows the
    column rule (:meth:`~qwkboost.explanations.explanation.Explanation.frame`; ``reserved``: the run's other
    columns of yours, its label, entity and weight). ``pictures=False``: the two tables only (drawing the pictures
    takes about a second)."""
    from qwkboost.explanations import ordinal, plots  # slow to import: matplotlib

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = [out / "importance.csv", out / "shap_values.parquet"]
    exp.importance().to_csv(files[0], index=False)
    exp.frame(ids, id_name, reserved).to_parquet(files[1], index=False)
    if not pictures:
        return files
    for f, fig in ((out / "importance.png", plots.importance_bars(exp)), (out / "summary.png", plots.beeswarm(exp))):
        fig.savefig(f, dpi=DPI)
        files.append(f)
    if exp.cuts is not None and exp.n_outputs == 1:
        rows = pick_rows(exp)
        fig, axes = plots.figure((8, 4.2 * len(rows)), len(rows), 1, squeeze=False)
        for i, ax in zip(rows, axes[:, 0]):
            ordinal.plot_row(exp, i, max_features=8, ax=ax)
        fig.tight_layout()
        f = out / "rows.png"
        fig.savefig(f, dpi=DPI)
        files.append(f)
        top = exp.importance()["feature"].iloc[0]
        fig = ordinal.plot_dependence(exp, top)
        f = out / "dependence.png"
        fig.savefig(f, dpi=DPI)
        files.append(f)
    return files
