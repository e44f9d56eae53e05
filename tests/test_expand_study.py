"""The expand study's notes from stored rows (pure): each expansion's usable space before and
after beside the planner's (planner/expansion.py, checked against OpenZFS 2.3 to the byte in
the guest tier), the reflow's time and rate, and what a new record costs. Its real runs are in
the guest tier (tests/guest/test_openzfs_expand.py): zfs-fuse cannot expand a raidz."""

from __future__ import annotations

from typing import Any

from poolbench.store.facts import facts_from_records
from poolbench.study.builtin import expand, registry
from poolbench.study.builtin.context import Context

MiB = 1 << 20
CTX = Context(4, "1G", dialect="openzfs")
KEY = "backend=zfs layout=raidz1:3 ashift=12"
VERSION = "zfs-2.3.2-2~bpo12+2"
# raidz1 of three 1 GiB files at ashift 12, grown to four (OpenZFS 2.3 rules, no partition)
PLANNED_AFTER = 2547515392


def _rows(after: int) -> list[dict[str, Any]]:
    pool = {"zfs_version": VERSION}
    section = {"vdev": "raidz1-0", "width_before": 3, "allocated_bytes": 96 * MiB,
               "usable_before": 1832386560, "usable_after": after, "seconds": 4.0}  # fmt: skip
    return [
        {"config": KEY, "workload": "expand", "replicate": 0, "value": 24.0,
         "guards": {"pool": pool, "expand": section}, "clat": None},
        {"config": KEY, "workload": "seq-read", "replicate": 0, "value": 100.0,
         "guards": {"pool": pool}, "clat": None},
    ]  # fmt: skip


def test_the_notes_put_each_expansion_beside_the_planner() -> None:
    meta = {"study_text": registry.study_text("expand", CTX)}
    facts = facts_from_records(meta, _rows(PLANNED_AFTER))
    (c,) = facts.configs
    (e,) = c.expansions
    assert (e.width_before, e.usable_after, e.seconds) == (3, PLANNED_AFTER, 4.0)
    lines = expand.notes(CTX, facts)
    assert lines[1] == (
        "  raidz1:3 (replicate 1), 3 → 4 disks: usable 1,747.5 MiB → 2,429.5 MiB; planner "
        "2,429.5 MiB after, reported +0.00%"
    )
    assert lines[2] == "    the reflow of 96.0 MiB allocated took 4 s (24.0 MiB/s)"
    # 128K at 3 wide: 32 data + 16 parity sectors, charged at the old ratio: 127.875K; at 4
    # wide 32 + 11 (+1 pad) sectors = 44, charged at the old ratio 44/48 of that: 117.2K
    assert "charged 117.2K of AVAIL, one written before 127.9K" in lines[3]
    off = expand.notes(CTX, facts_from_records(meta, _rows(PLANNED_AFTER - 64 * MiB)))
    assert off[1].endswith("reported -2.63%")


def test_no_expansion_no_notes() -> None:
    meta = {"study_text": registry.study_text("expand", CTX)}
    rows = [r for r in _rows(PLANNED_AFTER) if r["workload"] != "expand"]
    assert expand.notes(CTX, facts_from_records(meta, rows)) == []
