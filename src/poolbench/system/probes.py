"""Read-only probes of the machine: versions, memory, block devices. Nothing here writes."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from poolbench import __version__

SYS_BLOCK = Path("/sys/class/block")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def device_info(name: str, sys_block: Path = SYS_BLOCK) -> dict[str, Any]:
    """Model, size and sector sizes of a block device (by kernel name), for the record."""
    node = sys_block / name
    # A partition's queue and model live on its parent disk.
    disk = node.resolve().parent if (node / "partition").exists() else node.resolve()
    size = _read(node / "size")
    info: dict[str, Any] = {
        "name": name,
        "size_bytes": int(size) * 512 if size and size.isdigit() else None,
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
    return int(text) if text and text.isdigit() else None


def machine() -> dict[str, Any]:
    from poolbench.guards.workingset import arc_max_bytes, ram_bytes

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
