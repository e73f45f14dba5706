"""Figures logged with every run: learning curves, OOF score histograms by class, confusion matrix; a blend's members."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

__all__ = ["learning_curves", "score_histograms", "confusion_matrix", "class_probabilities", "blend_members"]


def learning_curves(models, metric_name: str, title: str = ""):
    """Train (dashed) and validation (solid) metric per round for each fold; best rounds marked."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for k, m in enumerate(models):
        curve = m.learning_curve
        color = f"C{k % 10}"
        if curve.get("train"):
            ax.plot(np.arange(1, len(curve["train"]) + 1), curve["train"], "--", color=color, lw=0.9, alpha=0.7)
        if curve.get("valid"):
            v = curve["valid"]
            ax.plot(np.arange(1, len(v) + 1), v, color=color, lw=1.2, label=f"fold {k + 1}")
            if 0 < m.best_iteration <= len(v):
                ax.plot(m.best_iteration, v[m.best_iteration - 1], "o", color=color, ms=4)
    ax.set_xlabel("boosting round")
    ax.set_ylabel(metric_name)
    ax.set_title(title or f"learning curves ({metric_name}; dashed = train, dot = best round)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    return fig


def _names(classes, names) -> list[str]:
    """Tick labels: the user's class labels (words) when given, else the class values."""
    return [str(n) for n in names] if names is not None else [f"{c:g}" for c in classes]


def score_histograms(scores, y, classes, cuts=None, title: str = "", names=None):
    """Histogram of out-of-fold scores for each true class, with the cut points drawn (``names``: the
    classes' labels when they are words)."""
    scores = np.asarray(scores, dtype=float)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    lo, hi = np.percentile(scores, [0.1, 99.9])
    bins = np.linspace(lo, hi, 80)
    for i, c in enumerate(classes):
        sel = y == c
        if sel.any():
            ax.hist(scores[sel], bins=bins, histtype="stepfilled", alpha=0.18, color=f"C{i % 10}")
            ax.hist(scores[sel], bins=bins, histtype="step", lw=1.4, color=f"C{i % 10}",
                    label=f"class {_names(classes, names)[i]} (n={sel.sum()})")
    for j, t in enumerate([] if cuts is None else cuts):
        ax.axvline(t, color="k", ls="--", lw=1, label="cut points" if j == 0 else None)
    ax.set_xlabel("out-of-fold score")
    ax.set_ylabel("rows")
    ax.set_title(title or "out-of-fold scores by true class")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def confusion_matrix(y_true, y_pred, classes, title: str = "", names=None):
    """Counts with row-normalised shading (true class in rows)."""
    classes = np.asarray(classes)
    k = len(classes)
    it = np.searchsorted(classes, y_true)
    ip = np.searchsorted(classes, y_pred)
    cm = np.bincount(it * k + ip, minlength=k * k).reshape(k, k)
    rows = cm.sum(axis=1, keepdims=True)
    frac = np.divide(cm, rows, out=np.zeros(cm.shape, dtype=float), where=rows > 0)
    fig, ax = plt.subplots(figsize=(1.1 * k + 2.5, 1.0 * k + 2))
    im = ax.imshow(frac, cmap="Blues", vmin=0, vmax=1)
    for i in range(k):
        for j in range(k):
            ax.text(j, i, f"{cm[i, j]}", ha="center", va="center", fontsize=8,
                    color="white" if frac[i, j] > 0.6 else "black")
    labels = _names(classes, names)
    ax.set_xticks(range(k), labels)
    ax.set_yticks(range(k), labels)
    ax.set_xlabel("predicted class")
    ax.set_ylabel("true class")
    ax.set_title(title or "confusion matrix (test)")
    fig.colorbar(im, ax=ax, fraction=0.046, label="share of true class")
    fig.tight_layout()
    return fig


def class_probabilities(proba, y, classes, title: str = "", names=None):
    """Mean predicted probability of each class (columns) for the rows of each true class (rows).

    A well-calibrated ordinal model has its mass on and next to the diagonal;
    each row sums to one.
    """
    proba = np.asarray(proba, dtype=float)
    classes = np.asarray(classes)
    k = classes.size
    M = np.full((k, k), np.nan)
    for i, c in enumerate(classes):
        sel = y == c
        if sel.any():
            M[i] = proba[sel].mean(axis=0)
    fig, ax = plt.subplots(figsize=(1.2 * k + 2.5, 1.0 * k + 2))
    im = ax.imshow(M, cmap="Blues", vmin=0, vmax=1)
    for i in range(k):
        for j in range(k):
            if np.isfinite(M[i, j]):
                ax.text(j, i, f"{M[i, j]:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if M[i, j] > 0.5 else "black")
    ax.set_xticks(range(k), _names(classes, names))
    ax.set_yticks(range(k), _names(classes, names))
    ax.set_xlabel("class")
    ax.set_ylabel("true class")
    ax.set_title(title or "mean out-of-fold class probability by true class")
    fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    return fig


def blend_members(table, metrics: dict, method: str, title: str = ""):
    """Each member's out-of-fold QWK (in-sample and nested) beside the blend's, and the blend's weights.

    ``table`` has one row per member: ``member``, ``weight``, ``oof_qwk``,
    ``nested_oof_qwk`` and, with test labels, ``test_qwk``.
    """
    names = list(table["member"]) + [f"blend ({method})"]
    ins = list(table["oof_qwk"]) + [metrics["oof_qwk"]]
    nested = list(table["nested_oof_qwk"]) + [metrics["nested_oof_qwk"]]
    test = list(table["test_qwk"]) + [metrics["test_qwk"]] if "test_qwk" in table else None
    y = np.arange(len(names))
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 0.5 * len(names) + 2.8), sharey=True,
                                  gridspec_kw={"width_ratios": [3, 1.3]})
    h = 0.27 if test is not None else 0.38
    ax.barh(y - h, ins, h, color="C0", alpha=0.55, label="OOF, cut points fitted on all rows (in-sample)")
    ax.barh(y, nested, h, color="C0", label="OOF, nested (fitted without the row's fold)")
    if test is not None:
        ax.barh(y + h, test, h, color="C2", label="test")
    every = ins + nested + (test or [])
    lo = min(every)
    ax.set_xlim(max(0.0, lo - 0.05), min(1.0, max(every) + 0.02))
    ax.axvline(metrics["best_member_nested_oof_qwk"], color="k", ls=":", lw=1, label="best member, nested")
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xlabel("QWK")
    ax.set_title(title or "members and their blend")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    weights = list(table["weight"]) + [np.nan]
    ax2.barh(y[:-1], weights[:-1], color="C1")
    for yi, wv in zip(y[:-1], weights[:-1]):
        ax2.text(wv + 0.01, yi, f"{wv:.2f}", va="center", fontsize=8)
    ax2.set_xlim(0, 1.1)
    ax2.set_xlabel("weight")
    ax2.set_title("blend weights")
    fig.tight_layout()
    return fig
