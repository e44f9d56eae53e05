"""One slow member on zfs-fuse, for real: three loop disks capped at 16 MiB/s, the first at
half of that in the slow configurations (engine/slow_disk.py), a 2-way mirror with and
without it and a raidz1:3 with it. The figures are held to what the caps make them
(study/builtin/slow_disk.expected), the slow-member guard must name the throttled disk, and
no cap may outlive the run."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from statistics import mean
from typing import Any

import pytest
from tests.conftest import needs_fio, needs_root, poolbench

from poolbench.engine import slow_members
from poolbench.store.db import Store
from poolbench.store.facts import study_facts
from poolbench.study.builtin import slow_disk
from poolbench.study.builtin.context import Context
from poolbench.system import throttle

pytestmark = [needs_root, needs_fio]
PEER, SLOW = 16, 8  # MiB/s

STUDY = f"""name = "slow-disk-real"
replicates = 2
max_replicates = 2
seed = 7
exclude = [{{layout = "raidz1:3", slow_member = 100}}]
[disks]
count = 3
size = "128M"
source = "loop"
cap = {PEER}
[factors]
backend = ["zfs"]
layout = ["mirror:2", "raidz1:3"]
slow_member = [100, {100 * SLOW // PEER}]
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


def test_one_slow_member_costs_what_the_caps_say_and_is_named(
    zfs_fuse: None, tmp_path: Path
) -> None:
    study, db = tmp_path / "slow.toml", tmp_path / "r.db"
    study.write_text(STUDY)
    before = throttle.caps()
    p = poolbench("run", str(study), "--db", str(db), "--scratch-dir", str(tmp_path / "s"))
    assert p.returncode == 0, p.stdout + p.stderr
    rows = _rows(db)
    key = "backend=zfs layout={} slow_member={}"
    healthy, slowed, raidz = (key.format("mirror:2", 100), key.format("mirror:2", 50),
                              key.format("raidz1:3", 50))  # fmt: skip
    # raidz1 streams at the slow disk's pace: 8 MiB/s × 2 data disks, at most.
    write = mean(r["value"] for r in rows[(raidz, "seq-write")])
    exp = slow_disk.expected("raidz1:3", 3, "seq-write", SLOW, PEER, "zfs-fuse")
    assert exp is not None and exp.mib_s == SLOW * 2
    assert write <= exp.mib_s * 1.15, write
    # A mirror write waits for both sides: the slow one's cap.
    assert mean(r["value"] for r in rows[(slowed, "seq-write")]) <= SLOW * 1.15
    # Mirror reads, against the same mirror without the slow member.
    ratio = mean(r["value"] for r in rows[(slowed, "seq-read")]) / mean(
        r["value"] for r in rows[(healthy, "seq-read")]
    )
    exp = slow_disk.expected("mirror:2", 3, "seq-read", SLOW, PEER, "zfs-fuse")
    assert exp is not None
    assert exp.ratio * 0.85 <= ratio <= 1.1, ratio
    # The guard names the throttled disk: the first in the pool's order, in both layouts.
    for config in (slowed, raidz):
        got = rows[(config, "seq-write")]
        device = got[0]["slow_member"]["device"]
        assert got[0]["slow_member"]["cap_mib_s"] == SLOW
        named = slow_members.named(got)
        assert len(named) == 1 and named[0].startswith(f"member {device} "), named
    assert not any(slow_members.named(rows[(healthy, w)]) for w in ("seq-write", "seq-read"))
    # The notes say it from the stored facts, and no cap is left behind.
    store = Store(db, mode="read")
    try:
        notes = slow_disk.notes(Context(3, "128M", dialect="zfs-fuse"), study_facts(store, 1))
    finally:
        store.close()
    assert any(line.startswith("  mirror:2: with the slow member") for line in notes), notes
    assert any("the guard flagged disk 1 slow in 2 of 2 replicates" in line for line in notes)
    assert throttle.caps() == before


@pytest.fixture(autouse=True)
def _no_stale_caps() -> None:
    if throttle.unavailable():
        pytest.skip(throttle.unavailable())
