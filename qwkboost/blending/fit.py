"""Fitting a blend of runs, its nested estimate, its files and its MLflow run (:func:`blend`).

The methods themselves are in :mod:`qwkboost.blending.methods`, the members in
:mod:`qwkboost.blending.members`.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from qwkboost import tracking
from qwkboost.blending.members import BlendInputError, Member, align, distinct_names, read_members
from qwkboost.blending.methods import BLEND_METHODS, BlendFit, fit_nested
from qwkboost.cv.folds import make_folds
from qwkboost.data.dataset import class_range
from qwkboost.data.fingerprint import DataFingerprint
from qwkboost.data.labels import ClassLabels
from qwkboost.evaluation.metrics import qwk
from qwkboost.evaluation.thresholds import METHODS as THRESHOLD_METHODS
from qwkboost.evaluation.thresholds import apply_thresholds, fit_thresholds
from qwkboost.objectives import check_trusted_modules
from qwkboost.tracking.blend import FittedBlend
from qwkboost.tracking.loading import load_pipeline
from qwkboost.tracking.vocabulary import member_keys
from qwkboost.tracking.writing import staged
from qwkboost.tracking.outputs import (
    CLASS,
    NESTED_CLASS,
    SCORE,
    OutputColumns,
    fold_role,
    member_role,
    write_predictions,
)

__all__ = ["BlendResult", "blend", "write_blend", "log_blend", "log_blend_contents"]

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- the result

@dataclass
class BlendResult:
    """A fitted blend: its members, weights, cut points, scores, classes and estimates.

    Scores and cut points are on the labels' scale for ``weights`` and
    ``mean``; on :math:`[0, 1]` for ``rank_mean``; the median class for ``vote``.
    """

    method: str
    thresholds: str
    members: list[Member]
    weights: np.ndarray
    cuts: np.ndarray | None
    classes: np.ndarray
    oof_score: np.ndarray
    oof_class: np.ndarray
    nested_oof_class: np.ndarray
    test_score: np.ndarray
    test_class: np.ndarray
    metrics: dict[str, float]
    member_table: Any                     # DataFrame: one row per member
    fit_info: BlendFit = field(repr=False)
    #: modules whose objectives the members' model files may import (:func:`qwkboost.load_model`)
    trusted_modules: tuple = field(default=(), repr=False)
    #: seconds :func:`blend` took (reading the members, fitting and scoring); MLflow's ``seconds``
    seconds: float = field(default=0.0, repr=False)

    @property
    def oof_qwk(self) -> float:
        return self.metrics["oof_qwk"]

    @property
    def nested_oof_qwk(self) -> float:
        return self.metrics["nested_oof_qwk"]

    @property
    def test_qwk(self) -> float | None:
        return self.metrics.get("test_qwk")

    def summary(self) -> dict[str, Any]:
        """What ``blend.json`` holds."""
        ref = self.members[0]
        return {"method": self.method, "thresholds": self.thresholds,
                "members": [{"name": m.name, "source": m.source, "run_id": m.run_id, "weight": float(w),
                             **{k: m.info.get(k) for k in ("engine", "objective") if m.info.get(k)},
                             **{c: float(row[c]) for c in self.member_table.columns if c.endswith("qwk")}}
                            for m, w, (_, row) in zip(self.members, self.weights, self.member_table.iterrows())],
                "weights": {m.name: float(w) for m, w in zip(self.members, self.weights)},
                "cuts": None if self.cuts is None else [round(float(c), 6) for c in self.cuts],
                "member_cuts": None if self.fit_info.member_cuts is None else
                [[round(float(c) + float(self.classes[0]), 6) for c in row] for row in self.fit_info.member_cuts],
                "classes": self.classes.tolist(), "labels": ref.labels, "id": ref.id_name, "target": ref.target,
                "n_train": int(len(ref.ids)), "n_test": int(len(ref.test_ids)), **self.metrics}


def blend(runs: Sequence, method: str = "weights", thresholds: str = "exact", check_folds: bool = True,
          id: str | None = None, target: str | None = None, tracking_uri: str | None = None,
          classes=None, trusted_modules=None) -> BlendResult:
    r"""Blend the out-of-fold and test predictions of several runs; fit and score it in-sample and nested.

    Parameters
    ----------
    runs : sequence
        Members: run output directories, directories of runs (a multirun's
        sweep directory), MLflow run ids (a parent stands for its children),
        directories of another tool's prediction files, or
        :class:`~qwkboost.blending.Member` objects (see :mod:`qwkboost.blending.members`).
    method : {"weights", "mean", "rank_mean", "greedy", "vote"}
    thresholds : {"exact", "nelder_mead", "distribution", "round"}
        How cut points are fitted, for the blend (and each member, for ``vote``).
    check_folds : bool, default True
        Refuse members cross-validated on different folds.
    id, target : str, optional
        The id and label columns of other tools' files (default: the qwkboost members').
    tracking_uri : str, optional
        The MLflow store of run ids.
    classes : sequence, optional
        The order of labels that are words in other tools' files (default: the order the qwkboost members record).
    trusted_modules : list of str, optional
        Modules whose objectives the members' model files may import when the blend's pipeline is written
        (:func:`write_blend`) and served; default none (see :func:`qwkboost.load_model`).

    Returns
    -------
    BlendResult
        ``metrics`` holds ``oof_qwk`` (in-sample), ``nested_oof_qwk`` (weights and
        cut points fitted without each fold), ``cut_optimism`` (their
        difference), ``best_member_oof_qwk`` and, when the test set has labels,
        ``test_qwk``, ``best_member_test_qwk`` (the best member on the test set: a bar to
        clear, chosen with the test labels) and ``chosen_member_test_qwk`` (the test QWK of
        the member with the best nested OOF QWK: the single model one would have picked).

    Raises
    ------
    ValueError
        Before any fitting: an unknown method, fewer than two members, members
        that cannot be read or whose ids, labels or folds differ.
    """
    import pandas as pd  # slow to import: pandas

    if method not in BLEND_METHODS:
        raise BlendInputError(f"blend method={method!r} is unknown; choose one of: {', '.join(BLEND_METHODS)}")
    if thresholds not in THRESHOLD_METHODS:
        raise BlendInputError(f"thresholds={thresholds!r} is unknown; choose one of: {', '.join(THRESHOLD_METHODS)}")
    trusted = check_trusted_modules(trusted_modules)
    started = time.perf_counter()
    runs = list(runs)
    members = distinct_names(runs) if all(isinstance(r, Member) for r in runs) else \
        read_members(runs, tracking_uri, id, target, classes=classes)
    _check_same_data(members)
    members = align(members, check_folds=check_folds)
    ref = members[0]
    if np.any(ref.y != np.round(ref.y)):
        raise BlendInputError(f"member {ref.name!r} has fractional labels; blending for QWK needs ordinal classes")
    classes = np.arange(len(ref.labels), dtype=np.float64) if ref.labels is not None else class_range(ref.y)
    lo, k = float(classes[0]), classes.size
    y_idx = (ref.y - lo).astype(np.int64)
    w = ref.weight
    S = np.column_stack([m.oof for m in members]) - lo
    T = np.column_stack([m.test for m in members]) - lo
    folds = next((m.folds[0] for m in members if m.folds is not None), None)
    if folds is None:       # check_folds=false and no member knows its folds: stratified folds for the estimate
        folds = np.empty(len(y_idx), dtype=np.int64)
        counts = np.bincount(y_idx)
        stratified = bool(counts[counts > 0].min() >= 5)        # a class of fewer than 5 rows: plain 5-fold
        for f, (_, va) in enumerate(make_folds(y_idx, 5, stratified, True, 0)):
            folds[va] = f
    fit, nested = fit_nested(method, S, y_idx, k, w, folds, thresholds)
    oof_class = fit.classes(S)
    metrics = {"oof_qwk": qwk(y_idx, oof_class, n_classes=k, sample_weight=w),
               "nested_oof_qwk": qwk(y_idx, nested, n_classes=k, sample_weight=w)}
    metrics["cut_optimism"] = metrics["oof_qwk"] - metrics["nested_oof_qwk"]
    test_class = fit.classes(T)
    labelled = ref.y_test is not None and np.all(ref.y_test == np.round(ref.y_test))
    yt = None
    if labelled:
        yt = (ref.y_test - lo).astype(np.int64)
        if yt.min() < 0 or yt.max() >= k:
            labelled = False        # test labels outside the training range: scored by nobody
    if labelled:
        metrics["test_qwk"] = qwk(yt, test_class, n_classes=k)
    rows = []
    for j, m in enumerate(members):
        own = fit_thresholds(thresholds, S[:, j], y_idx, n_classes=k, sample_weight=w)
        own_nested = np.empty_like(y_idx)
        for f in np.unique(folds):
            held = folds == f
            c = fit_thresholds(thresholds, S[~held, j], y_idx[~held], n_classes=k,
                               sample_weight=None if w is None else w[~held])
            own_nested[held] = apply_thresholds(S[held, j], c)
        row = {"member": m.name, "weight": float(fit.weights[j]),
               "oof_qwk": qwk(y_idx, apply_thresholds(S[:, j], own), n_classes=k, sample_weight=w),
               "nested_oof_qwk": qwk(y_idx, own_nested, n_classes=k, sample_weight=w)}
        if labelled:
            row["test_qwk"] = qwk(yt, apply_thresholds(T[:, j], own), n_classes=k)
        rows.append(row)
    table = pd.DataFrame(rows)
    best = table["nested_oof_qwk"].idxmax()
    metrics["best_member_oof_qwk"] = float(table["oof_qwk"].max())
    metrics["best_member_nested_oof_qwk"] = float(table.loc[best, "nested_oof_qwk"])
    if labelled:
        metrics["best_member_test_qwk"] = float(table["test_qwk"].max())     # the best on test: a bar, not a choice
        metrics["chosen_member_test_qwk"] = float(table.loc[best, "test_qwk"])  # the one nested OOF would pick
    shift = 0.0 if method == "rank_mean" else lo       # rank_mean scores live on [0, 1]
    cuts = None if fit.cuts is None else fit.cuts + shift
    result = BlendResult(method, thresholds, members, fit.weights, cuts, classes, fit.score(S) + shift,
                         classes[oof_class], classes[nested], fit.score(T) + shift, classes[test_class], metrics,
                         table, fit, trusted, time.perf_counter() - started)
    log.info("blend (%s) of %d members: OOF QWK %.4f in-sample, %.4f nested (best member %.4f nested)%s",
             method, len(members), metrics["oof_qwk"], metrics["nested_oof_qwk"],
             metrics["best_member_nested_oof_qwk"],
             f"; test QWK {metrics['test_qwk']:.4f} (best member {metrics['best_member_test_qwk']:.4f}, the one "
             f"nested OOF picks {metrics['chosen_member_test_qwk']:.4f})"
             if labelled else "")
    return result


#: What a blend writes into its directory; an earlier blend's that the new one lacks (``pipeline/``) go.
BLEND_OUTPUTS = ("oof.parquet", "predictions.parquet", "submission.csv", "blend.json", "plots", "pipeline")


def _check_same_data(members: Sequence[Member]) -> None:
    """Refuse members whose runs recorded fingerprints of other rows (:mod:`qwkboost.data.fingerprint`): the same
    ids over a ``train.csv`` or ``test.csv`` edited between two runs are other data. The feature columns both read
    are compared (members may use other features); members that recorded none (another tool's files, an older
    qwkboost's runs) are compared by ids, labels and folds only (:func:`align`).

    Raises
    ------
    BlendInputError
        Naming both members and what differs.
    """
    recorded = [(m, DataFingerprint.from_dict(m.info.get("data_fingerprint"))) for m in members]
    recorded = [(m, fp) for m, fp in recorded if fp is not None]
    for m, fp in recorded[1:]:
        ref, ref_fp = recorded[0]
        diff = ref_fp.conflicts(fp, when=(f"in {ref.name!r}", f"in {m.name!r}"))
        if diff:
            raise BlendInputError(f"member {m.name!r} ({m.source}) was made from other data than member "
                                  f"{ref.name!r} ({ref.source}): {'; '.join(diff)}; blend runs of the same files")


def write_blend(result: BlendResult, out: str | Path) -> list[Path]:
    """``submission.csv``, ``predictions.parquet``, ``oof.parquet``, ``blend.json`` and ``plots/blend.png``;
    and ``pipeline/`` when every member is a qwkboost pipeline. Returns the files written.

    The parquet files hold the blend's scores and classes and, as ``member_<i>``, the score of
    ``blend.json``'s ``members[i]``. They are written beside an earlier blend's and swapped in when all are
    written (:func:`qwkboost.tracking.writing.staged`): a failure keeps the earlier ones."""
    out = Path(out)
    with staged(out, remove=BLEND_OUTPUTS) as new:
        files = _write_blend_files(result, new)
    return [out / f.relative_to(new) for f in files]


def _write_blend_files(result: BlendResult, out: Path) -> list[Path]:
    import matplotlib.pyplot as plt  # slow to import: matplotlib.pyplot
    import pandas as pd  # slow to import: pandas

    from qwkboost.evaluation.plots import blend_members  # slow to import: matplotlib, matplotlib.pyplot

    ref = result.members[0]
    as_int = np.all(result.classes == np.round(result.classes))
    labels = None if ref.labels is None else ClassLabels(tuple(ref.labels))

    def cls(v):
        if labels is not None:
            return labels.decode(v)
        return v.astype(np.int64) if as_int else v

    n_folds = 0 if ref.folds is None else len(ref.folds)
    members = [member_role(i) for i in range(len(result.members))]
    user = {"id": ref.id_name, "label": ref.target, **({"group": ref.group_name} if ref.groups is not None else {}),
            **({"weight": ref.weight_name} if ref.weight is not None else {})}
    oc = OutputColumns.resolve(user, [SCORE, CLASS, NESTED_CLASS, *(fold_role(r) for r in range(n_folds)),
                                      *members], ref.labels)
    cols = {oc["id"]: ref.ids, oc["label"]: cls(ref.y)}
    if ref.groups is not None:
        cols.setdefault(oc["group"], ref.groups)        # the entity may also be the id
    if ref.weight is not None:
        cols[oc["weight"]] = ref.weight
    cols.update({oc[SCORE]: result.oof_score, oc[CLASS]: cls(result.oof_class),
                 oc[NESTED_CLASS]: cls(result.nested_oof_class)})
    for r in range(n_folds):
        cols[oc[fold_role(r)]] = ref.folds[r]
    for i, m in enumerate(result.members):         # aligned to the first member's rows; blend.json names them
        cols[oc[member_role(i)]] = m.oof
    oof = pd.DataFrame(cols)[oc.names]
    pc = OutputColumns.resolve({"id": ref.id_name, **({"label": ref.target} if ref.y_test is not None else {})},
                               [SCORE, CLASS, *members], ref.labels, reserved=list(oc.user.values()))
    pcols = {pc["id"]: ref.test_ids}
    if ref.y_test is not None:
        pcols[pc["label"]] = cls(ref.y_test) if labels is not None else ref.y_test
    pcols.update({pc[SCORE]: result.test_score, pc[CLASS]: cls(result.test_class)})
    for i, m in enumerate(result.members):
        pcols[pc[member_role(i)]] = m.test
    pred = pd.DataFrame(pcols)[pc.names]
    files = [out / "oof.parquet", out / "predictions.parquet", out / "submission.csv", out / "blend.json",
             out / "plots" / "blend.png"]
    write_predictions(oof, files[0], oc)
    write_predictions(pred, files[1], pc)
    pd.DataFrame({oc["id"]: ref.test_ids, oc["label"]: cls(result.test_class)}).to_csv(files[2], index=False)
    files[3].write_text(json.dumps(result.summary(), indent=1))
    files[4].parent.mkdir(exist_ok=True)
    fig = blend_members(result.member_table, result.metrics, result.method)
    fig.savefig(files[4], dpi=110)
    plt.close(fig)
    if all(m.pipeline_dir is not None for m in result.members):

        FittedBlend.write_result(result, out / "pipeline", result.trusted_modules)
    return files


def log_blend(result: BlendResult, out: str | Path, experiment_id: str, run_name: str = "blend",
              log_pyfunc: bool = True, params: dict | None = None) -> str:
    """Log a written blend (:func:`write_blend` into ``out``) as one MLflow run; return its id.

    The run is tagged ``kind=blend`` and with its members (``blend.member.<i>``: name and source;
    ``blend.member_runs``: the MLflow run ids among them), holds the weights
    (``weight.<member>``, :func:`~qwkboost.tracking.vocabulary.member_keys`) and the metrics, the files, and, when
    every member is a qwkboost pipeline, the blend as a servable pyfunc model (:func:`log_blend_contents`).
    """

    with tracking.run(experiment_id, run_name, tags={"kind": "blend"}) as active:
        tracking.log_metrics({"seconds": result.seconds})
        model_id = log_blend_contents(result, out, log_pyfunc, params)
        if model_id is not None:
            log.info("MLflow model: models:/%s", model_id)
        return active.info.run_id


def log_blend_contents(result: BlendResult, out: str | Path, log_pyfunc: bool = True,
                       params: dict | None = None, pipe=None, settings_as_tags: bool = False, step: int = 0,
                       name: str = "blend") -> str | None:
    """What :func:`log_blend` logs, into the active MLflow run (a time budget's parent run holds its blend);
    ``pipe``: the blend's pipeline already read from ``out / "pipeline"``. With ``settings_as_tags``, the blend's
    settings (``blend.thresholds``, ``blend.members``, ``params``) are tags rather than params: a run that is
    continued (a resumed time budget) may hold another blend, and MLflow refuses a param a second value.
    The metrics are logged at ``step`` (a continued run's later blend: a later step), and the servable model,
    named ``name``, is linked to them. Returns the model's id (``None`` without one)."""

    out = Path(out)
    m = result.metrics
    # the members that weigh, heaviest first; how many weigh nothing
    weighed = sorted(((w, x.name) for x, w in zip(result.members, result.weights) if w > 0), reverse=True)
    unused = len(result.members) - len(weighed)
    note = (f"{result.method} blend of {len(result.members)} members ("
            + ", ".join(f"{name} {w:.2f}" for w, name in weighed) + (f"; {unused} at weight 0" if unused else "")
            + "): out-of-fold QWK "
            f"{m['oof_qwk']:.4f}, nested {m['nested_oof_qwk']:.4f}"
            + (f", test {m['test_qwk']:.4f}" if "test_qwk" in m else ""))
    tracking.set_tags({"mlflow.note.content": note, "blend.method": result.method,
                       "blend.n_members": len(result.members),
                       "blend.member_runs": ",".join(m.run_id for m in result.members if m.run_id) or "-",
                       **{f"blend.member.{i}": f"{m.name} <- {m.source}" for i, m in enumerate(result.members)},
                       "command": tracking.command_line(),
                       **tracking.version_tags()})
    settings = {"method": result.method, "thresholds": result.thresholds, "members": len(result.members),
                **(params or {})}
    if settings_as_tags:
        tracking.set_tags({f"blend.{k}": str(v) for k, v in settings.items()})
    else:
        tracking.log_params({"blend": settings})
    keys = member_keys([m.name for m in result.members])        # by name, not position: a column is one member
    tracking.log_metrics({**result.metrics, **{f"weight.{k}": float(w) for k, w in zip(keys, result.weights)},
                          **{f"member.{k}.{c}": float(v) for k, (_, row) in zip(keys, result.member_table.iterrows())
                             for c, v in row.items() if c.endswith("qwk")}}, step=step)
    tracking.log_file(out / "blend.json")
    tracking.log_file(out / "plots" / "blend.png", "plots")
    for f in ("oof.parquet", "predictions.parquet", "submission.csv"):
        tracking.log_file(out / f, "predictions")
    if (out / "pipeline").is_dir():         # once: inside the servable model, else as the run's artifact
        if not log_pyfunc:
            tracking.log_artifacts(out / "pipeline", "pipeline")
        else:
            from qwkboost.tracking.serving import example_frame  # slow to import: mlflow, pandas
            from qwkboost.tracking.serving import log_pyfunc as log_model  # slow to import: mlflow, pandas

            pipe = load_pipeline(out / "pipeline", result.trusted_modules) if pipe is None else pipe
            return log_model(out / "pipeline", example_frame([m.schema for m in pipe.members]),
                             result.trusted_modules, pipe=pipe, name=name, step=step)
    return None
