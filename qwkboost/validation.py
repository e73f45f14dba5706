"""Input checks shared by every stage.

Each check raises :class:`ValueError` naming the offending argument, so a user
sees *which* input is wrong and *why* before any work starts.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
from collections.abc import Mapping
from pathlib import Path

import numpy as np

__all__ = [
    "check_int",
    "check_real",
    "check_bool",
    "check_mapping",
    "check_seed",
    "SEED_MAX",
    "check_1d",
    "check_labels",
    "check_same_length",
    "check_features",
    "feature_names",
    "align_columns",
    "shown",
    "read_json",
    "read_regular",
    "parse_json",
    "file_kind",
    "json_depth",
    "MAX_JSON_BYTES",
    "MAX_JSON_DEPTH",
    "check_writable_dir",
    "check_command_line",
]


#: Seeds must fit every engine's and NumPy's seed type (a signed 32-bit integer).
SEED_MAX = 2**31 - 1
#: Integers beyond this lose their distinctness as float64.
EXACT_INT_MAX = 2**53


def shown(value, width: int = 80) -> str:
    """``value`` as a message shows it: NumPy scalars as the plain numbers they hold (``3``, not
    ``np.int64(3)``), strings quoted, as ``repr`` shows Python's own values; cut at ``width`` characters."""
    if isinstance(value, np.generic):
        value = value.item()
    try:
        text = repr(value)
    except RecursionError:          # a value nested too deeply to show (read from a file)
        text = f"<a {type(value).__name__} nested too deeply to show>"
    return text if len(text) <= width else text[:width - 3] + "..."


def check_int(value, name: str, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an ``int``: an integer (not a bool, not a float) in ``[lo, hi]``.

    Raises
    ------
    ValueError
        Naming ``name``, the bounds and the value.
    """
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    if ok and (lo is None or value >= lo) and (hi is None or value <= hi):
        return int(value)
    bounds = (f" >= {lo}" if hi is None else f" in [{lo}, {hi}]") if lo is not None else \
        (f" <= {hi}" if hi is not None else "")
    raise ValueError(f"{name} must be an integer{bounds}; got {shown(value)}")


def check_real(value, name: str, lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
               hi_open: bool = False, allow_none: bool = False) -> float | None:
    """``value`` as a finite ``float`` in the interval given (open or closed at each end).

    Raises
    ------
    ValueError
        Naming ``name``, the interval and the value.
    """
    if value is None and allow_none:
        return None
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)) \
        and bool(np.isfinite(value))
    if ok:
        v = float(value)
        if (lo is None or (v > lo if lo_open else v >= lo)) and (hi is None or (v < hi if hi_open else v <= hi)):
            return v
    if lo is not None and hi is not None:
        where = f" in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
    elif lo is not None:
        where = f" {'>' if lo_open else '>='} {lo:g}"
    elif hi is not None:
        where = f" {'<' if hi_open else '<='} {hi:g}"
    else:
        where = ""
    raise ValueError(f"{name} must be a finite number{where}{' or None' if allow_none else ''}; got {shown(value)}")


def check_bool(value, name: str) -> bool:
    """``value`` if it is ``True`` or ``False``; a string such as ``"false"`` is refused, not read as true."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ValueError(f"{name} must be true or false; got {value!r}")


def check_mapping(value, name: str) -> dict:
    """``value`` as a dict (``None`` is an empty one)."""

    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{name} must be a dict of names to values; got {type(value).__name__} {value!r}")
    return dict(value)


def check_seed(value, name: str = "seed") -> int:
    """A seed every engine and NumPy accept: an integer in ``[0, 2**31 - 1]``."""
    return check_int(value, name, 0, SEED_MAX)


def check_1d(values, name: str, *, allow_nan: bool = False) -> np.ndarray:
    """Return ``values`` as a non-empty, finite, 1-d float array.

    Parameters
    ----------
    values : array-like
        The input.
    name : str
        Argument name used in error messages.
    allow_nan : bool, default False
        Accept NaN (never inf).

    Raises
    ------
    ValueError
        If the input is empty, not 1-d, not numeric or not finite.
    """
    if values is None:
        raise ValueError(f"{name} is None; give an array of numbers")
    raw = np.asarray(values)
    if raw.dtype.kind in "iu" and raw.size and int(np.max(np.abs(raw.astype(np.float64)))) >= EXACT_INT_MAX:
        raise ValueError(f"{name} holds integers beyond 2**53, which float64 cannot tell apart; subtract their "
                         "minimum (or recode them) first")
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        flat = np.asarray(values, dtype=object).ravel()
        for i, v in enumerate(flat):
            try:
                float(v)
            except (TypeError, ValueError):
                raise ValueError(f"{name} must be numeric; {name}[{i}] is {shown(v)}, which is not a number") from None
        raise ValueError(f"{name} must be numeric; got values that cannot be read as numbers ({exc})") from None
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-dimensional; got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty; at least one value is required")
    bad = np.isinf(arr) if allow_nan else ~np.isfinite(arr)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        what = "inf" if allow_nan else "NaN or inf"
        raise ValueError(
            f"{name} contains {int(bad.sum())} {what} value(s) (first at index {first}: {float(arr[first])!r})"
        )
    return arr


def check_weight(weight, n: int, name: str = "sample_weight") -> np.ndarray | None:
    """``None``, or ``weight`` as ``n`` finite non-negative floats with a positive sum.

    Raises
    ------
    ValueError
        Naming ``name`` and the problem (length, a negative or non-finite value, all zero).
    """
    if weight is None:
        return None
    w = check_1d(weight, name)
    if w.size != n:
        raise ValueError(f"{name} has {w.size} values for {n} rows; give one weight per row")
    if np.any(w < 0):
        i = int(np.flatnonzero(w < 0)[0])
        raise ValueError(f"{name} must be >= 0; {name}[{i}] is {float(w[i])!r}")
    if not w.sum() > 0:
        raise ValueError(f"{name} sums to 0 (every weight is zero); at least one row needs a positive weight")
    return w


def check_labels(values, name: str) -> np.ndarray:
    """Return ``values`` as non-negative integer class labels (int64).

    Float arrays whose values are whole numbers are accepted (``2.0`` is class 2).

    Raises
    ------
    ValueError
        If a value is NaN, inf, negative or not a whole number.
    """
    arr = check_1d(values, name)
    if np.max(np.abs(arr)) >= EXACT_INT_MAX:
        raise ValueError(f"{name} holds labels beyond 2**53, which float64 cannot tell apart; recode them")
    frac = arr != np.round(arr)
    if frac.any():
        first = int(np.flatnonzero(frac)[0])
        raise ValueError(
            f"{name} must hold integer class labels; index {first} is {float(arr[first])!r}. "
            "Round or threshold continuous scores first (see qwkboost.evaluation.thresholds)."
        )
    if (arr < 0).any():
        first = int(np.flatnonzero(arr < 0)[0])
        raise ValueError(
            f"{name} must hold class labels 0..K-1; index {first} is negative ({float(arr[first])!r}). "
            "Shift labels so the lowest class is 0."
        )
    return arr.astype(np.int64)


def check_same_length(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> None:
    """Raise if ``a`` and ``b`` differ in length."""
    if len(a) != len(b):
        raise ValueError(f"{name_a} and {name_b} have different lengths: {len(a)} != {len(b)}")


def check_features(X, name: str = "X") -> np.ndarray:
    """Return ``X`` as a 2-d float array; NaN (missing) is kept, inf and strings are rejected.

    Raises
    ------
    ValueError
        If ``X`` is empty, not 2-d, sparse, holds strings or holds inf.
    """
    if X is None:
        raise ValueError(f"{name} is None; give a 2-d array or DataFrame of features")
    if hasattr(X, "tocsr") and hasattr(X, "nnz"):
        raise ValueError(
            f"{name} is a scipy.sparse matrix; pass a dense array instead: {name}.toarray() if absent entries "
            "are zeros (scikit-learn's reading), or a dense array with NaN where values are missing "
            "(XGBoost's and LightGBM's reading of absent entries)")
    if hasattr(X, "columns") and hasattr(X, "dtypes"):
        from pandas.api.types import is_bool_dtype, is_numeric_dtype  # slow to import: pandas

        bad = [str(c) for c, t in X.dtypes.items() if not (is_numeric_dtype(t) or is_bool_dtype(t))]
        if bad:
            raise ValueError(f"{name} has non-numeric columns {bad}; encode them as numbers first")
        X = X.to_numpy(dtype=np.float64, na_value=np.nan)
    elif hasattr(X, "to_numpy"):
        X = X.to_numpy()
    try:
        arr = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric; it holds values that are not numbers ({exc})") from None
    if arr.ndim == 1:
        raise ValueError(f"{name} must be 2-dimensional (n_samples, n_features); got a 1-d array of length {arr.size}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-dimensional (n_samples, n_features); got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} has no rows")
    if arr.shape[1] == 0:
        raise ValueError(f"{name} has no columns")
    inf = np.isinf(arr)
    if inf.any():
        r, c = np.argwhere(inf)[0]
        raise ValueError(f"{name} contains {int(inf.sum())} inf value(s) (first at row {r}, column {c}); "
                         "use NaN for missing values")
    return arr


def feature_names(X, name: str = "X") -> list[str] | None:
    """Column names of a DataFrame as strings; ``None`` for arrays.

    Raises
    ------
    ValueError
        If two columns share a name (matching columns by name would be ambiguous).
    """
    cols = getattr(X, "columns", None)
    if cols is None:
        return None
    names = [str(c) for c in cols]
    if len(set(names)) != len(names):
        dup = sorted({c for c in names if names.count(c) > 1})
        raise ValueError(f"{name} has duplicate column names {dup}; give every column its own name")
    return names


def align_columns(X, names: list[str] | None, n_features: int | None, name: str = "X",
                  reference: str = "the model was trained on"):
    """Select and order ``X``'s columns as in training.

    A DataFrame is matched by column name when the model knows its feature
    names: reordered columns are put back in order, extra columns are not used,
    and a missing column is an error. Arrays (or models trained on arrays) are
    checked by width only.

    Raises
    ------
    ValueError
        Naming the missing columns, or the width mismatch.
    """
    have = feature_names(X, name)
    if names is not None and have is not None:
        missing = [c for c in names if c not in have]
        if missing:
            raise ValueError(f"{name} lacks the feature column(s) {missing}; {reference} {names}")
        if have != names:
            X = X[[c for c in X.columns if str(c) in set(names)]]
            X.columns = [str(c) for c in X.columns]
            X = X[names]
    arr = check_features(X, name)
    if n_features is not None and arr.shape[1] != n_features:
        raise ValueError(f"{name} has {arr.shape[1]} features but {reference} {n_features}")
    return arr


#: The largest JSON file qwkboost reads (model, pipeline): a model of thousands of deep trees is a few hundred
#: megabytes.
MAX_JSON_BYTES = 1 << 30
#: How deeply JSON text may nest before an engine's own parser reads it: XGBoost's models nest fewer than 10
#: levels, and its recursive parser ends the process (a stack overflow) on text nested many thousand times.
MAX_JSON_DEPTH = 64


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, as a message says it: ``"a regular file"``, ``"a directory"``,
    ``"a FIFO"``, ``"a character device"``, ``"a block device"``, ``"a socket"`` or ``"a symlink"``."""
    for test, words in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                        (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return words
    return "not a regular file"


def read_json(path, where: str, kind: str, max_bytes: int = MAX_JSON_BYTES):
    """The JSON value in the file ``path``, or a :class:`ValueError` of one line: ``"<where> is not <kind>
    (<reason>)"``, for a file that is not a regular file (a FIFO, a device, a directory: refused from ``os.stat``,
    never opened, so nothing waits), larger than ``max_bytes``, not UTF-8 text, not JSON, or nested too deeply
    for Python's parser (a ``RecursionError`` there)."""

    return parse_json(read_regular(path, where, kind, max_bytes), where, kind)


def read_regular(path, where: str, kind: str, max_bytes: int = MAX_JSON_BYTES) -> bytes:
    """The bytes of the regular file ``path``, refused as :func:`read_json` refuses it (not a regular file, larger
    than ``max_bytes``, unreadable) before anything is parsed."""

    path = Path(path)
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(f"{where} is not {kind} (it is {file_kind(mode)}, not a regular file)")
        # O_NONBLOCK: a file swapped for a FIFO since the stat does not wait either; fstat says what was opened
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ValueError(f"{where} is not {kind} (it is {file_kind(info.st_mode)}, not a regular file)")
            if info.st_size > max_bytes:
                raise ValueError(f"{where} is not {kind} (it holds {info.st_size:,} bytes; qwkboost reads at most "
                                 f"{max_bytes:,})")
            data = f.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise ValueError(f"{where} is not {kind} (it holds more than {max_bytes:,} bytes; qwkboost reads at "
                             f"most {max_bytes:,})")
        return data
    except MemoryError:
        reason = "too large to read"
    except OSError as exc:
        reason = f"it cannot be read: {exc.strerror or exc}"
    raise ValueError(f"{where} is not {kind} ({reason})")


def parse_json(data: bytes, where: str, kind: str):
    """The JSON value of ``data`` (UTF-8), or a :class:`ValueError` of one line as :func:`read_json` gives."""

    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        reason = "not UTF-8 text"
    except RecursionError:
        reason = "its JSON is nested too deeply"
    except MemoryError:
        reason = "too large to read"
    except ValueError as exc:
        reason = f"invalid JSON: {str(exc).splitlines()[0][:200]}"
    raise ValueError(f"{where} is not {kind} ({reason})")


#: What a malformed file's fields raise when code reads them as the format says (beyond ValueError).
_MALFORMED = (RecursionError, MemoryError, TypeError, KeyError, AttributeError, IndexError, OverflowError)


class named_file_errors:
    """Around reading a file's fields: a :class:`ValueError` that does not name the file yet gets ``where`` in
    front, and any other error a malformed file raises (a missing key, a wrong type, nesting) becomes one
    :class:`ValueError` that says ``"<where>: <name> is not <kind> (<error>)"``."""

    def __init__(self, where: str, path_text: str, name: str, kind: str):
        self.where, self.path_text, self.name, self.kind = where, path_text, name, kind

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None:
            return False
        if isinstance(exc, ValueError):
            if self.path_text in str(exc):
                return False
            raise ValueError(f"{self.where}: {exc}") from None
        if isinstance(exc, _MALFORMED):
            first = str(exc).splitlines()[0][:200] if str(exc) else ""
            raise ValueError(f"{self.where}: {self.name} is not {self.kind} ({type(exc).__name__}: {first})") from None
        return False


def json_depth(text: str) -> int:
    """How deeply JSON text nests (its brackets ``[`` and ``{`` outside strings), counted without parsing it."""

    # escapes first (each backslash with the character it escapes), then strings: neither holds structure, and
    # each pass is one linear scan
    bare = re.sub(r'"[^"]*"', "", re.sub(r"\\.", "", text, flags=re.S))
    step = _BRACKET_STEP[np.frombuffer(bare.encode("utf-8"), dtype=np.uint8)]
    # the running sum over the brackets alone: a model's text is mostly numbers (44 MB of XGBoost: 2.2 s -> 0.3 s)
    return int(np.cumsum(step[step != 0], dtype=np.int64).max(initial=0))


#: +1 for an opening bracket's byte, -1 for a closing one's, 0 for any other byte.
_BRACKET_STEP = np.zeros(256, dtype=np.int8)
_BRACKET_STEP[[ord("["), ord("{")]] = 1
_BRACKET_STEP[[ord("]"), ord("}")]] = -1


def check_writable_dir(path, key: str, hint: str | None = None, shown_as: str | None = None) -> Path:
    """``path`` as a directory this process can make or write into, checked without making anything.

    The nearest part of ``path`` that exists (``path`` itself, or the parent it would be made in) must be a
    directory this process may write in: a regular file there, a read-only file system (which stops root too) or
    a missing permission is refused. A relative ``path`` is taken from the working directory.

    Parameters
    ----------
    path : str or Path
    key : str
        The setting that names it (``output_dir``, ``hydra.run.dir``), as the message shows it.
    hint : str, optional
        What to do instead, replacing ``give <key>=<a directory you can write to>``.
    shown_as : str, optional
        The value as the message shows it (the setting as given), instead of ``path``.

    Returns
    -------
    Path

    Raises
    ------
    ValueError
        One line naming ``key``, the part of ``path`` that stops it and why.
    """
    path = Path(path)
    todo = hint or f"give {key}=<a directory you can write to>"
    setting = f"{key}={str(path) if shown_as is None else shown_as!r}"
    for part in (path, *path.parents):
        try:
            mode = os.stat(part).st_mode
        except (FileNotFoundError, NotADirectoryError):
            continue            # made later, in the part above
        except OSError as exc:
            raise ValueError(f"{setting} cannot be made: {part} cannot be reached ({exc.strerror}); {todo}") \
                from None
        if not stat.S_ISDIR(mode):
            raise ValueError(f"{setting} cannot be made: {part} is {file_kind(mode)}, not a directory; {todo}")
        if not os.access(part, os.W_OK | os.X_OK):
            read_only = bool(os.statvfs(part).f_flag & os.ST_RDONLY)
            raise ValueError(f"{setting} cannot be written: {part} is "
                             + ("on a read-only file system" if read_only else "not writable by this user")
                             + f"; {todo}")
        return path
    return path


def _quoted(text: str, parse) -> str | None:
    """``key=value`` with its value (each of a sweep's values) in double quotes, as a shell takes it, if Hydra reads
    that back as the same value(s); else ``None``."""
    m = re.fullmatch(r"(~|\+\+|\+)?([^=]+)=(.*)", text, flags=re.S)
    if m is None or '"' in m[3]:
        return None
    prefix, key, value = m[1] or "", m[2], m[3]
    items = value.split(",")
    fixed = f"{prefix}{key}=" + ",".join(f'"{v}"' for v in items)
    try:
        (override,) = parse([fixed])
    except Exception:         # whatever Hydra's parser refuses: no quoted form to show
        return None
    value = override.value()
    got = [getattr(v, "text", v) for v in value.list] if override.is_sweep_override() else [value]
    return fixed if got == items else None


def check_command_line(argv, config_file=None) -> None:
    """What Hydra would answer with a traceback, checked before it starts, as one line.

    * An override whose value holds a character Hydra's grammar takes only quoted (a non-ASCII one such as
      ``☃`` in ``data.path=/tmp/☃/train.csv``): the message shows the quoted form.
    * The output directory, ``hydra.run.dir`` (``hydra.sweep.dir`` with ``-m``), as given on the command line
      or in ``config_file`` (the part before its first ``${...}``, from the working directory): refused when it
      cannot be made or written (:func:`check_writable_dir`). Not checked for ``--cfg``, ``--help``, ``--info``,
      which write nothing.

    Anything else Hydra refuses is left to Hydra.

    Parameters
    ----------
    argv : sequence of str
        The command's arguments (``sys.argv[1:]``).
    config_file : str or Path, optional
        The command's primary config (``conf/config.yaml``), for the default output directory.

    Raises
    ------
    ValueError
        One line (the entry points print it alone: :func:`qwkboost.exceptions.config_errors`).
    """
    from hydra._internal.utils import get_args_parser  # slow to import: hydra
    from hydra.core.override_parser.overrides_parser import OverridesParser  # slow to import: hydra
    from hydra.errors import OverrideParseException  # slow to import: hydra
    from omegaconf import OmegaConf  # slow to import: omegaconf

    try:
        args, _ = get_args_parser().parse_known_args(list(argv))
    except SystemExit:          # argparse refused it: Hydra says so itself
        return
    parse = OverridesParser.create().parse_overrides
    given = {}
    for text in args.overrides:
        try:
            (override,) = parse([text])
        except OverrideParseException:
            odd = next((c for c in text if not c.isascii()), None)
            if odd is None:
                continue        # Hydra's own message says where its grammar stops
            fixed = _quoted(text, parse)
            if fixed is None:
                raise ValueError(f"{text}: Hydra takes {odd!r} only in a quoted value (a key is an ASCII name); "
                                 "quote the value, e.g. 'key=\"value\"'") from None
            raise ValueError(f"{text}: Hydra takes {odd!r} in a value only in quotes; quote it: {shlex.quote(fixed)}") \
                from None
        if not override.is_delete():
            given[override.key_or_group] = override.value()
    if args.help or args.hydra_help or args.cfg or args.info or args.shell_completion:
        return
    key = "hydra.sweep.dir" if args.multirun else "hydra.run.dir"
    value, hint = given.get(key), None
    if value is None and config_file is not None and not (args.config_name or args.config_path or args.config_dir):
        node = OmegaConf.to_container(OmegaConf.load(config_file), resolve=False)
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        value = node
        hint = f"run the command in a directory you can write to, or give {key}=<a directory you can write to>"
    if not isinstance(value, str) or not value:
        return
    static = value.split("${", 1)[0]
    if static != value:         # an interpolation ($now, ...): check the directory its fixed start names
        if not static:
            return
        static = static if static.endswith("/") else os.path.dirname(static) or "."
    check_writable_dir(static, key, hint, shown_as=value)
