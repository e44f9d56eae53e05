"""The tar archive of a tree drawn from a histogram (`study --files-from @NAME`).

The study's `untar` workload extracts it onto each configuration, so the measured write is
files of the user's sizes (planner/filedraw.py draws them). Kept beside the named histograms
(store/histograms.py), named by the histogram's content, the seed and the file count, so a
second study with the same draw reuses it. File contents are random bytes from the same
seed (incompressible, never zeros: DESIGN.md section 3 rule 3) and the same every time. The
archive is written to a temporary name and renamed, so a reader never sees half of one.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from poolbench.errors import UsageError
from poolbench.store.histograms import histogram_dir

CHUNK = 1 << 20


def archive_path(
    name: str, counts: Mapping[int, int], seed: int, files: int, db: Path | None
) -> Path:
    digest = hashlib.sha256(json.dumps(sorted(counts.items())).encode()).hexdigest()[:10]
    return histogram_dir(db) / f"{name}.{digest}.seed{seed}.{files}files.tar"


class _RandomReader(io.RawIOBase):
    """`size` random bytes from `rng`, read in pieces (a large file is never held whole)."""

    def __init__(self, rng: random.Random, size: int) -> None:
        self.rng, self.left = rng, size

    def readable(self) -> bool:
        return True

    def readinto(self, buf: memoryview) -> int:  # type: ignore[override]
        n = min(len(buf), self.left, CHUNK)
        buf[:n] = self.rng.randbytes(n)
        self.left -= n
        return n


def member_names(count: int, per_dir: int) -> list[str]:
    """files/d0000/f000000 …: `per_dir` files to a directory, as the histogram's tree had."""
    return [f"files/d{i // per_dir:04d}/f{i:06d}" for i in range(count)]


def write_archive(path: Path, sizes: Sequence[int], seed: int, per_dir: int) -> Path:
    """The archive of files of these sizes (reused when it exists already)."""
    if path.is_file():
        return path
    rng = random.Random(seed)
    tmp = ""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "wb") as fh, tarfile.open(fileobj=fh, mode="w") as tf:
            for name, size in zip(member_names(len(sizes), per_dir), sizes, strict=True):
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = size, 0o644, 0
                tf.addfile(info, io.BufferedReader(_RandomReader(rng, size), CHUNK))
        os.replace(tmp, path)
    except BaseException as exc:  # a full disk or Ctrl-C leaves no half archive behind
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        if not isinstance(exc, OSError):
            raise
        raise UsageError(
            f"The drawn tree's archive cannot be written in {path.parent}: {exc.strerror or exc}.",
            "Point --db (or $POOLBENCH_DB) at a store in a writable directory with room for "
            "the tree.",
        ) from exc
    return path
