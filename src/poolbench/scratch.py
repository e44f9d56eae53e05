"""A scratch filesystem poolbench makes for itself: ext4 on a loop device over a sparse file.

Used by `poolbench bench --scratch` (the embedded default: it measures something real on any
machine without touching a disk the user owns) and by tests. Everything it makes is removed
on exit, error or Ctrl-C, in reverse order of creation.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from poolbench.errors import PoolbenchError
from poolbench.system.runner import Runner


def _require_root() -> None:
    if os.geteuid() != 0:
        raise PoolbenchError(
            "A scratch filesystem needs root (losetup, mkfs, mount).",
            "Run poolbench with sudo, or point 'poolbench bench' at a directory you can write.",
        )


@contextmanager
def ext4_on_loop(runner: Runner, size_bytes: int, parent: Path | None = None) -> Iterator[Path]:
    """Yield the mountpoint of a fresh ext4 on a direct-I/O loop device over a sparse file."""
    _require_root()
    base = Path(tempfile.mkdtemp(prefix="poolbench-scratch-", dir=parent or "/var/tmp"))
    image = base / "disk.img"
    mnt = base / "mnt"
    with ExitStack() as undo:
        undo.callback(shutil.rmtree, base, True)
        with open(image, "wb") as fh:
            fh.truncate(size_bytes)  # sparse: costs nothing until written
        # --direct-io keeps the image out of the host page cache, so the loop device's reads
        # really go to the disk below instead of a second cache.
        dev = runner.run(
            ["losetup", "--find", "--show", "--direct-io=on", str(image)]
        ).stdout.strip()
        if not dev.startswith("/dev/"):
            raise PoolbenchError(f"losetup returned no device ({dev!r}).", "Check loop support.")
        undo.callback(runner.run, ["losetup", "--detach", dev], check=False)
        # Initialise inode tables and journal now, not lazily in the background while
        # poolbench measures (ext4's lazy init would steal device bandwidth).
        runner.run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev])
        mnt.mkdir()
        runner.run(["mount", "-t", "ext4", dev, str(mnt)])
        undo.callback(runner.run, ["umount", str(mnt)], check=False)
        yield mnt
