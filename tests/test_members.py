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
from tests.conftest import needs_fio, needs_root, poolbench, sh

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
    # The same with loop0 also busy a quarter longer than the others: it holds them up.
    held = [MemberRate("loop0", int(25.4 * MiB), 0, 0.72), *read[1:]]
    assert [w.split()[1] for w in slow_members(held)] == ["loop0"]


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
@needs_root
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
