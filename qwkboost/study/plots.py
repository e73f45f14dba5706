"""The study's figures: each method's paired difference to the regime's best, extended QWK against the reference
engine by engine, the ranking, and test QWK against the training-set size (``study.sizes``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["plot_differences", "plot_engines", "plot_ranking", "plot_sizes"]


def plot_differences(summary: pd.DataFrame, headline: pd.DataFrame):
    """Left: the headline difference per regime; right: every row minus its regime's best, with intervals."""
    import matplotlib  # slow to import: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # slow to import: matplotlib.pyplot

    regimes = list(dict.fromkeys(summary["regime"]))
    rows = sorted(set(summary["row"]))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, max(4, 0.32 * len(rows) * 1 + 2)),
                                   gridspec_kw={"width_ratios": [1, 2]})
    if len(headline):
        y = np.arange(len(headline))
        d = headline["diff"].to_numpy()
        err = np.vstack([d - headline["diff_low"], headline["diff_high"] - d])
        colors = ["tab:green" if v == "better" else "tab:red" if v == "worse" else "tab:gray"
                  for v in headline["verdict"]]
        for i in range(len(d)):
            ax1.errorbar(d[i], y[i], xerr=err[:, i:i + 1], fmt="o", color=colors[i], capsize=3)
        ax1.set_yticks(y, headline["regime"])
        ax1.axvline(0, color="k", lw=0.8)
        ax1.invert_yaxis()
    ax1.set_title("best extended QWK − squared error + exact cuts")
    ax1.set_xlabel("test QWK difference (95% interval)")
    cmap = plt.get_cmap("tab10")
    offsets = np.linspace(-0.35, 0.35, max(1, len(regimes)))
    for j, regime in enumerate(regimes):
        s = summary[summary["regime"] == regime].set_index("row")
        ys = [rows.index(r) + offsets[j] for r in s.index]
        d = s["diff"].to_numpy()
        err = np.vstack([d - s["diff_low"], s["diff_high"] - d])
        ax2.errorbar(d, ys, xerr=err, fmt="o", ms=3, color=cmap(j % 10), label=regime, capsize=2, lw=0.8)
    ax2.set_yticks(range(len(rows)), rows)
    ax2.axvline(0, color="k", lw=0.8)
    ax2.invert_yaxis()
    ax2.set_title("each method − the regime's best (paired over seeds)")
    ax2.set_xlabel("test QWK difference (95% interval)")
    ax2.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return fig


def plot_ranking(summary: pd.DataFrame):
    """Mean rank of each row per regime (1 = best), rows ordered by their mean rank over regimes."""
    import matplotlib  # slow to import: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # slow to import: matplotlib.pyplot

    wide = summary.pivot_table(index="row", columns="regime", values="rank")
    wide = wide[list(dict.fromkeys(summary["regime"]))]
    wide = wide.loc[wide.mean(axis=1).sort_values().index]
    fig, ax = plt.subplots(figsize=(1.1 * wide.shape[1] + 4, 0.35 * wide.shape[0] + 1.8))
    im = ax.imshow(wide.to_numpy(), cmap="viridis_r", aspect="auto")
    ax.set_xticks(range(wide.shape[1]), wide.columns, rotation=30, ha="right")
    ax.set_yticks(range(wide.shape[0]), [f"{r} ({m:.1f})" for r, m in wide.mean(axis=1).items()])
    for i in range(wide.shape[0]):
        for j in range(wide.shape[1]):
            v = wide.iat[i, j]
            if np.isfinite(v):
                ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize=7, color="w" if v > wide.to_numpy()[
                    np.isfinite(wide.to_numpy())].mean() else "k")
    fig.colorbar(im, ax=ax, label="mean rank over seeds (1 = best)")
    ax.set_title("ranking: mean rank per regime (row label: mean over regimes)")
    fig.tight_layout()
    return fig


def plot_sizes(summary: pd.DataFrame, cells: pd.DataFrame, rows: tuple[str, ...] = ("squared_error", "extended_qwk")):
    """Mean test QWK (95% interval) against the training rows, one panel per data set of a study run at several
    sizes (regimes ``<data>@<rows>``), one line per row whose method starts with one of ``rows`` and is decoded by
    exact cut points (every row if none is). ``None`` when the study ran one size."""
    import matplotlib  # slow to import: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # slow to import: matplotlib.pyplot

    if not len(summary) or not summary["regime"].str.contains("@").any():
        return None
    n_train = cells.groupby("regime")["n_train"].mean()
    s = summary.assign(data=summary["regime"].str.split("@").str[0], n=summary["regime"].map(n_train))
    chosen = s["row"].str.endswith("+exact") & s["row"].str.split(":").str[-1].str.startswith(rows)
    if chosen.any():
        s = s[chosen]
    sets = list(dict.fromkeys(s["data"]))
    fig, axes = plt.subplots(1, len(sets), figsize=(5.2 * len(sets), 4), squeeze=False)
    for ax, data in zip(axes[0], sets):
        for row, g in s[s["data"] == data].sort_values("n").groupby("row", sort=False):
            ax.errorbar(g["n"], g["mean"], yerr=np.vstack([g["mean"] - g["low"], g["high"] - g["mean"]]),
                        marker="o", ms=4, capsize=3, label=row)
        ax.set_xscale("log")
        ax.set_xlabel("training rows")
        ax.set_ylabel("test QWK (mean over seeds, 95% interval)")
        ax.set_title(data)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_engines(engines: pd.DataFrame):
    """Each extended-QWK method minus the reference on the same engine (:func:`~qwkboost.study.report.
    engine_comparison`), one line per regime, a marker per engine and method with its 95% interval; filled where
    the Holm-corrected test finds a difference. ``None`` without rows."""
    import matplotlib  # slow to import: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # slow to import: matplotlib.pyplot

    if engines is None or not len(engines):
        return None
    regimes = list(dict.fromkeys(engines["regime"]))
    series = list(dict.fromkeys(zip(engines["engine"], engines["method"])))
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.55 * len(regimes) * max(1, len(series)) ** 0.5))
    cmap = plt.get_cmap("tab10")
    offsets = np.linspace(-0.32, 0.32, len(series)) if len(series) > 1 else np.zeros(1)
    for j, (engine, method) in enumerate(series):
        g = engines[(engines["engine"] == engine) & (engines["method"] == method)]
        y = np.array([regimes.index(r) for r in g["regime"]]) + offsets[j]
        d = g["diff"].to_numpy()
        err = np.vstack([d - g["diff_low"].to_numpy(), g["diff_high"].to_numpy() - d])
        ax.errorbar(d, y, xerr=err, fmt="none", ecolor=cmap(j % 10), capsize=2, lw=1)
        decided = (g["verdict"] != "no difference").to_numpy()
        ax.scatter(d, y, s=22, edgecolors=[cmap(j % 10)] * len(d), label=f"{engine}: {method}",
                   facecolors=[cmap(j % 10) if k else "white" for k in decided], zorder=3)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(range(len(regimes)), regimes)
    ax.invert_yaxis()
    ref = engines["reference"].iloc[0].removesuffix("_tuned")
    ax.set_xlabel(f"test QWK: extended QWK − {ref}, both with exact cut points (95% interval; filled: Holm p ≤ α)")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig
