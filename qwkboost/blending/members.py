"""The members of a blend: out-of-fold and test predictions of runs, read from wherever they are, and checked.

A member is one model's predictions for the same training rows and the same
test rows as every other member's. It can come from

* a run's output directory (``outputs/<date>/<time>``: ``oof.parquet``,
  ``predictions.parquet`` and ``pipeline/``);
* a directory that holds runs (a multirun's sweep directory, a table's output
  directory): every run in it, in order;
* an MLflow run id: that run, or, for the parent of a multirun, a table or a
  tuning study, each of its finished children;
* a directory of another tool's predictions (a neural network's): ``oof.csv``
  (or ``.parquet``) with the id, the label, a ``score`` column or class
  probabilities ``proba_<class>``, and the row's ``fold``; and ``test.csv``
  with the id and the same prediction columns. Their names follow the rule of
  :mod:`qwkboost.tracking.outputs`: where the label or id column is itself
  called ``score`` or ``fold``, the prediction is ``score_qwkboost`` and the
  fold ``fold_qwkboost``;
* a :class:`Member` built in Python (:meth:`Member.from_frames`).

:func:`align` puts every member's rows in the first member's order (by id)
and refuses members whose ids, labels, row weights or folds differ: blend
weights fitted on predictions made with different folds would leak.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from qwkboost import tracking
from qwkboost.blending.downloads import Downloads, Found, from_run_id
from qwkboost.blending.errors import BlendInputError
from qwkboost.data.labels import ClassLabels
from qwkboost.tracking.files import run_path
from qwkboost.tracking.outputs import (
    META_KEY,
    PROBA_PREFIX,
    SCORE,
    OutputColumns,
    fold_role,
    legacy_clash,
    read_predictions,
)
from qwkboost.validation import read_json, shown

__all__ = ["Member", "read_members", "align", "BlendInputError"]

_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
OOF_NAMES = ("oof.parquet", "oof.csv")
TEST_NAMES = ("predictions.parquet", "test.parquet", "test.csv", "predictions.csv")


@dataclass
class Member:
    """One model's out-of-fold and test scores, on the labels' scale.

    Attributes
    ----------
    name : str
        Shown in reports (``engine/objective`` for a qwkboost run).
    source : str
        Where it was read from (a directory or ``run:<id>``).
    ids, y : ndarray
        Training ids and labels, one per out-of-fold score.
    oof : ndarray
        Out-of-fold scores (a probabilistic model's expected class).
    test_ids, test : ndarray
        Test ids and the model's test scores.
    folds : ndarray of shape (repeats, n) or None
        The validation fold of every training row in every CV repeat.
    weight : ndarray or None
        Training row weights, if the run had them.
    y_test : ndarray or None
        Test labels, where the test set has them.
    pipeline_dir : Path or None
        The qwkboost pipeline that makes these scores from features (for a servable blend).
    run_id : str or None
    info : dict
        Engine, objective and the like.
    id_name, target : str
        Column names of the id and the label.
    labels : list or None
        The class labels in order when they are words: ``y`` and ``y_test`` then hold class indices.
    weight_name : str or None
        The column ``weight`` came from.
    groups, group_name : ndarray or None, str or None
        The entity of every training row (``cv.group``) and its column, when the run had one.
    keep : object or None
        What must live as long as the member: the temporary directory it was downloaded into, if any.
    """

    name: str
    source: str
    ids: np.ndarray
    y: np.ndarray
    oof: np.ndarray
    test_ids: np.ndarray
    test: np.ndarray
    folds: np.ndarray | None = None
    weight: np.ndarray | None = None
    y_test: np.ndarray | None = None
    pipeline_dir: Path | None = None
    run_id: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    id_name: str = "id"
    target: str = "label"
    labels: list | None = None
    weight_name: str | None = None
    groups: np.ndarray | None = None
    group_name: str | None = None
    keep: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_cv(cls, name: str, cv, y, ids=None, test_ids=None, y_test=None, sample_weight=None) -> "Member":
        """A member from :func:`qwkboost.cross_validate`'s result: its OOF and test scores and its folds.

        Parameters
        ----------
        name : str
        cv : CVResult
            Run with ``X_test`` so that it holds test scores.
        y : array-like
            The training labels ``cv`` was fitted on.
        ids, test_ids : array-like, optional
            Row ids (default: row numbers).
        y_test : array-like, optional
            Test labels, where known.
        sample_weight : array-like, optional

        Raises
        ------
        BlendInputError
            If ``cv`` has no test scores or ``y`` has another length.
        """
        if getattr(cv, "test", None) is None:
            raise BlendInputError(f"member {name}: its cross_validate result has no test scores; pass X_test")
        y = np.asarray(y, dtype=float)
        if y.shape != cv.oof.shape:
            raise BlendInputError(f"member {name}: y has {y.size} labels for {cv.oof.size} out-of-fold scores")
        ids = np.arange(y.size) if ids is None else np.asarray(ids)
        test_ids = np.arange(cv.test.size) if test_ids is None else np.asarray(test_ids)
        return cls(name, name, ids, y, np.asarray(cv.oof, dtype=float), test_ids, np.asarray(cv.test, dtype=float),
                   None if cv.fold_of is None else np.asarray(cv.fold_of),
                   None if sample_weight is None else np.asarray(sample_weight, dtype=float),
                   None if y_test is None else np.asarray(y_test, dtype=float))

    @classmethod
    def from_frames(cls, name: str, oof, test, id: str = "id", target: str = "label", source: str | None = None,
                    columns: OutputColumns | None = None, test_columns: OutputColumns | None = None,
                    classes=None, **extra) -> "Member":
        """A member from two DataFrames: ``oof`` (id, label, score or ``proba_<class>``, ``fold``...) and
        ``test`` (id and the same prediction columns; the label too where known).

        Parameters
        ----------
        name : str
        oof, test : DataFrame
        id, target : str
            The id and label columns.
        source : str, optional
            Where the frames came from, for messages.
        columns, test_columns : OutputColumns, optional
            The tables' column records (qwkboost's own files carry them); without one, the columns are named
            by the rule of :mod:`qwkboost.tracking.outputs` from ``id`` and ``target``: ``score``, ``fold``,
            ``fold_1``, ... and ``weight``, each with ``_qwkboost`` added where ``id`` or ``target`` has its name.
        classes : sequence, optional
            The order of labels that are words (``classes=[low,medium,high]``); a record's own comes first.

        Raises
        ------
        BlendInputError
            Naming the missing column or the bad value.
        """
        where = source or name
        columns = columns or _by_rule(oof, id, target)
        test_columns = test_columns or _by_rule(test, columns["id"], columns["label"])
        for frame, what, cols in ((oof, "out-of-fold", columns), (test, "test", test_columns)):
            need = [cols["id"], *([cols["label"]] if what == "out-of-fold" else [])]
            missing = [c for c in need if c not in frame.columns]
            if missing:
                raise BlendInputError(f"member {where}: its {what} table lacks column(s) {missing} (has "
                                      f"{list(frame.columns)})")
        oof_score = _score(oof, columns, f"member {where}: out-of-fold table")
        test_score = _score(test, test_columns, f"member {where}: test table")
        folds = None
        fold_cols = [c for c in columns.fold_columns if c in oof.columns]
        if fold_cols:
            folds = oof[fold_cols].to_numpy().T
            if not np.issubdtype(folds.dtype, np.number) or np.isnan(folds.astype(float)).any():
                raise BlendInputError(f"member {where}: its fold column(s) {fold_cols} must hold fold numbers in "
                                      "every row")
            folds = folds.astype(np.int64)
        order = columns.labels if columns.labels is not None else (None if classes is None else list(classes))
        label = columns["label"]
        y = _labels(oof[label], order, f"member {where}: label column {label!r}")
        y_test = None
        test_label = test_columns.user.get("label")
        if test_label is not None and test_label in test.columns:
            y_test = _labels(test[test_label], order, f"member {where}: test label column {test_label!r}")
        wcol = columns.get("weight")
        weight = oof[wcol].to_numpy(dtype=float) if wcol is not None and wcol in oof.columns else None
        gcol = columns.user.get("group")
        groups = oof[gcol].to_numpy() if gcol is not None and gcol in oof.columns else None
        return cls(name, source or name, oof[columns["id"]].to_numpy(), y, oof_score,
                   test[test_columns["id"]].to_numpy(), test_score, folds, weight, y_test, id_name=columns["id"],
                   target=label, labels=order, weight_name=wcol if weight is not None else None, groups=groups,
                   group_name=gcol if groups is not None else None, **extra)


def _by_rule(frame, id: str, target: str) -> OutputColumns:
    """The columns of a table without a record, named by the rule from its id and label names."""
    wide = OutputColumns.resolve({"id": id, "label": target, "weight": None},
                                 [SCORE, *(fold_role(r) for r in range(64))])
    folds = 0
    while folds < 64 and wide.own[fold_role(folds)] in frame.columns:
        folds += 1
    return OutputColumns.resolve({"id": id, "label": target, "weight": None},
                                 [SCORE, *(fold_role(r) for r in range(folds))])


def _labels(col, order, what: str) -> np.ndarray:
    """Labels as numbers: their values, or their class index in ``order`` when they are words."""
    if order is not None:
        try:
            return ClassLabels.of(order, "classes").encode(col, what, col.index)
        except ValueError as exc:
            raise BlendInputError(str(exc)) from None
    try:
        return _numbers(col, what)
    except BlendInputError:
        import pandas as pd  # slow to import: pandas

        text = col[pd.to_numeric(col, errors="coerce").isna() & col.notna()]
        if len(text):
            raise BlendInputError(f"{what} holds words ({shown(text.iloc[0])}, ...); give their order, lowest first, "
                                  "with classes=[...]") from None
        raise


def _numbers(col, what: str) -> np.ndarray:
    v = np.asarray(col.to_numpy(), dtype=object)
    try:
        out = v.astype(float)
    except (TypeError, ValueError):
        raise BlendInputError(f"{what} must hold numbers") from None
    if not np.isfinite(out).all():
        raise BlendInputError(f"{what} is missing or infinite in {int((~np.isfinite(out)).sum())} row(s)")
    return out


def _score(frame, columns: OutputColumns, where: str) -> np.ndarray:
    """The score column, or the expected class of ``proba_<class>`` columns (rows normalised to sum 1)."""
    score = columns.get(SCORE, SCORE)
    if score in frame.columns:
        return _numbers(frame[score], f"{where}: column {score!r}")
    cols = [c for c in frame.columns if str(c).startswith(PROBA_PREFIX) and c not in columns.user.values()]
    if not cols:
        raise BlendInputError(f"{where} has neither a {score!r} column nor class probabilities 'proba_<class>' "
                              f"(columns: {list(frame.columns)})")
    try:
        classes = np.array([float(str(c)[len(PROBA_PREFIX):]) for c in cols])
    except ValueError:
        raise BlendInputError(f"{where}: probability columns must be named proba_<class> with a numeric class; "
                              f"got {cols}") from None
    p = np.column_stack([_numbers(frame[c], f"{where}: column {c!r}") for c in cols])
    if (p < 0).any() or not (p.sum(axis=1) > 0).all():
        raise BlendInputError(f"{where}: class probabilities must be >= 0 with a positive sum in every row")
    return (p / p.sum(axis=1, keepdims=True)) @ classes


# --------------------------------------------------------------------------- reading

def _read_table(path: Path):
    """``(frame, record)`` of a prediction file (the record ``None`` for one without)."""
    try:
        return read_predictions(path)
    except Exception as exc:  # noqa: BLE001 - any reader error is an unreadable member
        raise BlendInputError(f"{path} cannot be read ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})") \
            from None


def _json(path: Path, kind: str) -> dict:
    """A member's JSON file as a mapping; a malformed one (not JSON, nested too deeply, too large, not a
    mapping) is refused in one line naming it."""
    try:
        value = read_json(path, str(path), kind)
    except ValueError as exc:
        raise BlendInputError(str(exc)) from None
    if not isinstance(value, dict):
        raise BlendInputError(f"{path} is not {kind} (its JSON is not a mapping)")
    return value


def _name(value) -> str | None:
    return value if isinstance(value, str) and value else None


def _inside(d: Path, name: str, kind: str = "file") -> Path | None:
    """``d / name`` if it is there: a regular file (or a directory) inside ``d``, else refused in one line
    (:func:`~qwkboost.tracking.files.run_path`); ``None`` if there is nothing of that name."""
    if not os.path.lexists(d / name):
        return None
    try:
        return run_path(d, name, "file" if kind == "file" else "folder", f"member {str(d)!r}", kind)
    except ValueError as exc:
        raise BlendInputError(str(exc)) from None


def _first(d: Path, names: Sequence[str]) -> Path | None:
    return next((p for n in names for p in [_inside(d, n)] if p is not None), None)


def is_member_dir(d: Path) -> bool:
    """Whether ``d`` holds one member's predictions (an out-of-fold table and a test table)."""
    return _first(d, OOF_NAMES) is not None and _first(d, TEST_NAMES) is not None


def _from_dir(d: Path, id_name: str | None, target: str | None, source: str | None = None,
              run_id: str | None = None, classes=None) -> Member:
    """One member from a directory (a qwkboost run's outputs, or another tool's files)."""
    oof_path, test_path = _first(d, OOF_NAMES), _first(d, TEST_NAMES)
    info: dict[str, Any] = {}
    pipeline_dir = _inside(d, "pipeline", "dir")
    meta_file = None if pipeline_dir is None else _inside(pipeline_dir, "pipeline.json")
    pipeline_dir = None if meta_file is None else pipeline_dir
    if meta_file is not None:
        meta = _json(meta_file, "a qwkboost pipeline file")
        info = dict(meta.get("info") or {}) if isinstance(meta.get("info"), dict) else {}
        id_name = id_name or _name(meta.get("id_name")) or "row"
        target = target or _name(meta.get("target")) or "label"
    result = _inside(d, "result.json")
    if result is not None:
        info = {**_json(result, "a run's result file"), **info}
    (oof, columns), (test, test_columns) = _read_table(oof_path), _read_table(test_path)
    if columns is None and pipeline_dir is not None:
        # qwkboost 0.1 wrote its columns by their plain names, over any of the user's that had one
        clash = legacy_clash({"id": id_name, "label": target})
        if clash is not None:
            raise BlendInputError(
                f"member {source or d} was written by qwkboost 0.1, whose own {clash!r} column wrote over your "
                f"column {clash!r} in {oof_path.name}: its labels or ids are lost. Run it again with this qwkboost "
                f"(its command is in {d / '.hydra' / 'overrides.yaml'} or its MLflow run's 'command' tag); the "
                "new files keep your columns and name qwkboost's score_qwkboost, class_qwkboost, ...")
    if columns is None:
        id_name = id_name or ("id" if "id" in oof.columns else str(oof.columns[0]))
        target = target or ("label" if "label" in oof.columns else None)
        if target is None:
            raise BlendInputError(f"member {source or d}: cannot tell its label column; give target=<column> "
                                  f"(columns: {list(oof.columns)})")
    name = "/".join(str(info[k]) for k in ("engine", "objective") if info.get(k)) or d.name
    return Member.from_frames(name, oof, test, id_name or "id", target or "label", source=source or str(d),
                              columns=columns, test_columns=test_columns, classes=classes,
                              pipeline_dir=pipeline_dir, run_id=run_id or info.get("run_id"), info=info)


def _recorded_labels(d: Path) -> list | None:
    """The class labels a member directory's ``oof.parquet`` records, if any (read before its rows)."""
    path = _first(d, OOF_NAMES)
    if path is None or path.suffix != ".parquet":
        return None
    import pyarrow.parquet as pq  # slow to import: pyarrow

    try:
        raw = (pq.read_schema(path).metadata or {}).get(META_KEY.encode())
        return None if raw is None else json.loads(raw).get("labels")
    except Exception:  # noqa: BLE001 - an unreadable file is reported when it is read
        return None


def _sub_runs(d: Path) -> list[Path]:
    """The runs in a directory of runs (a sweep's ``0``, ``1``, ... or a table's rows), in order."""
    subs = [p for p in d.iterdir() if p.is_dir() and is_member_dir(p)]
    return sorted(subs, key=lambda p: (0, int(p.name), "") if p.name.isdigit() else (1, 0, p.name))


def _read_found(f: Found, id_name, target, classes) -> Member:
    if f.run is None:
        return _from_dir(f.path, id_name, target, classes=classes)
    m = _from_dir(f.path, id_name, target, source=f.source, run_id=f.run.info.run_id, classes=classes)
    tags = f.run.data.tags
    m.info.setdefault("engine", tags.get("engine"))
    m.info.setdefault("objective", tags.get("objective"))
    m.name = f.run.info.run_name or m.name
    return m


def read_members(runs: Sequence, tracking_uri: str | None = None, id: str | None = None, target: str | None = None,
                 workdir: str | Path | None = None, classes=None) -> list[Member]:
    """Every member named by ``runs``, in order (see the module's docstring for what a run may be).

    ``workdir`` keeps downloaded artifacts; by default a temporary directory, made only when a run is downloaded
    and removed when no member read from it is left (they hold it: :class:`~qwkboost.blending.downloads.Downloads`).
    ``classes`` orders labels that are words in other tools' files; by default the order a qwkboost
    member records is used for every member.

    Raises
    ------
    BlendInputError
        For a run that does not exist or cannot be read, naming it.
    """
    if isinstance(runs, (str, Path, Member)) or runs is None:
        runs = [] if runs is None else [runs]
    downloads = None
    found: list[Member | Found] = []
    uri = None
    for i, r in enumerate(runs):
        if isinstance(r, Member):
            found.append(r)
            continue
        text = str(r).strip()
        p = Path(text).expanduser()
        if p.is_dir():
            if is_member_dir(p):
                found.append(Found(p))
                continue
            subs = _sub_runs(p)
            if not subs:
                raise BlendInputError(f"runs[{i}]={text!r} is a directory with neither predictions (oof.parquet or "
                                      "oof.csv, and a test file) nor runs that have them")
            found += [Found(s) for s in subs]
        elif p.exists():
            raise BlendInputError(f"runs[{i}]={text!r} is a file; give a run's output directory, a directory of "
                                  "runs or prediction files, or an MLflow run id")
        elif _RUN_ID.match(text):

            uri = uri or tracking.resolve_tracking_uri(tracking_uri)
            tracking.bound_http_retries(uri)
            tracking.check_reachable(uri)
            if workdir is None:
                downloads = downloads or Downloads()
            found += from_run_id(text, uri, Path(workdir) if workdir is not None else downloads.path)
        else:
            raise BlendInputError(f"runs[{i}]={text!r} is neither a directory nor an MLflow run id (32 hex digits)")
    if classes is None:     # words as labels: the order a qwkboost member records, for every member
        classes = next((lab for f in found if isinstance(f, Found) for lab in [_recorded_labels(f.path)]
                        if lab is not None), None)
    members = [f if isinstance(f, Member) else _read_found(f, id, target, classes) for f in found]
    for m, f in zip(members, found):
        if isinstance(f, Found) and f.run is not None:
            m.keep = downloads      # the folder its files were downloaded into lives as long as the member
    return distinct_names(members)


def distinct_names(members: list[Member]) -> list[Member]:
    """``members``, a second ``a`` renamed ``a (2)`` and so on: names tell members apart in reports and key
    their weights in ``blend.json``."""
    names: dict[str, int] = {}
    out = []
    for m in members:
        n = names.get(m.name, 0)
        names[m.name] = n + 1
        out.append(replace(m, name=f"{m.name} ({n + 1})") if n else m)     # the caller's objects stay as they are
    return out


# --------------------------------------------------------------------------- checks

def _order(ids: np.ndarray, ref: np.ndarray, what: str, name: str, ref_name: str) -> np.ndarray:
    """Positions in ``ids`` of each of ``ref``'s ids, or an error naming the first difference."""
    import pandas as pd  # slow to import: pandas

    if len(ids) != len(ref):
        raise BlendInputError(f"members {ref_name!r} and {name!r} have different {what} rows ({len(ref)} and "
                              f"{len(ids)}); every member must predict the same rows")
    idx = pd.Index(ids)
    if idx.has_duplicates:
        raise BlendInputError(f"member {name!r} repeats the {what} id {idx[idx.duplicated()][0]!r}")
    pos = idx.get_indexer(ref)
    if (pos < 0).any():
        raise BlendInputError(f"members {ref_name!r} and {name!r} have different {what} ids (e.g. "
                              f"{ref[np.flatnonzero(pos < 0)[0]]!r} is not in {name!r})")
    return pos


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two fold labellings split the rows the same way (fold numbers may differ)."""
    import pandas as pd  # slow to import: pandas

    return np.array_equal(pd.factorize(a)[0], pd.factorize(b)[0])


def align(members: Sequence[Member], check_folds: bool = True) -> list[Member]:
    """The members with their rows in the first member's order, after checking they belong together.

    Raises
    ------
    BlendInputError
        For fewer than two members; different training or test ids, labels or
        row weights; members without folds, or with different folds, when
        ``check_folds`` (set it to ``False`` only knowingly: weights fitted
        across different folds leak).
    """
    if len(members) < 2:
        raise BlendInputError(f"a blend needs at least two members; got {len(members)}"
                              + (f" ({members[0].name})" if members else ""))
    ref = members[0]
    for ids, what in ((ref.ids, "training"), (ref.test_ids, "test")):
        if len(np.unique(ids)) != len(ids):
            raise BlendInputError(f"member {ref.name!r} repeats {what} ids")
    out = [ref]
    for m in members[1:]:
        pos = _order(m.ids, ref.ids, "training", m.name, ref.name)
        tpos = _order(m.test_ids, ref.test_ids, "test", m.name, ref.name)
        if m.labels != ref.labels:
            raise BlendInputError(f"members {ref.name!r} and {m.name!r} have different classes ({ref.labels} and "
                                  f"{m.labels}); they were not trained on the same labels")
        y = m.y[pos]
        if not np.array_equal(y, ref.y):
            i = int(np.flatnonzero(y != ref.y)[0])
            shown = (lambda v: repr(ref.labels[int(v)])) if ref.labels is not None else (lambda v: f"{v:g}")
            raise BlendInputError(f"members {ref.name!r} and {m.name!r} have different labels (id {ref.ids[i]!r}: "
                                  f"{shown(ref.y[i])} and {shown(y[i])}); they were not trained on the same file")
        w = None if m.weight is None else m.weight[pos]
        if (w is None) != (ref.weight is None) or (w is not None and not np.allclose(w, ref.weight)):
            raise BlendInputError(f"members {ref.name!r} and {m.name!r} have different row weights")
        folds = None if m.folds is None else m.folds[:, pos]
        if check_folds:
            for x in (ref, m):
                if x.folds is None:
                    raise BlendInputError(
                        f"member {x.name!r} ({x.source}) records no CV folds (a 'fold' column), so the members' "
                        "folds cannot be checked; re-run it with this qwkboost, add the column, or set "
                        "check_folds=false knowingly")
            if folds.shape[0] != ref.folds.shape[0] or not all(
                    _same_partition(a, b) for a, b in zip(folds, ref.folds)):
                raise BlendInputError(
                    f"members {ref.name!r} ({ref.source}) and {m.name!r} ({m.source}) were cross-validated on "
                    "different folds: blend weights fitted on their out-of-fold scores would leak. Re-run them with "
                    "the same seed, cv.n_splits, cv.repeats and cv.group, or set check_folds=false "
                    "knowingly")
        y_test = None if m.y_test is None else m.y_test[tpos]
        out.append(replace(m, ids=ref.ids, y=ref.y, oof=m.oof[pos], test_ids=ref.test_ids, test=m.test[tpos],
                           folds=folds, weight=w, y_test=y_test, groups=None if m.groups is None else m.groups[pos]))
    return out
