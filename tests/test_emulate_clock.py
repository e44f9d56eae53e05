"""The emulated disk's time line (emulate/clock.py): one request at a time in arrival order,
the emulator's own turnaround not charged as disk time, an idle disk starting at arrival."""

from __future__ import annotations

import pytest

from poolbench.emulate.clock import QUEUED_S, STREAM_S, DiskClock, Tally, wait_until
from poolbench.emulate.model import Service


def test_requests_are_served_one_after_another_in_arrival_order() -> None:
    clock = DiskClock(queued_s=0.0005)
    # Three requests reach an idle disk; each next one arrives right after the previous
    # reply (the single-threaded emulator reads it only then), 0.1 ms of turnaround later.
    first = clock.schedule(10.0, 0.012)
    assert first == pytest.approx(10.012)
    second = clock.schedule(first + 0.0001, 0.008)
    assert second == pytest.approx(10.020)  # back to back: the turnaround is not disk time
    third = clock.schedule(second + 0.0004, 0.001)
    assert third == pytest.approx(10.021)


def test_an_idle_disk_starts_a_request_when_it_arrives() -> None:
    clock = DiskClock(queued_s=0.0005)
    end = clock.schedule(1.0, 0.010)
    later = end + 0.0006  # past the queue's window: the disk sat idle
    assert clock.schedule(later, 0.010) == pytest.approx(later + 0.010)


def test_a_stream_is_not_slowed_by_the_hosts_gaps_but_never_runs_ahead_of_its_rate() -> None:
    clock = DiskClock(queued_s=0.0005, stream_s=0.010)
    end = clock.schedule(0.0, 0.003)  # the first piece, positioned elsewhere
    # 100 more pieces, each 3 ms of transfer, each arriving 2 ms after the previous reply (a
    # slow host): read-ahead kept reading meanwhile, so the stream runs at the disk's rate.
    for _ in range(100):
        end = clock.schedule(end + 0.002, 0.003, streamed=True)
    assert end == pytest.approx(0.303)
    # A host slower than the disk: what was read ahead is answered at once, but the disk's
    # time line never falls more than the window behind, nor runs ahead of its rate.
    arrived = end
    for _ in range(100):
        arrived = max(arrived, end) + 0.004
        end = clock.schedule(arrived, 0.003, streamed=True)
        assert arrived - 0.010 <= end - 0.003 <= arrived  # it started within the window
    # Past the window (20 ms away) the stream starts again from its arrival.
    assert clock.schedule(end + 0.020, 0.003, streamed=True) == pytest.approx(end + 0.023)


def test_the_windows_are_the_documented_ones() -> None:
    assert (QUEUED_S, STREAM_S) == (0.0005, 0.010)


def test_wait_until_returns_at_or_after_the_deadline() -> None:
    times = iter([0.0, 0.0005])
    assert wait_until(0.0, now=lambda: next(times)) == 0.0005  # not ahead: no sleep
    import time

    start = time.monotonic()
    woke = wait_until(start + 0.002)
    assert woke >= start + 0.002


def test_the_tally_counts_what_was_served() -> None:
    t = Tally()
    t.add(False, 4096, Service(0.007, 0.004, 0.00003), late_s=0.00004, work_s=0.00002, gap_s=0.0)
    t.add(True, 131072, Service(0.0, 0.0, 0.0008), late_s=0.0003, work_s=0.0001, gap_s=0.00015)
    t.add(False, 4096, Service(0.001, 0.002, 0.00003), late_s=-0.00001, work_s=0.0, gap_s=-1)
    d = t.as_dict()
    assert (d["requests"], d["reads"], d["writes"]) == (3, 2, 1)
    assert (d["bytes_read"], d["bytes_written"]) == (8192, 131072)
    assert (d["positioned"], d["streamed"]) == (2, 1)
    assert d["sizes"] == {"4096": 2, "131072": 1}
    assert d["service_s"] == pytest.approx(0.007 + 0.004 + 0.00003 + 0.0008 + 0.003 + 0.00003)
    assert d["late_us"] == {"<50": 1, "<500": 1, "<10": 1}  # early counts as on time
    assert d["late_max_us"] == 300.0
    assert d["gap_us"] == {"<20": 1, "<200": 1}  # a request into a busy disk has no gap
