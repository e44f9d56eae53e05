"""Cold reads: empty the page cache before a cold read, and prove that it is empty.

The drop itself is a write of "3" to /proc/sys/vm/drop_caches (after a sync, so dirty pages
can be dropped), done by opening the file — not by a command line, which is how a famous
`["echo", "3", ">", ...]` bug dropped nothing. Without root, poolbench falls back to
posix_fadvise(DONTNEED) on its own files. Either way the effect is verified: `fincore` counts
the pages of the data files still resident, and more than 1% resident fails the guard.
Caches the kernel cannot see (ZFS's ARC) are defeated by the backend (export/import) and
caught afterwards by the device byte check.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from poolbench.system.probes import resident_bytes
from poolbench.system.runner import Runner

__all__ = ["CacheDrop", "drop", "resident_bytes"]

DROP_CACHES = Path("/proc/sys/vm/drop_caches")
MAX_RESIDENT_FRACTION = 0.01


@dataclass(frozen=True)
class CacheDrop:
    method: str  # "drop_caches", "fadvise", "none"
    resident_before: int | None
    resident_after: int | None
    file_bytes: int
    verified: bool
    detail: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _fadvise_dontneed(files: Sequence[Path]) -> None:
    for f in files:
        try:
            fd = os.open(f, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def drop(runner: Runner, files: Sequence[Path]) -> CacheDrop:
    """Empty the page cache of `files` (and, as root, the whole page cache) and verify it."""
    total = sum(f.stat().st_size for f in files if f.exists())
    before = resident_bytes(runner, files)
    os.sync()
    method = "none"
    detail = ""
    if runner.dry_run:
        return CacheDrop("dry-run", before, before, total, False, "dry run: nothing dropped")
    try:
        with open(DROP_CACHES, "w") as fh:
            fh.write("3\n")
        method = "drop_caches"
    except OSError as exc:
        # Not root (or a container): drop what we can, our own files' pages.
        _fadvise_dontneed(files)
        method = "fadvise"
        detail = f"cannot write {DROP_CACHES} ({exc.strerror}); used posix_fadvise(DONTNEED). "
    after = resident_bytes(runner, files)
    if after is None:
        return CacheDrop(
            method, before, None, total, False, detail + "fincore unavailable: drop unverified"
        )
    verified = total == 0 or after <= MAX_RESIDENT_FRACTION * total
    if not verified:
        detail += (
            f"{after} of {total} bytes still in the page cache after the drop "
            "(another process may hold them, or the filesystem ignores the drop)"
        )
    return CacheDrop(method, before, after, total, verified, detail.strip())
