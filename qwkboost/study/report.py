"""The study's results: cells as a table, the statistics over seeds, the verdicts and ``study.md``."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from qwkboost.evaluation.stats import TESTS, holm, mean_interval, paired_comparison
from qwkboost.study.cells import Cell
from qwkboost.study.spec import TUNED, StudySpec

__all__ = ["cells_frame", "ceilings", "summarise", "blend_comparison", "tuning_comparison", "regime_verdict",
           "overall_verdict", "render_report", "CEILING_SOURCES"]


def cells_frame(cells: Sequence[Cell]) -> pd.DataFrame:
    """One row per cell and decoder: regime, engine, method, decoder, row label, seed, test and OOF QWK (nested
    too, for a blend), times."""
    rows = []
    for c in cells:
        if c.result is None:
            continue
        for dec, q in c.result["qwk"].items():
            rows.append({"regime": c.regime, "engine": c.engine, "method": c.method.name, "decoder": dec,
                         "objective": c.method.objective or c.method.peer, "peer": c.method.peer is not None,
                         "blend": c.method.is_blend, "seed": c.seed, "qwk": q, "qwk_oof": c.result["qwk_oof"][dec],
                         "qwk_oof_nested": c.result.get("qwk_oof_nested", {}).get(dec, np.nan),
                         "cell_seconds": c.result["seconds"], "fit_seconds": c.result["fit_seconds"],
                         "tuned": c.method.name.endswith(TUNED), "n_train": c.result.get("n_train", np.nan),
                         "tune_seconds": (c.result.get("tuning") or {}).get("seconds", np.nan),
                         "tune_pruned": (c.result.get("tuning") or {}).get("n_pruned", np.nan),
                         "reused": bool(c.result.get("reused", False)), "key": c.key})
    df = pd.DataFrame(rows)
    if len(df):
        multi_engine = df.loc[~df["peer"], "engine"].nunique() > 1
        df["row"] = [f"{m}+{d}" if (p or not multi_engine) else f"{e}:{m}+{d}"
                     for e, m, d, p in zip(df["engine"], df["method"], df["decoder"], df["peer"])]
    return df


#: Generated data whose best rule is known: cut points on the sum of the visible columns.
CEILING_SOURCES = ("quartiles", "latent_classes")


def ceilings(cells: Sequence[Cell]) -> pd.DataFrame:
    """Test QWK of the generator's own rule per regime and seed, for generated data
    (:func:`qwkboost.runs.table.bayes_ceiling`)."""
    from qwkboost.runs.experiment import load_dataset  # slow to import: matplotlib, scipy
    from qwkboost.runs.table import bayes_ceiling  # slow to import: matplotlib, scipy

    rows, seen = [], set()
    for c in cells:
        data = c.config["data"]
        if data.get("name") not in CEILING_SOURCES or (c.regime, c.seed) in seen or c.result is None:
            continue
        seen.add((c.regime, c.seed))
        rows.append({"regime": c.regime, "seed": c.seed, "ceiling": bayes_ceiling(load_dataset(data, c.seed))})
    return pd.DataFrame(rows, columns=["regime", "seed", "ceiling"])


def summarise(df: pd.DataFrame, confidence: float = 0.95, alpha: float = 0.05,
              reference: str = "squared_error+exact", test: str = "wilcoxon") -> tuple[pd.DataFrame, pd.DataFrame]:
    r"""Per regime and row: mean test QWK with its interval, and the paired comparison with the regime's best.

    Also, per regime, the headline: the best extended-QWK row minus ``reference``
    on the same engine, Holm-corrected across regimes. Extended-QWK rows are tuned
    variants when ``reference`` is one (``squared_error_tuned+exact``), else
    default ones: each objective is compared with the same chance.

    Only seeds where every row of a regime has a result are compared (pairs need both).

    Returns
    -------
    summary : DataFrame
        One row per regime and row: ``mean``, ``low``, ``high``, ``n``, ``rank``
        (mean rank over seeds, 1 = best), ``diff``/``diff_low``/``diff_high`` (row
        minus best), ``p`` (``test``: Wilcoxon or paired t), ``p_holm`` (Holm over the regime's rows),
        ``worse`` (significantly below the best).
    headline : DataFrame
        One row per regime: ``best_eqwk``, ``reference``, ``diff``, interval, ``p``, ``p_holm``, ``verdict``.
    """
    out, heads = [], []
    for regime, g in df.groupby("regime", sort=False):
        wide = g.pivot_table(index="seed", columns="row", values="qwk", aggfunc="first").dropna()
        if wide.empty:
            continue
        means = wide.mean().sort_values(ascending=False)
        best = means.index[0]
        ranks = wide.rank(axis=1, ascending=False).mean()
        recs = []
        for row in means.index:
            iv = mean_interval(wide[row], confidence)
            rec = {"regime": regime, "row": row, "mean": iv.mean, "low": iv.low, "high": iv.high, "n": iv.n,
                   "rank": float(ranks[row]), "is_best": row == best}
            if row != best:
                pc = paired_comparison(wide[row], wide[best], confidence, test)
                rec.update(diff=pc.diff.mean, diff_low=pc.diff.low, diff_high=pc.diff.high, p=pc.p_value)
            recs.append(rec)
        ps = [r["p"] for r in recs if not r["is_best"]]
        adj = iter(holm(ps))
        for r in recs:
            if r["is_best"]:
                r.update(diff=0.0, diff_low=0.0, diff_high=0.0, p=np.nan, p_holm=np.nan, worse=False)
            else:
                r["p_holm"] = float(next(adj))
                r["worse"] = bool(r["p_holm"] <= alpha and r["diff"] < 0)
        out += recs
        # the headline: the best extended-QWK row on an engine that also has the reference row
        refs = g[(g["method"] + "+" + g["decoder"]) == reference].drop_duplicates("engine").set_index("engine")["row"]
        tuned = reference.split("+", 1)[0].endswith(TUNED)
        eq = g[(g["objective"] == "extended_qwk") & g["engine"].isin(refs.index)
               & (g["method"].str.endswith(TUNED) == tuned)]
        eq_rows = [r for r in means.index if r in set(eq["row"])]
        if eq_rows:
            best_eq = eq_rows[0]
            ref = refs[g.loc[g["row"] == best_eq, "engine"].iloc[0]]
            heads.append({"regime": regime, "best_eqwk": best_eq, "reference": ref,
                          **_paired(wide[best_eq], wide[ref], confidence, test), "best": best})
    summary = pd.DataFrame(out)
    headline = pd.DataFrame(heads, columns=["regime", "best_eqwk", "reference", "diff", "diff_low", "diff_high", "p",
                                            "wins", "losses", "n", "best"])
    headline["p_holm"] = holm(headline["p"].to_numpy(dtype=float))
    headline["verdict"] = pd.Series(dtype=object) if headline.empty else [
        "better" if (ph <= alpha and d > 0) else "worse" if (ph <= alpha and d < 0) else "no difference"
        for ph, d in zip(headline["p_holm"], headline["diff"])]
    return summary, headline


#: The fields of a paired comparison (a minus b over the seeds both have) in the report's tables.
PAIRED = ["diff", "diff_low", "diff_high", "p", "wins", "losses", "n"]


def _paired(a: pd.Series, b: pd.Series, confidence: float, test: str) -> dict:
    """``a`` minus ``b``, paired over seeds (:func:`~qwkboost.evaluation.stats.paired_comparison`), as the
    :data:`PAIRED` fields."""
    pc = paired_comparison(a, b, confidence, test)
    return {"diff": pc.diff.mean, "diff_low": pc.diff.low, "diff_high": pc.diff.high, "p": pc.p_value,
            "wins": pc.wins, "losses": pc.losses, "n": pc.diff.n}


def _paired_table(df: pd.DataFrame, by, columns, pairs, cols: list[str], confidence: float, test: str,
                  complete: bool = False) -> pd.DataFrame:
    """The comparisons ``pairs`` names, one row each: for each group of ``df`` by ``by``, the test QWK as a table
    of seeds by ``columns`` (with ``complete``, only the seeds every column has), and for each ``(a, b, fields)``
    that ``pairs(group, rows, wide)`` yields, ``a`` minus ``b`` over the seeds both have (:func:`_paired`) beside
    ``fields(pair)``, the row's other columns from the two columns' seeds. A pair missing a column, or with no
    seed in common, is left out."""
    out = []
    for key, g in (df.groupby(by, sort=False) if len(df) else ()):
        wide = g.pivot_table(index="seed", columns=columns, values="qwk", aggfunc="first")
        wide = wide.dropna() if complete else wide
        for a, b, fields in pairs(key, g, wide):
            if a not in wide or b not in wide:
                continue
            pair = wide[[a, b]].dropna()
            if pair.empty:
                continue
            out.append({**fields(pair), **_paired(pair[a], pair[b], confidence, test)})
    return pd.DataFrame(out, columns=cols)


def blend_comparison(df: pd.DataFrame, confidence: float = 0.95, test: str = "wilcoxon") -> pd.DataFrame:
    """Each blend row against the regime's best single method (highest mean test QWK among the rows that are
    not blends), paired over seeds: ``diff`` with its interval, ``p`` of ``test``, wins and losses, and the
    blend's mean nested out-of-fold QWK beside its in-sample one."""
    cols = ["regime", "blend", "best_single", "blend_mean", "single_mean", *PAIRED, "oof", "oof_nested"]
    if not len(df) or "blend" not in df or not df["blend"].any():
        return pd.DataFrame(columns=cols)

    def pairs(regime, g, wide):
        blends = [r for r in dict.fromkeys(g.loc[g["blend"], "row"]) if r in wide]
        singles = [r for r in dict.fromkeys(g.loc[~g["blend"], "row"]) if r in wide]
        if not blends or not singles:
            return
        best = wide[singles].mean().idxmax()
        for b in blends:
            rows = g[g["row"] == b]
            yield b, best, lambda pair, b=b, rows=rows: {
                "regime": regime, "blend": b, "best_single": best, "blend_mean": float(pair[b].mean()),
                "single_mean": float(pair[best].mean()), "oof": float(rows["qwk_oof"].mean()),
                "oof_nested": float(rows["qwk_oof_nested"].mean())}

    return _paired_table(df, "regime", "row", pairs, cols, confidence, test, complete=True)


def tuning_comparison(df: pd.DataFrame, confidence: float = 0.95, test: str = "wilcoxon") -> pd.DataFrame:
    """Each tuned row against the same method's default row (same engine and decoder), paired over seeds:
    ``diff`` (tuned minus default) with its interval, ``p`` of ``test``, wins and losses; the tuned cells' mean
    tuning seconds and pruned trials. Whether the configured defaults are fair to an objective shows here."""
    cols = ["regime", "engine", "method", "decoder", "default_mean", "tuned_mean", *PAIRED, "tune_seconds",
            "tune_pruned"]
    if not len(df) or "tuned" not in df or not df["tuned"].any():
        return pd.DataFrame(columns=cols)

    def pairs(key, g, wide):
        regime, engine = key
        for m, dec in dict.fromkeys(zip(g.loc[g["tuned"], "method"], g.loc[g["tuned"], "decoder"])):
            base = m[: -len(TUNED)]
            rows = g[(g["method"] == m) & (g["decoder"] == dec)]
            yield (m, dec), (base, dec), lambda pair, m=m, base=base, dec=dec, rows=rows: {
                "regime": regime, "engine": engine, "method": base, "decoder": dec,
                "default_mean": float(pair[(base, dec)].mean()), "tuned_mean": float(pair[(m, dec)].mean()),
                "tune_seconds": float(rows["tune_seconds"].mean()),
                "tune_pruned": float(rows["tune_pruned"].mean())}

    return _paired_table(df, ["regime", "engine"], ["method", "decoder"], pairs, cols, confidence, test)


def engine_comparison(df: pd.DataFrame, confidence: float = 0.95, alpha: float = 0.05,
                      test: str = "wilcoxon", reference: str = "squared_error") -> pd.DataFrame:
    r"""Each extended-QWK method against the ``reference`` method on the same engine, both decoded by exact cut
    points, paired over seeds: one row per regime, engine and method (a tuned method against the tuned
    reference), with the mean difference :math:`\bar d = \overline{q^{\mathrm{eqwk}}_s - q^{\mathrm{ref}}_s}`,
    its interval, ``p`` of ``test``, and ``p_holm`` corrected across the regimes of each engine and method. No
    row is picked as the best of several, so nothing here is flattered by selection."""
    cols = ["regime", "engine", "method", "reference", "ref_mean", "eqwk_mean", *PAIRED, "p_holm", "verdict"]

    def pairs(key, g, wide):
        regime, engine = key
        for m in dict.fromkeys(g.loc[g["objective"] == "extended_qwk", "method"]):
            ref = reference + (TUNED if m.endswith(TUNED) else "")
            yield m, ref, lambda pair, m=m, ref=ref: {
                "regime": regime, "engine": engine, "method": m, "reference": ref,
                "ref_mean": float(pair[ref].mean()), "eqwk_mean": float(pair[m].mean())}

    exact = df[(df["decoder"] == "exact") & ~df["blend"] & (df["engine"] != "-")] if len(df) else df
    res = _paired_table(exact, ["regime", "engine"], "method", pairs, cols[:-2], confidence, test)
    res["p_holm"] = np.nan
    for _, idx in res.groupby(["engine", "method"], sort=False).groups.items():
        res.loc[idx, "p_holm"] = holm(res.loc[idx, "p"].to_numpy(dtype=float))
    res["verdict"] = ["better" if (ph <= alpha and d > 0) else "worse" if (ph <= alpha and d < 0)
                      else "no difference" for ph, d in zip(res["p_holm"], res["diff"])]
    return res[cols]


def _fmt_diff(d: float, lo: float, hi: float) -> str:
    return f"{d:+.4f} [{lo:+.4f}, {hi:+.4f}]"


def _p(p: float) -> str:
    return "" if not np.isfinite(p) else ("< 0.0001" if p < 1e-4 else f"{p:.4f}")


def regime_verdict(regime: str, summary: pd.DataFrame, engines: pd.DataFrame | None, alpha: float,
                   test: str = "wilcoxon") -> str:
    """A few plain sentences on a regime: each extended-QWK method against squared error with exact cut points on
    the same engine (:func:`engine_comparison`, defaults against defaults, tuned against tuned; no row picked as
    the best of several), then the regime's best row."""
    s = summary[summary["regime"] == regime]
    best = s[s["is_best"]].iloc[0]
    ties = s[~s["is_best"] & ~s["worse"]]["row"].tolist()
    text = [f"Best: `{best['row']}` (mean test QWK {best['mean']:.4f})"]
    text[0] += (f"; not distinguishable from it at {alpha:.0%} ({TESTS[test]}, Holm): "
                + ", ".join(f"`{t}`" for t in ties) + "." if ties else "; every other method is significantly worse.")
    rows = None if engines is None else engines[engines["regime"] == regime]
    if rows is not None and len(rows):
        what = {"better": "higher", "worse": "lower", "no difference": "no different"}
        parts = [f"`{e.method}` on {e.engine} {_fmt_diff(e.diff, e.diff_low, e.diff_high)} ({what[e.verdict]}, "
                 f"Holm p {_p(e.p_holm)})" for e in rows.itertuples()]
        text.insert(0, "Optimising QWK directly against squared error with exact cut points, on the same engine: "
                       + "; ".join(parts) + ".")
    return " ".join(text)


def overall_verdict(engines: pd.DataFrame | None, summary: pd.DataFrame, n_seeds: int, alpha: float,
                    test: str = "wilcoxon", tuned: bool = False) -> str:
    """The study's verdict from the per-engine comparisons (:func:`engine_comparison`): how many (regime, engine,
    method) comparisons of extended QWK with squared error went which way, ``tuned`` ones or the defaults'."""
    rows = None if engines is None else engines[engines["method"].str.endswith(TUNED) == tuned]
    if rows is None or rows.empty:
        return "No regime has both an extended-QWK method and the reference method on one engine; no verdict."
    counts = rows["verdict"].value_counts()
    b, w, n = int(counts.get("better", 0)), int(counts.get("worse", 0)), int(counts.get("no difference", 0))
    ranks = summary.groupby("row")["rank"].mean().sort_values()
    top = ", ".join(f"`{r}` ({v:.1f})" for r, v in ranks.head(3).items())
    return (f"Over {rows['regime'].nunique()} regime{'s' * (rows['regime'].nunique() != 1)}, "
            f"{rows['engine'].nunique()} engine{'s' * (rows['engine'].nunique() != 1)} and {n_seeds} "
            f"seed{'s' * (n_seeds != 1)}, optimising QWK directly{' (tuned)' if tuned else ''} against squared error "
            f"with exact cut points on the same engine{' (tuned)' if tuned else ''} was significantly better in {b} "
            f"of {len(rows)} comparisons, significantly worse in {w}, and indistinguishable in {n} ({TESTS[test]} "
            f"test, Holm-corrected across regimes at {alpha:.0%}; no row picked as the best of several). "
            f"Mean rank over regimes, lower is better: {top}.")


def render_report(spec: StudySpec, df: pd.DataFrame, summary: pd.DataFrame, headline: pd.DataFrame,
                  timing: Mapping[str, Any], command: str, ceiling: pd.DataFrame | None = None,
                  blends: pd.DataFrame | None = None, tuning: pd.DataFrame | None = None,
                  engines: pd.DataFrame | None = None) -> str:
    """``study.md``: the overall verdict, extended QWK against squared error per engine, blending against the
    best single method, defaults against tuning, a section per regime (verdict, ceiling, table) and the time
    taken."""

    lines = ["# Study: optimising QWK directly against squared error with cut points, classification and ordinal "
             "models", "", f"Command: `{command}`", "",
             f"Seeds: {spec.seeds} ({spec.first_seed}..{spec.first_seed + spec.seeds - 1}); regimes: "
             f"{', '.join(spec.regimes)}; engines: {', '.join(spec.engines)}; {spec.confidence:.0%} intervals; "
             f"tests at {spec.alpha:.0%}.", "",
             "## Verdict", "", overall_verdict(engines, summary, spec.seeds, spec.alpha, spec.test), ""]
    if engines is not None and engines["method"].str.endswith(TUNED).any():
        lines += ["With every objective tuned on the same budget: "
                  + overall_verdict(engines, summary, spec.seeds, spec.alpha, spec.test, tuned=True), ""]
    if spec.seeds < 6 and spec.test == "wilcoxon":
        # the smallest two-sided signed-rank p-value with n pairs is 2 / 2**n
        lines += [f"With {spec.seeds} seed{'s' * (spec.seeds != 1)} no difference can be significant: the two-sided "
                  f"Wilcoxon test's smallest p-value is {2 / 2 ** spec.seeds:.3f}. Use study.seeds=6 or more.", ""]
    if engines is not None and len(engines):
        lines += ["## Extended QWK against the reference, engine by engine", "",
                  "Both decoded by exact cut points fitted on the out-of-fold scores, on the same engine, seeds and "
                  f"folds (a tuned method against the tuned reference); {TESTS[spec.test]} test, Holm-corrected "
                  "across the regimes of each engine and method. No row is the best of several here.", "",
                  "| regime | engine | method | reference | reference QWK | extended QWK | "
                  "extended − reference [95% CI] | p | Holm p | wins/losses | verdict |",
                  "|---|---|---|---|---:|---:|---|---:|---:|---|---|"]
        for e in engines.itertuples():
            lines.append(f"| {e.regime} | {e.engine} | `{e.method}` | `{e.reference}` | {e.ref_mean:.4f} | "
                         f"{e.eqwk_mean:.4f} | "
                         f"{_fmt_diff(e.diff, e.diff_low, e.diff_high)} | {_p(e.p)} | {_p(e.p_holm)} | "
                         f"{e.wins}/{e.losses} | {e.verdict} |")
        lines.append("")
    if blends is not None and len(blends):
        lines += ["## Blending", "", "Each blend against the regime's best single method (its highest mean test QWK; "
                  "picking it on these seeds favours it a little), paired over seeds. The blend's weights and cut "
                  "points are fitted on the out-of-fold scores; `nested OOF` fits them without each fold.", "",
                  "| regime | blend | best single | blend − best single [95% CI] | p | wins/losses | "
                  "blend OOF in-sample / nested |", "|---|---|---|---|---:|---|---|"]
        for b in blends.itertuples():
            lines.append(f"| {b.regime} | `{b.blend}` {b.blend_mean:.4f} | `{b.best_single}` {b.single_mean:.4f} | "
                         f"{_fmt_diff(b.diff, b.diff_low, b.diff_high)} | {_p(b.p)} | {b.wins}/{b.losses} | "
                         f"{b.oof:.4f} / {b.oof_nested:.4f} |")
        lines.append("")
    if tuning is not None and len(tuning):
        lines += ["## Defaults against tuning", "", "Each method tuned on its training folds (the same number of "
                  "Optuna trials for every objective and engine, the test rows unseen) against the same method with "
                  "the configured defaults, paired over seeds.", "",
                  "| regime | engine | method | default | tuned | tuned − default [95% CI] | p | "
                  "wins/losses | tuning s | pruned trials |", "|---|---|---|---:|---:|---|---:|---|---:|---:|"]
        for t in tuning.itertuples():
            lines.append(f"| {t.regime} | {t.engine} | `{t.method}+{t.decoder}` | {t.default_mean:.4f} | "
                         f"{t.tuned_mean:.4f} | {_fmt_diff(t.diff, t.diff_low, t.diff_high)} | {_p(t.p)} | "
                         f"{t.wins}/{t.losses} | {t.tune_seconds:.0f} | {t.tune_pruned:.1f} |")
        lines.append("")
    for regime in dict.fromkeys(summary["regime"]):
        lines += [f"## {regime}", "", regime_verdict(regime, summary, engines, spec.alpha, spec.test), ""]
        ceil = None if ceiling is None else ceiling.loc[ceiling["regime"] == regime, "ceiling"]
        if ceil is not None and len(ceil):
            iv = mean_interval(ceil, spec.confidence)
            lines += [f"The generator's rule (cut points on the sum of the visible columns, fitted on the training "
                      f"split): {iv.mean:.4f} [{iv.low:.4f}, {iv.high:.4f}]. Its cut points are estimated, so a "
                      "method can match it within noise.", ""]
        lines += ["| method | mean test QWK [95% CI] | − best [95% CI] | p | Holm p | mean rank |",
                  "|---|---|---|---:|---:|---:|"]
        for r in summary[summary["regime"] == regime].itertuples():
            mark = " (best)" if r.is_best else (" (worse)" if r.worse else "")
            diff = "" if r.is_best else _fmt_diff(r.diff, r.diff_low, r.diff_high)
            lines.append(f"| `{r.row}`{mark} | {r.mean:.4f} [{r.low:.4f}, {r.high:.4f}] | {diff} | {_p(r.p)} | "
                         f"{_p(r.p_holm)} | {r.rank:.1f} |")
        lines.append("")
    lines += ["## Time", "",
              f"Wall time of this command: {timing['wall']:.0f} s with {spec.n_jobs} cells at a time; "
              f"{timing['computed']} cells computed, {timing['reused']} reused from `{spec.cache_dir}`."]
    history = timing.get("history") or []
    if len(history) > 1:
        lines.append(f"The {len(history)} commands that ran this study took {sum(h['wall'] for h in history):.0f} s "
                     f"in all, computing {sum(h['computed'] for h in history)} cells.")
    lines += [f"Compute over all cells: {timing['cell_total']:.0f} s (one cell at a time that would take "
              f"{timing['cell_total'] / 60:.1f} min).", "",
              "| regime | cells | median s per cell | max s |", "|---|---:|---:|---:|"]
    per = df.drop_duplicates("key").groupby("regime", sort=False)["cell_seconds"]
    for regime, v in per:
        lines.append(f"| {regime} | {v.size} | {v.median():.2f} | {v.max():.2f} |")
    per_m = df.drop_duplicates("key").groupby("method", sort=False)["cell_seconds"]
    lines += ["", "| method | cells | median s per cell |", "|---|---:|---:|"]
    for m, v in per_m:
        lines.append(f"| {m} | {v.size} | {v.median():.2f} |")
    lines += ["", "How to read this: a method's row is its test QWK over seeds. `− best` is the paired difference "
              "to the regime's best row (highest mean; picking it on these seeds favours it a little). p is "
              f"the two-sided {TESTS[spec.test]} test of that difference over seeds, Holm p the same corrected for the number of "
              "rows in the regime. Methods given label shift's target distribution use it as described in "
              "`qwkboost/data/shift.py`.", ""]
    return "\n".join(lines)
