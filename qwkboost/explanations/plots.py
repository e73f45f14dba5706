"""Pictures of an explanation: the importance bars and the SHAP summary (beeswarm), drawn with matplotlib.

Every picture is a :class:`matplotlib.figure.Figure` made without pyplot (:func:`figure`), so that a run can draw
them in a thread of its own while it logs the rest; ``fig.savefig`` writes one, a notebook shows one.
"""

from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.figure import Figure

__all__ = ["figure", "importance_bars", "beeswarm"]


def figure(figsize, nrows: int = 1, ncols: int = 1, **kw):
    """A new figure and its axes, outside pyplot's state (safe in any thread)."""
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, **kw)


def importance_bars(exp, max_features: int = 20, title: str = ""):
    """Mean :math:`|\\phi|` per feature (bars, in score units) and the share of split gain (dots, top axis);
    with several outputs, one bar per output stacked."""
    table = exp.importance()
    if exp.n_outputs == 1:
        top = table.head(max_features)
        fig, ax = figure((7.5, 0.32 * len(top) + 1.6))
        y = np.arange(len(top))[::-1]
        ax.barh(y, top["mean_abs_shap"], color="C0", alpha=0.8, label="mean |SHAP value|")
        ax.set_yticks(y, top["feature"], fontsize=8)
        ax.set_xlabel("mean |SHAP value| (score units)")
        ax2 = ax.twiny()
        ax2.plot(top["gain_share"], y, "o", color="C3", ms=4, label="share of split gain")
        ax2.set_xlabel("share of split gain", color="C3")
        ax2.set_xlim(0, max(0.05, float(top["gain_share"].max()) * 1.1))
    else:
        wide = table.pivot(index="feature", columns="output", values="mean_abs_shap")
        wide = wide.loc[wide.sum(axis=1).sort_values(ascending=False).index[:max_features]]
        fig, ax = figure((7.5, 0.32 * len(wide) + 1.6))
        y = np.arange(len(wide))[::-1]
        left = np.zeros(len(wide))
        for k, out in enumerate(wide.columns):
            ax.barh(y, wide[out], left=left, color=f"C{k % 10}", alpha=0.8, label=f"output {out}")
            left += wide[out].to_numpy()
        ax.set_yticks(y, wide.index, fontsize=8)
        ax.set_xlabel("mean |SHAP value| per output (score units)")
        ax.legend(fontsize=7)
    ax.set_title(title or "feature importance", pad=24 if exp.n_outputs == 1 else 6)
    fig.tight_layout()
    return fig


def _colour_values(column) -> np.ndarray | None:
    """A feature's values scaled to [0, 1] by rank (numbers), or ``None`` (categories: one colour)."""
    if column is None or column.dtype.kind not in "biuf":
        return None
    v = column.to_numpy(dtype=float)
    ok = np.isfinite(v)
    out = np.full(v.size, np.nan)
    if ok.any():
        ranks = np.argsort(np.argsort(v[ok]))
        out[ok] = ranks / max(1, ok.sum() - 1)
    return out


def beeswarm(exp, max_features: int = 15, output: int | None = None, title: str = ""):
    """The SHAP summary: for each feature (largest mean :math:`|\\phi|` on top), every row's SHAP value as a dot,
    spread vertically where dots crowd, coloured by the feature's value (low blue, high red; categories grey)."""
    values = exp.values if exp.n_outputs == 1 else exp.values[:, :, 0 if output is None else output]
    order = np.argsort(-np.abs(values).mean(axis=0), kind="stable")[:max_features]
    fig, ax = figure((8, 0.38 * len(order) + 1.8))
    rs = np.random.RandomState(0)
    cmap = matplotlib.colormaps["coolwarm"]
    for row, j in enumerate(order[::-1]):
        v = values[:, j]
        hist, edges = np.histogram(v, bins=50)
        crowd = hist[np.clip(np.searchsorted(edges, v, side="right") - 1, 0, hist.size - 1)]
        spread = 0.4 * crowd / max(1, hist.max())
        y = row + rs.uniform(-1, 1, v.size) * spread
        name = exp.feature_names[j]
        col = _colour_values(exp.data[name]) if exp.data is not None and name in exp.data.columns else None
        if col is None:
            ax.scatter(v, y, s=5, color="0.55", alpha=0.7, linewidths=0)
        else:
            ax.scatter(v, y, s=5, c=np.where(np.isnan(col), 0.5, col), cmap=cmap, vmin=0, vmax=1, alpha=0.7,
                       linewidths=0)
    ax.axvline(0, color="0.4", lw=0.8)
    ax.set_yticks(range(len(order)), [exp.feature_names[j] for j in order[::-1]], fontsize=8)
    ax.set_xlabel("SHAP value (score units)")
    sm = matplotlib.cm.ScalarMappable(cmap=cmap, norm=matplotlib.colors.Normalize(0, 1))
    bar = fig.colorbar(sm, ax=ax, fraction=0.03, pad=0.01)
    bar.set_ticks([0, 1], labels=["low", "high"])
    bar.set_label("feature value", fontsize=8)
    which = "" if exp.n_outputs == 1 else f" (output {exp.outputs[0 if output is None else output]})"
    ax.set_title(title or f"SHAP summary{which}")
    fig.tight_layout()
    return fig
