"""The random-I/O studies (sync-slog, geometry, qd-curve) and the workloads they added (issue 15):
sync/dsync writes, the 70/30 mix, -qdN/-jN loads. Pure: study files, refusals on zfs-fuse,
job files, fio parsing of a recorded randrw run, and each note computed from hand-written
facts. The real runs at a small scale are in test_studies_builtin.py (SMALL)."""

from __future__ import annotations

import configparser
import json
from pathlib import Path
from typing import Any

import pytest

from poolbench.errors import EXIT_UNSUPPORTED, UsageError
from poolbench.guards.devices import Counters, check
from poolbench.planner.capacity import plan_pool
from poolbench.planner.layout import parse_layout
from poolbench.planner.rules import rules_for_reported
from poolbench.store.facts import ConfigFacts, StudyFacts
from poolbench.study import matrix
from poolbench.study.builtin import geometry, qd_curve, registry, sync_slog
from poolbench.study.builtin.context import Context
from poolbench.study.model import parse
from poolbench.workloads import fiojob
from poolbench.workloads.fioparse import parse as parse_fio
from poolbench.workloads.library import get

DATA = Path(__file__).parent / "data"
PARAMS = fiojob.JobParams(directory="/mnt/x", size_bytes=64 << 20, iodepth=2, numjobs=3)
MiB = 1 << 20
FUSE = "zfs-fuse"


def _job(name: str, params: fiojob.JobParams = PARAMS) -> dict[str, str]:
    cp = configparser.ConfigParser(interpolation=None)
    cp.read_string(fiojob.render(get(name), params))
    return dict(cp["global"])


# -- workloads -----------------------------------------------------------------------------------
def test_sync_write_fsyncs_every_write_and_dsync_opens_o_dsync() -> None:
    g = _job("sync-write-16k-j4")
    assert (g["rw"], g["bs"], g["fsync"], g["numjobs"], g["end_fsync"]) == (
        "randwrite",
        "16384",
        "1",
        "4",
        "1",
    )
    assert "sync" not in g and g["ioengine"] == "psync"  # one write at a time per job
    d = _job("dsync-write-128k")
    assert (d["sync"], d["bs"], d["numjobs"]) == ("dsync", "131072", "3")  # the study's jobs
    assert "fsync" not in d
    assert get("sync-write-4k").needs_data and get("sync-write-4k").time_based


def test_load_suffix_overrides_the_study_queue_depth_and_jobs() -> None:
    g = _job("rand-read-4k-qd8-j4")
    assert (g["ioengine"], g["iodepth"], g["direct"], g["numjobs"]) == ("libaio", "8", "1", "4")
    plain = _job("rand-read-4k")  # no suffix: the study's iodepth 2 and 3 jobs
    assert (plain["iodepth"], plain["numjobs"]) == ("2", "3")
    qd1 = _job("rand-read-4k-qd1", fiojob.JobParams(directory="/x", size_bytes=1 << 26))
    assert qd1["ioengine"] == "psync" and "iodepth" not in qd1 and "numjobs" not in qd1
    for bad in ("rand-read-4k-qd0", "rand-read-4k-j0", "rand-read-4k-j257", "rand-mix0-4k"):
        with pytest.raises(UsageError):
            get(bad)


def test_mix_is_randrw_cold_durable_and_counts_both_halves() -> None:
    w = get("rand-mix70-16k-j2")
    g = _job(w.name)
    assert (g["rw"], g["rwmixread"], g["bs"], g["numjobs"], g["end_fsync"]) == (
        "randrw",
        "70",
        "16384",
        "2",
        "1",
    )
    assert w.direction == "mixed" and w.cold and w.needs_data and w.unit == "IOPS"
    data = json.loads((DATA / "fio-randrw-mix70.json").read_text())["jobs"][0]
    r = parse_fio((DATA / "fio-randrw-mix70.json").read_text(), "mixed")
    reads, writes = data["read"]["total_ios"], data["write"]["total_ios"]
    assert r.total_ios == reads + writes and reads > 0 and writes > 0
    assert r.io_bytes == data["read"]["io_bytes"] + data["write"]["io_bytes"]
    assert 0.6 < reads / (reads + writes) < 0.8  # rwmixread=70
    lat = (data["read"]["lat_ns"]["mean"] * reads + data["write"]["lat_ns"]["mean"] * writes) / (
        reads + writes
    )
    assert r.lat_mean_ns == pytest.approx(lat)
    # The device check counts both directions for a mix, one for a read.
    io = Counters(read_bytes=70 * MiB, write_bytes=31 * MiB)
    assert check("mixed", 100 * MiB, io, 1.0).warning == ""
    assert check("read", 100 * MiB, io, 1.0).warning != ""


# -- study files ---------------------------------------------------------------------------------
def _study(name: str, ctx: Context) -> Any:
    return parse(registry.study_text(name, ctx))


def test_geometry_compares_the_same_disks_and_draid_only_on_openzfs() -> None:
    oz = _study("geometry", Context(6, "1G"))
    assert oz.factors["layout"] == [
        "mirror:2+mirror:2+mirror:2",
        "raidz1:6",
        "raidz2:6",
        "draid1:1s",
    ]
    assert oz.factors["recordsize"] == ["16K"] and oz.disks.count == 6
    assert oz.workloads.names == [
        f"rand-{k}-{s}" for s in ("4k", "16k") for k in ("read", "write", "mix70")
    ]
    fuse = _study("geometry", Context(6, "1G", dialect=FUSE))
    assert "draid1:1s" not in fuse.factors["layout"] and len(fuse.factors["layout"]) == 3
    with pytest.raises(UsageError, match="zfs-fuse .* no dRAID") as e:
        registry.build(
            "geometry", Context(6, "1G", dialect=FUSE, options={"layouts": "raidz1,draid1:1s"})
        )
    assert "nothing was created" in e.value.paragraph()


def test_qd_curve_sweeps_depth_by_jobs_on_one_pool_per_layout() -> None:
    s = _study("qd-curve", Context(4, "1G", options={"depths": "1,8", "jobs": "1,2"}))
    assert s.workloads.names == [
        "rand-read-4k-qd1-j1",
        "rand-read-4k-qd8-j1",
        "rand-read-4k-qd1-j2",
        "rand-read-4k-qd8-j2",
    ]
    assert s.factors["layout"] == ["mirror:2+mirror:2", "raidz1:4"]
    assert len(matrix.configs(s)) == 2  # the sweep is workloads, not pools
    with pytest.raises(UsageError, match="--mode"):
        registry.build("qd-curve", Context(4, "1G", options={"mode": "sideways"}))
    with pytest.raises(UsageError, match="--depths"):
        registry.build("qd-curve", Context(4, "1G", options={"depths": "0"}))


def test_sync_slog_levels_follow_the_zfs_in_use() -> None:
    oz = _study("sync-slog", Context(4, "1G"))
    assert oz.factors["sync"] == ["standard", "always", "disabled"]
    assert oz.workloads.names == [
        f"{k}-4k-j{j}" for j in (1, 4, 16) for k in ("rand-write", "sync-write")
    ]
    fuse = _study("sync-slog", Context(4, "1G", dialect=FUSE))
    assert "sync" not in fuse.factors  # no sync property on pool version 23
    with pytest.raises(UsageError, match="no sync property") as e:
        registry.build("sync-slog", Context(4, "1G", dialect=FUSE, options={"levels": "always"}))
    assert "Nothing was created" in e.value.paragraph()


def test_sync_slog_log_levels_build_the_log_class() -> None:
    s = _study("sync-slog", Context(4, "1G"))
    assert s.factors["layout"] == ["mirror:2", "mirror:2 + log stripe:1", "mirror:2 + log mirror:2"]
    assert [sync_slog.log_kind(x) for x in s.factors["layout"]] == ["none", "single", "mirror"]
    with pytest.raises(UsageError, match="needs at least 4 disks"):
        registry.build("sync-slog", Context(3, "1G", options={"logs": "mirror"}))
    with pytest.raises(UsageError, match="not none, single or mirror"):
        registry.build("sync-slog", Context(4, "1G", options={"logs": "ssd"}))


@pytest.mark.parametrize("name", ["sync-slog", "geometry", "qd-curve"])
def test_new_studies_estimate_their_duration(name: str) -> None:
    from poolbench.study.estimate import estimate

    s = _study(name, registry.example_context(name))
    e = estimate(s)
    runtime = s.workloads.runtime * len(s.workloads.names)
    # Every trial runs each time-based workload for its run time, at least.
    assert e.trials == len(matrix.configs(s)) * s.replicates
    assert e.seconds >= e.trials * runtime


# -- notes ---------------------------------------------------------------------------------------
def _cfg(key: str, **figures: tuple[float, ...]) -> ConfigFacts:
    levels = dict(kv.split("=", 1) for kv in key.split(" ; "))
    return ConfigFacts(key, levels, figures={k.replace("_", "-"): v for k, v in figures.items()})


def _facts(*configs: ConfigFacts, n: int = 4) -> StudyFacts:
    return StudyFacts("t", "loop", n, 256 * MiB, configs, ())


def test_sync_slog_notes_say_what_sync_costs_and_what_disabled_risks() -> None:
    std = ConfigFacts(
        "std",
        {"layout": "mirror:2", "sync": "standard"},
        figures={"sync-write-4k-j1": (115.0, 125.0), "rand-write-4k-j1": (2300.0, 2500.0)},
    )
    off = ConfigFacts(
        "off",
        {"layout": "mirror:2", "sync": "disabled"},
        figures={"sync-write-4k-j1": (2000.0, 2200.0)},
    )
    lines = sync_slog.notes(Context(4, "1G"), _facts(std, off))
    cost = next(x for x in lines if x.startswith("  sync-write-4k-j1:"))
    # each ratio with its 95% Fieller interval from the two replicates a side
    assert cost.startswith(
        f"  sync-write-4k-j1: 120 IOPS vs plain writes 2,400 IOPS: sync is {2400 / 120:.2f}× "
        "slower (CI "
    ), cost
    gain = next(x for x in lines if x.startswith("  log none, sync-write-4k-j1"))
    assert f": {2100 / 120:.2f}× faster (CI " in gain, gain
    assert sync_slog.DISABLED_RISK in lines
    assert not any("only sync=standard" in x for x in lines)


def test_sync_slog_notes_judge_the_slog_by_its_ratio() -> None:
    def c(layout: str, *v: float) -> ConfigFacts:
        return ConfigFacts(layout, {"layout": layout}, figures={"sync-write-4k-j4": v})

    lines = sync_slog.notes(
        Context(4, "1G"),
        _facts(
            c("mirror:2", 98.0, 102.0),
            c("mirror:2 + log mirror:2", 128.0, 132.0),
            c("mirror:2 + log stripe:1", 102.0, 106.0),
        ),
    )
    mirror = next(x for x in lines if "log mirror" in x and "sync=standard" in x)
    assert "1.30× faster (CI " in mirror and mirror.endswith("; the SLOG pays"), mirror
    single = next(x for x in lines if "log single" in x)
    assert "no significant difference (within 5%" in single and "does not pay" in single
    # 30% faster in one replicate a side: no interval, so no verdict that it pays
    once = sync_slog.notes(
        Context(4, "1G"), _facts(c("mirror:2", 100.0), c("mirror:2 + log mirror:2", 130.0))
    )
    line = next(x for x in once if "log mirror" in x)
    assert "1.30× faster; too few runs" in line and line.endswith("the SLOG does not pay here")
    assert sync_slog.SAME_DEVICES in lines
    assert any("only sync=standard was measured" in x for x in lines)


def test_geometry_notes_rank_layouts_and_cost_blocks_from_the_planner() -> None:
    mir = ConfigFacts(
        "m",
        {"layout": "mirror:2+mirror:2", "recordsize": "16K"},
        figures={"rand-read-4k": (900.0, 1100.0)},
        zfs_version="zfs-fuse 0.7.2",
    )
    rz = ConfigFacts(
        "r",
        {"layout": "raidz1:4", "recordsize": "16K"},
        figures={"rand-read-4k": (400.0,)},
        zfs_version="zfs-fuse 0.7.2",
    )
    facts = _facts(rz, mir)
    lines = geometry.notes(Context(4, "256M"), facts)
    assert lines[0] == "rand-read-4k: mirror:2+mirror:2 1,000 IOPS > raidz1:4 400 IOPS"
    rules = rules_for_reported("zfs-fuse 0.7.2")
    for layout in ("mirror:2+mirror:2", "raidz1:4"):
        plan = plan_pool(parse_layout(layout, (256 * MiB,) * 4), 12, rules)
        for block in (4096, 16384):
            b = next(x for x in plan.vdevs[0].blocks if x.psize == block)
            want = (
                f"  {layout}: a {block // 1024}k block writes {b.raw_bytes // 1024}K raw "
                f"({b.efficiency:.0%} efficient)"
            )
            assert want in lines
    # raidz1 on 4 disks at ashift 12: a 4K block is 1 data + 1 parity sector = 8K raw, 50%;
    # a mirror pair writes 2 copies: also 8K. A 16K block: raidz1 4+2 sectors (24K), mirror 32K.
    assert "  raidz1:4: a 16k block writes 24K raw (67% efficient)" in lines
    assert "  mirror:2+mirror:2: a 16k block writes 32K raw (50% efficient)" in lines


def test_qd_curve_notes_find_the_knee_by_littles_law() -> None:
    figs = {
        "rand-read-4k-qd1-j1": (1000.0,),
        "rand-read-4k-qd4-j1": (3000.0,),
        "rand-read-4k-qd16-j1": (3200.0,),
        "rand-read-4k-qd32-j1": (3300.0,),
    }
    c = ConfigFacts("backend=zfs layout=mirror:2", {"layout": "mirror:2"}, figures=figs)
    lines = qd_curve.notes(Context(2, "1G"), _facts(c))
    knee = lines[1]
    # 3000 ≥ 0.9 × 3300: the knee is qd4; qd32 gives 3300/3000 = 1.10× the IOPS for
    # (32/3300)/(4/3000) = 7.3× the mean latency.
    assert knee.endswith(
        ": knee at qd4 (91% of the peak 3,300 IOPS); qd32 gives 1.10× the "
        "IOPS for 7.3× the mean latency"
    )
    assert "qd1: 1,000 IOPS, mean 1.00 ms (Little's law)" in lines[2]
    assert "qd32: 3,300 IOPS, mean 9.70 ms" in lines[2]
    assert "no latency percentiles were recorded" in lines[-1]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["geometry", "--disks", "4x128M", "--layouts", "raidz1:4,draid1:1s"], "no dRAID"),
        (["sync-slog", "--levels", "always"], "no sync property"),
    ],
)
def test_zfs_fuse_refusals_exit_unsupported_with_one_paragraph_and_create_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    says: str,
) -> None:
    """Through the CLI, with this machine's ZFS probed as zfs-fuse (a dry run besides, so a
    refusal that did not happen could still create nothing)."""
    from poolbench.cli.main import main
    from poolbench.engine import offers

    monkeypatch.setattr(offers, "probe", lambda: offers.Offers("zfs-fuse", True, ""))
    db, scratch = tmp_path / "r.db", tmp_path / "scratch"
    argv = ["study", *args, "--dry-run", "--db", str(db), "--scratch-dir", str(scratch)]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == EXIT_UNSUPPORTED
    assert not db.exists() and not scratch.exists()
    err = capsys.readouterr().err
    assert says in err and "nothing was created" in err.lower() and "vm/run-openzfs-tier" in err


def test_unsupported_paragraph_is_printed_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from poolbench.cli.main import main
    from poolbench.engine import offers

    monkeypatch.setattr(offers, "probe", lambda: offers.Offers("zfs-fuse", True, ""))
    with pytest.raises(SystemExit):
        main(["study", "sync-slog", "--levels", "disabled", "--print-toml"])
    err = capsys.readouterr().err
    assert err.count("error: ") == 1 and "Traceback" not in err
    assert "no sync property" in err and "Drop --levels" in err


def test_stored_p99_reaches_the_facts_and_the_notes_prefer_it() -> None:
    from poolbench.store.facts import facts_from_records

    meta = {"study_text": registry.study_text("qd-curve", Context(2, "1G"))}
    layout = "mirror:2"
    key = f"backend=zfs layout={layout} ashift=12"
    rows = []
    for qd, iops, p99 in ((1, 1000.0, 2e6), (4, 3000.0, 5e6)):  # p99 2 ms and 5 ms
        for rep in (0, 1):
            clat = {"percentiles": {"50": p99 / 4, "99": p99 + rep * 2e5}}
            rows.append({"config": key, "workload": f"rand-read-4k-qd{qd}-j1", "replicate": rep,
                         "value": iops, "guards": {}, "clat": clat})  # fmt: skip
    facts = facts_from_records(meta, rows)
    (c,) = facts.configs
    assert c.latency["rand-read-4k-qd4-j1"]["99"] == (5e6, 5.2e6)
    lines = qd_curve.notes(Context(2, "1G"), facts)
    # qd4 is the knee (the peak). No histograms were stored, so the points carry the
    # geometric means of the runs' p99s, labelled so: √(2 · 2.2) = 2.0976 → 2.10 ms,
    # √(5 · 5.2) = 5.0990 → 5.10 ms, each with its log-scale interval.
    what = "p99 (geometric mean of the runs' p99s; no histograms to pool)"
    assert f"qd1: 1,000 IOPS, {what} 2.10 ms (95% CI" in lines[2]
    assert f"qd4: 3,000 IOPS, {what} 5.10 ms" in lines[2]
    assert not any("Little's law" in x for x in lines)


def test_a_depth_that_was_never_reached_reaches_the_facts_and_the_note() -> None:
    """zfs-fuse does each qd4 read inside io_submit (guards queue_depth.blocking_submit):
    the qd-curve note must say the curve above qd1 is not a queue at the disks."""
    from poolbench.store.facts import facts_from_records

    meta = {"study_text": registry.study_text("qd-curve", Context(2, "1G"))}
    key = "backend=zfs layout=mirror:2 ashift=12"
    rows = []
    for qd, iops in ((1, 1000.0), (4, 1010.0)):
        for rep in (0, 1):
            depth = {"requested": qd, "blocking_submit": rep == 1} if qd > 1 else {}
            guards = {"queue_depth": depth}
            rows.append({"config": key, "workload": f"rand-read-4k-qd{qd}-j1", "replicate": rep,
                         "value": iops, "guards": guards, "clat": None})  # fmt: skip
    facts = facts_from_records(meta, rows)
    assert facts.configs[0].blocking_submit == frozenset({"rand-read-4k-qd4-j1"})
    last = qd_curve.notes(Context(2, "1G"), facts)[-2]
    assert last.startswith("  at depth > 1 each I/O was done inside the submit call")
    assert "≥ 75% of the run there: rand-read-4k-qd4-j1)" in last
    # Queued everywhere: no such line.
    for r in rows:
        r["guards"] = {}
    lines = qd_curve.notes(Context(2, "1G"), facts_from_records(meta, rows))
    assert not any("inside the submit call" in x for x in lines)


def test_block_costs_follow_the_version_openzfs_prints() -> None:
    """`zfs version` in the guest says 'zfs-2.3.2-2~bpo12+2': the notes must still find the
    planner's rules (the first guest run printed 'n/a' for every block cost)."""
    from poolbench.planner.rules import parse_zfs_version

    assert rules_for_reported("zfs-2.3.2-2~bpo12+2") == parse_zfs_version("2.3.2")
    version = "zfs-2.3.2-2~bpo12+2"
    levels = {"layout": "draid1:1s", "recordsize": "4K"}
    c = ConfigFacts("m", levels, figures={"rand-read-4k": (400.0,)}, zfs_version=version)
    lines = geometry.notes(Context(4, "2G"), StudyFacts("t", "devices", 4, 2 << 30, (c,), ()))
    # dRAID1 on 4 disks with a spare: groups of 2 data + 1 parity, a 4K block padded to a
    # whole group: 12K raw.
    assert "  draid1:1s: a 4k block writes 12K raw (33% efficient)" in lines
