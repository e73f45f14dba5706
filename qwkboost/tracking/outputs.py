"""The columns of qwkboost's prediction files, and the one rule that names them.

**The rule.** Your columns keep their names. A prediction file (``oof.parquet``, ``predictions.parquet``,
``submission.csv``, and a blend's) holds your id column and your label column and, in ``oof.parquet``, your
entity (``cv.group``) and weight (``data.weight``) columns, under the names they have in your file. qwkboost's own
columns are named ``score``, ``class``, ``nested_class``, ``fold`` (``fold_1``, ``fold_2``, ... for further CV
repeats) and ``member_<i>`` (a blend's members), unless your id, label, entity or weight column has that name:
then qwkboost's column takes the suffix ``_qwkboost`` (added again while the name is still taken), in every file
of the run alike (the rule of :mod:`qwkboost.data.columns`, which an explanation's table follows too). A target called ``score`` gives ``Id, score, score_qwkboost, class, fold`` in
``oof.parquet``: ``score`` holds your labels, ``score_qwkboost`` the out-of-fold scores; and the test scores are
``score_qwkboost`` in ``predictions.parquet`` too.

Every Parquet file written here records which column plays which part, and the class labels when they are
words, in its schema metadata (the key ``qwkboost``); readers (the blend, ``experiments/predict.py``) take the
names from there (:func:`read_predictions`). Another tool's files have no such record and are read by the same
rule, from the id and label names the user gives. Files that qwkboost 0.1 wrote carry no record either; they
are read with the plain names, unless the user's id, label or entity column had one of qwkboost's names: there
the label was written over, and the file is refused with a message saying so.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from qwkboost.data.columns import SUFFIX, give_way

__all__ = ["OutputColumns", "SUFFIX", "META_KEY", "SCORE", "CLASS", "NESTED_CLASS", "PROBA_PREFIX", "fold_role",
           "member_role", "write_predictions", "read_predictions", "legacy_clash", "DEFAULT_NAMES"]

#: The key of a Parquet file's schema metadata that records its columns' parts.
META_KEY = "qwkboost"
FORMAT = "qwkboost-predictions"
FORMAT_VERSION = 2

SCORE, CLASS, NESTED_CLASS = "score", "class", "nested_class"
#: Class probabilities in another tool's files: ``proba_<class>``.
PROBA_PREFIX = "proba_"
#: The names of your columns' parts when you did not name them (a Python ``Dataset`` without an id column).
DEFAULT_NAMES = {"id": "row", "label": "label", "group": "group", "weight": "weight"}
USER_ROLES = ("id", "label", "group", "weight")
_LEGACY = re.compile(r"^(score|class|nested_class|weight|fold(_\d+)?|member_\d+)$")


def fold_role(r: int) -> str:
    """The part of CV repeat ``r``'s fold column (and its name when it is free): ``fold``, ``fold_1``, ..."""
    return "fold" if r == 0 else f"fold_{r}"


def member_role(i: int) -> str:
    """The part of a blend member's score column: ``member_<i>``."""
    return f"member_{i}"


@dataclass(frozen=True)
class OutputColumns:
    """Which column of a prediction file plays which part.

    Attributes
    ----------
    user : dict
        Your columns: part (``id``, ``label``, ``group``, ``weight``) -> its name in your file.
    own : dict
        qwkboost's columns: part (``score``, ``class``, ``fold``, ``fold_1``, ``member_0``, ...) -> its name
        in this file (the part itself, or with :data:`SUFFIX` where one of your columns has that name).
    labels : list or None
        The class labels in order, when the label column holds words (:class:`~qwkboost.data.labels.ClassLabels`).
    """

    user: Mapping[str, str]
    own: Mapping[str, str]
    labels: list | None = field(default=None)

    @classmethod
    def resolve(cls, user: Mapping[str, str | None], own: Sequence[str] = (), labels=None,
                reserved: Sequence[str] = ()) -> "OutputColumns":
        """Name a file's columns by the rule.

        Parameters
        ----------
        user : mapping
            Your parts in this file and their names; a part given as ``None`` takes its :data:`DEFAULT_NAMES`
            name, kept clear of the names you gave.
        own : sequence of str
            qwkboost's parts in this file, in column order.
        labels : sequence, optional
            The class labels, when they are words.
        reserved : sequence of str
            Further names of yours to keep clear of: the columns of the run that this file does not hold (a
            test file without labels still leaves your label's name to your label), so that every file of a
            run names qwkboost's columns alike.
        """
        unknown = sorted(set(user) - set(USER_ROLES))
        if unknown:
            raise ValueError(f"unknown part(s) {unknown} of your columns; they are {', '.join(USER_ROLES)}")
        taken = {str(v) for v in [*user.values(), *reserved] if v is not None}

        names = {role: str(v) for role, v in user.items() if v is not None}
        names.update({role: give_way(DEFAULT_NAMES[role], taken) for role, v in user.items() if v is None})
        return cls({r: names[r] for r in user}, {role: give_way(role, taken) for role in own},
                   None if labels is None else list(labels))

    def __getitem__(self, role: str) -> str:
        if role in self.user:
            return self.user[role]
        if role in self.own:
            return self.own[role]
        raise KeyError(f"this file has no {role!r} column (its parts: {', '.join([*self.user, *self.own])})")

    def get(self, role: str, default=None):
        try:
            return self[role]
        except KeyError:
            return default

    def _series(self, role) -> list[str]:
        out, i = [], 0
        while role(i) in self.own:
            out.append(self.own[role(i)])
            i += 1
        return out

    @property
    def fold_columns(self) -> list[str]:
        """The fold columns of CV repeats 0, 1, ... in order."""
        return self._series(fold_role)

    @property
    def member_columns(self) -> list[str]:
        """A blend's member score columns, in the order of its members."""
        return self._series(member_role)

    @property
    def names(self) -> list[str]:
        """Every column of the file, yours first (a column with two parts, say id and entity, once)."""
        return list(dict.fromkeys([*self.user.values(), *self.own.values()]))

    def to_dict(self) -> dict:
        return {"format": FORMAT, "format_version": FORMAT_VERSION, "user": dict(self.user), "own": dict(self.own),
                "labels": self.labels}

    @classmethod
    def from_dict(cls, d: Mapping, where: str) -> "OutputColumns":
        if not isinstance(d, Mapping) or d.get("format") != FORMAT:
            raise ValueError(f"{where}: its '{META_KEY}' metadata is not a qwkboost column record")
        if d.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{where} records columns of format {d.get('format_version')!r}; this qwkboost reads "
                             f"{FORMAT_VERSION}: upgrade qwkboost")
        return cls(dict(d.get("user") or {}), dict(d.get("own") or {}), d.get("labels"))


def write_predictions(frame, path: str | Path, columns: OutputColumns) -> Path:
    """Write ``frame`` (whose columns are exactly ``columns.names``) to Parquet with its column record.

    Raises
    ------
    ValueError
        If the frame's columns are not the record's: a column written over, or one the record does not name.
    """
    import pyarrow as pa  # slow to import: pyarrow
    import pyarrow.parquet as pq  # slow to import: pyarrow

    if list(frame.columns) != columns.names:
        raise ValueError(f"{Path(path).name}: columns {list(frame.columns)} are not the record's {columns.names}")
    table = pa.Table.from_pandas(frame, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[META_KEY.encode()] = json.dumps(columns.to_dict()).encode()
    path = Path(path)
    pq.write_table(table.replace_schema_metadata(meta), path)
    return path


def read_predictions(path: str | Path):
    """``(frame, columns)`` of a prediction file: ``columns`` is its record, or ``None`` for a CSV file, another
    tool's Parquet file or one of qwkboost 0.1."""
    import pandas as pd  # slow to import: pandas
    import pyarrow.parquet as pq  # slow to import: pyarrow

    path = Path(path)
    if path.suffix != ".parquet":
        return pd.read_csv(path), None
    meta = pq.read_schema(path).metadata or {}
    frame = pd.read_parquet(path)
    raw = meta.get(META_KEY.encode())
    if raw is None:
        return frame, None
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):
        raise ValueError(f"{path}: its '{META_KEY}' metadata is not valid JSON (or nested too deeply)") from None
    columns = OutputColumns.from_dict(record, str(path))
    missing = [c for c in columns.names if c not in frame.columns]
    if missing:
        raise ValueError(f"{path} lacks column(s) {missing} that its record names")
    return frame, columns


def legacy_clash(user: Mapping[str, str | None]) -> str | None:
    """For a file qwkboost 0.1 wrote (no record): the first of your columns whose name one of qwkboost's plain
    columns took, and so wrote over; ``None`` when there is none."""
    for role in ("label", "id"):
        name = user.get(role)
        if name is not None and _LEGACY.match(str(name)):
            return name
    return None
