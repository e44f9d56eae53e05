"""slow-disk: what one slow disk costs each layout in throughput and p99, and whether the
slow-member guard names it.

Every disk is a loop device capped at the same speed (`[disks] cap`), and in half the
configurations the first member is capped lower still, at `slow_member` percent of its peers
(engine/slow_disk.py; the cap is journaled and lifted at teardown). Each layout is compared
with itself without the slow member, so the cost is the slow disk's alone.

What to expect, computed from the caps (the notes print it beside the measured ratio):

* Writes go to every member in proportion (a mirror writes every byte to each side; raidz
  and dRAID spread data and parity evenly), so the pool writes at the slow member's pace:
  streaming write ≈ slow cap × data disks, i.e. the slow fraction of the healthy figure.
* Mirror reads need one side only. OpenZFS (0.7 and later) sends each read to the side with
  the fewest active I/Os (vdev_queue_length), plus a penalty for a side that did not serve
  the previous offset: 5 I/Os on rotational members (2 within 1 MiB), 1 on others
  (vdev_mirror_load). A streaming read's prefetch keeps at most 3 async reads active per
  side (zfs_vdev_async_read_max_active), so on rotational members (loop devices on a disk
  are) the stream may stay on the slow side: the read lies between the slow side's rate and
  (sides - 1) × peers + slow, and which side served it explains where (measured in the
  OpenZFS guest, 2-way mirror at 4 and 2 MiB/s: 95% of the bytes from the fast side in one
  replicate, 53% from the slow side in the other; 3.8 and 3.7 MiB/s; in a second run 15%
  and 34%, 4.3 and 5.7 MiB/s, against 5.9 healthy). zfs-fuse (pool v23)
  picks the side without looking at its load, so half of the reads of a 2-way mirror wait
  on the slow side.
* raidz reads skip parity, whose column follows the block's offset: the slow member holds a
  data column of most blocks, and a streaming read lies between its rate × data disks and
  the healthy figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from poolbench.errors import UsageError
from poolbench.study.builtin.base import (
    Builtin,
    StudyFile,
    default_left_out,
    need,
    study_file,
    working_set,
)
from poolbench.study.builtin.context import Context
from poolbench.study.builtin.slow_guard import GuardView, needed, view

if TYPE_CHECKING:
    from poolbench.planner.layout import VdevSpec

if TYPE_CHECKING:
    from poolbench.store.facts import ConfigFacts, StudyFacts

MiB = 1 << 20
WORKLOADS = ["seq-write", "seq-read", "rand-read-4k"]
DEFAULT_CAP = 40  # MiB/s per loop disk: slow enough that the cap, not the host, sets the pace
WINDOW = (0.1, "256M")  # the working set: a tenth of a disk, at most 256M (base.working_set)


def _percent(ctx: Context) -> int:
    """--fraction as a percent: '1/2', '0.5' or '50%'."""
    raw = ctx.options.get("fraction", "1/2").strip()
    try:
        if "/" in raw:
            a, b = raw.split("/", 1)
            value = float(a) / float(b)
        elif raw.endswith("%"):
            value = float(raw[:-1]) / 100
        else:
            value = float(raw)
    except (ValueError, ZeroDivisionError):
        value = -1.0
    if not 0.01 <= value < 1:
        raise UsageError(
            f"--fraction '{raw[:40]}' is not a share of the peers' speed between 1% and 100% "
            "(exclusive).",
            "e.g. --fraction 1/2, 0.25 or 33%",
        )
    return round(value * 100)


def _layouts(ctx: Context) -> list[str]:
    n = ctx.n
    # One 2-way mirror, not pairs: with one top-level vdev the cost has a simple model
    # (several share writes by the allocator's own rules).
    out = ["mirror:2", f"raidz1:{n}"] + ([f"raidz2:{n}"] if n >= 4 else [])
    if n < 4:
        default_left_out(ctx, f"no raidz2: it needs 4 disks; --disks gives {n}.")
    if ctx.dialect == "openzfs":
        out.append(f"draid1:{n - 2}d:{n}c:1s" if n >= 4 else f"draid1:{n - 1}d:{n}c:0s")
    else:
        default_left_out(ctx, "no dRAID: zfs-fuse (pool version 23) has none (OpenZFS 2.1+).")
    return ctx.opt_list("layouts", out)


def build(ctx: Context) -> StudyFile:
    need(ctx, 3, "slow-disk study (mirror pairs and raidz1)")
    if ctx.devices:
        raise UsageError(
            "The slow-disk study throttles one of its own loop disks against capped peers; "
            "on real devices the peers' speed is not known or held.",
            "Run it on loop disks (--disks 4x1G); `poolbench disks --screen` measures real disks.",
        )
    pct = _percent(ctx)
    cap = ctx.opt_int("cap", DEFAULT_CAP)
    if cap < 1:
        raise UsageError("--cap must be at least 1 MiB/s.", "e.g. --cap 40")
    return study_file(
        ctx,
        "slow-disk",
        f"each layout with every disk capped at {cap} MiB/s, and with its first disk at {pct}% "
        "of that: streaming write, cold streaming read, 4K random read (throughput and p99)",
        {"backend": ["zfs"], "layout": _layouts(ctx), "slow_member": [100, pct]},
        {"names": WORKLOADS, "size": working_set(ctx, *WINDOW)},
        disks={"cap": cap},
    )


# -- notes ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Expectation:
    """What one slow member should do to a layout's figure, computed from the caps: a
    figure, or a range where the caps bound it from both sides (high_*)."""

    ratio: float  # of the healthy figure (the low end of a range)
    mib_s: float | None  # the figure itself, when the caps set it
    why: str
    high_ratio: float | None = None
    high_mib_s: float | None = None

    def text(self) -> str:
        if self.high_ratio is not None and self.high_mib_s is not None and self.mib_s:
            return (f"expected {self.ratio:.2f}–{self.high_ratio:.2f}× of the healthy figure, "
                    f"{self.mib_s:.1f}–{self.high_mib_s:.1f} MiB/s ({self.why})")  # fmt: skip
        at = f" ≈ {self.mib_s:.1f} MiB/s" if self.mib_s is not None else ""
        return f"expected {self.ratio:.2f}× of the healthy figure{at} ({self.why})"


def data_disks(v: VdevSpec) -> float:
    """The disks' worth of data a full stripe of `v` carries."""
    if v.kind == "mirror":
        return 1.0
    if v.kind == "draid":
        return (v.width - v.draid_spares) * v.draid_data / (v.draid_data + v.parity)
    return float(v.width - v.parity)


def expected(
    layout: str, n: int, workload: str, slow: float, peer: float, dialect: str
) -> Expectation | None:
    """The streaming figures of a single-vdev layout with its first member capped at `slow`
    MiB/s and its peers at `peer` (None where no simple model holds: random reads, several
    top-level vdevs, whose allocator shares writes by its own rules)."""
    from poolbench.planner.layout import parse_layout

    try:
        vdevs = parse_layout(layout, (1 << 30,) * n).vdevs
    except (UsageError, ValueError):
        return None
    if len(vdevs) != 1 or workload not in ("seq-write", "seq-read") or peer <= 0:
        return None
    v, f = vdevs[0], slow / peer
    d, w = data_disks(v), v.width
    if workload == "seq-write":
        return Expectation(f, slow * d, f"the slow disk's {slow:g} MiB/s × {d:g} data disks: "
                           "every member holds its share of each stripe")  # fmt: skip
    if v.kind != "mirror":
        return Expectation(f, slow * d, f"from the slow disk's {slow:g} MiB/s × {d:g} data "
                           "disks, where it holds a data column of every block, up to the "
                           "healthy figure: reads skip parity, whose place follows the "
                           "block's offset", 1.0, peer * d)  # fmt: skip
    if dialect == "openzfs":
        high = (w - 1) * peer + slow
        return Expectation(slow / (w * peer), slow, "OpenZFS gives a read to the side with the "
                           "fewest active I/Os, but the side that served the previous offset "
                           "is ahead by up to 5 (rotational) or 1 (not) of them: a stream "
                           "may stay on the slow side, or leave it and keep every side busy "
                           "at its own speed", high / (w * peer), high)  # fmt: skip
    return Expectation(f, slow * w, f"zfs-fuse splits reads evenly over the {w} sides without "
                       f"looking at their load: {w} × the slow side's {slow:g} MiB/s")  # fmt: skip


def window_mib(ctx: Context) -> float:
    """The working set each window moves, as build() set it (without announcing it again)."""
    from poolbench.units import parse_size

    if "size" in ctx.options:
        return parse_size(ctx.options["size"].upper()) / MiB
    share = int(ctx.disk_bytes * WINDOW[0]) // MiB
    return float(min(parse_size(WINDOW[1]) // MiB, max(8, share)))


def guard_view(layout: str, n: int, workload: str, window: float, slow: float, peer: float,
               dialect: str) -> GuardView | None:  # fmt: skip
    """What a window of `window` MiB lets the slow-member guard see (study/builtin/slow_guard)."""
    from poolbench.planner.layout import parse_layout

    try:
        vdevs = parse_layout(layout, (1 << 30,) * n).vdevs
    except (UsageError, ValueError):
        return None
    if len(vdevs) != 1 or peer <= 0:
        return None
    v = vdevs[0]
    return view(v.kind, v.width, data_disks(v), workload, window, slow, peer, dialect)


def named_line(c: ConfigFacts, workload: str, position: int, why: str = "") -> str:
    """How often the slow-member guard caught the throttled disk in this workload's windows
    (the report names a member slow in a majority of the replicates, at least two), by its
    byte counters and, on OpenZFS, by each leaf's write disk_wait; and whether either named
    it. `why`: what the caps say the byte counters can see, said after their count."""
    line = _flagged(c.slow_flags.get(workload, ()), position, "the guard") + why
    by_wait = c.latency_flags.get(workload, ())
    if not by_wait:
        return line
    line += "; " + _flagged(by_wait, position, "its disk_wait rule")
    named = [
        rule
        for rule, judged in (("its byte counters", c.slow_flags.get(workload, ())),
                             ("its disk_wait", by_wait))
        if sum(1 for places in judged if position in places) >= needed(len(judged))
    ]  # fmt: skip
    return line + (f": the guard names it by {' and '.join(named)}" if named
                   else ": the guard names it by neither rule")  # fmt: skip


def _flagged(judged: tuple[tuple[int, ...], ...], position: int, rule: str) -> str:
    if not judged:
        return f"{rule} could not judge the members (fewer than two compared)"
    hits = sum(1 for places in judged if position in places)
    others = sorted({p + 1 for places in judged for p in places if p != position})
    line = f"{rule} flagged disk {position + 1} slow in {hits} of {len(judged)} replicates"
    return line + (f"; also disk(s) {others}" if others else "")


def notes(ctx: Context, facts: StudyFacts) -> list[str]:
    """Per workload and layout: the slow member's cost with its interval, p99 where recorded,
    the computed expectation."""
    from poolbench.study.builtin.headline import compared, p99_compared

    pairs: dict[str, dict[bool, ConfigFacts]] = {}
    percent = 0
    for c in facts.configs:
        slow = c.level("slow_member", "100") != "100"
        if slow:
            percent = int(c.level("slow_member"))
        pairs.setdefault(c.level("layout"), {})[slow] = c
    out = []
    for w in WORKLOADS:
        lines = []
        for layout, pair in pairs.items():
            if True not in pair or False not in pair:
                continue
            if not (pair[False].figures.get(w) or pair[True].figures.get(w)):
                continue  # not run (--workloads left it out)
            text, _shown = compared(pair[False].figures.get(w, ()), pair[True].figures.get(w, ()))
            line = f"  {layout}: with the slow member {text}"
            throttled = pair[True].slow_member
            exp = expected(layout, facts.disk_count, w, throttled.cap_mib_s,
                           throttled.peer_mib_s, ctx.dialect) if throttled else None  # fmt: skip
            if exp is not None:
                line += f"; {exp.text()}"
            p99 = p99_compared(pair[True], pair[False], w)
            if p99 is not None:
                line += f"; {p99[0]}"
            place = throttled.position if throttled else 0
            seen = guard_view(layout, facts.disk_count, w, window_mib(ctx), throttled.cap_mib_s,
                              throttled.peer_mib_s, ctx.dialect) if throttled else None  # fmt: skip
            why = f" ({'it can' if seen.visible else 'it cannot'} name it: {seen.why})" \
                if seen is not None else ""  # fmt: skip
            line += f"; {named_line(pair[True], w, place, why)}"
            lines.append(line)
        if lines:
            out += [f"{w}: one member at {percent}% of its peers' cap, against the same layout "
                    "without it (mean of the replicates, 95% CI):", *lines]  # fmt: skip
    return out


BUILTIN = Builtin(
    "slow-disk",
    "What does one slow disk cost mirror, raidz1/2 and dRAID, and is it named?",
    (4, "1G"),
    build,
    {
        "layouts": "layouts, e.g. mirror:2+mirror:2,raidz1:4",
        "fraction": "the slow member's speed as a share of its peers' (default 1/2)",
        "cap": f"every loop disk's speed in MiB/s (default {DEFAULT_CAP})",
    },
    notes=notes,
)
