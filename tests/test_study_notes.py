"""The built-in studies' notes as pure functions of (Context, StudyFacts), and the one function
that builds StudyFacts from the store. No root, no pools: the facts are written by hand (or
stored in a temporary SQLite store) and each sentence is computed and asserted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from poolbench.planner.capacity import predicted_usable
from poolbench.records.findings import Findings
from poolbench.records.measurement import Measurement
from poolbench.records.sections import Fill, Resilver
from poolbench.store.db import Store
from poolbench.store.facts import (
    MEMBER_DISKS,
    ConfigFacts,
    DiskSectors,
    StudyFacts,
    facts_from_records,
    study_facts,
)
from poolbench.study.builtin import (
    ashift,
    capacity,
    compression,
    fill,
    fs_compare,
    registry,
    resilver,
    width,
)
from poolbench.study.builtin.context import Context

MiB = 1 << 20
CTX = Context(4, "128M")


def _facts(*configs: ConfigFacts, sectors: tuple[DiskSectors, ...] | None = ()) -> StudyFacts:
    return StudyFacts("t", "loop", 4, 128 * MiB, tuple(configs), sectors)


def _cfg(key: str, **kw: Any) -> ConfigFacts:
    levels = dict(kv.split("=", 1) for kv in key.split())  # test data only
    return ConfigFacts(key, levels, **kw)


# -- capacity: the planner's prediction beside the reported bytes -----------------------------
def test_capacity_note_sets_the_planner_beside_what_the_pool_reported() -> None:
    p9 = predicted_usable("raidz1", 9, 4, 128 * MiB, "zfs-fuse 0.7.2")
    p12 = predicted_usable("raidz1", 12, 4, 128 * MiB, "zfs-fuse 0.7.2")
    assert p9 > p12  # ashift 12 pads raidz blocks to 4K sectors: less usable space
    off = p12 - p12 // 50  # 2% less than predicted
    facts = _facts(
        _cfg("backend=zfs layout=raidz1 ashift=9", usable_bytes=p9, zfs_version="zfs-fuse 0.7.2"),
        _cfg("backend=zfs layout=raidz1 ashift=12", usable_bytes=off, zfs_version="zfs-fuse"),
        _cfg("backend=zfs layout=raidz1 ashift=13"),  # no capacity figure: no line
    )
    lines = capacity.notes(CTX, facts)
    assert lines[0].startswith("usable space as the pool reports it")
    assert lines[1] == (
        f"  backend=zfs layout=raidz1 ashift=9: {p9 / MiB:,.1f} MiB; "
        f"planner {p9 / MiB:,.1f} MiB (reported +0.00%)"
    )
    pct = (off - p12) / p12 * 100
    assert -2.01 < pct < -1.99
    assert lines[2] == (
        f"  backend=zfs layout=raidz1 ashift=12: {off / MiB:,.1f} MiB; "
        f"planner {p12 / MiB:,.1f} MiB (reported {pct:+.2f}%)"
    )
    assert len(lines) == 3


def test_capacity_note_on_real_whole_disks_uses_the_whole_disk_rule() -> None:
    # OpenZFS partitions a whole disk: on 300 MiB disks that costs whole metaslabs, so the
    # note must predict with the planner's whole-disk rule, as the guest tier's real pools
    # report (tests/guest/test_openzfs_studies.py checks it to the byte).
    from poolbench.planner.capacity import plan_pool
    from poolbench.planner.layout import parse_layout
    from poolbench.planner.rules import parse_zfs_version

    disk, version = 300 * MiB, "zfs-2.3.2-2~bpo12+2"
    layout = parse_layout("raidz1", (disk,) * 4)
    whole = plan_pool(layout, 12, parse_zfs_version("2.3.2"), whole_disk=True).usable_bytes
    bare = plan_pool(layout, 12, parse_zfs_version("2.3.2")).usable_bytes
    assert whole < bare
    key = "backend=zfs layout=raidz1 ashift=12"
    cfg = _cfg(key, usable_bytes=whole, zfs_version=version)
    devices = StudyFacts("capacity", "devices", 4, disk, (cfg,), ())
    assert capacity.notes(CTX, devices)[1] == (
        f"  {key}: {whole / MiB:,.1f} MiB; planner {whole / MiB:,.1f} MiB (reported +0.00%)"
    )
    # Partitions poolbench made: the planner is not told their size, so it does not guess.
    parts = StudyFacts("capacity", "devices", 4, disk, (cfg,), (), vdev_source="partition")
    assert capacity.notes(CTX, parts)[1].endswith(
        "planner n/a (the members are partitions poolbench made; the planner is given whole disks)"
    )


def test_capacity_note_says_na_where_the_planner_cannot_answer() -> None:
    facts = _facts(_cfg("backend=btrfs layout=parity1", usable_bytes=300 * MiB))
    (_, line) = capacity.notes(CTX, facts)
    assert line.startswith("  backend=btrfs layout=parity1: 300.0 MiB; planner n/a (")
    assert "'parity1' is not a vdev type" in line
    unknown = StudyFacts("t", "devices", 4, None, facts.configs, ())
    assert capacity.notes(CTX, unknown)[1].endswith("n/a (the disks' size was not recorded)")
    assert capacity.notes(CTX, _facts(_cfg("backend=zfs layout=raidz1"))) == []


# -- ashift: the 512e explanation only for 512/4096 disks ---------------------------------------
@pytest.mark.parametrize(
    ("sectors", "expect"),
    [
        ((DiskSectors("sdb", 512, 4096), DiskSectors("sdc", 512, 4096)), "512e drives (sdb, sdc)"),
        ((DiskSectors("sdb", 512, 4096), DiskSectors("nvme0n1", 4096, 4096)), "512e drives (sdb)"),
        ((DiskSectors("loop0", 512, 512),), "sectors of 512/512 bytes: not 512e"),
        (
            (DiskSectors("sdb", 4096, 4096), DiskSectors("sdc", 512, 512)),
            "sectors of 4096/4096, 512/512 bytes: not 512e",
        ),
        ((), "The members are plain files"),
        (None, "This run did not record its disks' sector sizes"),
    ],
)
def test_ashift_512e_note_follows_the_recorded_sector_sizes(
    sectors: tuple[DiskSectors, ...] | None, expect: str
) -> None:
    lines = ashift.notes(CTX, _facts(sectors=sectors))
    assert len(lines) == 1 and expect in lines[0]
    explains_rmw = "must read-modify-write" in lines[0]
    assert explains_rmw == any(d.logical == 512 and d.physical == 4096 for d in sectors or ())


def test_ashift_notes_end_with_the_capacity_table() -> None:
    p = predicted_usable("raidz1", 12, 4, 128 * MiB, "")
    facts = _facts(_cfg("backend=zfs layout=raidz1 ashift=12", usable_bytes=p))
    lines = ashift.notes(CTX, facts)
    assert lines[1:] == capacity.notes(CTX, facts) and len(lines) == 3


# -- width: the 2^n rule per raidz vdev ---------------------------------------------------------
def test_width_note_counts_data_disks_per_vdev() -> None:
    facts = _facts(
        _cfg("backend=zfs layout=raidz1:4 ashift=12"),
        _cfg("backend=zfs layout=raidz2:6+raidz2:4 ashift=12"),
        _cfg("backend=zfs layout=raidz1:4 ashift=9"),  # the same layout once
        _cfg("backend=zfs layout=mirror:2 ashift=12"),  # no raidz: nothing to judge
    )
    assert width.notes(CTX, facts) == [
        "the 2^n rule: a raidz vdev with a power-of-two number of data disks",
        "  raidz1:4: raidz1:4: 3 data disks, off",
        "  raidz2:6+raidz2:4: raidz2:6: 4 data disks, on; raidz2:4: 2 data disks, on",
        "  mirror:2: no raidz vdev",
    ]


# -- compression, fill, resilver, fs-compare ----------------------------------------------------
def test_compression_note_reports_the_ratio_after_writes_only() -> None:
    facts = _facts(
        _cfg(
            "backend=zfs compression=gzip compressibility=50",
            compressratios={"seq-write": (1.9, 1.91, 1.9), "seq-read": (7.0,)},
        ),
        _cfg("backend=zfs compression=off compressibility=0", compressratios={"seq-read": (1,)}),
    )
    lines = compression.notes(CTX, facts)
    assert lines[:2] == [
        "achieved compressratio after the writes (zfs get compressratio):",
        "  backend=zfs compression=gzip compressibility=50: 1.90x, 1.91x",
    ]
    assert "buffer_compress_percentage" in lines[2] and len(lines) == 3
    assert compression.notes(CTX, _facts(_cfg("backend=zfs compression=off"))) == []


def test_fill_note_gives_asked_achieved_and_filler() -> None:
    facts = _facts(
        _cfg("backend=zfs layout=raidz1 fill=50", fill=Fill(50, 49.5, 160 * MiB)),
        _cfg("backend=zfs layout=raidz1 fill=10", fill=Fill(10, 10.25, 32 * MiB + 1)),
    )
    assert fill.notes(CTX, facts) == [
        "fill levels reached before measuring:",
        "  backend=zfs layout=raidz1 fill=50: asked 50%, achieved 49.5% (160 MiB of filler)",
        "  backend=zfs layout=raidz1 fill=10: asked 10%, achieved 10.25% (32 MiB of filler)",
    ]
    assert fill.notes(CTX, _facts(_cfg("backend=zfs fill=10"))) == []


def test_resilver_note_lists_every_trial() -> None:
    facts = _facts(
        _cfg(
            "backend=zfs layout=mirror:2",
            resilvers=(Resilver(0, 21 * MiB, 1.5), Resilver(1, 20 * MiB + MiB // 2, None)),
        )
    )
    assert resilver.notes(CTX, facts) == [
        "resilver: bytes and time per trial",
        "  backend=zfs layout=mirror:2 (replicate 1): 21.0 MiB resilvered in 1.5 s",
        "  backend=zfs layout=mirror:2 (replicate 2): 20.5 MiB resilvered in ? s",
    ]
    rebuilt = Resilver(0, 80 * MiB, 5.2, "sequential rebuild to a distributed spare", 5.1)
    unscrubbed = Resilver(1, 80 * MiB, 5.0, "sequential rebuild to a distributed spare")
    facts = _facts(_cfg("backend=zfs layout=draid1:2d:5c:1s", resilvers=(rebuilt, unscrubbed)))
    assert resilver.notes(CTX, facts)[1:] == [
        "  backend=zfs layout=draid1:2d:5c:1s (replicate 1): 80.0 MiB resilvered in 5.2 s "
        "(sequential rebuild to a distributed spare; the verifying scrub: 5.1 s more)",
        "  backend=zfs layout=draid1:2d:5c:1s (replicate 2): 80.0 MiB resilvered in 5 s "
        "(sequential rebuild to a distributed spare; the verifying scrub: none followed)",
    ]


def test_fs_compare_says_why_md_is_left_out() -> None:
    assert fs_compare.pre_notes(CTX) == []
    ctx = Context(4, "1G", has_md=False, md_reason="no md driver here")
    assert fs_compare.pre_notes(ctx) == [
        "md raid5/raid6 with ext3, ext4 and xfs is left out: no md driver here. The ZFS and "
        "btrfs stacks run."
    ]


# -- StudyFacts from the store ------------------------------------------------------------------
STUDY_TEXT = """name = "ashift"
[disks]
count = 4
size = "128M"
[factors]
backend = ["zfs"]
layout = ["raidz1"]
ashift = [9, 12]
[workloads]
names = ["seq-write", "capacity"]
size = "16M"
"""
K9, K12 = "backend=zfs layout=raidz1 ashift=9", "backend=zfs layout=raidz1 ashift=12"


def _m(config: str, workload: str, rep: int, value: float, guards: dict[str, Any]) -> Measurement:
    return Measurement(
        config,
        workload,
        rep,
        value,
        "MiB/s",
        1,
        1,
        1.0,
        None,
        None,
        [],
        Findings.from_json(guards),
        {},
        "",
    )


def _loop(name: str, lo: int = 512, ph: int = 512) -> dict[str, Any]:
    return {"name": name, "logical_sector": lo, "physical_sector": ph, "size_bytes": 128 * MiB}


def test_study_facts_from_a_stored_run(tmp_path: Path) -> None:
    store = Store(tmp_path / "r.db")
    run = store.start_run("study", "ashift", ["poolbench"], {"study_text": STUDY_TEXT})
    pool = {"usable_bytes": 300 * MiB, "zfs_version": "zfs-fuse 0.7.2", "compressratio": "1.00x"}
    members = [_loop("loop0"), _loop("loop1")]
    rows = [  # stored in trial order, not study order; replicate 1 before replicate 0
        (K12, "seq-write", 1, 80.0, {"pool": pool, MEMBER_DISKS: members}),
        (K12, "seq-write", 0, 90.0, {"pool": pool, MEMBER_DISKS: members}),
        (K12, "capacity", 0, 300.0, {"pool": {}, "capacity": {"usable_bytes": 301 * MiB}}),
        (K9, "seq-write", 0, 70.0, {"pool": {**pool, "compressratio": "1.05"}}),
        (K9, "seq-write", 1, 71.0, {"pool": pool, MEMBER_DISKS: [_loop("loop1"), _loop("loop2")]}),
    ]
    for key, w, rep, value, guards in rows:
        store.add_measurement(run, _m(key, w, rep, value, guards))
    facts = study_facts(store, run)
    store.close()
    assert (facts.study, facts.disk_source, facts.disk_count, facts.disk_bytes) == (
        "ashift", "loop", 4, 128 * MiB
    )  # fmt: skip
    assert [c.key for c in facts.configs] == [K9, K12]  # the study's order: ashift 9, 12
    c9, c12 = facts.configs
    assert dict(c9.levels) == {"backend": "zfs", "layout": "raidz1", "ashift": "9"}
    assert c12.figures == {"seq-write": (90.0, 80.0), "capacity": (300.0,)}
    # The capacity workload's own figure, before the pool description read back at creation.
    assert c12.usable_bytes == 301 * MiB and c9.usable_bytes == 300 * MiB
    assert c12.zfs_version == "zfs-fuse 0.7.2"
    assert c9.compressratios == {"seq-write": (1.05, 1.0)}
    assert [d.name for d in facts.sectors or ()] == ["loop0", "loop1", "loop2"]
    note = ashift.sector_note(facts)
    assert note.startswith("These disks report logical/physical sectors of 512/512 bytes")


def test_facts_without_recorded_disks_say_so_and_devices_bring_their_own() -> None:
    rows = [{"config": K9, "workload": "capacity", "replicate": 0, "value": 1.0, "guards": {}}]
    facts = facts_from_records({"study_text": STUDY_TEXT}, rows)
    assert facts.sectors is None and facts.configs[0].usable_bytes is None
    assert facts.configs[0].rows == tuple(rows)  # what a factor's study decodes its section from
    assert "did not record" in ashift.sector_note(facts)
    devices = STUDY_TEXT.replace('count = 4\nsize = "128M"', 'source = "devices"\n'
                                 'devices = ["/dev/sdb", "/dev/sdc", "/dev/sdd"]')  # fmt: skip
    claims = [_loop("sdb", 512, 4096), _loop("sdc", 512, 4096), _loop("sdd", 4096, 4096)]
    claims[2]["size_bytes"] = 100 * MiB
    meta = {"study_text": devices, "claims": {"claims": claims, "overrides": []}}
    facts = facts_from_records(meta, rows)
    assert (facts.disk_source, facts.disk_count, facts.disk_bytes) == ("devices", 3, 100 * MiB)
    assert "512e drives (sdb, sdc)" in ashift.sector_note(facts)


# -- the registry and the CLI's options ---------------------------------------------------------
def test_every_study_option_reaches_the_cli() -> None:
    from poolbench.cli.study_cmd import study

    options = registry.cli_options()
    cli_names = {o.name for o in study.params}
    for b in registry.STUDIES.values():
        for key in b.options:
            assert key in options and key in cli_names, (b.name, key)
    help_text = CliRunner().invoke(study, ["--help"]).output
    assert "--slice-size" in help_text and "(vdev-source) size of the slice" in help_text


@pytest.mark.parametrize("name", ["parity", "ashift", "width", "capacity"])  # no dialect levels
def test_print_toml_is_the_example_study(name: str) -> None:
    from poolbench.cli.study_cmd import study
    from poolbench.study.model import parse

    # as a user's shell has it: no POOLBENCH_MIN_WINDOW (the suite's 0 would be printed)
    out = CliRunner().invoke(study, [name, "--print-toml"], env={"POOLBENCH_MIN_WINDOW": None})
    assert out.exit_code == 0, out.output
    assert out.output == registry.example_text(name)
    example = (Path(__file__).resolve().parent.parent / "examples" / f"{name}.toml").read_text()
    assert parse(out.output) == parse(example) and out.output == example
