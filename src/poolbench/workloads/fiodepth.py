"""Achieved queue depth from fio's depth distribution (pure).

fio's JSON gives, per job, `iodepth_level`: the share of I/Os submitted while 1, 2-3, 4-7,
8-15, 16-31, 32-63 and >= 64 I/Os were in flight. A requested iodepth is only an upper limit:
an engine whose submit call blocks until the I/O completes (libaio on a filesystem without
real asynchronous direct I/O: zfs-fuse, OpenZFS <= 2.2, which accept O_DIRECT and still go
through the ARC) keeps one I/O in flight whatever was asked, and the figure is a depth-1
figure. This module turns the distribution into bounds on the mean depth and a warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# fio's bucket label -> the depths it holds (low, high); >=64 is open, 64 is its floor.
BUCKETS: dict[str, tuple[int, int]] = {
    "1": (1, 1), "2": (2, 3), "4": (4, 7), "8": (8, 15), "16": (16, 31), "32": (32, 63),
    ">=64": (64, 64),
}  # fmt: skip
# "Well below": even the distribution's upper bound is at most this share of the request.
SHORTFALL = 0.5


@dataclass(frozen=True)
class Depth:
    requested: int
    low: float  # mean depth if every I/O sat at its bucket's lowest depth
    high: float  # ... at its bucket's highest depth (>= 64 counted as 64)

    def as_dict(self) -> dict[str, object]:
        return {"requested": self.requested, "achieved_low": round(self.low, 2),
                "achieved_high": round(self.high, 2)}  # fmt: skip


def achieved(levels: Mapping[str, float], requested: int) -> Depth | None:
    """Bounds on the mean depth from fio's `iodepth_level` percentages; None without data."""
    pairs = [(BUCKETS[k], float(v)) for k, v in levels.items() if k in BUCKETS]
    total = sum(share for _, share in pairs)
    if total <= 0:
        return None
    low = sum(min(lo, requested) * share for (lo, _), share in pairs) / total
    high = sum(min(hi, requested) * share for (_, hi), share in pairs) / total
    return Depth(requested, low, max(low, high))


def warning(depth: Depth | None, engine: str) -> str:
    """A warning when the achieved depth is well below the requested one, else ''."""
    if depth is None or depth.requested <= 1 or depth.high > depth.requested * SHORTFALL:
        return ""
    return (
        f"queue depth {depth.requested} was requested but fio kept only about "
        f"{depth.high:.1f} I/O in flight ({engine}): the engine's submit call waited for each "
        "I/O, so this is a low-depth figure; see docs/queue-depth.md for which engines "
        "queue on which filesystem."
    )
