"""Helpers of the guest tier's end-to-end tests: the guest's scratch disks made blank, the
real CLI run as a user runs it, every stored figure checked, and nothing left behind."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
# fs-compare's untar tree in the guest: xorg-server-source (vm/ozvm.sh TOOLS_PKGS) is 5 MB,
# 1834 files; linux-source-6.1 would make each untar take minutes under emulation.
GUEST_TARBALL = "/usr/src/xorg-server.tar.xz"
SHORTFALL = 0.95  # guards/devices.py: the devices must have moved at least this share


def sh(*argv: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check)


def disk_bytes(dev: str) -> int:
    return int(Path(f"/sys/class/block/{Path(dev).name}/size").read_text()) * 512


def scratch_disks(n: int, size: int = 2 << 30) -> list[str]:
    """The first n scratch disks of the guest of `size` bytes (vm/run-openzfs-tier.sh: six of
    2 GiB, one of 3 GiB, one of 5 GiB, four of 300 MiB)."""
    disks = [d for d in os.environ.get("OZVM_DISKS", "").split() if disk_bytes(d) == size]
    if len(disks) < n:
        pytest.fail(f"needs {n} scratch disks of {size} bytes, the guest has {len(disks)}")
    return disks[:n]


def blank(disks: list[str]) -> None:
    """What a previous test left (partitions, ZFS labels, GPT) is wiped: a user gives
    poolbench blank disks. (poolbench's own teardown wipes what its pools left: the
    planner and backend tests build pools on these disks without it.)"""
    for d in disks:
        for part in sorted(Path("/dev").glob(Path(d).name + "[0-9]*")):
            sh("wipefs", "-a", "-q", str(part))
            sh("dd", "if=/dev/zero", f"of={part}", "bs=1M", "count=4", "conv=fsync")
        sh("wipefs", "-a", "-q", d)
        sh("blockdev", "--rereadpt", d)
    sh("udevadm", "settle")


def poolbench(*args: str, timeout: float = 3000) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(
        [sys.executable, "-m", "poolbench", *args],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT,
    )  # fmt: skip
    out = Path(os.environ.get("OZVM_OUT", "/tmp"))
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(args[:2]))[:60]
    (out / f"cli-{name}.log").write_text(f"$ poolbench {' '.join(args)}\n{p.stdout}\n{p.stderr}")
    return p


def export(db: Path) -> list[dict[str, Any]]:
    p = poolbench("export", "latest", "--json", "--db", str(db))
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    rows = doc["measurements"] if isinstance(doc, dict) else doc
    assert rows, "the run stored no measurement"
    return list(rows)


def check_figures(rows: list[dict[str, Any]]) -> None:
    """Every figure is non-zero and verified at the devices: the member disks moved at least
    what the workload moved (metadata workloads: the devices were read at all)."""
    for r in rows:
        what = f"{r['config']} {r['workload']} #{r['replicate']}: {r['warnings']}"
        if r["workload_def"].get("kind") == "pool":  # capacity, resilver: no I/O of its own
            continue  # to count at the devices; the tests check those figures themselves
        assert r["value"] > 0 and r["seconds"] > 0, what
        dev = r["guards"].get("device", {})
        assert "write_bytes" in dev and "unverified" not in dev, what
        # A note says the devices wrote more than the layout's model (untar: inodes,
        # directories and the journal; small random writes: partial records and the
        # indirect blocks each transaction group rewrites): the bytes reached the disks.
        notes = [w for w in r["warnings"] if w.startswith("note: the devices wrote")]
        problems = [w for w in r["warnings"] if w not in notes]
        assert not [w for w in problems if "device" in w or "unverified" in w], what
        direction = r["workload_def"].get("direction")
        family = r["workload_def"].get("family")
        if family != "metadata" and direction in ("read", "write") and r["app_bytes"]:
            moved = dev[f"{direction}_bytes"]
            assert moved >= SHORTFALL * r["app_bytes"], f"{what}; devices moved {moved}"


def raidz_write_cost(width: int, parity: int, ashift: int = 12, record: int = 128 << 10) -> float:
    """Sectors a raidz vdev writes per data sector for one full record (vdev_raidz_asize):
    ceil(data / data columns) rows of parity, the total rounded up to a multiple of
    parity + 1 (the skip sectors)."""
    data = record >> ashift
    rows = -(-data // (width - parity))
    total = data + rows * parity
    return -(-total // (parity + 1)) * (parity + 1) / data


def leftovers(scratch: Path) -> list[str]:
    """Pools, md arrays, mounts and loop devices a run may have left."""
    left = [f"pool {p}" for p in sh("zpool", "list", "-H", "-o", "name").stdout.split()]
    mdstat = Path("/proc/mdstat").read_text() if Path("/proc/mdstat").exists() else ""
    left += [f"md {line}" for line in mdstat.splitlines() if re.match(r"md\d+ :", line)]
    left += [
        f"mount {x}" for x in Path("/proc/mounts").read_text().splitlines() if str(scratch) in x
    ]
    left += [f"loop {x}" for x in sh("losetup", "-a").stdout.splitlines() if str(scratch) in x]
    return left
