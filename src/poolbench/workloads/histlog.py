"""fio's completion-latency histogram log (`write_hist_log`, `log_hist_msec`), read back over a
window of wall-clock time (pure).

A foreground that runs while something else happens (a resilver) is one continuous fio run;
what it did during the event is what its log says about the event's own window. Each log row
is one direction's interval: `time (ms; Unix epoch with log_unix_epoch=1), ddir, bs, counts of
fio's latency bins...`. fio writes a row when a completion finds the interval over, so a row
covers the time since the row before it: after a stall, one row spans the whole stall (the
first row, whose start is unknown, covers nothing). A row that straddles an edge of the window
counts for the part of it inside, at the row's own rate (its completions spread evenly over
its span): the figure covers the window exactly wherever the log does, however short the
window. The p99 comes from the rows' merged bins, weighted the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

# fio's histogram layout (stat.h): 29 groups of 64 buckets, exact below 128.
PLAT_BITS = 6
PLAT_VAL = 1 << PLAT_BITS
PLAT_NR = 29 * PLAT_VAL
DDIR = {"read": 0, "write": 1}


def bin_value_ns(idx: int) -> int:
    """The latency (ns) fio gives bucket `idx` (stat.c, plat_idx_to_val): its range's mean,
    as the keys of json+'s `bins`."""
    if idx < (PLAT_VAL << 1):
        return idx
    error_bits = (idx >> PLAT_BITS) - 1
    base = 1 << (error_bits + PLAT_BITS)
    k = idx % PLAT_VAL
    return int(base + (k + 0.5) * (1 << error_bits))


@dataclass(frozen=True)
class Row:
    t_ms: int
    ddir: int
    bs: int
    counts: tuple[int, ...]


def parse(text: str) -> list[Row]:
    """The rows of one histogram log (malformed or empty lines are skipped: fio stopped by a
    trigger may leave a last line cut short)."""
    out = []
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) < 4:
            continue
        try:
            t, ddir, bs, *counts = (int(p) for p in parts)
        except ValueError:
            continue
        out.append(Row(t, ddir, bs, tuple(counts)))
    return out


@dataclass(frozen=True)
class Window:
    """What the log says about [start_ms, end_ms]."""

    start_ms: int
    end_ms: int
    intervals: int  # rows inside the window, wholly or in part
    seconds: float  # the part of the window the rows cover
    ios: float  # completions, a straddling row's counted in proportion
    io_bytes: float
    bins: dict[int, float] = field(default_factory=dict)  # latency (ns) -> completions
    first_ms: int | None = None  # the log's first row: fio was doing I/O by then

    def p99_ms(self) -> float | None:
        """fio's rule (fioparse.percentile_from_bins) on weighted counts."""
        total = sum(self.bins.values())
        if total <= 0:
            return None
        running = 0.0
        for value in sorted(self.bins):
            running += self.bins[value]
            if running >= 0.99 * total * (1 - 1e-12):  # rounding of the weights
                return value / 1e6
        return max(self.bins) / 1e6


def _value_of(j: int, coarseness: int) -> int:
    """A coarse bucket (2^coarseness fine ones merged) valued at its highest fine bucket: a
    p99 is never understated."""
    return bin_value_ns(min(((j + 1) << coarseness) - 1, PLAT_NR - 1))


def window(
    rows: Iterable[Row], direction: str, start_ms: int, end_ms: int, coarseness: int = 0
) -> Window:
    """The rows of `direction` over [start_ms, end_ms], summed (straddling ones in part)."""
    mine = sorted((r for r in rows if r.ddir == DDIR[direction]), key=lambda r: r.t_ms)
    ios = nbytes = 0.0
    n = covered_ms = 0
    bins: dict[int, float] = {}
    for prev, cur in zip(mine, mine[1:], strict=False):
        lo, hi = max(prev.t_ms, start_ms), min(cur.t_ms, end_ms)
        if hi <= lo:
            continue
        share = (hi - lo) / (cur.t_ms - prev.t_ms)
        n += 1
        covered_ms += hi - lo
        done = sum(cur.counts) * share
        ios += done
        nbytes += done * cur.bs
        for j, c in enumerate(cur.counts):
            if c:
                v = _value_of(j, coarseness)
                bins[v] = bins.get(v, 0.0) + c * share
    first = mine[0].t_ms if mine else None
    return Window(start_ms, end_ms, n, covered_ms / 1000, ios, nbytes, bins, first)


def merged(windows: Sequence[Window]) -> Window:
    """The windows of several logs of one run (numjobs > 1): their I/O adds up over the same
    time, so the seconds are the longest of theirs and the intervals the fewest."""
    if not windows:
        raise ValueError("no windows to merge")
    bins: dict[int, float] = {}
    for w in windows:
        for k, v in w.bins.items():
            bins[k] = bins.get(k, 0) + v
    firsts = [w.first_ms for w in windows if w.first_ms is not None]
    return Window(
        windows[0].start_ms, windows[0].end_ms, min(w.intervals for w in windows),
        max(w.seconds for w in windows), sum(w.ios for w in windows),
        sum(w.io_bytes for w in windows), bins, max(firsts) if firsts else None,
    )  # fmt: skip
