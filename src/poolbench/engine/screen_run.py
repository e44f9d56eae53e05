"""Running a disk screen: each disk alone, test by test, the runs interleaved across disks
(A B C A B C, never A A A: drift in the machine cannot make one disk look slow), then the
sustained random write on each disk with its rate read from the device's counters.

Nothing is created (no pool, no mount, no loop device, no throttle): an interrupted screen
leaves nothing to clean up beyond fio itself, which the runner stops with its process group.
Write tests reach a device only through the runner it is given; for them that is the guarded
runner over the devices' claims (safety/guarded.py), which rechecks each claim before the
first write and refuses a device that is not claimed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from poolbench.engine.screen_jobs import SUSTAIN, ScreenOptions, ScreenTest, fio_argv, how
from poolbench.engine.screen_knee import find_knee, intervals
from poolbench.engine.screen_records import DiskScreen, Figure
from poolbench.guards.members import Sampler
from poolbench.system.diskqueue import SYS_ROOT, disk_facts
from poolbench.system.runner import Runner
from poolbench.workloads import fiolimit
from poolbench.workloads.fioparse import FioResult, parse

MiB = 1024 * 1024
Progress = Callable[[str], None]


@dataclass(frozen=True)
class ScreenDisk:
    """A device to screen: the path fio opens, its kernel name (for sysfs and its counters)
    and what the CLI found worth saying about it (in use, for a read-only screen)."""

    path: str
    name: str
    warnings: tuple[str, ...] = ()


@dataclass
class Screen:
    disks: list[DiskScreen]
    options: ScreenOptions
    skipped: list[ScreenTest] = field(default_factory=list)


def _figure(test: ScreenTest, res: FioResult) -> float:
    """MiB/s or IOPS over fio's whole runtime (a write's includes its closing flush)."""
    if res.runtime_s <= 0:
        return 0.0
    if test.unit == "IOPS":
        return res.total_ios / res.runtime_s
    return res.io_bytes / res.runtime_s / MiB


def run_fio(runner: Runner, test: ScreenTest, device: str, seconds: float) -> FioResult:
    # A read test does not mutate: it runs without a claim (and with fio's --readonly).
    argv = fio_argv(test, device, seconds)
    res = runner.run(argv, mutates=test.writes, timeout=fiolimit.limit_s("", argv[1:]))
    return parse(res.stdout, "write" if test.writes else "read")


def _blank(d: ScreenDisk, sys_root: Path) -> DiskScreen:
    f = disk_facts(d.name, sys_root)
    return DiskScreen(
        d.path, d.name, f.info["serial"], f.info["model"], f.info["size_bytes"] or 0,
        f.info["logical_sector"], f.info["physical_sector"], f.info["rotational"],
        f.zoned, f.write_cache, warnings=list(d.warnings),
    )  # fmt: skip


def screen(
    runner: Runner,
    disks: Sequence[ScreenDisk],
    options: ScreenOptions,
    *,
    sys_root: Path = SYS_ROOT,
    progress: Progress | None = None,
) -> Screen:
    """Measure every disk by `options`; the tests that would write are skipped unless
    `options.writes` (the caller claimed the disks then)."""
    say = progress or (lambda _line: None)
    out = [_blank(d, sys_root) for d in disks]
    run, skipped = options.plan()
    values: dict[tuple[int, str], list[float]] = {}
    for rep in range(options.repeats):
        for test in (t for t in run if t.name != SUSTAIN):
            for i, d in enumerate(disks):
                say(f"{test.name} on {d.path}, run {rep + 1} of {options.repeats}")
                res = run_fio(runner, test, d.path, options.runtime_s)
                values.setdefault((i, test.name), []).append(_figure(test, res))
    for i, s in enumerate(out):
        for test in run:
            if test.name != SUSTAIN:
                s.figures[test.name] = Figure(
                    test.name, test.unit, tuple(values[(i, test.name)]), how(test, options)
                )
    if any(t.name == SUSTAIN for t in run):
        for d, s in zip(disks, out, strict=True):
            say(f"{SUSTAIN} on {d.path}: {options.sustain_s:g} s")
            sustain(runner, d, s, options, sys_root)
    return Screen(out, options, skipped)


def sustain(
    runner: Runner, d: ScreenDisk, s: DiskScreen, options: ScreenOptions, sys_root: Path
) -> None:
    """The sustained random write, its rate over time from the device's counters, its knee."""
    test = options.test(SUSTAIN)
    sampler = Sampler([d.name], interval=options.interval_s, sys_block=sys_root / "class" / "block")
    sampler.start()
    try:
        res = run_fio(runner, test, d.path, options.sustain_s)
    finally:
        sampler.stop()
    samples = [(t, c[d.name].write_bytes) for t, c in sampler.samples if d.name in c]
    s.series = intervals(samples)
    s.knee = find_knee(s.series)
    s.figures[SUSTAIN] = Figure(SUSTAIN, test.unit, (_figure(test, res),), how(test, options))
