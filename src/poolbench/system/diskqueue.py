"""What a disk screen reads about a device from sysfs, beyond size and sectors: its zoned
model and its write cache setting. Read-only; the sysfs root is a parameter so a test can
describe a zoned or 512e disk with a directory of files.

`queue/zoned` is the kernel's word for the zone model (Documentation/ABI/stable/sysfs-block):
"none", "host-aware" or "host-managed". A drive-managed SMR disk hides its zones and reads
"none": only its write behaviour gives it away (engine/screen/knee.py). `queue/write_cache`
is "write back" (the disk acknowledges writes from its cache) or "write through".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from poolbench.system.probes import DeviceInfo, device_info

SYS_ROOT = Path("/sys")

ZONED_MEANING = {
    "none": "not zoned as the kernel sees it",
    "host-aware": "host-aware SMR (zoned; random writes allowed but slow)",
    "host-managed": "host-managed SMR (zoned; only sequential writes within a zone)",
}


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


@dataclass(frozen=True)
class DiskFacts:
    """One device as a screen records it."""

    info: DeviceInfo
    zoned: str | None  # none | host-aware | host-managed; None: the kernel does not say
    write_cache: str | None  # "write back" | "write through"; None: not reported

    @property
    def is_zoned(self) -> bool:
        return self.zoned in ("host-aware", "host-managed")

    @property
    def is_512e(self) -> bool:
        """512-byte logical sectors over 4K physical ones: ashift=12 avoids read-modify-write."""
        logical, physical = self.info["logical_sector"], self.info["physical_sector"]
        return logical == 512 and (physical or 0) >= 4096


def disk_facts(name: str, sys_root: Path = SYS_ROOT) -> DiskFacts:
    """Facts of the block device with kernel name `name` (a partition reads its disk's queue)."""
    sys_block = sys_root / "class" / "block"
    node = sys_block / name
    disk = node.resolve().parent if (node / "partition").exists() else node.resolve()
    return DiskFacts(
        info=device_info(name, sys_block),
        zoned=_read(disk / "queue" / "zoned"),
        write_cache=_read(disk / "queue" / "write_cache"),
    )
