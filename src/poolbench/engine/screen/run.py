"""Running a disk screen: every disk at once, test by test (one fio, a job per disk; the
runs repeated, so drift in the machine falls on every disk alike), then one disk alone on one
test, each repeat, to see whether the path to the disks limits them together
(engine/screen/path.py), then the sustained random write on every disk at once with each
disk's rate read from its own counters. The screen of N disks takes about the time of one.

Nothing is created (no pool, no mount, no loop device, no throttle): an interrupted screen
leaves nothing to clean up beyond fio itself, which the runner stops with its process group.
Write tests reach a device only through the runner it is given; for them that is the guarded
runner over the devices' claims (safety/guarded.py), which rechecks each claim before the
first write and refuses a device that is not claimed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from poolbench.engine.screen.jobs import (
    FIO_START_S,
    SUSTAIN,
    ScreenOptions,
    ScreenTest,
    fio_argv,
    fio_argv_together,
    how,
)
from poolbench.engine.screen.knee import find_knee, intervals
from poolbench.engine.screen.path import PathCheck, check_disk, check_test, median_disk
from poolbench.engine.screen.records import DiskScreen, Figure
from poolbench.guards.members import Sampler
from poolbench.system.diskqueue import SYS_ROOT, disk_facts
from poolbench.system.runner import Runner
from poolbench.workloads import fiolimit
from poolbench.workloads.fioentry import FioJob
from poolbench.workloads.fioparse import (
    FioOutputError,
    FioResult,
    extract_json,
    parse,
    parse_jobs,
)

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
    path: PathCheck | None = None  # one disk alone against its figure with the others


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


def run_together(
    runner: Runner, test: ScreenTest, devices: list[str], seconds: float
) -> list[float]:
    """`test` on every device at once: each device's figure, in the order given."""
    argv = fio_argv_together(test, devices, seconds)
    res = runner.run(argv, mutates=test.writes, timeout=fiolimit.limit_s("", argv[1:]))
    section = "write" if test.writes else "read"
    parse(res.stdout, section)  # a failed job is an error, never a figure
    doc = extract_json(res.stdout)
    version = str(doc.get("fio version", "unknown"))
    jobs = {j.name: j for j in map(FioJob.from_json, doc.get("jobs") or [])}
    out = []
    for i in range(len(devices)):
        job = jobs.get(f"{test.name}-{i}")
        if job is None:
            raise FioOutputError(
                f"fio's result has no job for {devices[i]} ({test.name}-{i}).",
                "Run the screen again; if it recurs, report it with fio's version.",
            )
        one = parse_jobs([job], version, section)
        out.append(_figure(test, one))
    return out


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
    """Measure every disk by `options`, all at once, and one alone; the tests that would
    write are skipped unless `options.writes` (the caller claimed the disks then)."""
    out = [_blank(d, sys_root) for d in disks]
    run, skipped = options.plan()
    timed = [t for t in run if t.name != SUSTAIN]
    clock = _Clock(options, len(disks), progress)
    paths = [d.path for d in disks]
    values: dict[tuple[int, str], list[float]] = {}
    alone: list[float] = []
    check = check_test([t.name for t in timed]) if len(disks) > 1 else None
    who = -1
    for rep in range(options.repeats):
        for test in timed:
            clock.say(f"{test.name} on {len(disks)} disk(s) at once, run {rep + 1} of "
                      f"{options.repeats}", options.runtime_s)  # fmt: skip
            for i, v in enumerate(run_together(runner, test, paths, options.runtime_s)):
                values.setdefault((i, test.name), []).append(v)
        if check is not None:
            if who < 0:  # chosen on the first round's figures, then kept
                firsts = [values[(i, check)][0] for i in range(len(disks))]
                who = check_disk(firsts)
            clock.say(
                f"{check} on {paths[who]} alone (does the path limit the disks "
                f"together?), run {rep + 1} of {options.repeats}",
                options.runtime_s,
            )
            alone.append(_figure(options.test(check), run_fio(
                runner, options.test(check), paths[who], options.runtime_s)))  # fmt: skip
    for i, s in enumerate(out):
        for test in timed:
            s.figures[test.name] = Figure(
                test.name, test.unit, tuple(values[(i, test.name)]), how(test, options)
            )
    path = None
    if check is not None:
        unit = options.test(check).unit
        total = sum(s.figures[check].mean for s in out)
        runs = zip(*(s.figures[check].values for s in out), strict=True)
        together = tuple(median_disk(run) for run in runs)
        path = PathCheck(paths[who], check, unit, tuple(alone), together, total, len(disks))
    if len(run) > len(timed):
        clock.say(f"{SUSTAIN} on {len(disks)} disk(s) at once: {options.sustain_s:g} s",
                  options.sustain_s)  # fmt: skip
        sustain(runner, disks, out, options, sys_root)
    clock.say("done", 0.0)
    return Screen(out, options, skipped, path)


class _Clock:
    """Progress lines: which fio run of how many, the time spent, and the time left (the
    first estimate less what the runs so far were estimated to take: an estimate that does
    not hold shows as the two not adding up)."""

    def __init__(self, options: ScreenOptions, disks: int, progress: Progress | None) -> None:
        self.emit = progress or (lambda _line: None)
        self.left = options.estimate_s(disks)
        self.start = time.monotonic()
        self.runs = options.fio_runs(disks)
        self.done = 0
        self.expected = 0.0  # what the run just finished was expected to take

    def say(self, what: str, seconds: float) -> None:
        if self.done:
            self.left -= self.expected  # what was planned for it, not what it took
        spent = time.monotonic() - self.start
        if what == "done":
            self.emit(f"screen done in {spent:.1f} s")
            return
        self.done += 1
        self.expected = seconds + FIO_START_S
        self.emit(f"[{self.done}/{self.runs}] {what}; {spent:.0f} s so far, about "
                  f"{max(self.left, 0.0):.0f} s left")  # fmt: skip


def sustain(
    runner: Runner,
    disks: Sequence[ScreenDisk],
    out: list[DiskScreen],
    options: ScreenOptions,
    sys_root: Path,
) -> None:
    """The sustained random write on every disk at once, each disk's rate over time from its
    own counters, each disk's knee."""
    test = options.test(SUSTAIN)
    names = [d.name for d in disks]
    sampler = Sampler(names, interval=options.interval_s, sys_block=sys_root / "class" / "block")
    sampler.start()
    try:
        figures = run_together(runner, test, [d.path for d in disks], options.sustain_s)
    finally:
        sampler.stop()
    for d, s, fig in zip(disks, out, figures, strict=True):
        samples = [(t, c[d.name].write_bytes) for t, c in sampler.samples if d.name in c]
        s.series = intervals(samples)
        s.knee = find_knee(s.series)
        s.figures[SUSTAIN] = Figure(SUSTAIN, test.unit, (fig,), how(test, options))
