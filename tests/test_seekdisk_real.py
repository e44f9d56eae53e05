"""The emulated disk checked against its own model, with real fio on a real loop device over
the running emulator (docs/emulated-disks.md has the figures and where each tolerance comes
from).

One 1 GiB disk (the hdd-7200 preset) serves every test here; each test's fio run costs 1-5 s.
Two kinds of assertion: the emulator's own tally (what it computed for each request: the seek
of every track-to-track request is exactly the single-track figure, the mean over random
requests is the model's expectation within its sampling spread) checks the model; fio's
figure against that tally checks that the emulator delivers the times it computes, never
faster, and slower only by the host's own turnaround (the loop device's worker, FUSE,
fio; a busy host adds more, hence the lower bounds)."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.conftest import HAS_FIO
from tests.plugins.tiers import machine_fixture

from poolbench.backends import sources
from poolbench.emulate import process as emulated
from poolbench.emulate.model import PRESETS, Geometry, Head
from poolbench.records.jsontypes import JsonObject
from poolbench.safety.journal import Journal
from poolbench.system.runner import LocalRunner

GIB = 1 << 30
P = PRESETS["hdd-7200"]
G = Geometry(P, GIB)
# fio's figure against the emulator's computed service time: never faster than the model
# (beyond fio's own rounding), and at most this much slower: the host's own part (the loop
# device's worker, FUSE, fio) runs at normal priority and waits for a core on a busy
# two-core machine (measured in docs/emulated-disks.md: 1-3% slower on a quiet one, down to
# 11% when other processes kept both cores busy). A stream of 128 KiB pieces feels it most.
FASTEST, SLOWEST, SLOWEST_STREAM = 1.01, 0.90, 0.85

pytestmark = [
    pytest.mark.skipif(not HAS_FIO, reason="fio is not installed (Debian: fio)"),
    pytest.mark.skipif(bool(emulated.unavailable()), reason=emulated.unavailable() or "-"),
]


@dataclass(frozen=True)
class Served:
    loop: str
    disk: emulated.EmulatedDisk


@machine_fixture(slow=True, scope="module")
def served() -> Iterator[Served]:
    base = Path(tempfile.mkdtemp(prefix="pbtest-seek-", dir="/var/tmp"))
    journal = Journal(LocalRunner(), path=base / "journal")
    left: list[str] = ["not torn down"]
    try:
        (disk,) = sources.emulated_disks(journal, base / "disks", [GIB], P)
        (loop,) = sources.loop_devices(journal.runner, journal, [disk])
        yield Served(loop, emulated.EmulatedDisk(disk.parent))
    finally:
        left = journal.teardown()
        shutil.rmtree(base, ignore_errors=True)
    assert left == []


def tally(s: Served) -> JsonObject:
    return emulated.stats(s.disk)


def since(before: JsonObject, after: JsonObject, key: str) -> float:
    return float(after[key]) - float(before[key])  # type: ignore[arg-type]


def late(before: JsonObject, after: JsonObject) -> dict[str, object]:
    """For a failure's message: how late the emulator's replies were, and how long the disk
    sat idle before each request (the host's turnaround), during the run."""
    return {
        key: {k: int(v) - int(before[key].get(k, 0)) for k, v in after[key].items()}  # type: ignore[union-attr]
        for key in ("late_us", "gap_us")
    }


def fio(s: Served, *args: str) -> JsonObject:
    """One fio job on the loop device (a replayed iolog names the device itself)."""
    where = [] if any(a.startswith("--read_iolog") for a in args) else [f"--filename={s.loop}"]
    out = subprocess.run(
        ["fio", "--name=t", *where, "--direct=1", "--output-format=json", "--randseed=7",
         *args],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    # (a replay prints a note of its own after the JSON)
    job: JsonObject = json.JSONDecoder().raw_decode(out[out.index("{") :])[0]["jobs"][0]
    return job


def iolog(s: Served, tmp_path: Path, offsets: list[int], size: int = 4096) -> Path:
    f = tmp_path / "iolog"
    lines = ["fio version 2 iolog", f"{s.loop} add", f"{s.loop} open"]
    lines += [f"{s.loop} read {o} {size}" for o in offsets] + [f"{s.loop} close"]
    f.write_text("\n".join(lines) + "\n")
    return f


def test_a_direct_io_loop_device_over_the_emulator(served: Served) -> None:
    name = served.loop.removeprefix("/dev/")
    assert Path(f"/sys/block/{name}/loop/dio").read_text().strip() == "1"
    backing = Path(f"/sys/block/{name}/loop/backing_file").read_text().strip()
    assert backing == str(served.disk.disk)
    mounts = [x.split() for x in Path("/proc/self/mounts").read_text().splitlines()]
    assert [m[2] for m in mounts if m[1] == str(served.disk.mountpoint)] == [emulated.FSTYPE]
    t = tally(served)
    assert t["realtime"] is True and t["timer_slack_1us"] is True, t
    assert t["tracks"] == G.tracks and t["params"] == P.as_dict()


def test_no_page_cache_serves_a_read_twice(served: Served) -> None:
    before = tally(served)
    for _ in range(2):  # the loop device, O_DIRECT
        subprocess.run(["dd", f"if={served.loop}", "of=/dev/null", "bs=4096", "count=1",
                        "skip=1000", "iflag=direct"], check=True, capture_output=True)  # fmt: skip
    for _ in range(2):  # the emulator's file itself, buffered: FUSE direct_io keeps no cache
        with open(served.disk.disk, "rb") as fh:
            fh.seek(8192 * 1000)
            assert len(fh.read(4096)) == 4096
    after = tally(served)
    assert since(before, after, "reads") == 4


def test_a_1mib_stream_reaches_the_emulator_in_128k_pieces_and_is_one_stream(
    served: Served,
) -> None:
    before = tally(served)
    fio(served, "--rw=read", "--bs=1M", "--offset=256M", "--size=16M", "--ioengine=psync")
    after = tally(served)
    assert since(before, after, "bytes_read") == 16 << 20
    sizes = {int(k): int(v) - int(before["sizes"].get(k, 0)) for k, v in after["sizes"].items()}  # type: ignore[union-attr]
    assert max(k for k, v in sizes.items() if v) <= 131072  # FUSE's 32-page requests
    assert since(before, after, "positioned") == 1  # the first piece only: no seek between
    assert since(before, after, "streamed") == since(before, after, "reads") - 1


def test_writes_reach_the_emulator_in_128k_pieces(served: Served) -> None:
    before = tally(served)
    fio(served, "--rw=write", "--bs=1M", "--offset=512M", "--size=8M", "--ioengine=psync")
    after = tally(served)
    assert since(before, after, "bytes_written") == 8 << 20
    sizes = {int(k): int(v) - int(before["sizes"].get(k, 0)) for k, v in after["sizes"].items()}  # type: ignore[union-attr]
    assert max(k for k, v in sizes.items() if v) == 131072  # big_writes: up to 128 KiB
    assert since(before, after, "positioned") == 1


def _service_spread(lo: int, hi: int, n: int = 20_000) -> float:
    """The standard deviation of one random 4K request's service time over [lo, hi), from
    the model's own draws."""
    head, rng = Head(G, seed=3), random.Random(3)
    draws = [head.serve(rng.randrange(lo, hi - 4096) & ~4095, 4096).total_s for _ in range(n)]
    mean = sum(draws) / n
    return math.sqrt(sum((d - mean) ** 2 for d in draws) / (n - 1))


def test_queue_depth_1_random_4k_reads_over_the_full_span(served: Served) -> None:
    """~86 IOPS: 1 / (mean seek over uniformly random offsets + half a revolution + 4K at the
    zone's rate). 5 s of fio."""
    before = tally(served)
    job = fio(served, "--rw=randread", "--bs=4k", "--ioengine=psync", "--runtime=5",
              "--time_based")  # fmt: skip
    after = tally(served)
    n = since(before, after, "reads")
    assert n == job["read"]["total_ios"]  # type: ignore[index]
    modelled = since(before, after, "service_s") / n
    expected = G.expected_random_s(4096)
    assert 1 / expected == pytest.approx(86.1, abs=0.2)
    assert abs(modelled - expected) < 4 * _service_spread(0, GIB) / math.sqrt(n)
    iops = float(job["read"]["iops"])  # type: ignore[index]
    assert SLOWEST / modelled <= iops <= FASTEST / modelled, (
        iops,
        1 / modelled,
        late(before, after),
    )


def test_track_to_track_and_full_stroke_latency(served: Served, tmp_path: Path) -> None:
    """Each request one track from the last (outer zone) costs the single-track seek, a share
    of a revolution and the transfer; each from one end to the other, the full stroke. 1 s
    and 2 s of fio."""
    for offsets, seek_ms in (
        ([-(-G.track_start(10 + i % 2) // 4096) * 4096 for i in range(1, 201)], P.single_track_ms),
        ([0 if i % 2 else GIB - 4096 for i in range(1, 101)], P.full_stroke_ms),
    ):
        # put the head where the pattern's last request would leave it: every request then
        # moves it by the pattern's distance
        fio(served, f"--read_iolog={iolog(served, tmp_path, offsets[-1:])}", "--ioengine=psync")
        before = tally(served)
        job = fio(served, f"--read_iolog={iolog(served, tmp_path, offsets)}",
                  "--replay_no_stall=1", "--ioengine=psync")  # fmt: skip
        after = tally(served)
        n = since(before, after, "positioned")
        assert n == len(offsets) == since(before, after, "reads")
        assert since(before, after, "seek_s") / n * 1000 == pytest.approx(seek_ms)
        rotation = since(before, after, "rotation_s") / n
        assert abs(rotation - G.rev_s / 2) < 4 * G.rev_s / math.sqrt(12 * n)
        modelled = since(before, after, "service_s") / n
        clat = float(job["read"]["clat_ns"]["mean"]) / 1e9  # type: ignore[index]
        assert modelled / FASTEST <= clat <= modelled / SLOWEST, (
            clat,
            modelled,
            late(before, after),
        )


@pytest.mark.parametrize("zone", ["outer", "inner"])
def test_sequential_rate_at_the_outer_and_inner_zone(served: Served, zone: str) -> None:
    """1 MiB reads streamed over 96 MiB at one end of the disk run at that zone's rate:
    163 MB/s falling to 156 over the first 96 MiB, 91 to 84 over the last. 0.6 s and 1.1 s."""
    lo = 0 if zone == "outer" else GIB - (96 << 20)
    before = tally(served)
    job = fio(served, "--rw=read", "--bs=1M", f"--offset={lo}", "--size=96M",
              "--ioengine=psync")  # fmt: skip
    after = tally(served)
    rate = 1 / G.expected_transfer_s(1, lo, lo + (96 << 20))  # bytes/s, the zone's mean
    # (each request at its start's rate: within 0.1% of the zone's integral)
    assert since(before, after, "transfer_s") == pytest.approx((96 << 20) / rate, rel=1e-3)
    assert since(before, after, "positioned") <= 1
    bw = float(job["read"]["bw_bytes"])  # type: ignore[index]
    assert SLOWEST_STREAM * rate <= bw <= FASTEST * rate, (
        bw / 1e6,
        rate / 1e6,
        late(before, after),
    )


def test_more_requests_in_flight_do_not_make_one_head_faster(served: Served) -> None:
    """One head, no reordering: 8 requests in flight give no more than 1 does. 3 s each."""
    figures = []
    for depth in (1, 8):
        before = tally(served)
        job = fio(served, "--rw=randread", "--bs=4k", "--ioengine=libaio", f"--iodepth={depth}",
                  "--runtime=3", "--time_based")  # fmt: skip
        after = tally(served)
        modelled = since(before, after, "service_s") / since(before, after, "reads")
        iops = float(job["read"]["iops"])  # type: ignore[index]
        assert iops <= FASTEST / modelled
        figures.append(iops * modelled)  # the share of the model's IOPS delivered
    assert figures[1] <= figures[0] * 1.05, figures


@pytest.mark.slow
def test_the_emulator_leaves_by_itself_once_nothing_uses_its_disk(
    tmp_path: Path, machine: None
) -> None:
    base = Path(tempfile.mkdtemp(prefix="pbtest-seekidle-", dir="/var/tmp"))
    try:
        d = emulated.EmulatedDisk(base / "seek0")
        d.mountpoint.mkdir()
        emulated.start(LocalRunner(), d, 64 << 20, P.as_dict(), idle_exit=1)
        pid = emulated.server_pid(d)
        assert pid is not None and os.path.ismount(d.mountpoint)
        deadline = __import__("time").monotonic() + 15
        while os.path.ismount(d.mountpoint) and __import__("time").monotonic() < deadline:
            __import__("time").sleep(0.1)
        assert not os.path.ismount(d.mountpoint)
        assert emulated.server_pid(d) is None and not d.pidfile.exists()
        assert "not open for 1 s: leaving" in d.log.read_text()
    finally:
        emulated.stop(LocalRunner(), base / "seek0")
        shutil.rmtree(base, ignore_errors=True)
