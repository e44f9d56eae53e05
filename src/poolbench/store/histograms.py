"""Named file-size histograms (`plan --data PATH --save-data NAME`, then `--data @NAME`).

One JSON file per name in `histograms/` beside the result store (the XDG data directory, or
the directory of --db / $POOLBENCH_DB), so a scan of a large tree is done once. Written to a
temporary file and renamed, so a reader never sees half a histogram.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from poolbench.errors import UsageError
from poolbench.store.db import default_path

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def histogram_dir(db: Path | None) -> Path:
    return (db if db is not None else default_path()).parent / "histograms"


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise UsageError(
            f"'{name}' is not a histogram name.",
            "Use letters, digits, '.', '_' and '-' (up to 64, starting with a letter or "
            "digit), e.g. --save-data media-2026.",
        )
    return name


def save(name: str, doc: dict[str, object], db: Path | None) -> Path:
    d = histogram_dir(db)
    path = d / f"{check_name(name)}.json"
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=d)
        with os.fdopen(fd, "w") as fh:
            json.dump(doc, fh)
        os.replace(tmp, path)
    except OSError as exc:
        raise UsageError(
            f"The histogram cannot be saved in {d}: {exc.strerror or exc}.",
            "Point --db (or $POOLBENCH_DB) at a store in a writable directory.",
        ) from exc
    return path


def load(name: str, db: Path | None) -> tuple[dict[str, object], Path]:
    path = histogram_dir(db) / f"{check_name(name)}.json"
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        known = sorted(p.stem for p in histogram_dir(db).glob("*.json"))
        raise UsageError(
            f"No saved histogram named '{name}' in {path.parent}"
            + (f" (saved: {', '.join(known[:10])})." if known else " (none saved yet)."),
            f"Scan first: poolbench plan --data /some/dir --save-data {name} ...",
        ) from None
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"The saved histogram {path} cannot be read ({exc}).",
            "Scan the directory again with --save-data to replace it.",
        ) from exc
    if not isinstance(doc, dict):
        raise UsageError(f"{path} is not a saved histogram.", "Scan again with --save-data.")
    return doc, path
