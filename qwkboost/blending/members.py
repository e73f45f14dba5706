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
  with the id and the same prediction columns;
* a :class:`Member` built in Python (:meth:`Member.from_frames`).

:func:`align` puts every member's rows in the first member's order (by id)
and refuses members whose ids, labels, row weights or folds differ: blend
weights fitted on predictions made with different folds would leak.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

__all__ = ["Member", "read_members", "align", "BlendInputError"]

log = logging.getLogger(__name__)

_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
OOF_NAMES = ("oof.parquet", "oof.csv")
TEST_NAMES = ("predictions.parquet", "test.parquet", "test.csv", "predictions.csv")


class BlendInputError(ValueError):
    """A member that cannot be read, or members that do not belong together."""


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
                    **extra) -> "Member":
        """A member from two DataFrames: ``oof`` (id, label, ``score`` or ``proba_<class>``, ``fold``...) and
        ``test`` (id and the same prediction columns; the label too where known).

        Raises
        ------
        BlendInputError
            Naming the missing column or the bad value.
        """
        where = source or name
        for frame, what, need in ((oof, "out-of-fold", (id, target)), (test, "test", (id,))):
            missing = [c for c in need if c not in frame.columns]
            if missing:
                raise BlendInputError(f"member {where}: its {what} table lacks column(s) {missing} (has "
                                      f"{list(frame.columns)})")
        oof_score = _score(oof, f"member {where}: out-of-fold table")
        test_score = _score(test, f"member {where}: test table")
        fold_cols = [c for c in oof.columns if c == "fold" or re.fullmatch(r"fold_\d+", str(c))]
        fold_cols.sort(key=lambda c: 0 if c == "fold" else int(c.split("_")[1]))
        folds = None
        if fold_cols:
            folds = oof[fold_cols].to_numpy().T
            if not np.issubdtype(folds.dtype, np.number) or np.isnan(folds.astype(float)).any():
                raise BlendInputError(f"member {where}: its 'fold' column(s) must hold fold numbers in every row")
            folds = folds.astype(np.int64)
        y = _numbers(oof[target], f"member {where}: label column {target!r}")
        y_test = None
        if target in test.columns:
            y_test = _numbers(test[target], f"member {where}: test label column {target!r}")
        weight = oof["weight"].to_numpy(dtype=float) if "weight" in oof.columns else None
        return cls(name, source or name, oof[id].to_numpy(), y, oof_score, test[id].to_numpy(), test_score, folds,
                   weight, y_test, id_name=id, target=target, **extra)


def _numbers(col, what: str) -> np.ndarray:
    v = np.asarray(col.to_numpy(), dtype=object)
    try:
        out = v.astype(float)
    except (TypeError, ValueError):
        raise BlendInputError(f"{what} must hold numbers") from None
    if not np.isfinite(out).all():
        raise BlendInputError(f"{what} is missing or infinite in {int((~np.isfinite(out)).sum())} row(s)")
    return out


def _score(frame, where: str) -> np.ndarray:
    """The ``score`` column, or the expected class of ``proba_<class>`` columns (rows normalised to sum 1)."""
    if "score" in frame.columns:
        return _numbers(frame["score"], f"{where}: column 'score'")
    cols = [c for c in frame.columns if str(c).startswith("proba_")]
    if not cols:
        raise BlendInputError(f"{where} has neither a 'score' column nor class probabilities 'proba_<class>' "
                              f"(columns: {list(frame.columns)})")
    try:
        classes = np.array([float(str(c)[len("proba_"):]) for c in cols])
    except ValueError:
        raise BlendInputError(f"{where}: probability columns must be named proba_<class> with a numeric class; "
                              f"got {cols}") from None
    p = np.column_stack([_numbers(frame[c], f"{where}: column {c!r}") for c in cols])
    if (p < 0).any() or not (p.sum(axis=1) > 0).all():
        raise BlendInputError(f"{where}: class probabilities must be >= 0 with a positive sum in every row")
    return (p / p.sum(axis=1, keepdims=True)) @ classes


# --------------------------------------------------------------------------- reading

def _read_table(path: Path):
    import pandas as pd

    try:
        return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except Exception as exc:  # noqa: BLE001 - any reader error is an unreadable member
        raise BlendInputError(f"{path} cannot be read ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})") \
            from None


def _first(d: Path, names: Sequence[str]) -> Path | None:
    return next((d / n for n in names if (d / n).is_file()), None)


def is_member_dir(d: Path) -> bool:
    """Whether ``d`` holds one member's predictions (an out-of-fold table and a test table)."""
    return _first(d, OOF_NAMES) is not None and _first(d, TEST_NAMES) is not None


def _from_dir(d: Path, id_name: str | None, target: str | None, source: str | None = None,
              run_id: str | None = None) -> Member:
    """One member from a directory (a qwkboost run's outputs, or another tool's files)."""
    oof_path, test_path = _first(d, OOF_NAMES), _first(d, TEST_NAMES)
    info: dict[str, Any] = {}
    pipeline_dir = d / "pipeline" if (d / "pipeline" / "pipeline.json").is_file() else None
    if pipeline_dir is not None:
        meta = json.loads((pipeline_dir / "pipeline.json").read_text())
        info = dict(meta.get("info") or {})
        id_name = id_name or meta.get("id_name") or "row"
        target = target or meta.get("target") or "label"
    result = d / "result.json"
    if result.is_file():
        info = {**json.loads(result.read_text()), **info}
    oof, test = _read_table(oof_path), _read_table(test_path)
    id_name = id_name or ("id" if "id" in oof.columns else str(oof.columns[0]))
    target = target or ("label" if "label" in oof.columns else None)
    if target is None:
        raise BlendInputError(f"member {source or d}: cannot tell its label column; give target=<column> (columns: "
                              f"{list(oof.columns)})")
    name = "/".join(str(info[k]) for k in ("engine", "objective") if info.get(k)) or d.name
    return Member.from_frames(name, oof, test, id_name, target, source=source or str(d), pipeline_dir=pipeline_dir,
                              run_id=run_id or info.get("run_id"), info=info)


def _sub_runs(d: Path) -> list[Path]:
    """The runs in a directory of runs (a sweep's ``0``, ``1``, ... or a table's rows), in order."""
    subs = [p for p in d.iterdir() if p.is_dir() and is_member_dir(p)]
    return sorted(subs, key=lambda p: (0, int(p.name), "") if p.name.isdigit() else (1, 0, p.name))


def _from_run_id(run_id: str, uri: str, id_name, target, tmp: Path) -> list[Member]:
    import mlflow
    from mlflow.exceptions import MlflowException

    from qwkboost import tracking

    client = mlflow.MlflowClient(uri)
    try:
        run = client.get_run(run_id)
    except MlflowException:
        raise BlendInputError(f"run {run_id} is not a run of the MLflow store {uri.split('?')[0]}; give its "
                              "tracking.uri, or a run's output directory") from None
    children = tracking.retry(client.search_runs, [run.info.experiment_id],
                               f"tags.mlflow.parentRunId = '{run_id}'", max_results=10_000,
                               order_by=["attributes.start_time ASC"])
    if not children:
        return [_download(client, run, uri, id_name, target, tmp)]
    done = [c for c in children if c.info.status == "FINISHED"]
    skipped = [c.info.run_name for c in children if c.info.status != "FINISHED"]
    if skipped:
        log.warning("run %s: %d child run(s) did not finish and are left out: %s", run_id, len(skipped),
                    ", ".join(skipped))
    out = []
    for c in done:
        try:
            out.append(_download(client, c, uri, id_name, target, tmp))
        except BlendInputError as exc:
            if "logged no predictions" not in str(exc):
                raise
            log.info("run %s: child %s has no predictions (a parent of its own?), left out", run_id,
                     c.info.run_name)
    if not out:
        raise BlendInputError(f"run {run_id} has {len(children)} child run(s) but none finished with predictions")
    return out


def _download(client, run, uri: str, id_name, target, tmp: Path) -> Member:
    from mlflow.exceptions import MlflowException

    run_id = run.info.run_id
    d = tmp / run_id
    d.mkdir(parents=True, exist_ok=True)
    names = {a.path for a in client.list_artifacts(run_id, "predictions")}
    if "predictions/oof.parquet" not in names:
        raise BlendInputError(f"run {run_id} ({run.info.run_name}) logged no predictions (predictions/oof.parquet)")
    try:
        client.download_artifacts(run_id, "predictions", str(d))
        if any(a.path == "pipeline" for a in client.list_artifacts(run_id)):
            client.download_artifacts(run_id, "pipeline", str(d / "predictions"))
    except (MlflowException, OSError) as exc:
        raise BlendInputError(f"run {run_id}: its predictions cannot be downloaded ({type(exc).__name__})") from None
    m = _from_dir(d / "predictions", id_name, target, source=f"run:{run_id}", run_id=run_id)
    tags = run.data.tags
    m.info.setdefault("engine", tags.get("engine"))
    m.info.setdefault("objective", tags.get("objective"))
    m.name = run.info.run_name or m.name
    return m


def read_members(runs: Sequence, tracking_uri: str | None = None, id: str | None = None, target: str | None = None,
                 workdir: str | Path | None = None) -> list[Member]:
    """Every member named by ``runs``, in order (see the module's docstring for what a run may be).

    ``workdir`` keeps downloaded artifacts (a temporary directory by default,
    removed when the members are read, except their pipelines' copies under it).

    Raises
    ------
    BlendInputError
        For a run that does not exist or cannot be read, naming it.
    """
    if isinstance(runs, (str, Path, Member)) or runs is None:
        runs = [] if runs is None else [runs]
    tmp = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="qwkboost-blend-"))
    out: list[Member] = []
    uri = None
    for i, r in enumerate(runs):
        if isinstance(r, Member):
            out.append(r)
            continue
        text = str(r).strip()
        p = Path(text).expanduser()
        if p.is_dir():
            if is_member_dir(p):
                out.append(_from_dir(p, id, target))
                continue
            subs = _sub_runs(p)
            if not subs:
                raise BlendInputError(f"runs[{i}]={text!r} is a directory with neither predictions (oof.parquet or "
                                      "oof.csv, and a test file) nor runs that have them")
            out += [_from_dir(s, id, target) for s in subs]
        elif p.exists():
            raise BlendInputError(f"runs[{i}]={text!r} is a file; give a run's output directory, a directory of "
                                  "runs or prediction files, or an MLflow run id")
        elif _RUN_ID.match(text):
            from qwkboost import tracking

            uri = uri or tracking.resolve_tracking_uri(tracking_uri)
            tracking.bound_http_retries(uri)
            tracking.check_reachable(uri)
            out += _from_run_id(text, uri, id, target, tmp)
        else:
            raise BlendInputError(f"runs[{i}]={text!r} is neither a directory nor an MLflow run id (32 hex digits)")
    return distinct_names(out)


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
    import pandas as pd

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
    import pandas as pd

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
        y = m.y[pos]
        if not np.array_equal(y, ref.y):
            i = int(np.flatnonzero(y != ref.y)[0])
            raise BlendInputError(f"members {ref.name!r} and {m.name!r} have different labels (id {ref.ids[i]!r}: "
                                  f"{ref.y[i]:g} and {y[i]:g}); they were not trained on the same file")
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
                           folds=folds, weight=w, y_test=y_test))
    return out
