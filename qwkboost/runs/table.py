r"""The QWK benchmark table: engines x objectives under one protocol, one parent MLflow run.

The table of rsakata, "[Kaggle] DSB2019: QWKをGBDTで直接最適化する" (Optimising QWK
directly with GBDT, 2020; code at https://www.kaggle.com/code/rsakata/optimize-qwk-by-lgb)
is reproduced row by row, and its figures are shown beside ours where the
protocol is the article's (:func:`matches_article`). The Bayes ceiling of its
data shows how close each row comes to the best achievable QWK.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from qwkboost import tracking
from qwkboost.data.dataset import Dataset
from qwkboost.data.shift import shift_weights
from qwkboost.evaluation.metrics import qwk
from qwkboost.evaluation.thresholds import apply_thresholds, fit_exact
from qwkboost.exceptions import config_errors
from qwkboost.runs.experiment import check_against_data, load_dataset, run_experiment

__all__ = ["ARTICLE_TABLE", "ARTICLE_PROTOCOL", "COLUMNS", "bayes_ceiling", "matches_article", "run_table",
           "render"]

log = logging.getLogger(__name__)

COLUMNS = ["engine", "objective", "qwk_round", "qwk_thresholds", "thresholds", "fit_seconds"]

#: The article's published figures: (test QWK rounded, test QWK with 5-fold CV thresholds).
ARTICLE_TABLE = {
    ("xgboost", "squared_error"): (0.5806, 0.6335),
    ("xgboost", "extended_qwk"): (0.6350, 0.6351),
    ("lightgbm", "squared_error"): (0.5797, 0.6348),
    ("lightgbm", "extended_qwk"): (0.6352, 0.6347),
}

#: The article's protocol: its data at its sizes, 5-fold CV, learning rate 0.1, early stopping after
#: 100 rounds, XGBoost at depth 5 and LightGBM at its defaults, extended QWK with a constant hessian.
ARTICLE_PROTOCOL = {
    "data": {"name": "quartiles", "n_train": 100_000, "n_test": 100_000, "seed": 0, "test_seed": 1,
             "n_features": 10, "n_visible": 5, "n_classes": 4},
    "cv": {"n_splits": 5},
    "engine": {"early_stopping_rounds": 100, "params": {"learning_rate": 0.1}},
    "engine.xgboost": {"params": {"max_depth": 5}},
    "objective.extended_qwk": {"params": {"a": None, "b": None, "hessian": "constant", "clip": "range"}},
}


def _contains(have: Any, want: Any) -> bool:
    if isinstance(want, Mapping):
        return isinstance(have, Mapping) and all(_contains(have.get(k), v) for k, v in want.items())
    return have == want


def matches_article(cfg: Mapping[str, Any]) -> bool:
    """Whether a row runs the article's protocol on the article's data, so its figures compare."""
    engine, objective = cfg["engine"]["name"], cfg["objective"]["name"]
    if (engine, objective) not in ARTICLE_TABLE:
        return False
    parts = [(cfg.get("data"), ARTICLE_PROTOCOL["data"]), (cfg.get("cv"), ARTICLE_PROTOCOL["cv"]),
             (cfg.get("engine"), ARTICLE_PROTOCOL["engine"]),
             (cfg.get("engine"), ARTICLE_PROTOCOL.get(f"engine.{engine}", {})),
             (cfg.get("objective"), ARTICLE_PROTOCOL.get(f"objective.{objective}", {}))]
    return all(_contains(have, want) for have, want in parts)


def bayes_ceiling(ds: Dataset) -> float:
    r"""Test QWK of the best rule for the article's data, which only the generator knows.

    The class is the quantile of :math:`S + H`, the sums of the visible and the
    hidden uniforms, with :math:`H` independent of the visible columns. So
    :math:`P(\text{class} \ge k \mid x)` depends on :math:`x` only through
    :math:`S` and rises with it: monotone cut points on :math:`S` are the best
    achievable rule. They are fitted exactly (:func:`qwkboost.evaluation.thresholds.fit_exact`)
    on the training sum and labels and scored on the test set. The same holds
    for :func:`qwkboost.data.sources.latent_classes`; under label shift the training
    rows are weighted to the test proportions (:func:`qwkboost.data.shift.shift_weights`).
    """

    lo = ds.y_train.min()
    y = (ds.y_train - lo).astype(int)
    w = None if ds.test_prior is None else shift_weights(y, ds.test_prior)
    cuts = fit_exact(ds.X_train.sum(axis=1), y, sample_weight=w)
    return qwk((ds.y_test - lo).astype(int), apply_thresholds(ds.X_test.sum(axis=1), cuts))


def run_table(row_cfgs: Sequence[Mapping[str, Any]], experiment_id: str | None, output_dir: str | Path,
              name: str = "qwk_table", table_cfg: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Run every row config under one parent run; write ``qwk_table.csv`` and ``.md``.

    All rows share the data of the first config (loaded once). The parent run
    holds the table, the Bayes ceiling and one summary metric per row; each
    row is a child run with everything :func:`~qwkboost.runs.experiment.run_experiment` logs.
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    name = tracking.safe_name(name)
    first = row_cfgs[0]
    with config_errors():
        ds = load_dataset(first["data"], int(first.get("seed", 0)), first["cv"].get("group"))
        for cfg in row_cfgs:        # every row's parameters, before the first row trains
            check_against_data(cfg, ds)
    ceiling = bayes_ceiling(ds) if first["data"]["name"] == "quartiles" else None

    def body(parent_id: str | None) -> pd.DataFrame:
        rows = []
        for i, cfg in enumerate(row_cfgs):
            label = f"{cfg['engine']['name']}/{cfg['objective']['name']}"
            log.info("row %d/%d: %s", i + 1, len(row_cfgs), label)
            row = run_experiment(cfg, experiment_id, parent_run_id=parent_id, run_name=label,
                                 output_dir=output_dir / tracking.safe_name(label.replace("/", "__")), dataset=ds)
            ref = ARTICLE_TABLE.get((cfg["engine"]["name"], cfg["objective"]["name"])) \
                if matches_article(cfg) else None
            row["article_round"], row["article_thresholds"] = ref if ref else (np.nan, np.nan)
            rows.append(row)
        df = pd.DataFrame(rows)
        for col in COLUMNS:
            if col not in df:
                df[col] = np.nan
        df["thresholds"] = df["thresholds"].map(lambda t: "[" + ", ".join(f"{v:.3f}" for v in t) + "]"
                                                if isinstance(t, list) else "")
        table = df[COLUMNS + ["article_round", "article_thresholds"]].copy()
        if table[["article_round", "article_thresholds"]].isna().all().all():
            table = table.drop(columns=["article_round", "article_thresholds"])
        table.to_csv(output_dir / f"{name}.csv", index=False)
        md = _markdown(table, ceiling)
        (output_dir / f"{name}.md").write_text(md)
        if parent_id is not None:
            tracking.log_params({"table": dict(table_cfg or {}), "data": dict(first["data"]),
                                 "cv": dict(first["cv"]), "thresholds": dict(first["thresholds"])})
            tracking.set_tags(tracking.version_tags())
            summary = {f"{r.engine}.{r.objective}.{c}": getattr(r, c) for r in table.itertuples()
                       for c in ("qwk_round", "qwk_thresholds", "fit_seconds") if pd.notna(getattr(r, c))}
            if ceiling is not None:
                summary["bayes_ceiling"] = ceiling
            tracking.log_metrics(summary)
            tracking.log_file(output_dir / f"{name}.csv")
            tracking.log_file(output_dir / f"{name}.md")
        return table

    if experiment_id is None:
        table = body(None)
    else:
        with tracking.run(experiment_id, name, tags={"kind": "table"}) as parent:
            table = body(parent.info.run_id)
        log.info("MLflow run: %s", tracking.run_link(experiment_id, parent.info.run_id))
    render(table, ceiling)
    log.info("table written to %s/%s.{csv,md}", output_dir, name)
    return table


def _markdown(table: pd.DataFrame, ceiling: float | None) -> str:
    fmt = table.copy()
    for c in ("qwk_round", "qwk_thresholds", "article_round", "article_thresholds"):
        if c in fmt:
            fmt[c] = fmt[c].map(lambda v: f"{v:.4f}" if pd.notna(v) else "")
    fmt["fit_seconds"] = fmt["fit_seconds"].map(lambda v: f"{v:.1f}")
    cols = list(fmt.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(v) for v in r) + " |" for r in fmt[cols].itertuples(index=False)]
    if "article_round" in fmt:
        lines += ["", "article_*: the figures of rsakata (2020), \"[Kaggle] DSB2019: QWKをGBDTで直接最適化する\", "
                  "shown for rows run on its data with its protocol."]
    if ceiling is not None:
        lines += ["", f"Bayes ceiling (cut points on the sum of the visible columns): test QWK {ceiling:.4f}"]
    return "\n".join(lines) + "\n"


def render(table: pd.DataFrame, ceiling: float | None = None) -> None:
    """Print the table in the terminal, with the article's figures (where they compare) and the ceiling."""

    article = "article_round" in table
    t = Table(title="test QWK: rounded and with cut points fitted on out-of-fold predictions")
    cols = [("engine", "left"), ("objective", "left"), ("qwk_round", "right"), ("qwk_thresholds", "right")]
    if article:
        cols.append(("article (round / thr)", "right"))
    cols += [("thresholds", "left"), ("fit_seconds", "right")]
    for col, just in cols:
        t.add_column(col, justify=just, no_wrap=True)
    for r in table.itertuples(index=False):
        cells = [r.engine, r.objective, f"{r.qwk_round:.4f}", f"{r.qwk_thresholds:.4f}"]
        if article:
            cells.append(f"{r.article_round:.4f} / {r.article_thresholds:.4f}" if pd.notna(r.article_round) else "-")
        t.add_row(*cells, r.thresholds, f"{r.fit_seconds:.1f}")
    if ceiling is not None:
        t.add_row("bayes ceiling", "cuts on visible sum", "", f"{ceiling:.4f}", *([""] * (len(cols) - 4)),
                  style="bold")
    console = Console()
    if not console.is_terminal:
        console = Console(width=150)   # logs and pipes: no wrapping
    console.print(t)
