"""The trace model, pure: blkparse text → I/Os → summary; the fio iolog and per-I/O log;
the fidelity comparison with its tolerances and reasons. Every expected figure is computed
here from the I/Os the test wrote down."""

from __future__ import annotations

import struct
from dataclasses import replace
from pathlib import Path

import pytest

from poolbench.errors import UsageError
from poolbench.workloads import blkparse, fidelity, replay
from poolbench.workloads.tracestats import (
    TraceIO,
    TraceSummary,
    gap_label,
    lines,
    locality,
    size_label,
    summarize,
)

DATA = Path(__file__).parent / "data"
MS = 1_000_000

# blkparse's default output: queue events (Q) and the others a trace holds around them.
SAMPLE = """\
  7,0    1        1     0.000000000  4242  Q   W 0 + 8 [fio]
  7,0    1        2     0.000001200  4242  G   W 0 + 8 [fio]
  7,0    1        3     0.000002000  4242  D   W 0 + 8 [fio]
  7,0    1        4     0.000090000     0  C   W 0 + 8 [0]
  7,0    0        5     0.004000000  4242  Q   W 8 + 8 [fio]
  7,0    0        6     0.008000000  4242  Q  WS 16 + 16 [fio]
  7,0    0        7     0.009000000  4242  Q FWS [fio]
  7,0    1        8     0.020000000  4243  Q  RA 4096 + 32 [fio]
  7,0    1        9     0.030000000  4243  Q   D 100 + 8 [fstrim]
  7,0    1       10     0.150000000  4243  Q   R 0 + 8 [fio]
CPU0 (loop0):
 Reads Queued:           0,        0KiB\t Writes Queued:           2,       12KiB
Total (loop0):
 Reads Queued:           2,       20KiB\t Writes Queued:           3,       16KiB
"""


def test_blkparse_keeps_each_queued_read_and_write_once() -> None:
    ios = blkparse.parse(SAMPLE)
    # Q events with data that read or write: 5 (not G/D/C, not the flush, not the discard).
    assert ios == [
        TraceIO(0, True, 0, 4096),
        TraceIO(4 * MS, True, 4096, 4096),
        TraceIO(8 * MS, True, 8192, 8192),
        TraceIO(20 * MS, False, 4096 * 512, 16384),
        TraceIO(150 * MS, False, 0, 4096),
    ]


def test_blkparse_times_start_at_the_first_io_and_keep_nanoseconds() -> None:
    text = "  8,16 0 1 12.000000500 1 Q W 0 + 8 [x]\n  8,16 0 2 12.000001700 1 Q R 8 + 8 [x]\n"
    assert [io.t_ns for io in blkparse.parse(text)] == [0, 1200]


def test_blkparse_refuses_text_that_is_not_blkparse_output() -> None:
    with pytest.raises(UsageError, match="no blkparse event lines"):
        blkparse.parse("time,lat,dir\n1,2,3\n", source="x.txt")
    assert blkparse.parse("") == []


def test_summary_of_the_sample_computed_by_hand() -> None:
    s = summarize(blkparse.parse(SAMPLE))
    assert (s.ios, s.reads, s.writes) == (5, 2, 3)
    assert (s.read_bytes, s.write_bytes, s.bytes) == (20480, 16384, 36864)
    assert s.sizes == {"4k": 3, "8k": 1, "16k": 1}
    # 4096 follows 0+4096, 8192 follows 4096+4096: sequential; then 2 MiB away: far; then
    # back to 0 from 2 MiB + 16 KiB: far.
    assert s.locality == {"sequential": 2, "near": 0, "far": 2}
    # gaps 4, 4, 12, 130 ms
    assert s.gaps == {"<1ms": 0, "1-10ms": 2, "10-100ms": 1, ">=100ms": 1}
    assert (s.gap_p50_us, s.gap_p90_us, s.gap_p99_us) == (4000, 130000, 130000)
    assert s.span_s == pytest.approx(0.150)
    assert s.iops == pytest.approx(4 / 0.150)
    assert s.extent == 4096 * 512 + 16384
    assert s.read_share == pytest.approx(40.0)
    assert all(len(line) <= 80 for line in lines(s))


def test_buckets() -> None:
    assert [size_label(n) for n in (512, 513, 4096, 4097, 1 << 20, 3 << 20)] == [
        "512", "1k", "4k", "8k", "1m", "4m"]  # fmt: skip
    assert locality(4096, 4096) == "sequential"
    assert locality(4096, 0) == "near" and locality(0, (1 << 20) + 1) == "far"
    assert [gap_label(ns) for ns in (0, 999_999, MS, 10 * MS, 100 * MS)] == [
        "<1ms", "<1ms", "1-10ms", "10-100ms", ">=100ms"]  # fmt: skip


def test_summary_round_trips_through_json() -> None:
    s = summarize(blkparse.parse(SAMPLE))
    assert TraceSummary.from_json(s.to_json()) == s


def test_a_real_recording_of_the_known_job_through_the_kernel_blk_tracer() -> None:
    """The kernel blk tracer's text of a real recording on a loop device
    (tests/data/blktracer-loop.txt, recorded by test_replay_real.py on this kernel, where
    lockdown refuses blktrace): the known job's 64 sequential 4 KiB writes, then 32 random
    8 KiB reads within the first 256 KiB, 250 a second; the G/P/U events around each queue
    event are not I/Os."""
    text = (DATA / "blktracer-loop.txt").read_text()
    ios = blkparse.parse(text)
    s = summarize(ios)
    assert (s.ios, s.writes, s.reads) == (96, 64, 32)
    assert s.bytes == 64 * 4096 + 32 * 8192 and s.extent == 256 * 1024
    assert s.sizes == {"4k": 64, "8k": 32}
    assert s.locality == {"sequential": 63, "near": 32, "far": 0}
    # 4 ms apart at 250 IOPS; one long pause where fio switches from the writes to the reads
    assert s.gaps[">=100ms"] == 1 and s.gaps["1-10ms"] >= 90
    assert 3900 <= s.gap_p50_us <= 4100
    assert sum(" Q " in ln for ln in text.splitlines()) == 96  # one queue event per I/O


def test_iolog_is_fio_v3_in_microseconds() -> None:
    ios = [TraceIO(0, True, 0, 4096), TraceIO(2_500_000, False, 8192, 8192)]
    assert replay.iolog(ios).splitlines() == [
        "fio version 3 iolog", "0 trace add", "0 trace open", "0 trace write 0 4096",
        "2500 trace read 8192 8192", "2500 trace close"]  # fmt: skip


def test_fio_lat_log_gives_issue_times_and_skips_other_lines() -> None:
    text = "3, 1500000, 1, 4096, 0, 0\n7, 250000, 0, 8192, 4096, 0\n9, 10, 2, 4096, 0, 0\nx\n"
    assert replay.parse_lat_log(text) == [
        TraceIO(1_500_000, True, 0, 4096),
        TraceIO(6_750_000, False, 4096, 8192),
    ]


def _ios(n: int, gap_ns: int, bs: int = 4096) -> list[TraceIO]:
    return [TraceIO(i * gap_ns, i % 3 == 0, i * bs, bs) for i in range(n)]


def test_identical_replay_is_faithful_and_timed_says_it_is_throttled_by_the_timing() -> None:
    rec = summarize(_ios(100, 4 * MS))
    f = fidelity.compare(rec, rec, "timed")
    assert f.faithful and f.warnings == []
    assert "throttled by the recording's timing" in f.note
    assert all(len(line) <= 80 for line in fidelity.lines(f))


def test_a_lost_io_fails_count_and_bytes_exactly() -> None:
    ios = _ios(100, 4 * MS)
    f = fidelity.compare(summarize(ios), summarize(ios[:-1]), "timed")
    failed = {c.what for c in f.checks if not c.ok}
    assert {"I/O count", "bytes"} <= failed
    assert any(fidelity.DIFFERENT_IOS in w for w in f.warnings)


def test_a_slow_target_in_timed_mode_could_not_keep_the_rate() -> None:
    rec = summarize(_ios(100, 4 * MS))
    got = summarize(_ios(100, 20 * MS))  # five times slower
    f = fidelity.compare(rec, got, "timed")
    assert not f.faithful
    rate = next(c for c in f.checks if c.group == "rate")
    assert not rate.ok and rate.achieved == "50.0" and rate.recorded == "250.0"
    assert any("could not keep the trace's rate (50.0 IOPS achieved, 250.0" in w
               for w in f.warnings)  # fmt: skip


def test_spacing_off_at_the_right_rate_is_fios_timing() -> None:
    rec = summarize(_ios(101, 4 * MS))
    # Same span, same count, but in bursts: pairs 0.5 ms apart, 7.5 ms between pairs.
    bursty = [replace(io, t_ns=(i // 2) * 8 * MS + (i % 2) * MS // 2)
              for i, io in enumerate(_ios(101, 4 * MS))]  # fmt: skip
    f = fidelity.compare(rec, summarize(bursty), "timed")
    gap_warnings = [w for w in f.warnings if "inter-arrival" in w]
    assert gap_warnings and fidelity.FIO_TIMING in gap_warnings[0]


def test_fast_mode_differences_in_timing_say_it_ran_flat_out() -> None:
    rec = summarize(_ios(100, 4 * MS))
    f = fidelity.compare(rec, summarize(_ios(100, 100_000)), "fast")
    assert f.warnings and all(fidelity.FLAT_OUT in w for w in f.warnings)
    assert f.note.startswith("ran flat out")


def test_histogram_tolerance_is_in_percentage_points() -> None:
    base = [TraceIO(i * MS, False, 0, 4096) for i in range(100)]
    # one I/O in a hundred of another size: 1 point, within the ±1 point of sizes
    one_off = [*base[:99], TraceIO(99 * MS, False, 0, 8192)]
    f = fidelity.compare(summarize(base), summarize(one_off), "timed")
    sizes = [c for c in f.checks if c.group == "size"]
    assert all(c.ok for c in sizes)
    two_off = [*base[:98], TraceIO(98 * MS, False, 0, 8192), TraceIO(99 * MS, False, 0, 8192)]
    f = fidelity.compare(summarize(base), summarize(two_off), "timed")
    assert not all(c.ok for c in f.checks if c.group == "size")
    assert any(w.startswith("replay fidelity: I/O sizes outside tolerance") for w in f.warnings)


def _record(t: int, sector: int, nbytes: int, action: int, pdu: bytes = b"") -> bytes:
    from poolbench.workloads.blktracebin import MAGIC

    head = struct.pack("<IIQQIIIIHHH2x", MAGIC | 7, 0, t, sector, nbytes, action, 1, 7 << 20,
                       0, 0, len(pdu))  # fmt: skip
    return head + pdu


def test_blktrace_binary_records_give_the_same_ios(tmp_path: Path) -> None:
    from poolbench.workloads import blktracebin as b

    write_q = b.QUEUE | (b.TC_WRITE << 16)
    cpu0 = (
        _record(1_000, 0, 4096, write_q)
        + _record(1_500, 0, 0, 0x0400_0000 | 1, pdu=b"fio\0")  # a notify with a payload
        + _record(2_000, 0, 4096, 8 | (b.TC_WRITE << 16))  # a completion: not an I/O
        + _record(9_000, 100, 4096, b.QUEUE | ((b.TC_WRITE | b.TC_DISCARD) << 16))
    )
    cpu1 = _record(5_000, 16, 8192, b.QUEUE | (1 << 16))  # a read, on the other CPU
    (tmp_path / "trace.blktrace.0").write_bytes(cpu0)
    (tmp_path / "trace.blktrace.1").write_bytes(cpu1)
    ios = b.parse_files(sorted(tmp_path.glob("trace.blktrace.*")))
    assert ios == [TraceIO(0, True, 0, 4096), TraceIO(4_000, False, 8192, 8192)]
    (tmp_path / "bad").write_bytes(b"\0" * 48)
    with pytest.raises(UsageError, match="not a blktrace binary file"):
        b.parse_files([tmp_path / "bad"])
