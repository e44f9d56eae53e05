"""A scratch filesystem poolbench makes for itself: ext4 on a loop device over a sparse file.

Used by `poolbench bench --scratch` (it measures something real on any machine without
touching a disk the user owns) and by tests. Everything it makes is journaled before it is
made and removed on exit, error or Ctrl-C, newest first; after a kill -9, `poolbench cleanup`
finds the journal and removes the rest.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from poolbench.errors import PoolbenchError
from poolbench.safety.journal import Journal
from poolbench.system.runner import Runner


def _require_root() -> None:
    if os.geteuid() != 0:
        raise PoolbenchError(
            "A scratch filesystem needs root (losetup, mkfs, mount).",
            "Run poolbench with sudo, or point 'poolbench bench' at a directory you can write.",
        )


@contextmanager
def ext4_on_loop(
    runner: Runner, size_bytes: int, journal_dir: Path, parent: Path | None = None
) -> Iterator[Path]:
    """Yield the mountpoint of a fresh ext4 on a direct-I/O loop device over a sparse file."""
    _require_root()
    journal_dir.mkdir(parents=True, exist_ok=True)
    journal = Journal(runner, journal_dir / f"scratch-pid{os.getpid()}.jsonl")
    try:
        base = Path(tempfile.mkdtemp(prefix="poolbench-scratch-", dir=parent or "/var/tmp"))
        journal.path_created(str(base))
        image = base / "disk.img"
        mnt = base / "mnt"
        with open(image, "wb") as fh:
            fh.truncate(size_bytes)  # sparse: costs nothing until written
        journal.loop_intent(str(image))
        # --direct-io keeps the image out of the host page cache, so the loop device's reads
        # really go to the disk below instead of a second cache.
        dev = runner.run(
            ["losetup", "--find", "--show", "--direct-io=on", str(image)]
        ).stdout.strip()
        if not dev.startswith("/dev/"):
            raise PoolbenchError(f"losetup returned no device ({dev!r}).", "Check loop support.")
        # Initialise inode tables and journal now, not lazily in the background while
        # poolbench measures (ext4's lazy init would steal device bandwidth).
        runner.run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev])
        mnt.mkdir()
        journal.mount_created(str(mnt), dev)
        runner.run(["mount", "-t", "ext4", dev, str(mnt)])
        yield mnt
    finally:
        journal.teardown_or_raise(
            "Scratch teardown left these alone: ", "Inspect them; 'poolbench cleanup' retries."
        )


DRY_RUN_MOUNTPOINT = Path("/var/tmp/poolbench-scratch-DRYRUN/mnt")


@contextmanager
def mounted(runner: Runner, size_bytes: int, journal_dir: Path) -> Iterator[Path]:
    """`ext4_on_loop`, or under --dry-run the commands it would run and a stand-in path."""
    if runner.dry_run:
        runner.run(["losetup", "--find", "--show", "--direct-io=on", "disk.img"])
        runner.run(["mkfs.ext4", "-q", "-F", "/dev/loopN"])
        runner.run(["mount", "/dev/loopN", str(DRY_RUN_MOUNTPOINT)])
        yield DRY_RUN_MOUNTPOINT
        return
    with ext4_on_loop(runner, size_bytes, journal_dir) as mnt:
        yield mnt
