"""Windows long enough to mean something (DESIGN.md section 3 rule 7).

A figure from a window of a fraction of a second is mostly start-up and jitter: the demo's
size-bound writes of a small working set lasted 0.216-0.799 s, and one configuration's
streaming write measured 69.6, 45.5, 58.8 and 352 MiB/s. Every timed window should last at
least `min_window` seconds:

- time-based workloads run for max(runtime, min_window) (workloads/fiojob.py);
- a size-bound write that finished sooner is measured again, the working set written
  `loops` times in one fio job, the count sized from the first, discarded pass. fio ends
  every pass with its end_fsync, so each pass is durable before the next one overwrites it
  (fio's time_based fsyncs once, at the end, so the page cache can fold the passes into
  one write: a time-based 96 MiB seq-write on this machine's ext4 "wrote" 4 GB in 3 s, at
  page-cache speed; traced, loops=3 made three fsyncs); a fresh-file write unlinks its
  file before each pass (fio unlink_each_loop), so every pass allocates as the one did. The
  count aims HEADROOM past the minimum: later passes may run faster than the first, which
  also created the file. A window that still falls short is recorded and flagged;
- a cold read is never repeated: a second pass would be served from the cache it just
  filled (fio's time_based re-reads the same file; the ARC keeps what it read whatever fio
  asks of the page cache). Its window stays as long as the working set makes it, and a short
  one is flagged with the working set that would fill it.

Each window also records whether it reached steady state (stats/steady.py: the SNIA rule on
fio's one-second samples, in rounds long enough for the filesystem's quanta, engine/quanta.py;
a write's closing fsync left out of the rounds, never out of the figure). A window that never
steadied is flagged, and so is one too short for the rule to judge while the minimum window
is on: "not judged" is no verdict, and a demo or a study must not pass by it.
"""

from __future__ import annotations

import math
from typing import NotRequired, TypedDict

from poolbench.engine.quanta import Quanta
from poolbench.stats import steady
from poolbench.workloads.fiojob import STEADY_RING_S
from poolbench.workloads.fioparse import FioResult
from poolbench.workloads.workload import Workload

MiB = 1024 * 1024
HEADROOM = 1.5  # aim past the minimum: passes vary, and the window must still reach it
MAX_LOOPS = 1000  # a write that would need more passes is measured with this many


def extendable(w: Workload) -> bool:
    """A size-bound write that may be repeated: the data it writes is the same each pass and
    counts once it is durable. Not a read (cache), not a cached test, not metadata."""
    return (
        w.kind == "fio"
        and not w.time_based
        and not w.is_metadata
        and not w.cached_by_design
        and w.direction == "write"
        and not w.trace  # a replay is the trace once: repeating it would be another trace
    )


def loops_for(first_s: float, min_window_s: float) -> int:
    """Passes over the working set for a window of at least `min_window_s`, from one pass's
    time; 1 when one pass already lasts the minimum (or the minimum is 0)."""
    if min_window_s <= 0 or first_s >= min_window_s:
        return 1
    if first_s <= 0:
        return MAX_LOOPS
    return max(2, min(MAX_LOOPS, math.ceil(min_window_s * HEADROOM / first_s)))


class Repeated(TypedDict):
    """A repeated write's discarded first pass and the passes its window made."""

    first_pass_s: float
    loops: int


class WindowFinding(TypedDict):
    """The `window` section of a measurement's findings."""

    seconds: float
    min_s: float
    reached: bool
    repeated: NotRequired[Repeated]
    steady_state: NotRequired[dict[str, object]]  # stats.steady.Steady.as_dict and fio's say
    fill_working_set_mib: NotRequired[int]  # a short cold read: the working set to fill it


def finding(
    w: Workload,
    result: FioResult,
    seconds: float,
    min_window_s: float,
    *,
    first_pass_s: float | None = None,
    loops: int = 1,
    quanta: Quanta | None = None,
) -> tuple[WindowFinding, list[str]]:
    """The `window` section of a measurement's findings, and its warnings. `first_pass_s`
    and `loops`: a repeated write's discarded first pass, and the passes its window made;
    `quanta`: what the filesystem moves a stream in (None: write by write)."""
    out: WindowFinding = {"seconds": round(seconds, 3), "min_s": min_window_s,
                           "reached": seconds >= min_window_s}  # fmt: skip
    if first_pass_s is not None:
        out["repeated"] = {"first_pass_s": round(first_pass_s, 3), "loops": loops}
    # The warnings' words are the same for every replicate of a cell (a report lists each
    # distinct warning once); each window's own numbers are in its finding.
    warnings = []
    if seconds < min_window_s:
        warnings.append(_short(w, result, seconds, min_window_s, out))
    if result.steady_bw:
        # Not judged is said only where the minimum window is on and was met (a short
        # window already says so).
        unjudged = 0 < min_window_s <= seconds
        out["steady_state"], said = _steady(w, result, quanta, unjudged)
        warnings += said
    return out, warnings


def _steady(
    w: Workload, result: FioResult, quanta: Quanta | None, warn_unjudged: bool
) -> tuple[dict[str, object], list[str]]:
    """The steady-state section and its warning: never steady, or (with the minimum window
    on) too short to judge."""
    streaming = not w.fio.get("rw", "").startswith("rand")
    quantum = quanta.of(w.direction, streaming) if quanta else None
    unknown = quanta is not None and not quanta.known and w.direction != "meta"
    judged = steady.judge(result.steady_bw, quantum_bytes=quantum, moved_bytes=result.io_bytes)
    out = judged.as_dict()
    if quanta is not None and (quantum or unknown):
        out["quanta"] = quanta.as_dict()
    if unknown:  # a filesystem with quanta of unknown size: no round length to judge by
        out["steady"], out["not_judged"] = None, quanta.basis if quanta else ""
    out["samples_mib_s"] = [round(x / MiB, 2) for x in result.steady_bw]
    if len(result.steady_bw) >= STEADY_RING_S:  # fio judges only a full ring
        out["fio_slope"] = result.steady_criterion
    longer = "a larger working set" if w.direction == "read" else (
        "a longer --min-window or a larger working set")  # fmt: skip
    if out["steady"] is False:
        out["why_not"] = judged.why_not()
        return out, [
            f"the window never reached steady state (SNIA PTS rule: over its last rounds, "
            f"range within {steady.MAX_RANGE:.0%} and slope within {steady.MAX_SLOPE:.0%} of "
            "the mean; each round at least a second and long enough for "
            f"{steady.QUANTA_PER_ROUND} of the filesystem's quanta): the figure averages a "
            f"transient or a rate that swings from round to round; {longer} shows which"
        ]
    if out["steady"] is None and warn_unjudged and not unknown:  # unknown: said in the record
        return out, [
            "the window was too short to judge steady state (the SNIA PTS rule needs "
            f"{steady.MIN_ROUNDS} rounds, each at least a second and long enough for "
            f"{steady.QUANTA_PER_ROUND} of the filesystem's quanta): whether the figure is a "
            f"steady rate is not known; {longer} would let it be judged"
        ]
    return out, []


def _short(
    w: Workload, result: FioResult, seconds: float, min_window_s: float, out: WindowFinding
) -> str:
    said = f"the timed window was shorter than the {min_window_s:g} s minimum"
    if w.cold and result.io_bytes and seconds > 0:
        need = result.io_bytes * min_window_s * HEADROOM / seconds / MiB
        # A power of two, so replicates that differ by a little suggest the same size.
        out["fill_working_set_mib"] = 2 ** math.ceil(math.log2(max(1.0, need)))
        return (
            f"{said}: a cold read covers the working set once (a second pass would be served "
            "from the cache it filled), so the figure is mostly start-up and jitter; a "
            f"working set of about {out['fill_working_set_mib']} MiB would fill the window"
        )
    if w.is_metadata:
        return f"{said}: the figure is mostly start-up and jitter; raise metadata_files"
    return f"{said}: the figure is mostly start-up and jitter"
