"""Per-device rate caps: emulated disks of a known speed (the demo's, a study's `[disks] cap`).

The cap is the cgroup v1 blkio throttle set in the ROOT blkio cgroup
(`blkio.throttle.{read,write}_bps_device`, "MAJ:MIN BYTES_PER_SECOND"). A rule there applies to
every bio that reaches the device whoever submits it: a limit in a child cgroup would catch
only its own tasks' I/O, and page-cache writeback, zfs-fuse's threads and jbd2 run in the root
cgroup. cgroup v2's io.max cannot be set on the root cgroup at all, so where only v2 is
mounted there is no cap and `unavailable()` says why. A rule outlives the device's use (a
loop device keeps its number after it is detached), so every cap set is journaled first and
cleared by teardown (safety/journal.py `throttle_set`).
"""

from __future__ import annotations

import os
from pathlib import Path

from poolbench import is_digits

BLKIO = Path("/sys/fs/cgroup/blkio")
_FILES = ("blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device")


def unavailable(root: Path = BLKIO) -> str:
    """Why no cap can be set here ('' when one can)."""
    if not all((root / f).exists() for f in _FILES):
        return (
            f"this kernel has no cgroup v1 blkio throttle at {root} (cgroup v2's io.max cannot "
            "cap the root cgroup, where writeback and in-kernel ZFS's I/O run)"
        )
    if not all(os.access(root / f, os.W_OK) for f in _FILES):
        return f"only root may set the blkio throttle at {root}"
    return ""


def device_number(device: str, sys_class: Path = Path("/sys/class/block")) -> str:
    """'MAJ:MIN' of a block device, from sysfs."""
    name = Path(device).resolve().name
    return (sys_class / name / "dev").read_text().strip()


def set_cap(majmin: str, bytes_per_s: int, root: Path = BLKIO) -> None:
    """Cap reads and writes of the device at `bytes_per_s` (0 removes the rule)."""
    for f in _FILES:
        (root / f).write_text(f"{majmin} {int(bytes_per_s)}\n")


def caps(root: Path = BLKIO) -> dict[str, tuple[int, int]]:
    """The rules in force: MAJ:MIN → (read, write) bytes/s, for checking what was set."""
    found: dict[str, list[int]] = {}
    for i, f in enumerate(_FILES):
        for line in (root / f).read_text().splitlines():
            words = line.split()
            if len(words) == 2 and is_digits(words[1]):
                found.setdefault(words[0], [0, 0])[i] = int(words[1])
    return {k: (v[0], v[1]) for k, v in found.items()}
