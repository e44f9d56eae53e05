"""The engine's typed records, its store queries, the run lifecycle and the replicate loop
(pure or on a temporary SQLite file: no root, no devices)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from poolbench.engine import lifecycle, replicates
from poolbench.engine.records import TrialConfig
from poolbench.records.findings import CacheFinding, DeviceFinding, Findings
from poolbench.records.measurement import Measurement
from poolbench.stats.rounds import round_order
from poolbench.store import queries
from poolbench.store.db import Store
from poolbench.study.matrix import Config

# The guards of one cold read in a study trial, as poolbench has always stored them.
STUDY_READ: dict[str, Any] = {
    "pool": {"usable_bytes": 3 << 30, "compressratio": "1.00x"},
    "replicate": 1,
    "fill": {"asked_percent": 50, "usable_bytes": 3 << 30},
    "pool_state": {"state": "degraded", "offline": "/dev/loop3"},
    "data": {
        "compressibility_percent": 0,
        "pattern": "fio refill_buffers (fresh random data per write), never zeros",
    },
    "durability": "n/a",
    "cache": {"method": "export-import", "verified": True, "detail": ""},
    "device": {
        "devices": ["loop1", "loop2"],
        "read_bytes": 1 << 20,
        "write_bytes": 0,
        "ratio_to_app": 1.0,
    },
    "fio": {"version": "fio-3.33", "within_run_bw_dev_bytes_s": 12.5, "lat_mean_ns": 800.0},
}
# A fleet host's row: fio's disk_util instead of byte counts, guards not applied remotely.
FLEET_READ: dict[str, Any] = {
    "data": {"compressibility_percent": 30, "pattern": "p"},
    "durability": "n/a",
    "cache": {"method": "fio invalidate=1 on the server", "verified": False, "not_applied": "x"},
    "device": {"disk_util": [{"name": "sda", "read_ios": 9}], "bytes": "counts only"},
    "working_set": {"bytes": 1 << 30, "not_applied": "RAM"},
    "fio": {
        "version": "fio-3.33",
        "controller_version": "fio-3.35",
        "within_run_bw_dev_bytes_s": None,
        "lat_mean_ns": None,
    },
    "fleet": {"host": "h1:8765", "hosts_started_together": 2},
}


@pytest.mark.parametrize("stored", [STUDY_READ, FLEET_READ, {}, {"aggregate": {"kind": "s"}}])
def test_findings_write_back_exactly_what_was_stored(stored: dict[str, Any]) -> None:
    assert Findings.from_json(json.loads(json.dumps(stored))).to_json() == stored


def test_findings_read_typed() -> None:
    f = Findings.from_json(STUDY_READ)
    assert f.cache_verified and f.cache is not None and f.cache.method == "export-import"
    assert f.device is not None and f.device.devices == ("loop1", "loop2")
    assert f.device.read_bytes == 1 << 20 and f.device.ratio_to_app == 1.0
    assert f.data is not None and f.data.compressibility_percent == 0
    assert f.fio is not None and f.fio.version == "fio-3.33"
    assert f.pool == {"usable_bytes": 3 << 30, "compressratio": "1.00x"}
    assert f.other["pool_state"]["offline"] == "/dev/loop3"
    fleet = Findings.from_json(FLEET_READ)
    assert fleet.cache is not None and fleet.cache.verified is False and not fleet.cache_verified
    assert fleet.fio is not None and fleet.fio.controller_version == "fio-3.35"
    assert fleet.device is not None and fleet.device.devices is None


def test_findings_keep_damaged_sections_and_never_raise() -> None:
    damaged = {"cache": "dropped", "data": {"compressibility_percent": True}, "durability": 3}
    f = Findings.from_json(damaged)
    assert f.cache is None and f.data is None and f.durability is None
    assert f.to_json() == damaged
    assert Findings.from_json(None).to_json() == {}
    assert Findings.from_json([1, 2]).to_json() == {}


def test_unverified_cache_says_why() -> None:
    assert CacheFinding("fadvise", False, "fincore unavailable").why == "fincore unavailable"
    assert CacheFinding("drop_caches", False, "").why == "drop_caches"
    unverified = DeviceFinding(unverified="the pool's members are plain files")
    assert unverified.to_json() == {"unverified": "the pool's members are plain files"}


def test_merge_pool_adds_what_the_pool_said_without_touching_the_trial_record() -> None:
    trial = Findings(pool={"usable_bytes": 7}, other={"replicate": 0})
    one = trial.copy()
    one.merge_pool({"compressratio": "2.00x"})
    assert one.to_json()["pool"] == {"usable_bytes": 7, "compressratio": "2.00x"}
    assert trial.pool == {"usable_bytes": 7}


def test_what_the_pool_said_is_written_in_the_order_it_always_was() -> None:
    from poolbench.engine.op_sections import PoolSaid
    from poolbench.records.sections import DedupReadingRecord

    reading = DedupReadingRecord(level="on", ratio=2.0, entries=3, disk_bytes=4, core_bytes=5,
                                 referenced_blocks=6, referenced_bytes=7, unread="")  # fmt: skip
    said = PoolSaid({"dedup": reading}, compressratio="1.50x", zvol={"volblocksize": 16384},
                    class_alloc={"normal": 9}, class_free={})  # fmt: skip
    got = said.to_json()
    assert list(got) == ["dedup", "compressratio", "zvol", "class_alloc"]  # empty: left out
    assert got["dedup"] == reading and got["class_alloc"] == {"normal": 9}
    assert PoolSaid().to_json() == {}  # a backend without accounting, no factor: nothing
    one = Findings(pool={"usable_bytes": 7})
    one.merge_pool(got)
    assert list(json.loads(json.dumps(one.to_json()))["pool"])[:2] == ["usable_bytes", "dedup"]


def test_sections_stored_by_older_runs_decode_with_what_they_hold() -> None:
    from poolbench.records.sections import L2arcReads, Pgbench, Resilver

    # a resilver before the load factor; one with a load whose window was too short
    old = Resilver.decode({"resilver": {"resilvered_bytes": 1 << 20, "seconds": 2}}, 1)
    assert old == Resilver(1, 1 << 20, 2.0)
    short = {"resilvered_bytes": 0, "load": {"workload": "seq-read", "rate": "flat out",
             "during": {"value": None, "why": "too short", "unit": "MiB/s"}}}  # fmt: skip
    rs = Resilver.decode({"resilver": short}, 0)
    assert rs is not None and rs.load is not None
    assert rs.load.during.value is None and rs.load.during.why == "too short"
    assert rs.load.alone.value is None  # not recorded: no figure
    # l2arc reads without intervals (not recorded) and no steady part
    reads = L2arcReads.decode({"l2arc": {"interval_s": 6}}, 2)
    assert reads is not None and reads.intervals is None and reads.steady.l2_hits is None
    assert L2arcReads.decode({"l2arc": {}}, 2) is None  # an empty section: none
    pg = Pgbench.decode({"pgbench": {"device_bytes_per_txn": 8192, "cache": {"label": "warm"}}})
    assert pg == Pgbench(8192.0, True)
    assert Pgbench.decode({"pgbench": {}}) == Pgbench(None, False)
    assert Pgbench.decode({}) is None


def test_trial_config_reads_its_levels() -> None:
    cfg = Config((("backend", "btrfs"), ("layout", "raid1"), ("fill", "50")))
    tc = TrialConfig(cfg, replicate=2, index=7)
    assert tc.key == "backend=btrfs layout=raid1 fill=50"
    assert tc.levels == {"backend": "btrfs", "layout": "raid1", "fill": "50"}
    assert tc.backend == "btrfs"
    assert TrialConfig(Config((("layout", "mirror"),)), 0, 0).backend == "zfs"


def _measurement(config: str, workload: str, replicate: int, value: float) -> Measurement:
    return Measurement(
        config, workload, replicate, value, "MiB/s", 1 << 20, 16, 0.5, None, None,
        ["a warning"], Findings.from_json(STUDY_READ), {"name": workload}, "[job]\n",
    )  # fmt: skip


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "r.db")


def test_measurement_round_trips_through_the_store(store: Store) -> None:
    run = store.start_run("study", "s", ["poolbench"], {})
    m = _measurement("backend=zfs layout=mirror", "seq-read", 1, 123.5)
    store.add_measurement(run, m)
    (row,) = store.measurements(run)
    decoded = dict(row)
    for column in ("warnings", "guards", "workload_def"):
        decoded[column] = json.loads(row[column])
    assert decoded["guards"] == STUDY_READ
    assert decoded["clat"] is None and decoded["clat_p99_ns"] is None  # no latency given
    decoded["clat"] = None
    assert Measurement.from_json(decoded) == m


def test_latency_round_trips_through_the_store(store: Store) -> None:
    """fio's completion latency: the percentile columns and everything else in `clat`."""
    from dataclasses import replace

    from poolbench.workloads.fioparse import parse

    text = (Path(__file__).parent / "data" / "fio-rand-read-4k.jsonplus.json").read_text()
    lat = parse(text, "read").latency
    assert lat is not None
    run = store.start_run("study", "s", ["poolbench"], {})
    m = replace(_measurement("c", "rand-read-4k", 0, 9.0), latency=lat)
    store.add_measurement(run, m)
    (row,) = store.measurements(run)
    assert (row["clat_p50_ns"], row["clat_p90_ns"]) == (35072, 44800)
    assert (row["clat_p99_ns"], row["clat_p999_ns"]) == (77312, 177152)
    decoded = dict(row)
    for column in ("warnings", "guards", "workload_def", "clat"):
        decoded[column] = json.loads(row[column])
    assert sum(int(v) for v in decoded["clat"]["bins"].values()) == 25122
    assert Measurement.from_json(decoded) == m


def test_queries(store: Store) -> None:
    assert queries.latest_run_id(store) is None
    run = store.start_run("study", "s", ["poolbench"], {})
    other = store.start_run("study", "t", ["poolbench"], {})
    # Stored out of replicate order: values_by_workload must give them in replicate order.
    for rep, value in ((2, 30.0), (0, 10.0), (1, 20.0)):
        store.add_measurement(run, _measurement("c", "seq-read", rep, value))
    store.add_measurement(run, _measurement("c", "seq-write", 0, 5.0))
    store.add_measurement(run, _measurement("d", "seq-read", 0, 99.0))
    store.add_measurement(other, _measurement("c", "seq-read", 3, 1.0))
    assert queries.values_by_workload(store, run, "c") == {
        "seq-read": [10.0, 20.0, 30.0],
        "seq-write": [5.0],
    }
    assert queries.measured_workloads(store, run, "c", 0) == {"seq-read", "seq-write"}
    assert queries.measured_workloads(store, run, "c", 1) == {"seq-read"}
    assert queries.measured_workloads(store, run, "c", 3) == set()
    assert queries.measurement_count(store, run) == 5
    assert queries.measurement_count(store, other) == 1
    assert queries.latest_run_id(store) == other


def test_run_hosts_are_inserted_then_updated(store: Store) -> None:
    run = store.start_run("bench", "fleet:h1", ["poolbench"], {})
    host = queries.RunHost("h1:8765", "h1", 8765, "/t", "h1", "Linux", "x86_64", "fio-3.33",
                           0.1, "ok", None, ["a"])  # fmt: skip
    queries.record_run_hosts(store, run, [host])
    failed = queries.RunHost(**{**host.__dict__, "status": "failed", "error": "gone",
                                "not_applied": ["a", "b"]})  # fmt: skip
    queries.record_run_hosts(store, run, [failed])
    rows = list(store.conn.execute("SELECT * FROM run_hosts WHERE run_id = ?", (run,)))
    assert len(rows) == 1
    assert (rows[0]["status"], rows[0]["error"]) == ("failed", "gone")
    assert json.loads(rows[0]["not_applied"]) == ["a", "b"]
    assert rows[0]["fio_version"] == "fio-3.33"


def _status(store: Store, run: int) -> tuple[str, str | None]:
    row = store.run(run)
    return row["status"], row["error"]


def test_lifecycle_finished_and_partial(store: Store) -> None:
    run = lifecycle.start(store, "bench", "x", {}, ["poolbench", "bench"])
    assert _status(store, run) == ("running", None)
    with lifecycle.tracked(store, run):
        pass
    assert _status(store, run) == ("finished", None)
    run = lifecycle.start(store, "bench", "x", {})
    seen: list[str] = []
    with lifecycle.tracked(store, run, before_finish=lambda o: seen.append(o.status)) as out:
        out.mark_partial("host h2 failed")
    assert _status(store, run) == ("partial", "host h2 failed")
    assert seen == ["partial"]
    assert lifecycle.reopen(store, run) == run
    assert _status(store, run)[0] == "running"


def test_lifecycle_ctrl_c_keeps_what_was_measured(store: Store) -> None:
    run = lifecycle.start(store, "study", "x", {})
    store.add_measurement(run, _measurement("c", "seq-read", 0, 1.0))
    kept: list[int] = []
    with pytest.raises(KeyboardInterrupt), lifecycle.tracked(store, run, on_interrupt=kept.append):
        raise KeyboardInterrupt
    assert kept == [1]
    assert _status(store, run) == ("interrupted", None)


def test_lifecycle_failure_records_the_error(store: Store) -> None:
    run = lifecycle.start(store, "study", "x", {})
    with pytest.raises(RuntimeError), lifecycle.tracked(store, run):
        raise RuntimeError("disk vanished")
    assert _status(store, run) == ("failed", "disk vanished")


def test_interleave_replicates_round_by_round_until_the_rule_is_met() -> None:
    values: dict[str, list[float]] = {"steady": [], "noisy": []}
    order: list[str] = []
    progress: list[tuple[str, int, int]] = []

    def measure(name: str, rep: int) -> None:
        assert rep == len(values[name])
        order.append(name)
        # steady: identical figures, CI 0 after the minimum; noisy: 100/200, never within 5%.
        values[name].append(100.0 if name == "steady" or rep % 2 == 0 else 200.0)

    rule = replicates.policy(min_runs=2, max_runs=4, target=0.05)
    rounds: list[list[str]] = []
    done = replicates.interleave(
        ["steady", "noisy"], rule, values.__getitem__, measure,
        lambda name, rep: f"{name} {rep}", lambda d, n, t: progress.append((d, n, t)),
        seed=7, record=lambda r, names: rounds.append(names),
    )  # fmt: skip
    # Two rounds of both (each in its seeded order, never the same item twice in a row), then
    # the two extra replicates Stein's rule planned for the noisy one (sd 70.7 at n0 = 2).
    first = round_order(["steady", "noisy"], 7, 0)
    second = round_order(["steady", "noisy"], 7, 1, first[-1])
    assert rounds == [first, second, ["noisy"], ["noisy"]]
    assert order == first + second + ["noisy", "noisy"]
    assert all(a != b for a, b in zip(order[:3], order[1:4], strict=True))
    assert done == 6 and rule.planned(values["noisy"][:2]) == 4
    # Planned 2×2; when stage one is complete the total grows by what Stein's rule added.
    assert [t for _, _, t in progress] == [4, 4, 4, 4, 6, 6]
    assert progress[4] == ("noisy 2", 4, 6)


def test_the_store_gives_back_the_record_it_was_given(store: Store) -> None:
    """One record from the engine to the report: what add_measurement stored,
    measurement_records reads back equal, latency and factor levels included."""
    from dataclasses import replace

    from poolbench.records.latency import Latency

    lat = Latency("read", 3, 10.0, 5.0, 20.0, 2.0, {"50": 9.0, "99.9": 20.0}, {9: 2, 20: 1})
    m = replace(
        _measurement("backend=zfs layout=mirror", "seq-read", 2, 7.25),
        latency=lat,
        config_levels={"backend": "zfs", "layout": "mirror"},
        host="h1",
    )
    run = store.start_run("study", "s", ["poolbench"], {})
    store.add_measurement(run, m)
    assert store.measurement_records(run) == [m]
    (row,) = store.measurements(run)
    assert row["clat_p999_ns"] == 20.0  # the percentile column the record's latency fills


def test_a_row_from_an_older_or_damaged_store_reads_as_far_as_it_can() -> None:
    """A row from before 0005/0006 (no clat, no levels) and JSON columns holding the wrong
    type read as empty, never raise: the store has refused rows it cannot have written."""
    row: dict[str, object] = {
        "id": 1, "run_id": 1, "config": "c", "workload": "w", "replicate": 0, "value": 5,
        "unit": "MiB/s", "app_bytes": 1, "ops": 1, "seconds": 2, "device_bytes": None,
        "device_mib_s": None, "warnings": '"one"', "guards": "[1]", "workload_def": "null",
        "job_file": "", "created_at": 0.0,
    }  # fmt: skip
    m = Measurement.from_row(row)
    assert (m.value, m.seconds, m.warnings) == (5.0, 2.0, ["one"])
    assert m.findings == Findings() and m.workload_def == {}
    assert m.latency is None and m.config_levels is None and m.host is None
    assert Measurement.from_row({**row, "config_levels": '{"a": 1}'}).config_levels == {"a": "1"}
