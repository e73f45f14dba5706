"""Running a study: missing cells computed in parallel (blends after their members), the cache reused, the
report written, and one MLflow parent run with a child per cell."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from pathlib import Path

import pandas as pd

from qwkboost import tracking
from qwkboost.study.cache import CellCache
from qwkboost.study.cells import Cell, compute_cell
from qwkboost.study.plots import plot_differences, plot_engines, plot_ranking, plot_sizes
from qwkboost.study.report import (
    blend_comparison,
    ceilings,
    cells_frame,
    engine_comparison,
    render_report,
    summarise,
    tuning_comparison,
)
from qwkboost.study.spec import StudySpec

__all__ = ["run_study"]

log = logging.getLogger(__name__)


def _log_child(client, experiment_id: str, parent_id: str, cell: Cell) -> str:
    from mlflow.entities import Metric, Param, RunTag  # slow to import: mlflow

    now = int(time.time() * 1000)
    tags = [RunTag("mlflow.parentRunId", parent_id), RunTag("mlflow.runName", cell.label),
            RunTag("study.cell", cell.key), RunTag("study.regime", cell.regime)]
    run = tracking.retry(client.create_run, experiment_id, tags={t.key: t.value for t in tags},
                          run_name=cell.label)
    r = cell.result
    metrics = [Metric(f"test_qwk_{d}", float(v), now, 0) for d, v in r["qwk"].items()]
    metrics += [Metric(f"oof_qwk_{d}", float(v), now, 0) for d, v in r["qwk_oof"].items()]
    metrics += [Metric(f"oof_qwk_nested_{d}", float(v), now, 0) for d, v in r.get("qwk_oof_nested", {}).items()]
    metrics += [Metric(k, float(r[k]), now, 0) for k in ("seconds", "fit_seconds") if r.get(k) is not None]
    params = {"regime": cell.regime, "engine": cell.engine, "method": cell.method.name, "seed": cell.seed,
              "decode": ",".join(cell.method.decode), "overrides": " ".join(cell.method.overrides) or "-",
              "peer": cell.method.peer or "-", "reused": bool(r.get("reused", False)),
              **({"members": ",".join(cell.method.members), "blend_method": cell.method.blend_method}
                 if cell.method.is_blend else {})}
    tracking.retry(client.log_batch, run.info.run_id, metrics=metrics,
                    params=[Param(k, str(v)) for k, v in params.items()])
    tracking.retry(client.set_terminated, run.info.run_id, "FINISHED")
    return run.info.run_id


def _find_parent(client, experiment_id: str, fingerprint: str):
    runs = tracking.retry(client.search_runs, [experiment_id],
                           f"tags.`study.fingerprint` = '{fingerprint}'", max_results=1,
                           order_by=["attributes.start_time DESC"])
    return runs[0] if runs else None


def run_study(spec: StudySpec, cells: list[Cell], experiment_id: str | None, output_dir: str | os.PathLike,
              command: str = "", run_name: str = "study") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Compute the missing cells in parallel, reuse the cached ones, and write and log the report.

    The MLflow parent run is found by the study's fingerprint (the hash of all its
    cell keys), so a resumed study continues the same parent run: children are
    logged for the cells that lack one.
    """
    from joblib import Parallel, delayed  # slow to import: joblib
    from tqdm.auto import tqdm  # slow to import: tqdm

    from qwkboost.cv.crossval import progress_enabled  # slow to import: scipy
    from qwkboost.engines.threads import threads_per_job  # slow to import: scipy

    t_start = time.perf_counter()
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    cache = CellCache(spec.cache_dir)
    need_scores = {k for c in cells for k in c.depends}     # the cells blends are made of keep their scores
    pending, pending_blends = [], []
    for c in cells:
        hit = cache.get(c.key)
        if hit is not None and (c.key not in need_scores or cache.get_scores(c.key) is not None):
            c.result = {**hit["result"], "reused": True}
        else:
            (pending_blends if c.method.is_blend else pending).append(c)
    n_reused = len(cells) - len(pending) - len(pending_blends)
    log.info("study: %d cells (%d regimes x %d seeds); %d reused from %s, %d to compute on %d workers",
             len(cells), len(spec.regimes), spec.seeds, n_reused, cache.root, len(pending) + len(pending_blends),
             spec.n_jobs)
    fingerprint = hashlib.sha256("".join(sorted(c.key for c in cells)).encode()).hexdigest()[:16]

    def body(parent_id: str | None) -> tuple[pd.DataFrame, pd.DataFrame]:
        client = None
        logged: set[str] = set()
        if parent_id is not None:
            import mlflow  # slow to import: mlflow

            client = mlflow.MlflowClient()
            tracking.set_tags({"study.fingerprint": fingerprint, "command": command,
                               **tracking.version_tags()})
            if spec.log_children:
                for r in client.search_runs([experiment_id], f"tags.`mlflow.parentRunId` = '{parent_id}'",
                                            max_results=50_000):
                    logged.add(r.data.tags.get("study.cell", ""))
                for c in cells:
                    if c.result is not None and c.key not in logged:
                        _log_child(client, experiment_id, parent_id, c)
                        logged.add(c.key)
        threads = threads_per_job(spec.n_jobs)
        bar = tqdm(total=len(cells), initial=n_reused, disable=not progress_enabled(), desc="study", unit="cell",
                   dynamic_ncols=True)
        done = n_reused
        t_run = time.perf_counter()
        n_todo = len(pending) + len(pending_blends)

        def compute(todo: list[Cell], task) -> None:
            """Run ``todo`` (cells sharing a key run once) in parallel; cache and log each as it finishes."""
            nonlocal done
            if not todo:
                return
            by_key: dict[str, list[Cell]] = {}
            jobs = []
            for c in todo:
                by_key.setdefault(c.key, []).append(c)
                if len(by_key[c.key]) == 1:
                    jobs.append(c)
            results = Parallel(n_jobs=spec.n_jobs, return_as="generator_unordered")(task(c) for c in jobs)
            for key, res in results:
                if "error" in res:
                    label = by_key[key][0].label
                    log.error("study cell %s failed:\n%s", label, res["traceback"])
                    raise RuntimeError(f"study cell {label} failed: {res['error']}")
                scores = res["ok"].pop("scores", None)
                if scores is not None:
                    cache.put_scores(key, scores)
                for c in by_key[key]:
                    c.result = res["ok"]
                cache.put(key, {"label": by_key[key][0].label, "result": res["ok"]})
                done += len(by_key[key])
                bar.update(len(by_key[key]))
                if client is not None and spec.log_children:
                    for c in by_key[key]:
                        if c.key not in logged:
                            _log_child(client, experiment_id, parent_id, c)
                            logged.add(c.key)
                if not bar.disable:
                    continue
                computed = done - n_reused
                if computed % max(1, n_todo // 20) == 0 or done == len(cells):
                    rate = (time.perf_counter() - t_run) / max(1, computed)
                    log.info("study: %d/%d cells, %.1f s per cell, about %.0f s to go", done, len(cells),
                             rate, rate * (len(cells) - done))

        try:
            tuning_dir = str(cache.root / "tuning")     # a method tuned once serves every seed
            compute(pending, lambda c: delayed(compute_cell)(c.key, c.config, c.method, threads, c.key in need_scores,
                                                             tuning_dir=tuning_dir))
            # blends last: they read their members' scores from the cache
            compute(pending_blends, lambda c: delayed(compute_cell)(c.key, c.config, c.method, threads,
                                                             scores=[cache.get_scores(k) for k in c.depends]))
        finally:
            bar.close()
        df = cells_frame(cells)
        ref_method = spec.reference.partition("+")[0]
        summary, headline = summarise(df, spec.confidence, spec.alpha, spec.reference, spec.test)
        blends = blend_comparison(df, spec.confidence, spec.test)
        tuning = tuning_comparison(df, spec.confidence, spec.test)
        engines = engine_comparison(df, spec.confidence, spec.alpha, spec.test, ref_method)
        timing = {"wall": time.perf_counter() - t_start, "computed": n_todo, "reused": n_reused,
                  "cell_total": float(df.drop_duplicates("key")["cell_seconds"].sum())}
        timing["history"] = cache.record_command(fingerprint, timing["wall"], n_todo, n_reused)
        ceiling = ceilings(cells)
        md = render_report(spec, df, summary, headline, timing, command, ceiling, blends, tuning, engines)
        (out / "study.md").write_text(md)
        summary.to_csv(out / "study.csv", index=False)
        headline.to_csv(out / "headline.csv", index=False)
        ceiling.to_csv(out / "ceiling.csv", index=False)
        df.to_csv(out / "cells.csv", index=False)
        blends.to_csv(out / "blends.csv", index=False)
        engines.to_csv(out / "engines.csv", index=False)
        tuning.to_csv(out / "tuning.csv", index=False)
        (out / "plots").mkdir(exist_ok=True)
        import matplotlib.pyplot as plt  # slow to import: matplotlib.pyplot

        figures = [("paired_differences", plot_differences(summary, headline)), ("ranking", plot_ranking(summary)),
                   ("sizes", plot_sizes(summary, df)), ("engines", plot_engines(engines))]
        for name, fig in figures:
            if fig is None:
                continue
            fig.savefig(out / "plots" / f"{name}.png", dpi=110)
            plt.close(fig)
        if parent_id is not None:
            tracking.log_params({"study": {"seeds": spec.seeds, "first_seed": spec.first_seed,
                                           "regimes": ",".join(spec.regimes), "engines": ",".join(spec.engines),
                                           "methods": ",".join(m.name for m in spec.methods),
                                           "cap_n_train": spec.max_train, "cap_n_test": spec.max_test}})
            metrics = {f"{r.regime}.{r.row}.mean": r.mean for r in summary.itertuples()}
            metrics.update({f"{h.regime}.headline_diff": h.diff for h in headline.itertuples()})
            metrics.update({f"{b.regime}.{b.blend}.minus_best_single": b.diff for b in blends.itertuples()})
            metrics.update({f"{r}.bayes_ceiling": v for r, v in ceiling.groupby("regime")["ceiling"].mean().items()})
            metrics.update({f"{t.regime}.{t.engine}.{t.method}_{t.decoder}.tuned_minus_default": t.diff
                            for t in tuning.itertuples()})
            metrics.update({f"{e.regime}.{e.engine}.{e.method}.minus_{e.reference}": e.diff
                            for e in engines.itertuples()})
            metrics["wall_seconds"] = timing["wall"]
            tracking.log_metrics({_metric_name(k): v for k, v in metrics.items()})
            for f in ("study.md", "study.csv", "headline.csv", "ceiling.csv", "cells.csv", "blends.csv", "tuning.csv",
                      "engines.csv",
                      *(f"plots/{name}.png" for name, fig in figures if fig is not None)):
                tracking.log_file(out / f, str(Path(f).parent) if "/" in f else None)
        log.info("study written to %s (study.md, study.csv, cells.csv, plots/) in %.0f s", out, timing["wall"])
        return summary, headline

    if experiment_id is None:
        return body(None)
    import mlflow  # slow to import: mlflow

    client = mlflow.MlflowClient()
    previous = _find_parent(client, experiment_id, fingerprint)
    with tracking.run(experiment_id, run_name, run_id=previous.info.run_id if previous else None) as parent:
        result = body(parent.info.run_id)
    log.info("MLflow run: %s", tracking.run_link(experiment_id, parent.info.run_id))
    return result


def _metric_name(name: str) -> str:
    """An MLflow metric name for a study row: ``+`` (method+decoder) becomes ``_`` and ``@`` (a size regime,
    ``insteval@1000``) becomes ``_n``; MLflow takes only letters, digits and ``_ - . : /`` and spaces."""
    return name.replace("+", "_").replace("@", "_n")
