"""Benchmark: `poolbench plan --disks` must take well under 1 s on 24 disks of mixed sizes, and
under 0.3 s, start-up included, on 200 disks of two sizes (issue 29).

Run: python bench/plan_search.py [repeats]. Prints

- the median and worst wall time of the search (enumeration + exact capacity model + speed
  model + Pareto front) on 24 disks, in this process, and the number of layouts scored;
- for 200 disks (`100x4TB,100x8TB`): the search's first run in this process (the models'
  memories emptied before each run) and the whole `poolbench plan --disks … --json` as a
  fresh process, the way a user runs it (median and best wall time, and the best CPU time,
  which a busy machine disturbs least), once with poolbench's modules compiled and kept as
  an installed package has them (the budget: under 0.3 s at best) and once compiling the
  source each run (PYTHONDONTWRITEBYTECODE).

The figures measured on the development machine are recorded in docs/planner.md.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from types import ModuleType

from poolbench import units
from poolbench.planner import capacity, performance
from poolbench.planner.layout import parse_devices
from poolbench.planner.performance import DEFAULT_SPEEDS
from poolbench.planner.rules import parse_zfs_version
from poolbench.planner.search import search

DISKS = "8x20T,6x16T,6x12TB,4x8T"
MANY = "100x4TB,100x8TB"
MANY_BUDGET_S = 0.3


def _forget(*modules: ModuleType) -> None:
    """Empty every remembered result of the planner's models (a fresh process has none)."""
    for module in modules:
        for value in vars(module).values():
            clear: Callable[[], None] | None = getattr(value, "cache_clear", None)
            if clear is not None:
                clear()


def _search_times(text: str, repeats: int, fresh: bool) -> tuple[list[float], int]:
    disks = list(parse_devices(text, context=text))
    rules = parse_zfs_version("2.3")
    times, count = [], 0
    for _ in range(repeats):
        if fresh:
            _forget(performance, capacity, units)
        t0 = time.perf_counter()
        cands = search(disks, ashift=12, rules=rules, disk_speed=DEFAULT_SPEEDS["hdd"])
        times.append(time.perf_counter() - t0)
        count = len(cands)
    return times, count


def _process_times(repeats: int, bytecode: bool) -> tuple[list[float], list[float]]:
    """(wall, CPU) seconds of `poolbench plan --disks MANY --json` as fresh processes; with
    `bytecode`, poolbench's compiled modules are kept (in a temporary pycache, as an
    installed package has them) and one unmeasured run fills it; without, every run compiles
    poolbench's source (PYTHONDONTWRITEBYTECODE, as a source tree is often run)."""
    argv = [sys.executable, "-m", "poolbench", "plan", "--disks", MANY, "--json"]
    env = dict(os.environ)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="pb-pyc-")
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    walls, cpus = [], []
    try:
        _measure(argv, env, repeats, walls, cpus)
    finally:
        if bytecode:
            shutil.rmtree(env["PYTHONPYCACHEPREFIX"], ignore_errors=True)
    return walls, cpus


def _measure(
    argv: list[str], env: dict[str, str], repeats: int, walls: list[float], cpus: list[float]
) -> None:
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    times, count = _search_times(DISKS, repeats, fresh=False)
    print(
        f"24 disks ({DISKS}): {count} layouts; median {statistics.median(times) * 1e3:.1f} ms, "
        f"worst {max(times) * 1e3:.1f} ms over {repeats} runs"
    )
    many, count = _search_times(MANY, max(3, repeats // 4), fresh=True)
    print(
        f"200 disks ({MANY}): {count} layouts; search median "
        f"{statistics.median(many) * 1e3:.0f} ms, best {min(many) * 1e3:.0f} ms (models' "
        "memories emptied before each run)"
    )
    for bytecode in (True, False):
        walls, cpus = _process_times(max(5, repeats // 2), bytecode)
        how = "compiled modules kept" if bytecode else "source compiled each run"
        print(
            f"poolbench plan --disks {MANY} --json, fresh process ({how}): wall median "
            f"{statistics.median(walls) * 1e3:.0f} ms, best {min(walls) * 1e3:.0f} ms; CPU "
            f"best {min(cpus) * 1e3:.0f} ms over {len(walls)} runs"
        )
        if bytecode:
            installed = min(walls)
    if max(times) >= 1.0:
        raise SystemExit("too slow: the planner must search 24 disks in well under a second")
    if installed >= MANY_BUDGET_S:
        raise SystemExit(f"too slow: 200 disks must plan in under {MANY_BUDGET_S} s")


if __name__ == "__main__":
    main()
