"""Achieved queue depth: what fio's depth distribution and its submission time say (pure).

fio's JSON gives, per job, `iodepth_level`: the share of I/Os submitted while 1, 2-3, 4-7,
8-15, 16-31, 32-63 and >= 64 I/Os were in flight. A requested iodepth is only an upper limit,
and that distribution cannot see the commonest way of missing it: an engine whose submit call
does the I/O before it returns (libaio on a filesystem without real asynchronous direct I/O)
still leaves each finished I/O "in flight" until fio reaps it, so fio counts 16 while the disks
see one. Measured here: libaio at depth 16 on zfs-fuse with O_DIRECT, and on ext4 without it,
both show 99.9% at depth 16, yet fio spent 96-97% of the run inside io_submit and the device
queue averaged 0.2-0.7; on ext4 with O_DIRECT (real asynchronous I/O) it spent 31% there and
the device queue averaged 9.8. So the submit time decides (`FioResult.submit_busy`: the
share of each job's run spent in submit calls), and the distribution bounds the rest.
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
# A job that spends this share of its run inside submit calls is doing its I/O there, one at
# a time (measured: 0.97-0.98 blocking, 0.31 truly asynchronous).
BLOCKING_SUBMIT = 0.75


@dataclass(frozen=True)
class Depth:
    requested: int
    low: float  # mean depth if every I/O sat at its bucket's lowest depth
    high: float  # ... at its bucket's highest depth (>= 64 counted as 64)
    submit_busy: float | None = None  # share of the run inside submit calls (None: unknown)

    @property
    def blocking(self) -> bool:
        """The submit call did the I/O: one in flight per job, whatever fio counted."""
        return self.submit_busy is not None and self.submit_busy >= BLOCKING_SUBMIT

    def as_dict(self) -> dict[str, object]:
        busy = None if self.submit_busy is None else round(self.submit_busy, 3)
        return {"requested": self.requested, "achieved_low": round(self.low, 2),
                "achieved_high": round(self.high, 2), "submit_busy": busy,
                "blocking_submit": self.blocking}  # fmt: skip


def achieved(
    levels: Mapping[str, float], requested: int, submit_busy: float | None = None
) -> Depth | None:
    """Bounds on the mean depth from fio's `iodepth_level` percentages; None without data.
    A blocking submit (see the module docstring) caps both bounds at 1."""
    pairs = [(BUCKETS[k], float(v)) for k, v in levels.items() if k in BUCKETS]
    total = sum(share for _, share in pairs)
    if total <= 0:
        return None
    low = sum(min(lo, requested) * share for (lo, _), share in pairs) / total
    high = sum(min(hi, requested) * share for (_, hi), share in pairs) / total
    depth = Depth(requested, low, max(low, high), submit_busy)
    return Depth(requested, 1.0, 1.0, submit_busy) if depth.blocking else depth


def warning(depth: Depth | None, engine: str) -> str:
    """A warning when the achieved depth is well below the requested one, else ''."""
    if depth is None or depth.requested <= 1:
        return ""
    if depth.blocking:
        assert depth.submit_busy is not None
        return (
            f"queue depth {depth.requested} was requested but each I/O was done inside the "
            f"submit call ({engine}: fio spent {depth.submit_busy:.0%} of the run there), so "
            "one I/O per job was in flight and this is a depth-1 figure per job, whatever "
            "fio's depth distribution shows; more jobs (a -jN workload, or --jobs) are what "
            "queue on this filesystem (docs/queue-depth.md)."
        )
    if depth.high > depth.requested * SHORTFALL:
        return ""
    return (
        f"queue depth {depth.requested} was requested but fio kept only about "
        f"{depth.high:.1f} I/O in flight ({engine}): the engine's submit call waited for each "
        "I/O, so this is a low-depth figure; see docs/queue-depth.md for which engines "
        "queue on which filesystem."
    )
