"""Per-member breakdown (guards/members.py): bytes/s while busy per member, and the member
more than 25% slower than its peers named. The real case throttles one loop device of a
3-way zfs-fuse mirror with a blkio cap (cgroup v2 io.max where the io controller is enabled,
else the v1 root blkio throttle, which also catches the daemon's and flushers' I/O)."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import needs_fio, poolbench, sh

from poolbench.guards.devices import Counters, read_counters
from poolbench.guards.members import MemberRate, rates, slow_members
from poolbench.system.runner import LocalRunner
from poolbench.zfs.pools import destroy as destroy_pool

MiB = 2**20


def _samples(per_second: dict[str, list[int]]) -> list[tuple[float, dict[str, Counters]]]:
    """Cumulative written MiB per member at t = 0, 1, 2, ... seconds."""
    n = len(next(iter(per_second.values())))
    return [(float(t), {k: Counters(0, v[t] * MiB) for k, v in per_second.items()})
            for t in range(n)]  # fmt: skip


def test_rates_are_bytes_over_the_time_each_member_was_moving() -> None:
    # a and b write 40 MiB in the first second and idle; c writes 10 MiB/s for four seconds.
    got = {m.name: m for m in rates(_samples({"a": [0, 40, 40, 40, 40], "b": [0, 40, 40, 40, 40],
                                              "c": [0, 10, 20, 30, 40]}))}  # fmt: skip
    assert (got["a"].busy_s, got["a"].mib_s) == (1.0, 40.0)
    assert (got["c"].busy_s, got["c"].mib_s) == (4.0, 10.0)
    warnings = slow_members(list(got.values()))
    assert len(warnings) == 1
    assert warnings[0].startswith("member c ") and "75% slower" in warnings[0]


def test_within_25_percent_is_not_flagged_and_idle_members_are_left_out() -> None:
    ms = [
        MemberRate("a", 0, 100 * MiB, 1.0),
        MemberRate("b", 0, 80 * MiB, 1.0),
        MemberRate("c", 0, 78 * MiB, 1.0),  # 22% below the median of a and b
        MemberRate("d", 1 * MiB, 0, 1.0),
    ]  # a raid1 side that was not read: not compared
    assert slow_members(ms) == []  # fmt: skip
    # b moved its 100 MiB in 1.43 s while a and c took 1 s and then waited for it.
    b_slow = [MemberRate("a", 0, 100 * MiB, 1.0), MemberRate("b", 0, 100 * MiB, 1.43),
              MemberRate("c", 0, 100 * MiB, 1.0)]  # fmt: skip
    assert slow_members(b_slow)[0].startswith("member b ")


def test_a_member_with_less_to_do_is_not_slow() -> None:
    """The demo's raidz1:4 at ashift 12, streaming read (zfs-fuse): two members read 25.4
    MiB, two 40.8 and 37.0, all busy 0.573 s. Flagged "35% slower" before the busy rule."""
    read = [MemberRate(f"loop{i}", int(mib * MiB), 0, 0.573)
            for i, mib in enumerate((25.4, 25.5, 40.8, 37.0))]  # fmt: skip
    assert slow_members(read) == []
    # The same with loop0 also busy a quarter longer than the others: it holds them up, as
    # far as counters read every 0.02 s can tell; read every 0.1 s, 0.147 s is 1.5 readings.
    held = [MemberRate("loop0", int(25.4 * MiB), 0, 0.72), *read[1:]]
    assert [w.split()[1] for w in slow_members(held, interval=0.02)] == ["loop0"]
    assert slow_members(held, interval=0.1) == []


# -- one window is evidence; the replicates together are the verdict --------------------------
def _window(per_tick: dict[str, list[float]], interval: float = 0.1) -> list[MemberRate]:
    """Member rates from synthetic counters read every `interval` s: per member, the MiB it
    wrote in each interval."""
    samples = [(0.0, {k: Counters(0, 0) for k in per_tick})]
    total = dict.fromkeys(per_tick, 0.0)
    for t in range(len(next(iter(per_tick.values())))):
        for k, v in per_tick.items():
            total[k] += v[t]
        samples.append(((t + 1) * interval, {k: Counters(0, int(total[k] * MiB))
                                              for k in per_tick}))  # fmt: skip
    return rates(samples)


def _replicates(windows: list[list[MemberRate]]) -> list[str]:
    from poolbench.engine import slow_members as rule
    from poolbench.guards.members import evidence

    return rule.named([{rule.KEY: evidence(w)} for w in windows])


def test_equal_disks_with_one_reading_of_jitter_are_never_flagged() -> None:
    """The demo's case: every member wrote the same ~32 MiB, one finished a reading later
    (0.284 against 0.384 s busy): 26% "slower" by one counter reading, in every replicate."""
    windows = []
    for late in range(4):  # a different member is the late one in each replicate
        ticks = {f"loop{i}": [11.0, 11.0, 10.0] + ([0.0] if i != late else [])
                 for i in range(4)}  # fmt: skip
        ticks[f"loop{late}"] = [8.0, 8.0, 8.0, 8.0]
        windows.append(_window(ticks))
    assert all(slow_members(w) == [] for w in windows)
    # Even the same member late by one reading in every replicate is not named.
    same = _window({"loop0": [8.0] * 4, "loop1": [11.0, 11.0, 10.0, 0.0],
                    "loop2": [11.0, 11.0, 10.0, 0.0]})  # fmt: skip
    assert _replicates([same] * 4) == []


def test_a_half_speed_member_is_flagged_in_every_replicate_and_named() -> None:
    """Three mirror members write 96 MiB each; the third at half its peers' speed (3 s of
    readings at 0.1 s against 1.5 s): flagged in every window, named across them."""
    half = _window({"a": [6.4] * 15 + [0.0] * 15, "b": [6.4] * 15 + [0.0] * 15, "c": [3.2] * 30})
    assert [w.split()[1] for w in slow_members(half)] == ["c"]
    named = _replicates([half] * 4)
    assert len(named) == 1 and named[0].startswith("member c ")
    assert "in 4 of 4 replicates" in named[0] and "50% slower" in named[0]


def test_a_member_slow_in_one_replicate_of_four_is_not_named() -> None:
    even = _window({"a": [6.4] * 15, "b": [6.4] * 15, "c": [6.4] * 15})
    half = _window({"a": [6.4] * 15 + [0.0] * 15, "b": [6.4] * 15 + [0.0] * 15, "c": [3.2] * 30})
    assert _replicates([half, even, even, even]) == []
    assert _replicates([half, half, even, even]) == []  # 2 of 4 is not a majority
    assert _replicates([half, half, half, even])[0].startswith("member c ")
    assert _replicates([half]) == []  # one replicate is never enough
    assert _replicates([half, half])[0].startswith("member c ")


def test_a_member_is_followed_by_its_place_in_the_pool_across_rebuilt_pools() -> None:
    """A study rebuilds the pool for each trial, on loop devices whose names may change: the
    third disk is slow in three trials though it was loop2, loop6 and loop9."""
    from poolbench.engine import slow_members as rule
    from poolbench.guards.members import evidence

    def trial(names: list[str]) -> dict[str, object]:
        ticks = {n: [6.4] * 15 + [0.0] * 15 for n in names[:2]} | {names[2]: [3.2] * 30}
        return {rule.KEY: evidence(_window(ticks))}

    got = rule.named([trial(["loop0", "loop1", "loop2"]), trial(["loop4", "loop5", "loop6"]),
                      trial(["loop7", "loop8", "loop9"])])  # fmt: skip
    assert got == [
        "member loop9 (disk 3 in the pool's order) was slower than its peers in 3 of 3 "
        "replicates (median 50% slower while busy): the pool waits for its slowest member, so "
        "this disk limits the figure"
    ]


def test_the_replicate_rule_reads_stored_rows_of_any_shape() -> None:
    from poolbench.engine import slow_members as rule

    assert rule.named([{}, {rule.KEY: "junk"}, {rule.KEY: {"slow": ["x"]}}]) == []
    assert [rule.needed(n) for n in (1, 2, 3, 4, 5)] == [2, 2, 2, 3, 3]


# -- real: one member of a mirror capped -----------------------------------------------------
IO_MAX = Path("/sys/fs/cgroup/unified/io.max")
BLKIO = Path("/sys/fs/cgroup/blkio")
CAP = 6 * MiB


def _cap(majmin: str, bps: int) -> None:
    if IO_MAX.exists():  # cgroup v2 with the io controller enabled at the root
        v = str(bps) if bps else "max"
        IO_MAX.write_text(f"{majmin} rbps={v} wbps={v}\n")
        return
    for kind in ("read_bps_device", "write_bps_device"):
        (BLKIO / f"blkio.throttle.{kind}").write_text(f"{majmin} {bps}\n")


@pytest.fixture
def mirror_one_capped(zfs_fuse: None, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    if not IO_MAX.exists() and not (BLKIO / "blkio.throttle.write_bps_device").exists():
        pytest.skip("neither cgroup v2 io.max nor the v1 blkio throttle is available")
    loops: list[str] = []
    majmin = ""
    mnt = tmp_path / "mnt"
    try:
        for i in range(3):
            img = tmp_path / f"m{i}.img"
            sh("truncate", "-s", "200M", str(img))
            loop = sh("losetup", "--find", "--show", "--direct-io=on", str(img)).stdout
            loops.append(loop.strip())
        st = os.stat(loops[2])
        majmin = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
        sh("zpool", "create", "-m", str(mnt), "pbslow", "mirror", *loops)
        _cap(majmin, CAP)
        yield mnt, os.path.basename(loops[2])
    finally:
        if majmin:
            _cap(majmin, 0)
        destroy_pool(LocalRunner(), "pbslow")
        for d in loops:
            sh("losetup", "--detach", d, check=False)


@needs_fio
def test_a_capped_mirror_member_is_named(
    mirror_one_capped: tuple[Path, str], tmp_path: Path
) -> None:
    mnt, slow = mirror_one_capped
    db = tmp_path / "r.db"
    p = poolbench("bench", str(mnt), "--size", "24M", "--workloads", "seq-write",
                  "--min-runs", "2", "--max-runs", "2", "--json", "--db", str(db))  # fmt: skip
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)["results"][0]
    flagged = [w for w in r["warnings"] if w.startswith("member ")]
    assert flagged and all(w.startswith(f"member {slow} ") for w in flagged), r["warnings"]
    # The breakdown is stored per measurement; the capped member ran at about its cap.
    rows = sqlite3.connect(db).execute("SELECT guards FROM measurements").fetchall()
    for (g,) in rows:
        members = json.loads(g)["members"]
        assert slow in members and len(members) == 3
        assert members[slow]["mib_s"] <= CAP / MiB * 1.3
        assert all(m["write_bytes"] >= 24 * MiB for m in members.values())  # a mirror: all


def test_the_sampler_reads_a_fake_sys_tree_and_survives_a_member_going_away(
    tmp_path: Path,
) -> None:
    from poolbench.guards.members import Sampler

    for name in ("loop8", "loop9"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "stat").write_text("0 0 0 0 0 0 0 0 0 0 0\n")
    s = Sampler(["loop8", "loop9"], interval=0.02, sys_block=tmp_path)
    s.start()
    (tmp_path / "loop8" / "stat").write_text("0 0 0 0 1 0 2048 0 0 0 0\n")  # 1 MiB written
    import time

    time.sleep(0.1)
    (tmp_path / "loop9" / "stat").unlink()  # gone mid-window: sampling stops, no crash
    time.sleep(0.1)
    assert s.stop() != [] and s.samples[-1][1]["loop8"].write_bytes == 1 * MiB


def test_member_rates_carry_read_requests_from_the_stat_file(tmp_path: Path) -> None:
    # Documentation/block/stat.rst: reads completed, reads merged, sectors read, ms reading,
    # writes completed, ... One member read 64 KiB in 16 requests, then 128 KiB in 2 more.
    stat = tmp_path / "loop7" / "stat"
    stat.parent.mkdir()
    stat.write_text("16 0 128 5 3 0 24 1 0 10 10 0 0 0 0 0 0\n")
    first = read_counters(["loop7"], tmp_path)
    assert first["loop7"] == Counters(128 * 512, 24 * 512, 16, 3)
    stat.write_text("18 0 384 9 3 0 24 1 0 12 12 0 0 0 0 0 0\n")
    (m,) = rates([(0.0, first), (0.5, read_counters(["loop7"], tmp_path))])
    assert (m.read_bytes, m.read_ios, m.write_bytes, m.busy_s) == (128 * 1024, 2, 0, 0.5)
    assert m.as_dict()["read_ios"] == 2  # kept in the measurement's guards JSON


def test_the_reports_name_a_member_only_across_replicates(tmp_path: Path) -> None:
    """Every report reads the cells of load_run: a member slow in 3 of 3 replicates of one
    configuration is named there, one slow in 1 of 3 of another is not."""
    from poolbench.engine import slow_members as rule
    from poolbench.records.findings import Findings
    from poolbench.records.measurement import Measurement
    from poolbench.report.data import load_run
    from poolbench.store.db import Store

    store = Store(tmp_path / "r.db")
    run_id = store.start_run("study", "s", ["poolbench"], {})
    slow = {rule.KEY: {"slow": {"loop2": {"slower": 0.5, "longer_s": 1.5}}}}
    even: dict[str, object] = {rule.KEY: {"slow": {}}}
    for config, guards in (("layout=mirror", [slow] * 3), ("layout=raidz1", [slow, even, even])):
        for rep, g in enumerate(guards):
            store.add_measurement(run_id, Measurement(
                config=config, workload="seq-write", replicate=rep, value=100.0, unit="MiB/s",
                app_bytes=MiB, ops=1, seconds=1.0, device_bytes=None, device_mib_s=None,
                warnings=[], findings=Findings.from_json(g), workload_def={}, job_file="",
            ))  # fmt: skip
    cells = load_run(store, str(run_id)).cells
    assert [w.split()[1] for w in cells[("layout=mirror", "seq-write")].warnings] == ["loop2"]
    assert cells[("layout=raidz1", "seq-write")].warnings == []
