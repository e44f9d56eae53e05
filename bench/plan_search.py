"""Benchmark: `poolbench plan --disks` on 24 disks of mixed sizes must take well under 1 s.

Run: python bench/plan_search.py [repeats]. Prints the median and worst wall time of the
search (enumeration + exact capacity model + speed model + Pareto front) and the number of
candidate layouts scored. The figure measured on the development machine is recorded in
docs/planner.md.
"""

from __future__ import annotations

import statistics
import sys
import time

from poolbench.planner.layout import parse_devices
from poolbench.planner.performance import DEFAULT_SPEEDS
from poolbench.planner.rules import parse_zfs_version
from poolbench.planner.search import search

DISKS = "8x20T,6x16T,6x12TB,4x8T"


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    disks = list(parse_devices(DISKS, context=DISKS))
    rules = parse_zfs_version("2.3")
    times = []
    count = 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        cands = search(disks, ashift=12, rules=rules, disk_speed=DEFAULT_SPEEDS["hdd"])
        times.append(time.perf_counter() - t0)
        count = len(cands)
    median_ms = statistics.median(times) * 1e3
    worst_ms = max(times) * 1e3
    print(
        f"{len(disks)} disks ({DISKS}): {count} layouts; median {median_ms:.1f} ms, "
        f"worst {worst_ms:.1f} ms over {repeats} runs"
    )
    if max(times) >= 1.0:
        raise SystemExit("too slow: the planner must search 24 disks in well under a second")


if __name__ == "__main__":
    main()
