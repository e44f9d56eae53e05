"""`poolbench record`: the block I/O of a device the user names, for a given time, kept as a
trace that `trace:NAME` replays on every layout.

blktrace only reads: it asks the kernel (BLKTRACESETUP on a read-only open of the device) to
report each request, and writes its per-CPU files into the trace's own directory; nothing on
the device changes. The kernel hands the events out through debugfs: if none is mounted,
debugfs is mounted at /sys/kernel/debug for the recording, journaled first, and unmounted
after it (on error and Ctrl-C too; after a kill -9, `poolbench cleanup` unmounts it). A
debugfs that was already mounted is used where it is and left as it was.
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

from poolbench.errors import PoolbenchError, Refused, UsageError
from poolbench.guards.devices import mounts
from poolbench.safety.journal import Journal
from poolbench.system.runner import Runner
from poolbench.workloads import blkparse, blktracebin, replay, tracefile
from poolbench.workloads.tracestats import TraceSummary, summarize

DEBUGFS = Path("/sys/kernel/debug")
MOUNTINFO = Path("/proc/self/mountinfo")
MAX_SECONDS = 3600


@dataclass
class Recorded:
    name: str
    path: Path
    summary: TraceSummary
    debugfs: str  # what was done about debugfs, in words


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
        what = "a directory" if stat.S_ISDIR(mode) else "a regular file" if stat.S_ISREG(
            mode) else "not a block device"  # fmt: skip
        raise UsageError(
            f"{device} is {what}, not a block device: blktrace records the requests a block "
            "device receives, and nothing else.",
            "Name the block device under it (`findmnt -no SOURCE PATH` shows a mount's "
            "device; `losetup -j FILE` a loop device's).",
        )
    return device.resolve()


def check_can_record(runner: Runner, seconds: int) -> None:
    if not 1 <= seconds <= MAX_SECONDS:
        raise UsageError(
            f"--seconds {seconds}: a recording lasts 1 to {MAX_SECONDS} seconds.",
            "Record a representative stretch, e.g. --seconds 60.",
        )
    if os.geteuid() != 0:
        raise Refused(
            "Recording a block trace needs root (blktrace's kernel interface and debugfs).",
            "Run `sudo poolbench record ...`; nothing on the device is changed.",
        )
    for tool in ("blktrace", "blkparse"):
        if runner.which(tool) is None:
            raise PoolbenchError(
                f"'{tool}' is not installed or not on PATH.",
                "Install it (Debian package: blktrace; scripts/setup.sh installs it).",
            )


def debugfs_mountpoint(mountinfo: Path = MOUNTINFO) -> str | None:
    """Where a debugfs is mounted already (the first one), or None."""
    return next((m.mountpoint for m in mounts(mountinfo) if m.fstype == "debugfs"), None)


@contextmanager
def debugfs(runner: Runner, journal_dir: Path, mountinfo: Path = MOUNTINFO) -> Iterator[str]:
    """Yield a debugfs mountpoint; mount (journaled) and unmount one if none is mounted."""
    found = debugfs_mountpoint(mountinfo)
    if found is not None:
        yield found
        return
    journal_dir.mkdir(parents=True, exist_ok=True)
    journal = Journal(runner, journal_dir / f"record-pid{os.getpid()}.jsonl")
    journal.mountinfo = mountinfo
    journal.mount_created(str(DEBUGFS), "debugfs")
    try:
        runner.run(["mount", "-t", "debugfs", "debugfs", str(DEBUGFS)])
        yield str(DEBUGFS)
    finally:
        left = journal.teardown()
        if left:
            raise PoolbenchError(
                "After the recording, debugfs was left alone: " + "; ".join(left),
                "Inspect it; `poolbench cleanup` retries.",
            )


def _store(target: Path, dev: Path, seconds: int, text: str, how: str) -> TraceSummary:
    ios = blkparse.parse(text, source=str(target / "blkparse.txt"))
    # The same I/Os read from blktrace's binary files directly: a parser that misread
    # blkparse's text would show here, not in a replay's fidelity.
    binary = blktracebin.parse_files(sorted(target.glob("trace.blktrace.*")))
    summary = summarize(ios)
    (target / "trace.iolog").write_text(replay.iolog(ios))
    doc: dict[str, object] = {
        "trace": summary.to_json(),
        "device": str(dev),
        "seconds": seconds,
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "events": "blktrace queue (Q) events that carry data, one per I/O",
        "debugfs": how,
        "binary_check": "the binary files hold the same I/Os"
        if binary == ios
        else f"differs: {len(binary)} I/Os in the binary files, {len(ios)} in blkparse's text",
    }
    tracefile.save_summary(target, doc)
    return summary


def _blktrace(runner: Runner, dev: Path, root: str, seconds: int, target: Path) -> None:
    """Run blktrace for `seconds`; its per-CPU files land in `target` (its own words in
    blktrace.log), or the recording is refused with what blktrace said."""
    res = runner.run(
        ["blktrace", "-d", str(dev), "-r", root, "-w", str(seconds), "-D", str(target),
         "-o", "trace"], mutates=False, timeout=seconds + 120,
    )  # fmt: skip
    said = (res.stdout + res.stderr).strip()
    (target / "blktrace.log").write_text(said + "\n")
    if not runner.dry_run and not list(target.glob("trace.blktrace.*")):
        listing = ", ".join(sorted(p.name for p in target.iterdir())) or "nothing"
        raise PoolbenchError(
            f"blktrace wrote no trace files in {target} (it holds {listing}); blktrace said: "
            + (" | ".join(said.splitlines()[-8:]) or "(nothing)"),
            "Check that the kernel has CONFIG_BLK_DEV_IO_TRACE and that no other blktrace "
            "runs on the device.",
        )


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
    already = debugfs_mountpoint(mountinfo)
    target.mkdir(parents=True)
    try:
        with debugfs(runner, journal_dir, mountinfo) as root:
            _blktrace(runner, dev, root, seconds, target)
        out = target / "blkparse.txt"
        runner.run(["blkparse", "-i", "trace", "-D", str(target), "-o", str(out)], mutates=False)
        how = (
            f"already mounted at {already}: used and left as it was"
            if already
            else f"mounted at {DEBUGFS} for the recording and unmounted after it"
        )
        summary = _store(target, dev, seconds, out.read_text(errors="replace"), how)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)  # no half-stored trace
        raise
    return Recorded(name, target, summary, how)
