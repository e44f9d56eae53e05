"""One slow member on zfs-fuse, for real: three loop disks capped at 20 MiB/s, the first at
half of that (engine/slow_disk.py), under a 2-way mirror and a raidz1:3. The figures are held
to what the caps make them (study/builtin/slow_disk.expected: streaming writes at the slow
disk's pace × data disks; zfs-fuse's mirror reads split evenly over the sides, so 2 × the
slow side's rate), the slow-member guard flags the throttled disk or nothing, never a healthy
one, and no cap may outlive the run. (Measured before the healthy configurations were dropped
to save time: a healthy mirror read 36 MiB/s against 16 with one side at half of 16 MiB/s.)"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from statistics import mean
from typing import Any

import pytest
from tests.conftest import needs_fio, poolbench

from poolbench.engine import slow_members
from poolbench.study.builtin import slow_disk
from poolbench.system import throttle

pytestmark = needs_fio
# MiB/s: the study's default fraction, 1/2. Low caps: at 30/15 the 8 MiB mirror read came
# to 36.8 MiB/s, above the even split's 30 (short windows let the throttle's slices blur it).
PEER, SLOW = 20, 10

STUDY = f"""name = "slow-disk-real"
replicates = 2
max_replicates = 2
seed = 7
[disks]
count = 3
size = "128M"
source = "loop"
cap = {PEER}
[factors]
backend = ["zfs"]
layout = ["mirror:2", "raidz1:3"]
slow_member = [{100 * SLOW // PEER}]
[workloads]
names = ["seq-write", "seq-read"]
size = "8M"
min_window = 0
"""


def _rows(db: Path) -> dict[tuple[str, str], list[dict[str, Any]]]:
    con = sqlite3.connect(db)
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for config, workload, value, guards in con.execute(
        "SELECT config, workload, value, guards FROM measurements ORDER BY replicate"
    ):
        out.setdefault((config, workload), []).append({"value": value, **json.loads(guards)})
    return out


def test_one_slow_member_costs_what_the_caps_say_and_no_healthy_disk_is_flagged(
    zfs_fuse: None, tmp_path: Path
) -> None:
    study, db = tmp_path / "slow.toml", tmp_path / "r.db"
    study.write_text(STUDY)
    before = throttle.caps()
    p = poolbench("run", str(study), "--db", str(db), "--scratch-dir", str(tmp_path / "s"))
    assert p.returncode == 0, p.stdout + p.stderr
    rows = _rows(db)
    key = "backend=zfs layout={} slow_member=" + str(100 * SLOW // PEER)
    mirror, raidz = key.format("mirror:2"), key.format("raidz1:3")

    def figure(config: str, workload: str) -> float:
        return mean(r["value"] for r in rows[(config, workload)])

    for layout, config, workload in (("raidz1:3", raidz, "seq-write"),
                                     ("mirror:2", mirror, "seq-write"),
                                     ("mirror:2", mirror, "seq-read")):  # fmt: skip
        exp = slow_disk.expected(layout, 3, workload, SLOW, PEER, "zfs-fuse")
        assert exp is not None and exp.mib_s is not None
        got = figure(config, workload)
        print(f"{layout} {workload}: {got:.1f} MiB/s, expected {exp.text()}")
        if workload == "seq-write":  # at the slow disk's pace or below (fsync, txg waits)
            assert got <= exp.mib_s * 1.15, (layout, got)
        else:  # each side serves half: the slow side's rate × 2
            assert exp.mib_s * 0.85 <= got <= exp.mib_s * 1.15, (layout, got)
    # The guard: a window flags the throttled disk and never a healthy one. Naming it needs
    # a majority of windows where it was busy over 3 sampling intervals (0.3 s) longer than
    # its peers; at 8M per window the computed gap is 0.2 s (mirror read: 4 MiB at 10 against
    # 20 MiB/s), so the majority is not asserted here (measured: 1 of 2 mirror-read windows
    # flagged it; raidz1 writes showed it 40% slower while busy but 0.2 s longer). The
    # study's notes say so from the same model (study/builtin/slow_guard.py, whose rule
    # tests/test_slow_guard.py holds against the guard); the guest test's 16M windows at
    # 4/2 MiB/s give 2-4 s and assert the name.
    for config in (mirror, raidz):
        device = rows[(config, "seq-write")][0]["slow_member"]["device"]
        assert rows[(config, "seq-write")][0]["slow_member"]["cap_mib_s"] == SLOW
        for wl in ("seq-write", "seq-read"):
            for r in rows[(config, wl)]:
                slow = set(r["members_slow"].get("slow") or {})
                assert slow <= {device}, (config, wl, slow)
            named = slow_members.named(rows[(config, wl)])
            assert all(w.startswith(f"member {device} ") for w in named), named
    assert throttle.caps() == before


@pytest.fixture(autouse=True)
def _no_stale_caps() -> None:
    if throttle.unavailable():
        pytest.skip(throttle.unavailable())
