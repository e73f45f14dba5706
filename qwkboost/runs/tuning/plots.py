"""A study's pictures and table of trials, logged to its parent MLflow run under ``study/``.

==============================  ==========================================================================
``optimization_history.png``    every completed trial's value and the best so far (Optuna's plot)
``param_importances.png``       how much each parameter explains the values (fANOVA; two or more trials)
``parallel_coordinate.png``     the trials' parameters and values, one line each
``intermediate_values.png``     every trial's score after each CV fold: where the pruned ones stopped
``trials.csv``                  one row per trial: number, state, value, parameters, fold scores, MLflow run
==============================  ==========================================================================

The plots are ``optuna.visualization.matplotlib``'s. One drawn from too few completed trials would mislead (fANOVA
on one trial gives every parameter the same importance): below :data:`MIN_COMPLETE` of them its picture says so
instead, and a log line too.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

from qwkboost import tracking

__all__ = ["log_study", "PLOTS", "MIN_COMPLETE"]

log = logging.getLogger(__name__)

PLOTS = ("optimization_history", "param_importances", "parallel_coordinate", "intermediate_values")
#: The completed trials a plot needs before it says anything (the others are drawn from any trial).
MIN_COMPLETE = {"optimization_history": 1, "param_importances": 5, "parallel_coordinate": 2}


def log_study(study, metric: str) -> list[str]:
    """Log the study's plots and its table of trials to the active MLflow run; return the artifact paths."""
    import matplotlib  # slow to import: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # slow to import: matplotlib.pyplot
    import optuna  # slow to import: optuna
    import optuna.visualization.matplotlib as vis  # slow to import: optuna.visualization


    logged = []
    n_done = sum(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    for name in PLOTS:
        need = MIN_COMPLETE.get(name, 0)
        if n_done < need:
            why = (f"{name.replace('_', ' ')}: not drawn, {n_done} trial(s) completed of {len(study.trials)} "
                   f"(the others pruned or failed);\nit needs at least {need} completed trials")
            log.info("study plot %s", why.replace("\n", " "))
            fig, ax = plt.subplots(figsize=(9, 2.5))
            ax.axis("off")
            ax.text(0.5, 0.5, why, ha="center", va="center", fontsize=12, wrap=True)
            tracking.log_figure(fig, f"study/{name}.png")
            plt.close(fig)
            logged.append(f"study/{name}.png")
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ax = getattr(vis, f"plot_{name}")(study)
        except (ValueError, RuntimeError, ZeroDivisionError) as exc:
            log.info("study plot %s skipped: %s", name, exc)
            continue
        axes = ax if not hasattr(ax, "figure") else [ax]
        fig = next(iter(getattr(axes, "flat", axes))).figure
        fig.set_size_inches(9, 5.5)
        if name == "optimization_history":
            fig.axes[0].set_ylabel(metric)
        fig.tight_layout()
        path = f"study/{name}.png"
        tracking.log_figure(fig, path)
        plt.close(fig)
        logged.append(path)
    frame = study.trials_dataframe(attrs=("number", "state", "value", "params", "user_attrs", "duration"))
    frame = frame.drop(columns=[c for c in frame.columns if c.endswith(tracking.PROCESS_TAG)], errors="ignore")
    frame["state"] = frame["state"].astype(str)
    with tracking.tmpdir() as d:

        p = Path(d) / "trials.csv"
        frame.to_csv(p, index=False)
        tracking.log_file(p, "study")
    logged.append("study/trials.csv")
    log.info("study plots and table of %d trials (%d complete) logged under study/", len(study.trials), n_done)
    return logged
