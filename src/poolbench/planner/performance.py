"""Predicted speed of a layout from one disk's figures (pure).

A model, not a measurement: the rules below are the usual first-order ones for ZFS (each
top-level vdev is an independent unit; writes are striped across top-level vdevs; a mirror
reads from every side but writes every side; a raidz/dRAID group reads and writes its data
columns in parallel but serves one small random I/O at a time). They ignore the ARC, record
size vs I/O size, compression, fragmentation and fill level, and assume identical disks;
`poolbench run` measures what the model only predicts.

=============  ==================  ==================  =================  ==================
top-level      streaming read      streaming write     random read IOPS   random write IOPS
=============  ==================  ==================  =================  ==================
disk           1 × disk            1 × disk            1 × disk           1 × disk
mirror, W-way  W × disk            1 × disk            W × disk           1 × disk
raidzP, W      (W − P) × disk      (W − P) × disk      1 × disk           1 × disk
dRAID P, D,    (C − S)·D/(D+P)     (C − S)·D/(D+P)     (C − S)/(D+P)      (C − S)/(D+P)
C children,    × disk              × disk              × disk             × disk
S spares
=============  ==================  ==================  =================  ==================

A pool is the sum over its top-level vdevs. (ZFS spreads writes in proportion to free space,
so vdevs of unequal size do not add up perfectly; the sum is an upper bound.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from poolbench.errors import UsageError
from poolbench.planner.layout import Layout, VdevSpec, parse_size

DiskClass = Literal["hdd", "ssd", "nvme"]


@dataclass(frozen=True)
class DiskSpeed:
    """One disk: streaming read/write in bytes/s and random (4K) read/write IOPS."""

    read_bps: float
    write_bps: float
    read_iops: float
    write_iops: float
    source: str = "default"


# Defaults per class: conservative figures for a current 7200 rpm SATA disk, a SATA SSD and
# a PCIe 3/4 NVMe SSD at queue depth 1..4 (stated in docs/planner.md).
DEFAULT_SPEEDS: dict[str, DiskSpeed] = {
    "hdd": DiskSpeed(180e6, 180e6, 150, 150, "default for hdd"),
    "ssd": DiskSpeed(500e6, 450e6, 20_000, 15_000, "default for ssd"),
    "nvme": DiskSpeed(2_500e6, 1_500e6, 100_000, 60_000, "default for nvme"),
}


def parse_disk_speed(text: str) -> DiskSpeed:
    """``180M,250iops`` (MiB/s, IOPS); ``180M/150M,250iops/200iops`` gives read/write apart.

    The throughput takes the size units of the layout grammar (M = MiB, MB = 10^6), per
    second; a bare number of IOPS needs the ``iops`` suffix.
    """
    bps: tuple[float, float] | None = None
    iops: tuple[float, float] | None = None
    for part in (p.strip() for p in text.split(",") if p.strip()):
        pieces = [p.strip() for p in part.split("/")]
        if len(pieces) > 2:
            raise UsageError(f"'{part}' in --disk-speed has more than read/write.", _SPEED_FIX)
        if all(re.fullmatch(r"\d+(?:\.\d+)?\s*iops", p, re.I) for p in pieces):
            vals = [float(re.sub(r"(?i)\s*iops", "", p)) for p in pieces]
            iops = (vals[0], vals[-1])
            continue
        try:
            sizes = [float(parse_size(re.sub(r"(?i)/s$", "", p))) for p in pieces]
        except UsageError as exc:
            raise UsageError(f"'{part}' in --disk-speed is not a speed.", _SPEED_FIX) from exc
        bps = (sizes[0], sizes[-1])
    if bps is None and iops is None:
        raise UsageError(f"--disk-speed '{text}' names no figure.", _SPEED_FIX)
    base = DEFAULT_SPEEDS["hdd"]
    r_bps, w_bps = bps if bps else (base.read_bps, base.write_bps)
    r_iops, w_iops = iops if iops else (base.read_iops, base.write_iops)
    return DiskSpeed(r_bps, w_bps, r_iops, w_iops, f"--disk-speed {text}")


_SPEED_FIX = "Write it as THROUGHPUT,IOPS, e.g. --disk-speed 180M,250iops or 500M/450M,20000iops."


@dataclass(frozen=True)
class Speed:
    read_bps: float
    write_bps: float
    read_iops: float
    write_iops: float

    def __add__(self, other: Speed) -> Speed:
        return Speed(
            self.read_bps + other.read_bps,
            self.write_bps + other.write_bps,
            self.read_iops + other.read_iops,
            self.write_iops + other.write_iops,
        )

    def score(self, disk: DiskSpeed) -> float:
        """One number: the geometric mean of the four figures, each in units of one disk."""
        ratios = (
            self.read_bps / disk.read_bps,
            self.write_bps / disk.write_bps,
            self.read_iops / disk.read_iops,
            self.write_iops / disk.write_iops,
        )
        prod = 1.0
        for r in ratios:
            prod *= r
        return float(prod ** (1 / len(ratios)))

    def as_dict(self) -> dict[str, float]:
        return {
            "stream_read_bytes_per_s": round(self.read_bps),
            "stream_write_bytes_per_s": round(self.write_bps),
            "random_read_iops": round(self.read_iops, 1),
            "random_write_iops": round(self.write_iops, 1),
        }


def vdev_multipliers(spec: VdevSpec) -> tuple[float, float, float, float]:
    """(stream read, stream write, random read, random write) in units of one disk."""
    if spec.kind == "disk":
        return (1.0, 1.0, 1.0, 1.0)
    if spec.kind == "mirror":
        w = float(spec.width)
        return (w, 1.0, w, 1.0)
    if spec.kind == "raidz":
        data = float(spec.width - spec.parity)
        return (data, data, 1.0, 1.0)
    ndisks = spec.width - spec.draid_spares
    group = spec.draid_data + spec.parity
    stream = ndisks * spec.draid_data / group
    groups = ndisks / group
    return (stream, stream, groups, groups)


def predict_vdev(spec: VdevSpec, disk: DiskSpeed) -> Speed:
    sr, sw, rr, rw = vdev_multipliers(spec)
    return Speed(sr * disk.read_bps, sw * disk.write_bps, rr * disk.read_iops, rw * disk.write_iops)


def predict(layout: Layout, disk: DiskSpeed) -> Speed:
    total = Speed(0.0, 0.0, 0.0, 0.0)
    for v in layout.vdevs:
        total = total + predict_vdev(v, disk)
    return total


def side_by_side(predicted: Speed, measured: dict[str, float]) -> list[tuple[str, float, float]]:
    """(metric, predicted, measured) for every metric a study measured (same keys as
    `Speed.as_dict`), for the report's predicted-vs-measured table."""
    pred = predicted.as_dict()
    return [(k, float(pred[k]), float(v)) for k, v in measured.items() if k in pred]
