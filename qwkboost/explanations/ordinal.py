r"""The ordinal view of an explanation: which features move a row's score across which cut points.

A run's classes are its score cut at points :math:`c_1 < \dots < c_{K-1}`. A row's score is its bias plus its
features' SHAP values; adding them one at a time, largest first, walks the score from the bias (where every
row starts: the ensemble's expected score) to the row's own, and the class changes each time the walk crosses a
cut point. :func:`row_path` is that walk as a table, :func:`plot_row` draws it with the cut points and the
classes between them, and :func:`plot_dependence` draws one feature's SHAP values against its values, on the
score's scale (bias plus the feature's value), with the cut points drawn in.
"""

from __future__ import annotations

import numpy as np

from qwkboost.explanations.plots import figure

__all__ = ["row_path", "plot_row", "plot_dependence", "class_of"]


def _require(exp) -> None:
    if exp.cuts is None:
        raise ValueError("this explanation has no cut points: the ordinal view needs a run or a blend whose score is "
                         "cut into classes directly (not a lone model, nor a class objective's raw scores)")
    if exp.n_outputs != 1:
        raise ValueError("the ordinal view needs one score per row")


def class_of(exp, score) -> np.ndarray:
    """The class (the user's label where the labels are words) of scores on the explanation's scale."""
    # class j for c_j <= score < c_{j+1} (qwkboost.evaluation.thresholds.apply_thresholds)
    idx = np.searchsorted(np.asarray(exp.cuts, dtype=np.float64), np.atleast_1d(np.asarray(score, dtype=np.float64)),
                          side="right")
    names = exp.labels if exp.labels is not None else [f"{c:g}" for c in exp.classes]
    return np.asarray(names, dtype=object)[idx]


def row_path(exp, i: int, max_features: int | None = None):
    """Row ``i``'s walk from the bias to its score, features by decreasing :math:`|\\phi|`: a DataFrame with the
    feature, its value, its SHAP value, the score after it, the class after it, and ``crosses``: the cut points it
    crossed (empty when the class stayed)."""
    import pandas as pd  # slow to import: pandas

    _require(exp)
    phi = exp.values[i]
    order = np.argsort(-np.abs(phi), kind="stable")
    if max_features is not None:
        order = order[:max_features]
    cuts = np.asarray(exp.cuts, dtype=np.float64)
    score = float(exp.bias[i])
    rows = [{"feature": "(bias)", "value": None, "shap": score, "score": score,
             "class": class_of(exp, score)[0], "crosses": ""}]
    for j in order:
        before, score = score, score + float(phi[j])
        lo, hi = sorted((before, score))
        crossed = [f"{c:.3f}" for c in cuts if lo < c <= hi]
        value = exp.data.iloc[i, exp.data.columns.get_loc(exp.feature_names[j])] \
            if exp.data is not None and exp.feature_names[j] in exp.data.columns else None
        rows.append({"feature": exp.feature_names[j], "value": value, "shap": float(phi[j]), "score": score,
                     "class": class_of(exp, score)[0], "crosses": ", ".join(crossed)})
    rest = float(phi.sum() - phi[order].sum())
    if abs(rest) > 1e-9 * (1.0 + float(np.abs(phi).sum())):
        score += rest
        rows.append({"feature": "(other features)", "value": None, "shap": rest, "score": score,
                     "class": class_of(exp, score)[0], "crosses": ""})
    return pd.DataFrame(rows)


def _bands(ax, exp, lo: float, hi: float, vertical: bool) -> None:
    """The cut points as dashed lines, and each class's name in its band."""
    cuts = [float(c) for c in exp.cuts]
    edges = [lo] + [c for c in cuts if lo < c < hi] + [hi]
    for c in cuts:
        if lo < c < hi:
            (ax.axvline if vertical else ax.axhline)(c, color="k", ls="--", lw=0.9, alpha=0.7)
    for a, b in zip(edges[:-1], edges[1:]):
        name = class_of(exp, 0.5 * (a + b))[0]
        if vertical:
            ax.text(0.5 * (a + b), 1.01, f"class {name}", transform=ax.get_xaxis_transform(), ha="center",
                    va="bottom", fontsize=8, color="0.3")
        else:
            ax.text(1.01, 0.5 * (a + b), f"class {name}", transform=ax.get_yaxis_transform(), ha="left",
                    va="center", fontsize=8, color="0.3")


def plot_row(exp, i: int, max_features: int = 12, title: str = "", ax=None):
    """Row ``i``'s walk (:func:`row_path`) as a waterfall on the score's axis, with the cut points and classes
    (on ``ax`` if given, else in a new figure; returns the figure)."""
    path = row_path(exp, i, max_features)
    steps = path.iloc[1:]
    own = ax is None
    if own:
        fig, ax = figure((8, 0.42 * len(path) + 1.8))
    else:
        fig = ax.figure
    starts = path["score"].to_numpy()[:-1]
    ends = steps["score"].to_numpy()
    y = np.arange(len(steps))[::-1]
    colors = ["C3" if s > 0 else "C0" for s in steps["shap"]]
    ax.barh(y, ends - starts, left=starts, color=colors, alpha=0.8)
    labels = [f"{f} = {v}" if v is not None and f != "(other features)" else f
              for f, v in zip(steps["feature"], [_short(v) for v in steps["value"]])]
    ax.set_yticks(y, labels, fontsize=8)
    ax.axvline(path["score"].iloc[0], color="0.5", lw=0.8)
    ax.plot([ends[-1]], [y[-1]], "ko", ms=4)
    all_x = np.concatenate([starts, ends, np.asarray(exp.cuts, dtype=float)])
    pad = 0.05 * (all_x.max() - all_x.min() + 1e-9)
    lo, hi = all_x.min() - pad, all_x.max() + pad
    ax.set_xlim(lo, hi)
    _bands(ax, exp, lo, hi, vertical=True)
    ax.set_xlabel(f"score (bias {path['score'].iloc[0]:.3f} -> {ends[-1]:.3f}: class {path['class'].iloc[0]} -> "
                  f"{path['class'].iloc[-1]})")
    ax.set_title(title or f"row {i}: the features that move its score across the cut points", pad=18)
    if own:
        fig.tight_layout()
    return fig


def _short(v):
    if v is None:
        return None
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)[:24]


def plot_dependence(exp, feature: str, title: str = ""):
    """One feature's SHAP values against its values, on the score's scale (the mean bias plus the value), with
    the cut points: where the feature alone would move a row from the average across a class boundary."""
    _require(exp)
    j = exp.feature_names.index(feature)
    base = float(np.mean(exp.bias))
    y = base + exp.values[:, j]
    fig, ax = figure((7, 4.2))
    x = exp.data[feature] if exp.data is not None and feature in exp.data.columns else None
    if x is None:
        ax.scatter(np.arange(y.size), y, s=6, alpha=0.5)
        ax.set_xlabel("row")
    elif x.dtype.kind in "biuf":
        ax.scatter(x.to_numpy(dtype=float), y, s=6, alpha=0.5)
        ax.set_xlabel(feature)
    else:
        cats = x.astype(str).fillna("(missing)")
        order = sorted(set(cats), key=lambda c: float(np.mean(y[(cats == c).to_numpy()])))
        pos = {c: k for k, c in enumerate(order)}
        jitter = np.random.RandomState(0).uniform(-0.3, 0.3, y.size)
        ax.scatter(cats.map(pos).to_numpy() + jitter, y, s=6, alpha=0.5)
        shown = order if len(order) <= 30 else []
        ax.set_xticks(range(len(shown)), shown, rotation=60, fontsize=7)
        ax.set_xlabel(f"{feature} (categories by mean SHAP value)")
    lo, hi = min(y.min(), min(exp.cuts)), max(y.max(), max(exp.cuts))
    pad = 0.05 * (hi - lo + 1e-9)
    ax.set_ylim(lo - pad, hi + pad)
    _bands(ax, exp, lo - pad, hi + pad, vertical=False)
    ax.set_ylabel(f"mean bias + SHAP value of {feature}")
    ax.set_title(title or f"{feature}: its SHAP values on the score's scale, with the cut points")
    fig.tight_layout()
    return fig
