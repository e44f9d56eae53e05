"""The special study's notes from stored rows (pure): the figures with a special mirror against
the pool alone, and how full the special class got, from each workload's last replicate's
`class_alloc` (read back from `zpool iostat -v` on OpenZFS). Its real runs are in the guest
tier (tests/guest/test_openzfs_special.py): zfs-fuse has no allocation classes."""

from __future__ import annotations

from typing import Any

from poolbench.store.facts import facts_from_records
from poolbench.study.builtin import registry, special
from poolbench.study.builtin.context import Context

MiB = 1 << 20
CTX = Context(5, "1G", dialect="openzfs")
BASE = "backend=zfs layout=raidz1:3 ashift=12 recordsize=128K special_small_blocks=0"
WITH = "backend=zfs layout=raidz1:3 + special mirror:2 ashift=12 recordsize=128K "


def _row(config: str, workload: str, rep: int, value: float, **alloc: int) -> dict[str, Any]:
    guards = {"pool": {"class_alloc": alloc}} if alloc else {}
    return {"config": config, "workload": workload, "replicate": rep, "value": value,
            "guards": guards, "clat": None}  # fmt: skip


def test_the_notes_compare_with_the_pool_alone_and_say_how_full_the_special_class_got() -> None:
    meta = {"study_text": registry.study_text("special", CTX)}
    w = "smallfile-write-8k"
    rows = [
        _row(BASE, w, 0, 500.0, normal=60 * MiB),
        _row(BASE, w, 1, 520.0, normal=62 * MiB),
        # replicate 0's figure is older: the fill note reads the last replicate's
        _row(WITH + "special_small_blocks=16K", w, 1, 1530.0, normal=16 * MiB, special=8 * MiB),
        _row(WITH + "special_small_blocks=16K", w, 0, 1530.0, normal=10 * MiB, special=4 * MiB),
        _row(WITH + "special_small_blocks=0", w, 0, 600.0, normal=64 * MiB, special=1 * MiB),
        _row(WITH + "special_small_blocks=0", w, 1, 600.0, normal=64 * MiB, special=1 * MiB),
    ]
    facts = facts_from_records(meta, rows)
    by = {c.level("special_small_blocks"): c for c in facts.configs if "+" in c.level("layout")}
    assert by["16K"].class_alloc == {w: {"normal": 16 * MiB, "special": 8 * MiB}}
    lines = special.notes(CTX, facts)
    # 1530 files/s against the pool alone's mean of 510: three times as fast, and the
    # replicates say so; 600 against 510 is within their noise
    assert (
        f"  special_small_blocks=16K, {w}: 1,530.0 ops/s vs 510.0 ops/s without: 3.00× faster "
        "(CI 2.40–4.00×)" in lines
    )
    assert (
        f"  special_small_blocks=0, {w}: 600.0 ops/s vs 510.0 ops/s without: no significant "
        "difference (1.18× faster; CI 0.94–1.57×)" in lines
    )
    # 8 MiB of special beside 16 MiB on the data vdevs: 512 MiB per GiB; 1 of 64: 16 per GiB
    assert any("special_small_blocks=16K, after smallfile-write-8k: special 8.0 MiB, data "
               "vdevs 16.0 MiB: 512 MiB of special per GiB" in x for x in lines)  # fmt: skip
    assert any("special_small_blocks=0, after smallfile-write-8k: special 1.0 MiB" in x
               and ": 16 MiB of special per GiB" in x for x in lines)  # fmt: skip
    assert "cannot be removed" in lines[-1]
    # how full the special class is, from what iostat says is still free there; past 75%
    # OpenZFS sends small blocks to the data vdevs again, and the note says so
    rows.append(_row(WITH + "special_small_blocks=16K", "smallfile-read-8k", 1, 2000.0,
                     normal=16 * MiB, special=8 * MiB))  # fmt: skip
    rows[-1]["guards"]["pool"]["class_free"] = {"normal": 900 * MiB, "special": 24 * MiB}
    rows.append(_row(WITH + "special_small_blocks=16K", "smallfile-write-32k", 1, 900.0,
                     normal=40 * MiB, special=26 * MiB))  # fmt: skip
    rows[-1]["guards"]["pool"]["class_free"] = {"normal": 800 * MiB, "special": 6 * MiB}
    lines = special.notes(CTX, facts_from_records(meta, rows))
    assert (
        "  special_small_blocks=16K, after smallfile-read-8k: special 8.0 MiB (25.0% of its "
        "32 MiB), data vdevs 16.0 MiB: 512 MiB of special per GiB on the data vdevs"
    ) in lines
    assert any("after smallfile-write-32k: special 26.0 MiB (81.2% of its 32 MiB, past the "
               "threshold: new small blocks go to the data vdevs)" in x for x in lines)  # fmt: skip
    # every small file on the special vdev, (almost) nothing on the data vdevs: no ratio
    rows.append(_row(WITH + "special_small_blocks=16K", "meta-create-seq", 1, 900.0,
                     normal=512 * 1024, special=2 * MiB))  # fmt: skip
    lines = special.notes(CTX, facts_from_records(meta, rows))
    assert ("  special_small_blocks=16K, after meta-create-seq: special 2.0 MiB, data vdevs "
            "0.5 MiB (too little on the data vdevs for a per-GiB figure)") in lines  # fmt: skip


def test_without_recorded_allocations_the_note_says_so() -> None:
    meta = {"study_text": registry.study_text("special", CTX)}
    rows = [_row(BASE, "meta-stat-seq", r, 100.0) for r in (0, 1)]
    rows += [_row(WITH + "special_small_blocks=0", "meta-stat-seq", r, 150.0) for r in (0, 1)]
    lines = special.notes(CTX, facts_from_records(meta, rows))
    assert "1.50× faster; undetermined: the replicates are identical" in lines[1]
    assert lines[-1].startswith("how full the special class got: not recorded")
