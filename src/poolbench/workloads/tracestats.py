"""A block trace's shape, the same way for a recording and for its replay (pure).

One `TraceIO` per I/O the device was asked for (blktrace's queue event; fio's per-I/O log on
replay). `summarize` turns a list of them into the figures `poolbench record` prints and the
replay fidelity check compares: count, bytes, read/write mix, an I/O size histogram, an
offset-locality histogram, the inter-arrival distribution and the rate. Recording and replay
go through this one function, so a difference between them is the replay's, never the
arithmetic's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

MiB = 1024 * 1024
# An I/O that starts within this distance of the previous one's end (either way) is "near":
# the same region of the disk, a short seek; beyond it, "far". 0 exactly is "sequential".
NEAR_BYTES = MiB
# Inter-arrival buckets (upper bounds, microseconds). fio's per-I/O log stamps completions in
# whole milliseconds, so below 1 ms a replay cannot be told apart: one bucket there.
GAP_BOUNDS_US = (1_000, 10_000, 100_000)
GAP_LABELS = ("<1ms", "1-10ms", "10-100ms", ">=100ms")
LOCALITY_LABELS = ("sequential", "near", "far")


@dataclass(frozen=True)
class TraceIO:
    """One I/O: when it was issued (ns from the trace's start), read or write, where, how big."""

    t_ns: int
    write: bool
    offset: int
    length: int


def size_label(length: int) -> str:
    """The power-of-two bucket an I/O size falls in, named by its upper bound: 4096 → '4k',
    5000 → '8k', 512 → '512'."""
    bound = 512
    while bound < length:
        bound *= 2
    if bound >= MiB:
        return f"{bound // MiB}m"
    return f"{bound // 1024}k" if bound >= 1024 else str(bound)


def label_bytes(label: str) -> int:
    """The upper bound a size label names: '4k' → 4096."""
    unit = {"k": 1024, "m": MiB}.get(label[-1], 1)
    return int(label.rstrip("km")) * unit


def locality(prev_end: int, offset: int) -> str:
    distance = offset - prev_end
    if distance == 0:
        return "sequential"
    return "near" if abs(distance) <= NEAR_BYTES else "far"


def gap_label(gap_ns: int) -> str:
    us = gap_ns / 1000
    for bound, label in zip(GAP_BOUNDS_US, GAP_LABELS, strict=False):
        if us < bound:
            return label
    return GAP_LABELS[-1]


def _percentile(sorted_values: Sequence[int], q: float) -> int:
    """The nearest-rank percentile (0 for an empty list)."""
    if not sorted_values:
        return 0
    rank = max(1, -(-len(sorted_values) * q // 100))
    return sorted_values[int(rank) - 1]


class TraceSummaryJson(TypedDict):
    """A trace's figures as `record` stores them (its summary's `trace`) and a replay's
    fidelity record holds them (`recorded`, `achieved`): TraceSummary's fields, then its rates."""

    ios: int
    bytes: int
    reads: int
    writes: int
    read_bytes: int
    write_bytes: int
    span_s: float
    extent: int
    sizes: dict[str, int]
    locality: dict[str, int]
    gaps: dict[str, int]
    gap_p50_us: float
    gap_p90_us: float
    gap_p99_us: float
    iops: float
    mib_s: float


def _int(v: object) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _float(v: object) -> float:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0.0


def _counts(v: object) -> dict[str, int]:
    return {str(k): _int(n) for k, n in v.items()} if isinstance(v, dict) else {}


@dataclass
class TraceSummary:
    ios: int = 0
    bytes: int = 0
    reads: int = 0
    writes: int = 0
    read_bytes: int = 0
    write_bytes: int = 0
    span_s: float = 0.0  # first issue to last issue
    extent: int = 0  # the highest byte any I/O reaches: the file a replay needs
    sizes: dict[str, int] = field(default_factory=dict)
    locality: dict[str, int] = field(default_factory=dict)
    gaps: dict[str, int] = field(default_factory=dict)
    gap_p50_us: float = 0.0
    gap_p90_us: float = 0.0
    gap_p99_us: float = 0.0

    @property
    def iops(self) -> float:
        """I/Os per second over the span: (n - 1) intervals between n issues."""
        return (self.ios - 1) / self.span_s if self.span_s > 0 and self.ios > 1 else 0.0

    @property
    def mib_s(self) -> float:
        return self.bytes / MiB / self.span_s if self.span_s > 0 else 0.0

    @property
    def read_share(self) -> float:
        """Reads as a percentage of the I/Os."""
        return 100.0 * self.reads / self.ios if self.ios else 0.0

    def to_json(self) -> TraceSummaryJson:
        return {"ios": self.ios, "bytes": self.bytes, "reads": self.reads,
                "writes": self.writes, "read_bytes": self.read_bytes,
                "write_bytes": self.write_bytes, "span_s": self.span_s, "extent": self.extent,
                "sizes": dict(self.sizes), "locality": dict(self.locality),
                "gaps": dict(self.gaps), "gap_p50_us": self.gap_p50_us,
                "gap_p90_us": self.gap_p90_us, "gap_p99_us": self.gap_p99_us,
                "iops": round(self.iops, 3), "mib_s": round(self.mib_s, 3)}  # fmt: skip

    def to_text(self) -> str:
        return json.dumps(self.to_json(), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> TraceSummary:
        """A stored summary back (its rates are recomputed); a figure it lacks, or holds as
        something else than a number, is 0."""
        g = doc.get
        return cls(_int(g("ios")), _int(g("bytes")), _int(g("reads")), _int(g("writes")),
                   _int(g("read_bytes")), _int(g("write_bytes")), _float(g("span_s")),
                   _int(g("extent")), _counts(g("sizes")), _counts(g("locality")),
                   _counts(g("gaps")), _float(g("gap_p50_us")), _float(g("gap_p90_us")),
                   _float(g("gap_p99_us")))  # fmt: skip


def summarize(ios: Sequence[TraceIO], *, in_order: bool = False) -> TraceSummary:
    """The figures of a trace, in issue order: sorted by time (ties kept in their order), or
    `in_order` as given when the order is known better than the times (fio's log of a
    depth-1 replay is in issue order; its times are whole milliseconds, and sorting by them
    would reorder I/Os issued within one). A negative gap there counts as 0."""
    ordered = list(ios) if in_order else sorted(ios, key=lambda io: io.t_ns)
    s = TraceSummary(ios=len(ordered))
    s.sizes = {}
    s.locality = dict.fromkeys(LOCALITY_LABELS, 0)
    s.gaps = dict.fromkeys(GAP_LABELS, 0)
    gaps: list[int] = []
    prev: TraceIO | None = None
    for io in ordered:
        s.bytes += io.length
        if io.write:
            s.writes, s.write_bytes = s.writes + 1, s.write_bytes + io.length
        else:
            s.reads, s.read_bytes = s.reads + 1, s.read_bytes + io.length
        label = size_label(io.length)
        s.sizes[label] = s.sizes.get(label, 0) + 1
        s.extent = max(s.extent, io.offset + io.length)
        if prev is not None:
            s.locality[locality(prev.offset + prev.length, io.offset)] += 1
            gap = max(0, io.t_ns - prev.t_ns)
            gaps.append(gap)
            s.gaps[gap_label(gap)] += 1
        prev = io
    s.sizes = dict(sorted(s.sizes.items(), key=lambda kv: label_bytes(kv[0])))
    if ordered:
        times = [io.t_ns for io in ordered]
        s.span_s = (max(times) - min(times)) / 1e9
    gaps.sort()
    s.gap_p50_us, s.gap_p90_us, s.gap_p99_us = (_percentile(gaps, q) / 1000 for q in (50, 90, 99))
    return s


def shares(counts: dict[str, int]) -> dict[str, float]:
    """Each bucket as a percentage of the histogram's total."""
    total = sum(counts.values())
    return {k: 100.0 * v / total if total else 0.0 for k, v in counts.items()}


def lines(s: TraceSummary) -> list[str]:
    """The summary as text lines (under 80 columns): what `poolbench record` prints."""
    out = [
        f"I/Os      {s.ios} ({s.reads} reads, {s.writes} writes; {s.read_share:.1f}% reads)",
        f"bytes     {s.bytes} ({s.read_bytes} read, {s.write_bytes} written)",
        f"span      {s.span_s:.3f} s from first to last I/O: {s.iops:.1f} IOPS, "
        f"{s.mib_s:.2f} MiB/s",
        f"extent    {s.extent} bytes (the highest offset reached)",
    ]
    for title, counts in (("sizes", s.sizes), ("locality", s.locality), ("gaps", s.gaps)):
        pct = shares(counts)
        parts = [f"{k} {v} ({pct[k]:.0f}%)" for k, v in counts.items() if v]
        out.append(f"{title:<9} " + (", ".join(parts) or "-"))
    out.append(
        f"gap p50   {s.gap_p50_us:.0f} us, p90 {s.gap_p90_us:.0f} us, "
        f"p99 {s.gap_p99_us:.0f} us (inter-arrival)"
    )
    return out
