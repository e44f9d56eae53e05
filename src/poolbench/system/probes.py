"""Read-only probes of the machine: versions, memory (RAM, ZFS's ARC), block devices, the page
cache's hold on files. Nothing here writes; nothing here imports the guards that use them."""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import NotRequired, TypedDict

from poolbench import __version__, is_digits
from poolbench.system.runner import CommandError, Runner

SYS_BLOCK = Path("/sys/class/block")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


class DeviceInfo(TypedDict):
    """One block device as the kernel reports it (recorded with a run and its trials)."""

    name: str
    size_bytes: int | None
    logical_sector: int | None
    physical_sector: int | None
    rotational: bool
    model: str | None
    serial: str | None
    partition: bool
    loop_backing_file: NotRequired[str]
    loop_direct_io: NotRequired[bool]
    slaves: NotRequired[list[str]]


class Machine(TypedDict):
    """The machine a run was measured on (the run's metadata, `machine`)."""

    poolbench_version: str
    python: str
    kernel: str
    hostname: str
    cpus: int | None
    ram_bytes: int
    arc_max_bytes: int | None


def device_info(name: str, sys_block: Path = SYS_BLOCK) -> DeviceInfo:
    """Model, size and sector sizes of a block device (by kernel name), for the record."""
    node = sys_block / name
    # A partition's queue and model live on its parent disk.
    disk = node.resolve().parent if (node / "partition").exists() else node.resolve()
    size = _read(node / "size")
    info: DeviceInfo = {
        "name": name,
        "size_bytes": int(size) * 512 if size and is_digits(size) else None,
        "logical_sector": _int(_read(disk / "queue" / "logical_block_size")),
        "physical_sector": _int(_read(disk / "queue" / "physical_block_size")),
        "rotational": _read(disk / "queue" / "rotational") == "1",
        "model": _read(disk / "device" / "model"),
        # SATA/NVMe keep the serial under device/, virtio on the disk itself.
        "serial": _read(disk / "device" / "serial") or _read(disk / "serial"),
        "partition": (node / "partition").exists(),
    }
    backing = _read(node / "loop" / "backing_file")
    if backing:
        info["loop_backing_file"] = backing
        info["loop_direct_io"] = _read(node / "loop" / "dio") == "1"
    slaves = node / "slaves"
    if slaves.is_dir():
        info["slaves"] = sorted(p.name for p in slaves.iterdir())
    return info


def _int(text: str | None) -> int | None:
    return int(text) if text and is_digits(text) else None


def machine() -> Machine:
    uname = os.uname()
    return {
        "poolbench_version": __version__,
        "python": platform.python_version(),
        "kernel": f"{uname.sysname} {uname.release}",
        "hostname": uname.nodename,
        "cpus": os.cpu_count(),
        "ram_bytes": ram_bytes(),
        "arc_max_bytes": arc_max_bytes(),
    }


def ram_bytes(meminfo: Path = Path("/proc/meminfo")) -> int:
    for line in meminfo.read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("MemTotal missing from /proc/meminfo")


ARCSTATS = Path("/proc/spl/kstat/zfs/arcstats")


def arc_max_bytes(arcstats: Path = ARCSTATS) -> int | None:
    """OpenZFS ARC's ceiling (c_max), if OpenZFS is loaded."""
    return arcstat("c_max", arcstats)


def arcstat(name: str, arcstats: Path = ARCSTATS) -> int | None:
    """One figure of OpenZFS's arcstats (c_max, size, …), or None where there are none."""
    try:
        for line in arcstats.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == name and is_digits(parts[2]):
                return int(parts[2])
    except OSError:
        return None
    return None


def firmware(name: str, sys_block: Path = SYS_BLOCK) -> str | None:
    """A disk's firmware revision (NVMe `firmware_rev`, SCSI/SATA `rev`), or None."""
    node = sys_block / name
    disk = node.resolve().parent if (node / "partition").exists() else node.resolve()
    return _read(disk / "device" / "firmware_rev") or _read(disk / "device" / "rev")


def resident_bytes(runner: Runner, files: Sequence[Path]) -> int | None:
    """Bytes of `files` in the page cache, by util-linux fincore; None if it cannot tell."""
    existing = [str(f) for f in files if f.exists()]
    if not existing:
        return 0
    try:
        out = runner.run(
            ["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES", *existing],
            mutates=False,
        ).stdout
    except (CommandError, OSError):
        return None
    total = 0
    for line in out.split():
        if is_digits(line):
            total += int(line)
    return total
