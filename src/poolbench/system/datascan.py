"""Scan a directory tree into a file-size histogram: read-only, sizes only.

Never opens a file: one `lstat` per entry (os.scandir gives the type without one). Follows no
symlink and does not cross into another filesystem (like `du -x`: a mount under the tree is
counted as skipped, so /proc under / is never walked). A file with several names (hard
links) is counted once. An entry that cannot be read (a directory without permission, a
file gone between the listing and its lstat) is counted and a few are named; the scan goes
on. Sizes are logical (st_size); the allocated bytes on the scanned filesystem
(st_blocks × 512) are kept beside them, so a sparse file is stated, not hidden.

Past `sample_over` files (default one million) a tree is sampled: each further file is
measured with probability 1/`sample_every` and weighs `sample_every` files, and the 95%
error of the total is stated (Horvitz-Thompson variance for Poisson sampling). Listing still
visits every directory; what sampling saves is the lstat of the files not drawn.
"""

from __future__ import annotations

import os
import random
import stat
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from poolbench.errors import UsageError

Progress = Callable[[int, int, int], None]  # (files, logical bytes, directories) so far
EXAMPLES = 5
SAMPLE_OVER = 1_000_000
SAMPLE_EVERY = 10
PROGRESS_SECONDS = 2.0
UNIT = 512  # sizes are kept in 512-byte units, rounded up (planner/filesizes.py)


@dataclass(frozen=True)
class ScanResult:
    """What the scan found: sizes (512-B units, rounded up → files, weighted when sampled),
    totals, and its notes by name (planner.filesizes.ScanNotes's fields)."""

    root: str
    counts: dict[int, int]
    logical_bytes: int
    allocated_bytes: int
    notes: dict[str, object]


@dataclass
class _Tally:
    counts: Counter[int] = field(default_factory=Counter)
    logical: int = 0
    allocated: int = 0
    measured: int = 0  # files whose lstat was taken
    seen: set[tuple[int, int]] = field(default_factory=set)  # (dev, ino) of linked files
    var: float = 0.0  # Σ (k² − k) x² over sampled files
    n: dict[str, int] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    def skip(self, what: str, path: str = "") -> None:
        self.n[what] += 1
        if path and what == "unreadable" and len(self.examples) < EXAMPLES:
            self.examples.append(path)


def scan_tree(
    root: Path,
    *,
    sample_over: int = SAMPLE_OVER,
    sample_every: int = SAMPLE_EVERY,
    progress: Progress | None = None,
    seed: int = 0,
) -> ScanResult:
    """The histogram of every regular file under `root`."""
    try:
        top = os.stat(root)  # the root as named, a symlink to it included (du -H); none below
    except OSError as exc:
        raise UsageError(
            f"plan --data {root}: {exc.strerror or exc}.", "Give a readable directory."
        ) from exc
    if not stat.S_ISDIR(top.st_mode):
        raise UsageError(
            f"plan --data {root} is not a directory (nor a saved histogram or zdb output).",
            "Give the directory whose files you will store, e.g. --data /srv/data.",
        )
    t = _Tally()
    rng = random.Random(seed)
    start_wall, start = time.time(), time.monotonic()
    last = start
    stack = [str(root)]
    dirs = 0
    while stack:
        path = stack.pop()
        dirs += 1
        _scan_dir(path, top.st_dev, t, stack, start_wall, (sample_over, sample_every, rng))
        if progress is not None and time.monotonic() - last >= PROGRESS_SECONDS:
            last = time.monotonic()
            progress(sum(t.counts.values()), t.logical, dirs)
    return _result(root, t, dirs, time.monotonic() - start, sample_over, sample_every)


def _scan_dir(
    path: str,
    dev: int,
    t: _Tally,
    stack: list[str],
    since: float,
    sampling: tuple[int, int, random.Random],
) -> None:
    try:
        with os.scandir(path) as it:
            entries = list(it)
    except OSError:
        t.skip("unreadable", path)
        return
    for e in entries:
        try:
            if e.is_symlink():
                t.skip("symlinks")
            elif e.is_dir(follow_symlinks=False):
                if e.stat(follow_symlinks=False).st_dev != dev:
                    t.skip("mounts")
                else:
                    stack.append(e.path)
            elif e.is_file(follow_symlinks=False):
                _file(e, t, since, sampling)
            else:
                t.skip("other")
        except OSError:  # gone between the listing and the lstat, or unreadable
            t.skip("unreadable", e.path)


def _file(
    e: os.DirEntry[str], t: _Tally, since: float, sampling: tuple[int, int, random.Random]
) -> None:
    over, every, rng = sampling
    weight = 1
    if t.measured >= over and every > 1:
        if rng.randrange(every):
            return  # not drawn: neither measured nor counted; the drawn ones weigh for it
        weight = every
    st = e.stat(follow_symlinks=False)
    if st.st_nlink > 1:
        key = (st.st_dev, st.st_ino)
        if key in t.seen:
            t.skip("hardlinks")
            return
        t.seen.add(key)
    t.measured += 1
    size, alloc = st.st_size, st.st_blocks * 512
    t.counts[-(-size // UNIT)] += weight
    t.logical += size * weight
    t.allocated += alloc * weight
    if weight > 1:
        t.n["sampled"] += 1
        t.var += (weight * weight - weight) * float(size) ** 2
    if alloc + 4096 < size:  # holes: more than a block of the size is not allocated
        t.skip("sparse")
    if max(st.st_mtime, st.st_ctime) > since:
        t.skip("changed")


def _result(root: Path, t: _Tally, dirs: int, seconds: float, over: int, every: int) -> ScanResult:
    err = 1.96 * t.var**0.5 / t.logical if t.logical and t.var else 0.0
    notes: dict[str, object] = {
        "dirs": dirs,
        "hardlinks_skipped": t.n["hardlinks"],
        "symlinks_skipped": t.n["symlinks"],
        "other_skipped": t.n["other"],
        "mounts_skipped": t.n["mounts"],
        "unreadable": t.n["unreadable"],
        "unreadable_examples": tuple(t.examples),
        "changed_during_scan": t.n["changed"],
        "sparse_files": t.n["sparse"],
        "seconds": round(seconds, 3),
        "sample_over": over if t.n["sampled"] else 0,
        "sample_every": every if t.n["sampled"] else 1,
        "sampled_files": t.n["sampled"],
        "total_error_95": err,
    }
    return ScanResult(str(root), dict(t.counts), t.logical, t.allocated, notes)
