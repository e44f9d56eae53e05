"""`poolbench record`: the block I/O of a device the user names, for a given time, kept as a
trace that `trace:NAME` replays on every layout.

blktrace only reads: it asks the kernel (BLKTRACESETUP on a read-only open of the device) to
report each request, and writes its per-CPU files into the trace's own directory; nothing on
the device changes. The kernel hands the events out through debugfs: if none is mounted,
debugfs is mounted at /sys/kernel/debug for the recording, journaled first, and unmounted
after it (on error and Ctrl-C too; after a kill -9, `poolbench cleanup` unmounts it). A
debugfs that was already mounted is used where it is and left as it was. Where the kernel
refuses blktrace's relay files (lockdown), the same events come from the kernel's ftrace blk
tracer (engine/replay/blkftrace.py). Everything the recording changes outside its directory is in
one journal (`journals/record-pid<P>.jsonl`).
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from poolbench.capabilities import doctor_hint, install_hint
from poolbench.engine.replay import blkftrace
from poolbench.errors import CommandLineError, PoolbenchError, Refused, UsageError
from poolbench.guards.devices import mounts
from poolbench.safety.journal import Journal
from poolbench.system import watchdog
from poolbench.system.runner import Runner
from poolbench.workloads import blkparse, blktracebin, replay, tracefile
from poolbench.workloads.tracestats import TraceIO, TraceSummary, summarize

DEBUGFS = Path("/sys/kernel/debug")
MOUNTINFO = Path("/proc/self/mountinfo")
MAX_SECONDS = 3600


JsonDoc = dict[str, object]  # the summary document's fields (written as JSON by tracefile)


@dataclass
class Recorded:
    name: str
    path: Path
    summary: TraceSummary
    method: str  # blktrace, or ftrace (the kernel's blk tracer) where blktrace is refused
    notes: list[str]  # what was done about debugfs and tracefs; events lost


def check_device(device: Path) -> Path:
    """The device to trace: it must exist and be a block device (nothing else is traced)."""
    if not device.exists():
        raise UsageError(
            f"{device} does not exist, so there is nothing to record.",
            "Name the block device the workload runs on, e.g. /dev/sdb or /dev/nvme0n1 "
            "(`poolbench disks` lists them).",
        )
    mode = device.stat().st_mode
    if not stat.S_ISBLK(mode):
        kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISREG, "a regular file"),
                 (stat.S_ISCHR, "a character device"))  # fmt: skip
        what = next((name for test, name in kinds if test(mode)), "a special file")
        raise UsageError(
            f"{device} is {what}, not a block device: blktrace records the requests a block "
            "device receives, and nothing else.",
            "Name the block device under it (`findmnt -no SOURCE PATH` shows a mount's "
            "device; `losetup -j FILE` a loop device's).",
        )
    return device.resolve()


def check_can_record(runner: Runner, seconds: int) -> None:
    if not 1 <= seconds <= MAX_SECONDS:
        raise CommandLineError(
            f"--seconds {seconds}: a recording lasts 1 to {MAX_SECONDS} seconds.",
            "Record a representative stretch, e.g. --seconds 60.",
        )
    if os.geteuid() != 0:
        raise Refused(
            "Recording a block trace needs root (blktrace's kernel interface and debugfs).",
            "Run `sudo poolbench record ...`; nothing on the device is changed. "
            + doctor_hint("root"),
        )
    for tool in ("blktrace", "blkparse"):
        if runner.which(tool) is None:
            raise PoolbenchError(f"'{tool}' is not installed or not on PATH.", install_hint(tool))


def fs_mountpoint(fstype: str, mountinfo: Path = MOUNTINFO) -> str | None:
    """Where a filesystem of `fstype` (debugfs, tracefs) is mounted already, or None."""
    return next((m.mountpoint for m in mounts(mountinfo) if m.fstype == fstype), None)


def debugfs_mountpoint(mountinfo: Path = MOUNTINFO) -> str | None:
    return fs_mountpoint("debugfs", mountinfo)


@contextmanager
def journaled(runner: Runner, journal_dir: Path, mountinfo: Path = MOUNTINFO) -> Iterator[Journal]:
    """The recording's journal: whatever it records (mounts, kernel settings) is undone at
    the end, newest first, also on error and Ctrl-C; a kill -9 leaves it to `cleanup`."""
    journal_dir.mkdir(parents=True, exist_ok=True)
    journal = Journal(runner, journal_dir / f"record-pid{os.getpid()}.jsonl")
    journal.mountinfo = mountinfo
    try:
        yield journal
    finally:
        journal.teardown_or_raise(
            "After the recording, these were left alone: ",
            "Inspect them; `poolbench cleanup` retries.",
        )


def mounted(runner: Runner, journal: Journal, fstype: str, where: Path) -> tuple[str, str]:
    """(mountpoint, what was done) of a `fstype` filesystem: the mounted one, left as it
    is, or one mounted at `where` now, journaled first so it is unmounted after."""
    found = fs_mountpoint(fstype, journal.mountinfo)
    if found is not None:
        return found, f"{fstype} already mounted at {found}: used and left as it was"
    journal.mount_created(str(where), fstype)
    runner.run(["mount", "-t", fstype, fstype, str(where)])
    return str(where), f"{fstype} mounted at {where} for the recording and unmounted after it"


@contextmanager
def debugfs(runner: Runner, journal_dir: Path, mountinfo: Path = MOUNTINFO) -> Iterator[str]:
    """Yield a debugfs mountpoint; mount (journaled) and unmount one if none is mounted."""
    with journaled(runner, journal_dir, mountinfo) as journal:
        yield mounted(runner, journal, "debugfs", DEBUGFS)[0]


class LockedDown(PoolbenchError):
    """blktrace's relay files in debugfs were refused (EPERM even to root: kernel lockdown)."""


def _blktrace(runner: Runner, dev: Path, root: str, seconds: int, target: Path) -> None:
    """Run blktrace for `seconds`; its per-CPU files land in `target` (its own words in
    blktrace.log), or the recording is refused with what blktrace said."""
    res = runner.run(
        ["blktrace", "-d", str(dev), "-r", root, "-w", str(seconds), "-D", str(target),
         "-o", "trace"], mutates=False, timeout=seconds + watchdog.scaled(120), check=False,
    )  # fmt: skip
    said = (res.stdout + res.stderr).strip()
    (target / "blktrace.log").write_text(said + "\n")
    if runner.dry_run or (res.returncode == 0 and list(target.glob("trace.blktrace.*"))):
        return
    listing = ", ".join(sorted(p.name for p in target.iterdir())) or "nothing"
    kind = LockedDown if "Operation not permitted" in said else PoolbenchError
    raise kind(
        f"blktrace (exit code {res.returncode}) wrote no trace in {target} (it holds "
        f"{listing}); blktrace said: " + (" | ".join(said.splitlines()[-8:]) or "(nothing)"),
        "Check that the kernel has CONFIG_BLK_DEV_IO_TRACE and that no other blktrace "
        "runs on the device.",
    )


@dataclass
class Capture:
    method: str  # blktrace, or ftrace where the kernel refuses blktrace's relay files
    notes: list[str]  # what was done about debugfs and tracefs, events lost
    lost: int = 0


def _capture(runner: Runner, journal: Journal, dev: Path, seconds: int, target: Path) -> Capture:
    """Record with blktrace; on a kernel in lockdown, through the blk tracer instead."""
    root, how = mounted(runner, journal, "debugfs", DEBUGFS)
    before = blkftrace.enabled(dev.name)
    try:
        _blktrace(runner, dev, root, seconds, target)
        return Capture("blktrace", [how])
    except LockedDown as exc:
        why = exc.problem
    blkftrace.undo_refused_setup(dev.name, before)
    troot, how_t = mounted(runner, journal, "tracefs", blkftrace.TRACEFS)
    lost = blkftrace.record(runner, journal, Path(troot), dev, seconds, target / "ftrace.txt")
    notes = [how, how_t, f"blktrace refused, recorded through the kernel's blk tracer: {why}"]
    if lost:
        notes.append(f"the kernel dropped {lost} events (its trace buffer overflowed)")
    return Capture("ftrace", notes, lost)


def _parse(runner: Runner, method: str, target: Path) -> tuple[list[TraceIO], str]:
    """The recording's I/Os, and how they were cross-checked."""
    if method == "ftrace":
        text = (target / "ftrace.txt").read_text(errors="replace")
        ios = blkparse.parse(text, source=str(target / "ftrace.txt"))
        return ios, "none: the blk tracer writes text only (no binary files to compare)"
    out = target / "blkparse.txt"
    traced = sum(p.stat().st_size for p in target.glob("trace.blktrace.*"))
    runner.run(
        ["blkparse", "-i", "trace", "-D", str(target), "-o", str(out)],
        mutates=False,
        timeout=watchdog.work_limit(moved=8 * traced),
    )  # text about 8 times the binary
    ios = blkparse.parse(out.read_text(errors="replace"), source=str(out))
    # The same I/Os read from blktrace's binary files directly: a parser that misread
    # blkparse's text would show here, not in a replay's fidelity.
    binary = blktracebin.parse_files(sorted(target.glob("trace.blktrace.*")))
    if binary == ios:
        return ios, "the binary files hold the same I/Os"
    return ios, f"differs: {len(binary)} I/Os in the binary files, {len(ios)} in blkparse's text"


def _store(
    target: Path, dev: Path, seconds: int, ios: list[TraceIO], more: JsonDoc
) -> TraceSummary:
    summary = summarize(ios)
    (target / "trace.iolog").write_text(replay.iolog(ios))
    doc: JsonDoc = {
        "trace": summary.to_json(),
        "device": str(dev),
        "seconds": seconds,
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "events": "queue (Q) events that carry data, one per I/O",
        **more,
    }
    tracefile.save_summary(target, doc)
    return summary


def record(
    runner: Runner, device: Path, seconds: int, name: str, db: Path | None, journal_dir: Path,
    mountinfo: Path = MOUNTINFO,
) -> Recorded:  # fmt: skip
    """Trace `device` for `seconds`, parse it, store it as `traces/NAME/`."""
    dev = check_device(device)
    check_can_record(runner, seconds)
    target = tracefile.traces_dir(db) / tracefile.check_name(name)
    if target.exists():
        raise UsageError(
            f"A trace named '{name}' is already stored ({target}).",
            "Choose another --name, or remove that directory first.",
        )
    target.mkdir(parents=True)
    try:
        with journaled(runner, journal_dir, mountinfo) as journal:
            got = _capture(runner, journal, dev, seconds, target)
        ios, check = _parse(runner, got.method, target)
        more: JsonDoc = {"method": got.method, "notes": got.notes, "binary_check": check,
                         "lost_events": got.lost}  # fmt: skip
        summary = _store(target, dev, seconds, ios, more)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)  # no half-stored trace
        raise
    return Recorded(name, target, summary, got.method, got.notes)
