"""A model file's two forms on disk, which :func:`qwkboost.load_model` tells apart by their first bytes.

- **Compact** (:meth:`qwkboost.Model.save` to any path not ending in ``.json``; a pipeline's ``fold_<k>.zip``): a
  zip archive of ``model.json``, the model's fields (objective, initial score, rounds, feature schema, learning
  curves), and ``booster.<suffix>``, the engine's own compact format (XGBoost's UBJSON ``ubj``, LightGBM's model
  string ``txt``, CatBoost's ``cbm``, the native engine's ``json``), both deflated. ``unzip -l`` lists it.
- **JSON** (a path ending in ``.json``, and every file qwkboost wrote before the compact form): one JSON file
  whose ``booster`` field holds the engine's model as text.

Both are read without trusting them: the archive must hold exactly those two members (or the header alone for a
model of zero rounds), unencrypted, stored or deflated, none larger than
:data:`~qwkboost.validation.MAX_JSON_BYTES`; zip's own checksum is verified as they are read, and a booster's
nesting is bounded before an engine's recursive parser sees it (:func:`ubjson_depth`).
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from pathlib import Path

from qwkboost.validation import MAX_JSON_BYTES, parse_json

__all__ = ["ZIP_MAGIC", "HEADER", "write_compact", "read_compact", "ubjson_depth"]

#: The first bytes of a zip archive: a compact model file.
ZIP_MAGIC = b"PK\x03\x04"
#: The member holding the model's fields.
HEADER = "model.json"
#: zlib's level by the booster's format, the fastest that compresses it well (measured on one core): a 34 MB XGBoost
#: UBJSON booster takes 0.37 s to 2.4 MB at level 4 (level 1: 11 MB in 0.87 s; 6: 1.85 MB in 0.70 s); a 37 MB
#: CatBoost ``.cbm`` 0.33 s to 12.1 MB at level 1 (6: 11.1 MB in 1.36 s); a 4.8 MB LightGBM model string 0.05 s to
#: 1.4 MB at level 1 (6: 1.2 MB in 0.18 s).
COMPRESS_LEVEL = {"ubj": 4, "cbm": 1, "txt": 1, "json": 1}
#: A fixed time stamp, so that the same model writes the same bytes.
_STAMP = (1980, 1, 1, 0, 0, 0)
_SUFFIXES = ("ubj", "txt", "cbm", "json")


def write_compact(path: Path, header: bytes, booster: bytes | None, suffix: str) -> None:
    """Write the compact form: ``model.json`` (``header``, UTF-8 JSON) and ``booster.<suffix>``, deflated."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in ((HEADER, header), (f"booster.{suffix}", booster)):
            if data is not None:
                info = zipfile.ZipInfo(name, _STAMP)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                zf.writestr(info, data, compresslevel=COMPRESS_LEVEL[suffix] if name != HEADER else 6)


def read_compact(data: bytes, where: str) -> tuple[dict, bytes | None, str | None]:
    """The header's JSON, the booster's bytes and the booster's member name of a compact model file's ``data``.

    Raises
    ------
    ValueError
        Naming ``where``: not a zip archive, other or repeated members, an encrypted or oddly compressed member,
        a member over the size limit, a damaged member (zip's CRC), or a header that is not JSON.
    """
    kind = "a qwkboost model file"
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, ValueError, EOFError, struct.error) as exc:
        raise ValueError(f"{where} is not {kind} (a damaged zip archive: {exc})") from None
    names = [i.filename for i in infos]
    boosters = [n for n in names if n != HEADER]
    if names.count(HEADER) != 1 or len(boosters) > 1 or len(set(names)) != len(names) or any(
            not n.startswith("booster.") or n.split(".", 1)[1] not in _SUFFIXES for n in boosters):
        raise ValueError(f"{where} is not {kind} (a zip archive of {names}; a model file holds {HEADER!r} and one "
                         "'booster.<ubj|txt|cbm|json>')")
    read = {}
    for info in infos:
        if info.flag_bits & 0x1 or info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise ValueError(f"{where} is not {kind} ({info.filename} is encrypted or compressed in a way qwkboost "
                             "does not write)")
        if info.file_size > MAX_JSON_BYTES:
            raise ValueError(f"{where} is not {kind} ({info.filename} holds {info.file_size:,} bytes; qwkboost "
                             f"reads at most {MAX_JSON_BYTES:,})")
        try:
            with zf.open(info) as f:
                read[info.filename] = f.read(MAX_JSON_BYTES + 1)
        except (zipfile.BadZipFile, zlib.error, ValueError, EOFError, OSError, struct.error) as exc:
            raise ValueError(f"{where} is not {kind} ({info.filename} is damaged: {exc})") from None
        if len(read[info.filename]) != info.file_size:
            raise ValueError(f"{where} is not {kind} ({info.filename} holds other than the {info.file_size:,} bytes "
                             "its archive lists)")
    header = parse_json(read[HEADER], f"{where}: {HEADER}", kind)
    name = boosters[0] if boosters else None
    return header, (read[name] if name else None), name


#: UBJSON's fixed-size values (marker: bytes after it) and its integers' layouts (big-endian).
_SIZE = {ord("i"): 1, ord("U"): 1, ord("I"): 2, ord("l"): 4, ord("L"): 8, ord("d"): 4, ord("D"): 8, ord("C"): 1}
_INT = {ord("i"): ">b", ord("U"): ">B", ord("I"): ">h", ord("l"): ">i", ord("L"): ">q"}


def ubjson_depth(data: bytes, limit: int) -> int:
    """How deeply UBJSON ``data`` nests, walked without building it; stops as soon as it passes ``limit``.

    Reads the forms XGBoost writes (UBJSON, https://ubjson.org): objects ``{...}`` whose keys are length-prefixed
    strings, arrays ``[...]``, counted arrays ``[#<n>`` of ``n`` values, typed arrays ``[$<t>#<n>`` of ``n`` fixed-size
    numbers (skipped at once), strings, numbers and ``T``/``F``/``Z``/``N``. XGBoost's reader recurses once per
    level and ends the process (a stack overflow) on data nested a million times; this walk keeps its own stack.

    Raises
    ------
    ValueError
        If ``data`` is not such UBJSON (an unknown marker, a truncated value, bytes after the value).
    """
    n, pos, deepest = len(data), 0, 0
    stack: list[list] = []              # per open container: [values left (None: up to its end marker), is_object]

    def integer(p: int) -> tuple[int, int]:
        fmt = _INT.get(data[p])
        if fmt is None:
            raise ValueError(f"byte {p}: a length must be an integer, not {chr(data[p])!r}")
        v = struct.unpack_from(fmt, data, p + 1)[0]
        if v < 0:
            raise ValueError(f"byte {p}: a negative length")
        return v, p + 1 + _SIZE[data[p]]

    def value_done() -> None:           # counts a finished value; closes counted containers it fills
        while stack and stack[-1][0] is not None:
            stack[-1][0] -= 1
            if stack[-1][0] > 0:
                return
            stack.pop()

    try:
        while stack or pos == 0:
            if stack and stack[-1][1]:                      # in an object: its end, or a key before a value
                if stack[-1][0] is None and data[pos] == ord("}"):
                    stack.pop()
                    pos += 1
                    value_done()
                    continue
                k, pos = integer(pos)
                pos += k
            m = data[pos]
            pos += 1
            if m in (ord("{"), ord("[")):
                count = None
                if data[pos] == ord("$"):                   # typed: fixed-size numbers, no end marker
                    t = data[pos + 1]
                    if m == ord("{") or t not in _SIZE or data[pos + 2] != ord("#"):
                        raise ValueError(f"byte {pos}: a typed container qwkboost does not read")
                    count, pos = integer(pos + 3)
                    pos += count * _SIZE[t]
                    if pos > n:
                        raise IndexError
                    deepest = max(deepest, len(stack) + 1)
                    value_done()
                    continue
                if data[pos] == ord("#"):
                    count, pos = integer(pos + 1)
                stack.append([count, m == ord("{")])
                deepest = max(deepest, len(stack))
                if deepest > limit:
                    return deepest
                if count == 0:
                    stack.pop()
                    value_done()
            elif m == ord("]"):
                if not stack or stack[-1][1] or stack[-1][0] is not None:
                    raise ValueError(f"byte {pos - 1}: a ']' that closes nothing")
                stack.pop()
                value_done()
            else:
                if m in _SIZE:
                    pos += _SIZE[m]
                elif m in (ord("S"), ord("H")):
                    k, pos = integer(pos)
                    pos += k
                elif m not in (ord("T"), ord("F"), ord("Z"), ord("N")):
                    raise ValueError(f"byte {pos - 1}: unknown marker {chr(m)!r}")
                value_done()
            if pos > n:
                raise IndexError
    except (IndexError, struct.error):
        raise ValueError("it ends in the middle of a value") from None
    if pos != n:
        raise ValueError(f"{n - pos:,} bytes follow its value")
    return deepest
