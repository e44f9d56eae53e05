"""A recorded trace as a fio replay: the iolog, the workload, the job, the per-I/O log (pure).

The replay does not hand blktrace's binary to fio: `record` parses it once into poolbench's
`TraceIO` list and writes that as a fio v3 iolog (one `read`/`write` line per I/O with its
issue time), so the I/Os fio replays are exactly the ones the summary counted. The iolog
names one file, `trace`; `replay_redirect` sends it to the trial's target (a file of the
trace's extent on the filesystem, or a zvol). fio's per-I/O latency log (`write_lat_log`,
`log_offset=1`) says what the replay really did; `fidelity.py` compares it with the
recording.

Two modes, in the workload's name: `trace:NAME` keeps the recording's own timing (fio
sleeps until each I/O's timestamp), `trace-fast:NAME` issues the same I/Os in the same order
as fast as the target completes them (`replay_no_stall=1`).
"""

from __future__ import annotations

import tempfile
import zlib
from collections.abc import Sequence
from pathlib import Path

from poolbench import is_digits
from poolbench.workloads.tracestats import TraceIO, TraceSummary, label_bytes
from poolbench.workloads.workload import Workload

IOLOG_FILE = "trace"  # the one file name inside every iolog poolbench writes
LAT_LOG = "replay-lat"  # fio appends `_lat.1.log`
MODES = {"trace": "timed", "trace-fast": "fast"}
MODE_TEXT = {
    "timed": "timed: each I/O at its recorded time (the recording's own rate)",
    "fast": "as fast as possible: the recorded order, no waits (replay_no_stall)",
}


def iolog(ios: Sequence[TraceIO]) -> str:
    """fio's v3 iolog of the I/Os. fio 3.33 reads a v3 timestamp as microseconds from the
    start (measured: lines 200000 µs apart were issued 200 ms apart)."""
    out = ["fio version 3 iolog", f"0 {IOLOG_FILE} add", f"0 {IOLOG_FILE} open"]
    last = 0
    for io in sorted(ios, key=lambda i: i.t_ns):
        last = io.t_ns // 1000
        action = "write" if io.write else "read"
        out.append(f"{last} {IOLOG_FILE} {action} {io.offset} {io.length}")
    out.append(f"{last} {IOLOG_FILE} close")
    return "\n".join(out) + "\n"


def mode_of(name: str) -> str:
    """'timed' or 'fast' for a workload name `trace:X` / `trace-fast:X`."""
    return MODES[name.split(":", 1)[0]]


def workload(name: str, directory: Path, s: TraceSummary) -> Workload:
    """The replay of the stored trace in `directory` as a workload named `name`."""
    mode = mode_of(name)
    direction = "mixed" if s.reads and s.writes else ("write" if s.writes else "read")
    largest = max((label_bytes(k) for k in s.sizes), default=4096)
    return Workload(
        name=name,
        family="trace",
        summary=f"Replay of the recorded block trace {directory.name} ({s.ios} I/Os, "
        f"{s.bytes / 2**20:.1f} MiB, {s.read_share:.0f}% reads, {s.iops:.0f} IOPS recorded) "
        f"onto a file of its extent (or a zvol), {MODE_TEXT[mode]}; O_DIRECT; IOPS and "
        "latency as fio measures them, with the replay's fidelity measured per I/O.",
        direction=direction,  # type: ignore[arg-type]
        unit="IOPS",
        fio={"bs": str(largest), "ioengine": "psync"},
        # A block trace overwrites blocks that hold data: the file is laid out first.
        needs_data=True,
        cold=s.reads > 0,
        trace=str(directory),
        trace_extent=max(s.extent, 4096),
    )


def target_of(directory: str, device: str | None, file_name: str) -> str:
    return device if device is not None else f"{directory}/{file_name}"


def lat_log_prefix(directory: str) -> str:
    """Where fio writes the replay's per-I/O logs: the machine's temporary directory, not
    the target (fio writes them at the end of its run, inside the device window, where they
    would count as the layout's bytes), named after the target's working directory (one
    per run and process)."""
    tag = zlib.crc32(directory.encode()) & 0xFFFFFFFF
    return f"{tempfile.gettempdir()}/poolbench-{tag:08x}-{LAT_LOG}"


def options(w: Workload, target: str, directory: str) -> dict[str, str]:
    """The replay's own fio options (the renderer adds the data pattern and latency list)."""
    opts = {
        "ioengine": "psync",
        # The trace is block I/O: replayed around the page cache, so each recorded I/O
        # reaches the layout below as one I/O, when it was recorded.
        "direct": "1",
        "read_iolog": str(Path(w.trace) / "trace.iolog"),
        "replay_redirect": target,
        "write_lat_log": lat_log_prefix(directory),
        "log_offset": "1",
    }
    if mode_of(w.name) == "fast":
        opts["replay_no_stall"] = "1"
    if w.direction != "read":
        opts["end_fsync"] = "1"
    return opts


def parse_lat_log(text: str) -> list[TraceIO]:
    """fio's per-I/O total-latency log (`time ms, latency ns, direction, size, offset, ...`)
    as the I/Os the replay issued: each issued at its completion time less its latency
    (to the millisecond: fio stamps completions in whole milliseconds)."""
    ios = []
    for line in text.splitlines():
        f = [x.strip() for x in line.split(",")]
        if len(f) < 5 or not all(is_digits(x) for x in f[:5]) or f[2] not in ("0", "1"):
            continue
        t_ns = max(0, int(f[0]) * 1_000_000 - int(f[1]))
        ios.append(TraceIO(t_ns, f[2] == "1", int(f[4]), int(f[3])))
    return ios


def busy_share(text: str, span_s: float) -> float | None:
    """The share of the replay's span the target had an I/O in flight: the per-I/O
    latencies summed (a depth-1 replay has one I/O in flight at a time) over the span from
    the first issue to the last completion; None without a span."""
    lat_ns = _lat_ns(text)
    if not lat_ns or span_s <= 0:
        return None
    last = lat_ns[-1] / 1e9  # the span ends at the last issue: add the last I/O's time
    return min(1.0, sum(lat_ns) / 1e9 / (span_s + last))


def _lat_ns(log_text: str) -> list[int]:
    return [int(f[1]) for f in (ln.split(",") for ln in log_text.splitlines())
            if len(f) >= 5 and is_digits(f[1].strip())]  # fmt: skip


def _issue_us(iolog_text: str) -> list[int]:
    """The recorded issue times (µs) of the iolog's reads and writes, in order."""
    out = []
    for line in iolog_text.splitlines():
        f = line.split()
        if len(f) == 5 and f[2] in ("read", "write") and is_digits(f[0]):
            out.append(int(f[0]))
    return out


def target_late_share(log_text: str, iolog_text: str, late_s: float) -> float | None:
    """Of the time a replay fell behind its recording (`late_s`, span achieved less span
    recorded), the share its own I/Os account for: each I/O's latency beyond the recorded
    gap to the next one is time the target made the replay lose. None when it was not
    late or the two do not line up I/O for I/O."""
    lat = _lat_ns(log_text)
    times = _issue_us(iolog_text)
    if late_s <= 0 or not lat or len(lat) != len(times):
        return None
    gaps_ns = [(b - a) * 1000 for a, b in zip(times, times[1:], strict=False)]
    lost_ns = sum(max(0, lat_i - gap) for lat_i, gap in zip(lat, gaps_ns, strict=False))
    return min(1.0, lost_ns / 1e9 / late_s)
