"""A real history on capped disks (docs/history.md): `bench` runs on two btrfs filesystems,
each on its own loop device under a blkio rate cap. One device's cap is lowered once by 20%
between the third and fourth runs: its history shows one step there, named by the cap change
its fingerprints recorded, with an interval that reaches the figure's true change: between
the cap's −20% and −10%, since each figure's window also holds time the cap does not govern
(fio's start, the closing fsync: ~55 ms of a 0.56 s window here) and the throttle lets a
short burst through, so the figure falls by less than the cap. Two runs: −16.5% [−18.6%,
−14.4%] on a quiet machine, −13.1% [−20.1%, −5.4%] on a busy one. The other
device's cap never changes: no step. Six short bench runs per series (seq-write, 3
replicates of 24 MiB, no minimum window), the two series interleaved so that whatever else
the machine does falls on both. A campaign test (POOLBENCH_CAMPAIGN=1): 38 s of bench runs;
the default tier keeps the real fingerprint of a zfs-fuse pool on loop devices
(tests/test_bench_zfs.py) and the planted series (tests/test_history.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from tests.plugins.machine import LoopFs, MakeLoopFs

from poolbench.engine.bench_run import BenchRun
from poolbench.engine.replicates import policy
from poolbench.engine.subject import Options
from poolbench.report import history as hist
from poolbench.store.db import Store
from poolbench.store.history import load
from poolbench.system import throttle
from poolbench.system.runner import LocalRunner
from poolbench.workloads.library import parse_list

MiB = 1 << 20
CAP, LOWER = 48 * MiB, 48 * MiB * 8 // 10  # the step: exactly 0.8
RUNS, CHANGE_AT = 6, 3


@contextmanager
def _no_bar() -> Iterator[Callable[[str, int, int], None]]:
    yield lambda what, done, total: None


def _bench(store: Store, fs: LoopFs) -> None:
    options = Options(parse_list("seq-write"), size=24 * MiB, min_window_s=0,
                      stop=policy(3, 3, 0.05), seed=5)  # fmt: skip
    BenchRun(LocalRunner(), store, fs.mountpoint, options).run(_no_bar, lambda r, k: None)


@pytest.mark.slow
@pytest.mark.campaign  # 38 s of bench runs (module docstring)
@pytest.mark.skipif(bool(throttle.unavailable()), reason="needs the cgroup v1 blkio throttle")
def test_a_cap_lowered_once_is_one_step_named_and_a_steady_cap_none(
    make_loop_fs: MakeLoopFs, tmp_path: Path
) -> None:
    changed, steady = make_loop_fs("384M", fs="btrfs"), make_loop_fs("384M", fs="btrfs")
    before = throttle.caps()
    store = Store(tmp_path / "r.db")
    nums = {fs.name: throttle.device_number(fs.device) for fs in (changed, steady)}
    try:
        for i in range(RUNS):
            throttle.set_cap(nums[changed.name], CAP if i < CHANGE_AT else LOWER)
            throttle.set_cap(nums[steady.name], CAP)
            for fs in (changed, steady) if i % 2 else (steady, changed):
                _bench(store, fs)
    finally:
        for num in nums.values():
            throttle.set_cap(num, 0)
    assert throttle.caps() == before
    series = load(store)
    views = {k.name: hist.view(k, p) for k, p in series.items()}
    assert sorted(views) == sorted(str(fs.mountpoint) for fs in (changed, steady))
    moved, flat = views[str(changed.mountpoint)], views[str(steady.mountpoint)]
    print("\n".join(moved.lines() + flat.lines()))
    assert [r.n for r in moved.rows] == [3] * RUNS
    (step,) = moved.steps
    # Where the cap changed, its interval reaching the figure's true change, which lies
    # between the cap's 0.8 and 0.9 (module docstring)
    assert step.index == CHANGE_AT and step.high < 1, step
    assert step.low <= 0.9 and step.high >= 0.8, step
    lowered = f"{CAP / MiB:g} MiB/s → {LOWER / MiB:g} MiB/s"
    assert step.changed == (f"disk {changed.name} read cap {lowered}",
                            f"disk {changed.name} write cap {lowered}")  # fmt: skip
    assert all(r.changed == () for i, r in enumerate(moved.rows) if i != CHANGE_AT)
    assert flat.steps == () and all(r.changed == () for r in flat.rows)
    assert flat.history is not None and "no step" in "\n".join(flat.verdict())
