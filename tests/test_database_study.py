"""`poolbench study database`, fast: what it builds on each ZFS, the options it refuses, its
plan line, and its notes (the winner per layout with its interval, device bytes per
transaction per setting, the warm label) from planted facts."""

from __future__ import annotations

import pytest

from poolbench.errors import UsageError
from poolbench.store.facts import ConfigFacts, StudyFacts, facts_from_records
from poolbench.study import estimate, matrix
from poolbench.study.builtin import database, registry
from poolbench.study.builtin.context import Context
from poolbench.study.builtin.toml_file import to_toml
from poolbench.study.model import parse

MiB = 1 << 20
TPCB = "pgbench-tpcb-c4"


def test_the_full_matrix_on_openzfs() -> None:
    data = registry.build("database", Context(3, "1G"))
    f = data.factors
    assert f["layout"] == ["mirror:2", "raidz1:3"] and f["recordsize"] == ["8K", "16K", "128K"]
    assert f["full_page_writes"] == ["on", "off"] and f["logbias"] == ["latency", "throughput"]
    assert data.workloads["names"] == [TPCB, "pgbench-select-c4"]
    # a quarter of a 1G disk: 256M, which pgbench loads at scale 16
    assert data.workloads["size"] == "256M"


def test_zfs_fuse_keeps_logbias_when_it_has_it() -> None:
    ctx = Context(3, "1G", dialect="zfs-fuse")
    assert registry.build("database", ctx).factors["logbias"] == ["latency", "throughput"]


def test_a_property_zfs_fuse_lacks_is_dropped_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(database, "ZFS_FUSE_LACKS", ("logbias",))
    ctx = Context(3, "1G", dialect="zfs-fuse")
    assert "logbias" not in registry.build("database", ctx).factors
    assert any("no logbias levels: zfs-fuse has no logbias" in s for s in ctx.said)


def test_options_narrow_the_matrix() -> None:
    ctx = Context(3, "1G", options={"levels": "16k", "fpw": "off", "logbias": "latency",
                                    "modes": "tpcb", "clients": "1"})  # fmt: skip
    data = registry.build("database", ctx)
    assert data.factors["recordsize"] == ["16K"] and data.workloads["names"] == ["pgbench-tpcb-c1"]


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"fpw": "maybe"}, "--fpw maybe is not one of on, off"),
        ({"logbias": "fast"}, "--logbias fast"),
        ({"modes": "tpcc"}, "--modes takes tpcb and select"),
        ({"clients": "0"}, "--clients 0"),
        ({"levels": "3k"}, "power of two"),
    ],
)
def test_bad_options_are_refused(options: dict[str, str], says: str) -> None:
    with pytest.raises(UsageError) as e:
        registry.build("database", Context(3, "1G", options=options))
    assert says in str(e.value)


def test_too_few_disks_are_refused() -> None:
    with pytest.raises(UsageError, match="at least 3 disks"):
        registry.build("database", Context(2, "1G"))
    # a mirror alone fits two disks (a guest run was refused for it)
    built = registry.build("database", Context(2, "1G", options={"layouts": "mirror:2"}))
    assert "mirror:2" in str(built) and "raidz1" not in str(built)


def test_the_plan_says_the_scale_and_that_it_is_warm() -> None:
    study = parse(registry.study_text("database", Context(3, "1G")), "database")
    text = estimate.working_set_text(study, 24 << 30)
    assert "pgbench: scale 16 (about 244 MiB of data" in text
    assert "labelled warm" in text
    # 24 configurations × 3 replicates
    assert estimate.estimate(study).trials == 72


def test_the_study_file_round_trips() -> None:
    ctx = Context(3, "1G")
    data = registry.build("database", ctx)
    assert parse(to_toml(registry.get("database"), data, ctx.said), "x") == parse(
        registry.study_text("database", ctx), "y"
    )


# -- notes ------------------------------------------------------------------------------------
def _cfg(layout: str, rs: str, fpw: str, tps: tuple[float, ...], per_txn: tuple[float, ...],
         warm: bool = False) -> ConfigFacts:  # fmt: skip
    levels = {"layout": layout, "recordsize": rs, "full_page_writes": fpw, "logbias": "latency"}
    return ConfigFacts(f"{layout} {rs} {fpw}", levels, figures={TPCB: tps},
                       bytes_per_txn={TPCB: per_txn},
                       warm=frozenset({TPCB}) if warm else frozenset())  # fmt: skip


def _notes(*configs: ConfigFacts) -> list[str]:
    return database.notes(Context(3, "1G"), StudyFacts("database", "loop", 3, 1 << 30, configs))


def test_notes_name_the_winner_per_layout_with_its_interval() -> None:
    lines = _notes(
        _cfg("mirror:2", "8K", "off", (990.0, 1000.0, 1010.0), (8192.0, 8192.0, 8192.0)),
        _cfg("mirror:2", "128K", "on", (490.0, 500.0, 510.0), (65536.0, 61440.0, 69632.0)),
        _cfg("raidz1:3", "16K", "off", (700.0, 700.0, 700.0), (10240.0, 10240.0, 10240.0)),
    )
    mirror = next(x for x in lines if x.startswith("  mirror:2: "))
    # mean 1000, sd 10, t(0.975, 2) = 4.303: 1000 ± 24.8
    assert mirror.startswith(
        "  mirror:2: recordsize=8K full_page_writes=off logbias=latency, 1,000 TPS "
        "(95% CI 975–1,025, 3 runs)"
    ), mirror
    assert "against the next best (recordsize=128K full_page_writes=on" in mirror
    assert "2.00× faster (CI" in mirror
    raidz = next(x for x in lines if x.startswith("  raidz1:3: "))
    assert "700 TPS" in raidz and "next best" not in raidz  # alone on its layout
    cost = [x for x in lines if "KiB/txn" in x]
    assert "  mirror:2 recordsize=128K full_page_writes=on logbias=latency: 64.0 KiB/txn " \
           "(mean of 3 runs, 60.0–68.0)" in cost  # fmt: skip
    assert any(x.startswith("  mirror:2 recordsize=8K") and "8.0 KiB/txn" in x for x in cost)
    assert not any(x.startswith("warm") for x in lines)


def test_notes_say_warm() -> None:
    lines = _notes(_cfg("mirror:2", "8K", "off", (1.0, 2.0), (1.0, 1.0), warm=True))
    assert "[warm: RAM caches the database]" in lines[1]
    assert lines[-1].startswith("warm: the database was smaller than what RAM caches")


def test_facts_read_bytes_per_txn_and_the_warm_label() -> None:
    text = registry.study_text("database", Context(3, "1G", options={
        "levels": "8K", "fpw": "on", "logbias": "latency", "modes": "tpcb"}))  # fmt: skip
    study = parse(text, "x")
    key = matrix.configs(study)[0].key
    rows = [
        {"config": key, "workload": TPCB, "replicate": i, "value": 100.0 + i,
         "guards": {"pgbench": {"device_bytes_per_txn": 5000.0 + i,
                                "cache": {"label": "warm" if i else "cold"}}}}
        for i in range(2)
    ]  # fmt: skip
    facts = facts_from_records({"study_text": text}, rows)  # type: ignore[arg-type]
    c = facts.configs[0]
    assert c.bytes_per_txn[TPCB] == (5000.0, 5001.0) and c.warm == frozenset({TPCB})
