"""Benchmark: `plan --data` on a tree of a million empty files (issue 31).

Run: python bench/datascan_million.py [FILES]. Makes FILES (default 1,000,000) empty files in
1,000 directories under a fresh directory in /var/tmp, then scans it twice: whole (sampling
off), and with the default sampling past 100,000 files. Prints for each the wall time, the
files counted and the Python memory the scan allocated at its peak (tracemalloc) beside the
process's peak RSS. The tree is removed afterwards. The figures measured on the development
machine are recorded in docs/planner.md.
"""

from __future__ import annotations

import resource
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from poolbench.system.datascan import scan_tree


def make_tree(root: Path, files: int, dirs: int = 1000) -> None:
    for d in range(dirs):
        sub = root / f"d{d:04d}"
        sub.mkdir()
        for f in range(d, files, dirs):
            (sub / f"f{f}").touch()


def measure(root: Path, sample_over: int) -> None:
    tracemalloc.start()
    t0 = time.monotonic()
    r = scan_tree(root, sample_over=sample_over)
    wall = time.monotonic() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"sample_over={sample_over:,}: {wall:.1f} s, {sum(r.counts.values()):,} files counted "
        f"({r.notes['sampled_files']:,} drawn by sampling), Python peak {peak / 2**20:.1f} MiB, "
        f"process peak RSS {rss:.0f} MiB"
    )


def main() -> None:
    files = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    root = Path(tempfile.mkdtemp(prefix="pb-bench-scan-", dir="/var/tmp"))
    try:
        t0 = time.monotonic()
        make_tree(root, files)
        print(f"made {files:,} empty files in {time.monotonic() - t0:.1f} s")
        measure(root, sample_over=files + 1)
        measure(root, sample_over=100_000)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
