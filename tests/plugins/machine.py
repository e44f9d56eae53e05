"""The machine's own fixtures: real filesystems on tmpfs and loop devices, always torn down.

Every fixture here creates what it uses (sparse files, loop devices, mounts) and removes it in
a finally block, so a failing test leaves nothing behind. Nothing here touches a device the
fixture did not create. Each is a `machine_fixture` (tests/plugins/tiers.py): a test that uses
one is a machine test, and skipped (one reason) where the suite does not run as root.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.plugins.tiers import machine_fixture


def _sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), check=check, capture_output=True, text=True)


@machine_fixture(slow=False)
def machine() -> None:
    """For a test (or a fixture) that uses the machine without another machine fixture: it
    makes loop devices, partitions, pools, mounts or caps itself, starts a daemon, drops the
    page cache, or runs poolbench on any of these. It joins the machine's chain, as root;
    slow only if marked so or through another fixture."""


@machine_fixture(slow=False, root=False)
def device_inventory() -> None:
    """For a test that reads the machine's device inventory (lsblk, /sys/block) more than once
    and compares: no other machine test may add or remove a device meanwhile. Any user."""


@machine_fixture(slow=True)
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A private tmpfs (256 MiB) mounted under the test's tmp dir."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    _sh("mount", "-t", "tmpfs", "-o", "size=256m", "pbtest", str(mnt))
    try:
        yield mnt
    finally:
        _sh("umount", "-l", str(mnt), check=False)


@dataclass
class LoopFs:
    mountpoint: Path
    device: str  # /dev/loopN
    image: Path

    @property
    def name(self) -> str:
        return self.device.removeprefix("/dev/")


MakeLoopFs = Callable[..., LoopFs]


@machine_fixture(slow=True)
def make_loop_fs() -> Iterator[MakeLoopFs]:
    """Factory: ext4 on a direct-I/O loop device over a sparse file; all removed at the end."""
    made: list[tuple[str, Path, Path]] = []
    base = Path(tempfile.mkdtemp(prefix="pbtest-loop-", dir="/var/tmp"))

    def make(size: str = "512M", image_dir: Path | None = None, fs: str = "ext4") -> LoopFs:
        d = image_dir or base
        img = d / f"disk{len(made)}.img"
        _sh("truncate", "-s", size, str(img))
        dev = _sh("losetup", "--find", "--show", "--direct-io=on", str(img)).stdout.strip()
        mnt = base / f"mnt{len(made)}"
        mnt.mkdir()
        made.append((dev, mnt, img))
        if fs == "ext4":
            _sh("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev)
        else:
            _sh(f"mkfs.{fs}", "-f", dev) if fs in ("xfs", "btrfs") else _sh(f"mkfs.{fs}", dev)
        _sh("mount", dev, str(mnt))
        return LoopFs(mnt, dev, img)

    try:
        yield make
    finally:
        for dev, mnt, img in reversed(made):
            _sh("umount", str(mnt), check=False)
            _sh("losetup", "--detach", dev, check=False)
            img.unlink(missing_ok=True)
        shutil.rmtree(base, ignore_errors=True)
