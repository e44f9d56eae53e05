"""The tests of a disk screen (`poolbench disks --screen`) and their fio command lines. Pure.

Every disk is measured at once, the way a pool uses a shared controller: one fio process
with one job per disk (`fio_argv_together`), all started together, group reporting off so
each job reports its own disk. One process rather than one per disk: the jobs start in the
same instant (no disk runs alone while the others' fio is still starting), one time limit
covers the run, and one interrupt stops it. One disk is then run alone (`fio_argv`) to see
whether the path to the disks (HBA, expander, USB bridge) limits them together
(engine/screen/path.py). Each disk is measured on the raw device, with direct I/O
(`--direct=1`: no page cache between fio and the disk) through libaio, each test
time-based for `runtime_s` and repeated `repeats` times; the sustained random write runs
once for `sustain_s`, its rate sampled from the device's own counters every `interval_s`
(engine/screen/run.py). The command line names the device (`--filename=`), so the guarded
runner sees which device a write test would touch and refuses one that is not claimed; a
read test also passes `--readonly`, fio's own refusal to write.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from poolbench.errors import UsageError

MiB = 1024 * 1024
SUSTAIN = "sustain-write"  # the sustained random write (rate over time, the knee)
# What a fio run costs beyond its runtime: starting (opening the devices, the libaio setup)
# and writing its JSON: measured 0.75-1.0 s per run for 1 to 3 loop devices on a loaded
# 2-core machine (fio 3.33; tests/test_screen_real.py holds the estimate to 20%).
FIO_START_S = 0.9
MIN_INTERVALS = 6  # a knee needs a few intervals on each side of it (screen_knee.MIN_SIDE)


@dataclass(frozen=True)
class ScreenTest:
    name: str
    rw: str  # fio's rw=
    bs: int
    iodepth: int
    unit: str  # "MiB/s" or "IOPS": the figure the test reports

    @property
    def writes(self) -> bool:
        return "write" in self.rw

    def describe(self) -> str:
        size = f"{self.bs // MiB}M" if self.bs >= MiB else f"{self.bs / 1024:g}K"
        kind = "sequential" if self.rw in ("read", "write") else "random"
        what = "read" if not self.writes else "write"
        return f"{kind} {what}, {size} blocks, queue depth {self.iodepth}"


TESTS = (
    ScreenTest("seq-read", "read", MiB, 8, "MiB/s"),
    ScreenTest("seq-write", "write", MiB, 8, "MiB/s"),
    ScreenTest("rand-read-4k-qd1", "randread", 4096, 1, "IOPS"),
    ScreenTest("rand-read-4k-qd32", "randread", 4096, 32, "IOPS"),
    ScreenTest("rand-write-4k-qd1", "randwrite", 4096, 1, "IOPS"),
    ScreenTest("rand-write-4k-qd32", "randwrite", 4096, 32, "IOPS"),
    ScreenTest(SUSTAIN, "randwrite", 4096, 32, "MiB/s"),
)
BY_NAME = {t.name: t for t in TESTS}


@dataclass(frozen=True)
class ScreenOptions:
    """How long and how often; the defaults suit real disks (a few minutes per disk for the
    read tests, ten more for the sustained write: a drive-managed SMR cache of tens of GB
    fills in minutes of random writes)."""

    runtime_s: float = 30.0
    repeats: int = 3
    sustain_s: float = 600.0
    interval_s: float = 5.0
    writes: bool = False
    tests: tuple[str, ...] = tuple(t.name for t in TESTS)
    # The sustained write's block size: 4K random writes are what a drive-managed SMR disk
    # absorbs in its cache and then cannot keep up with.
    sustain_bs: int = 4096

    def check(self) -> None:
        """Refuse settings that cannot give a figure, in one paragraph each."""
        unknown = [t for t in self.tests if t not in BY_NAME]
        if unknown:
            raise UsageError(
                f"Unknown screen test(s): {', '.join(unknown)}.",
                f"Choose among: {', '.join(BY_NAME)}.",
            )
        if self.runtime_s < 0.5 or self.repeats < 1:
            raise UsageError(
                f"--runtime {self.runtime_s:g} s with --repeats {self.repeats} measures nothing.",
                "Give --runtime of at least 0.5 s (30 s suits a real disk) and --repeats >= 1.",
            )
        if self.sustain_bs < 512 or self.sustain_bs % 512:
            raise UsageError(
                f"--sustain-bs {self.sustain_bs} is not a whole number of 512-byte sectors.",
                "Give a block size such as 4K (the default) or 64K.",
            )
        if SUSTAIN in self.selected() and self.sustain_s < MIN_INTERVALS * self.interval_s:
            raise UsageError(
                f"--sustain {self.sustain_s:g} s holds fewer than {MIN_INTERVALS} intervals of "
                f"{self.interval_s:g} s: no knee could be found in it.",
                f"Lengthen --sustain or shorten --interval (at least {MIN_INTERVALS} intervals).",
            )

    def selected(self) -> list[str]:
        return [t.name for t in TESTS if t.name in self.tests]

    def test(self, name: str) -> ScreenTest:
        """The test as these options run it (the sustained write at `sustain_bs`)."""
        t = BY_NAME[name]
        return dataclasses.replace(t, bs=self.sustain_bs) if name == SUSTAIN else t

    def plan(self) -> tuple[list[ScreenTest], list[ScreenTest]]:
        """(tests to run, tests skipped because they write and writes were not enabled)."""
        chosen = [self.test(n) for n in self.selected()]
        return [t for t in chosen if self.writes or not t.writes], [
            t for t in chosen if t.writes and not self.writes
        ]

    def seconds_per_disk(self) -> float:
        run, _ = self.plan()
        timed = [t for t in run if t.name != SUSTAIN]
        return len(timed) * self.runtime_s * self.repeats + (
            self.sustain_s if any(t.name == SUSTAIN for t in run) else 0.0
        )

    def fio_runs(self, disks: int) -> int:
        """How many fio runs a screen of `disks` disks makes: each timed test `repeats`
        times on all disks at once, the alone check `repeats` times (two disks or more),
        the sustained write once."""
        run, _ = self.plan()
        timed = [t for t in run if t.name != SUSTAIN]
        alone = self.repeats if disks > 1 and timed else 0
        return len(timed) * self.repeats + alone + (len(run) > len(timed))

    def estimate_s(self, disks: int) -> float:
        """The screen's wall time: every disk at once takes the time of one, plus the alone
        check and each fio run's start and finish (FIO_START_S)."""
        runs = self.fio_runs(disks)
        alone = self.repeats * self.runtime_s if disks > 1 and runs else 0.0
        return self.seconds_per_disk() + alone + runs * FIO_START_S


def _ms(seconds: float) -> str:
    return f"{round(seconds * 1000)}ms"


def fio_argv(test: ScreenTest, device: str, runtime_s: float) -> list[str]:
    """One fio run of `test` on the raw `device` for `runtime_s` seconds."""
    argv = [
        "fio", "--output-format=json", f"--name={test.name}", f"--filename={device}",
        f"--rw={test.rw}", f"--bs={test.bs}", f"--iodepth={test.iodepth}",
        "--ioengine=libaio", "--direct=1", "--time_based=1", f"--runtime={_ms(runtime_s)}",
        "--group_reporting=1",
    ]  # fmt: skip
    if test.rw.startswith("rand"):
        argv += ["--randrepeat=0", "--norandommap=1"]  # new offsets each run, all the disk
    if test.writes:
        # Incompressible data (new random buffers for every write), and the disk's cache
        # flushed at the end and counted: a write counts when it is durable.
        argv += ["--refill_buffers=1", "--end_fsync=1"]
    else:
        argv.append("--readonly")
    return argv


def fio_argv_together(test: ScreenTest, devices: list[str], runtime_s: float) -> list[str]:
    """One fio run of `test` on every device at once: the options of `fio_argv` global, then
    one job per device (named `test-i`, i its position), group reporting off so each job's
    figures are its device's."""
    one = fio_argv(test, devices[0], runtime_s)
    argv = [a for a in one if not a.startswith(("--name=", "--filename=", "--group_reporting="))]
    argv.append("--group_reporting=0")
    for i, dev in enumerate(devices):
        argv += [f"--name={test.name}-{i}", f"--filename={dev}"]
    return argv


def how(test: ScreenTest, options: ScreenOptions) -> str:
    """How the figure was measured, for every line that prints it."""
    if test.name == SUSTAIN:
        return (
            f"{test.describe()}, every disk at once, one run of {options.sustain_s:g} s, the "
            "rate read from the "
            f"device's counters every {options.interval_s:g} s; direct I/O, incompressible data"
        )
    return (
        f"{test.describe()}; direct I/O on the raw device, every disk at once, "
        f"{options.runtime_s:g} s per run, "
        f"{options.repeats} run(s), mean with 95% t interval"
        + ("; incompressible data, ends with a cache flush" if test.writes else "")
    )
