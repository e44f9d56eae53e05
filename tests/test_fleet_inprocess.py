"""The fleet driven in-process over two "hosts": a recording runner plays fio's controller
(fio --client=H1 job1 --client=H2 job2), answering with the JSON fio 3.33 prints in client
mode, so every branch of the fleet's loop runs in milliseconds without a server or root.

Host A moves 8 MiB in 1 s (8 MiB/s), host B the same 8 MiB in 2 s (4 MiB/s): every figure
below is computed from those two facts."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from poolbench.engine import loop as engine_loop
from poolbench.engine import replicates
from poolbench.engine.subject import WorkloadResult
from poolbench.errors import UsageError
from poolbench.fleet import aggregate, hosts, probe, table
from poolbench.fleet.aggregate import Aggregate
from poolbench.fleet.clientout import HostFigures
from poolbench.fleet.records import FleetOptions
from poolbench.fleet.run import run_fleet
from poolbench.fleet.session import FleetSession
from poolbench.records.measurement import Measurement
from poolbench.store.db import Store
from poolbench.system.runner import CommandResult, RecordingRunner, Runner
from poolbench.workloads.library import parse_list

MiB = 1 << 20
SIZE = 8 * MiB
A, B = "10.0.0.1", "10.0.0.2"
FLEET = [hosts.parse_host(f"{A} /tank/a"), hosts.parse_host(f"{B} /tank/b")]
RUNTIME_MS = {A: 1000, B: 2000}
RATE = {A: 8.0, B: 4.0}  # MiB/s: SIZE over each host's runtime
TARGET = {A: "/tank/a", B: "/tank/b"}


class FakeController:
    """fio as the controller answers: each --client's job by name, each host's figures;
    `dies` = (host, job name) makes that host disconnect during that job."""

    def __init__(self, dies: tuple[str, str] | None = None) -> None:
        self.dies = dies
        self.jobs: list[tuple[str, list[str]]] = []  # (job name, hosts it went to)

    def __call__(self, argv: tuple[str, ...]) -> CommandResult:
        if argv[1:] == ("--version",):
            return CommandResult(argv, 0, "fio-3.33\n", "", 0.0)
        clients = [a.split("=", 1)[1].split(",")[0] for a in argv if a.startswith("--client=")]
        names = [Path(a).name.rsplit(".host", 1)[0] for a in argv if a.endswith(".fio")]
        self.jobs.append((names[0], clients))
        gone = self.dies is not None and self.dies[1] == names[0] and self.dies[0] in clients
        live = [c for c in clients if not (gone and self.dies and c == self.dies[0])]
        body = {"fio version": "fio-3.33", "client_stats": [_entry(h) for h in live]}
        body["disk_util"] = [{"name": "sda", "read_ios": 9, "write_ios": 9, "util": 50.0,
                              "hostname": A, "port": 8765}]  # fmt: skip
        stderr = f"client: host={self.dies[0]} disconnected\n" if gone and self.dies else ""
        return CommandResult(argv, 1 if gone else 0, json.dumps(body) + "\n", stderr, 0.0)


def _entry(host: str) -> dict[str, object]:
    ms = RUNTIME_MS[host]
    side = {"io_bytes": SIZE, "total_ios": SIZE // 4096, "runtime": ms, "iops": 1.0,
            "bw_bytes": SIZE * 1000 // ms, "bw_dev": 2.0, "lat_ns": {"mean": 5.0}}  # fmt: skip
    return {"jobname": "job", "error": 0, "read": side, "write": side, "hostname": host,
            "port": 8765}  # fmt: skip


def _prober(runner: Runner, host: hosts.Host, target: str | None) -> probe.HostInfo:
    return probe.HostInfo(host.label, host.address, host.port, target, reachable=True,
                          server_hostname=f"srv-{host.address}", os="Linux", arch="x86-64",
                          fio_version="fio-3.33", clock_skew_s=0.0)  # fmt: skip


def _options(names: str, runs: int = 2) -> FleetOptions:
    return FleetOptions(parse_list(names), size=SIZE, runtime_s=1, seed=5,
                        stop=replicates.policy(runs, runs, 0.5))  # fmt: skip


def _session(store: Store, fake: FakeController, names: str) -> FleetSession:
    run_id = store.start_run("bench", "fleet:test", ["poolbench"], {})
    runner = RecordingRunner(responses={"fio": fake})
    return FleetSession(runner, store, run_id, FLEET, None, _options(names), prober=_prober)


def _rows(store: Store, sql: str, *args: object) -> list[sqlite3.Row]:
    c = sqlite3.connect(store.path)
    c.row_factory = sqlite3.Row
    try:
        return list(c.execute(sql, args))
    finally:
        c.close()


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> list[tuple[WorkloadResult, Measurement, bool]]:
    """Every figure the engine's loop records: (result it went into, measurement, counted)."""
    seen: list[tuple[WorkloadResult, Measurement, bool]] = []
    real = engine_loop.MeasureLoop.record

    def record(
        self: engine_loop.MeasureLoop, res: WorkloadResult, m: Measurement, *, counted: bool = True
    ) -> None:
        seen.append((res, m, counted))
        real(self, res, m, counted=counted)

    monkeypatch.setattr(engine_loop.MeasureLoop, "record", record)
    return seen


def test_every_host_is_measured_through_the_engines_loop(
    tmp_path: Path, spy: list[tuple[WorkloadResult, Measurement, bool]]
) -> None:
    store = Store(tmp_path / "r.db")
    fake = FakeController()
    session = _session(store, fake, "seq-write,seq-read")
    session.preflight()
    results = {r.workload.name: r for r in session.run()}
    # Each host's figure went through the engine's MeasureLoop.record into that host's own
    # engine WorkloadResult, every replicate of every workload.
    for name, res in results.items():
        for label in (A, B):
            host = res.per_host[label]
            assert isinstance(host, WorkloadResult) and host.values == [RATE[label]] * 2
            mine = [m for r, m, _ in spy if r is host]
            assert [(m.host, m.workload, m.replicate) for m in mine] == [
                (label, name, 0), (label, name, 1)
            ]  # fmt: skip
            assert all(m.config == f"{label}:{TARGET[label]}" for m in mine)
    # The loop's rounds: each round's seeded order is recorded and is the order that ran.
    orders = session.round_orders
    assert len(orders) == 2 and all(sorted(o) == ["seq-read", "seq-write"] for o in orders)
    ran = [m.workload for _, m, _ in spy if m.host == A]
    assert ran == [w for o in orders for w in o]
    # Every measurement started both hosts in one controller run; prepared data removed.
    measured = [(n, c) for n, c in fake.jobs if n.startswith(("seq-write.", "seq-read."))]
    assert len(measured) == 4 and all(c == [A, B] for _, c in measured)
    assert fake.jobs[-1] == ("cleanup", [A, B])
    # Stored: 2 workloads x 2 replicates x (2 hosts + sum + slowest), as recorded.
    rows = store.measurements(session.run_id)
    assert len(rows) == len(spy) == 2 * 2 * 4
    per_host = [r for r in rows if r["host"]]
    assert sorted(Counter(r["host"] for r in per_host).items()) == [(A, 4), (B, 4)]
    assert all(r["value"] == RATE[r["host"]] and r["app_bytes"] == SIZE for r in per_host)
    for r in per_host:
        g = json.loads(r["guards"])
        assert g["fleet"] == {"host": r["host"], "hosts_started_together": 2}
        assert g["fio"]["controller_version"] == "fio-3.33"
    # Host A reported disk counts, host B (tmpfs-like) none: each host's notes say which.
    assert session.not_applied[A][-1].startswith("device bytes not verifiable")
    assert session.not_applied[B][-1].startswith("device check not applied")


def test_the_aggregate_is_the_sum_and_the_slowest_of_the_hosts(tmp_path: Path) -> None:
    store = Store(tmp_path / "r.db")
    session = _session(store, FakeController(), "seq-write")
    session.preflight()
    (res,) = session.run()
    total = RATE[A] + RATE[B]  # 12 MiB/s: both hosts ran at once, for the same replicate
    assert res.total.values == [total, total]
    assert res.slowest.values == [RATE[B], RATE[B]] and res.slowest_host == [B, B]
    assert not res.partial
    rows = {(r["config"], r["replicate"]): r for r in store.measurements(session.run_id)}
    for rep in (0, 1):
        s, slow = rows[(aggregate.SUM, rep)], rows[(aggregate.SLOWEST, rep)]
        assert s["host"] is None and s["value"] == pytest.approx(total)
        assert s["app_bytes"] == 2 * SIZE and s["seconds"] == 2.0  # the longest host's
        assert slow["value"] == pytest.approx(RATE[B]) and slow["app_bytes"] == SIZE
        agg = json.loads(s["guards"])["aggregate"]
        assert agg["values"] == {A: RATE[A], B: RATE[B]} and agg["slowest_host"] == B
        # 16 MiB over the longest host's 2 s: the rate the whole fleet sustained.
        assert agg["bytes_over_longest_runtime_mib_s"] == pytest.approx(2 * SIZE / 2.0 / MiB)
        assert agg["kind"] == aggregate.SUM and not agg["partial"]
    out = table.as_json([res], session.options.stop)[0]
    assert out["sum"]["mean"] == pytest.approx(total) and out["sum"]["replicates"] == 2
    assert out["slowest"]["hosts"] == [B, B]
    assert out["per_host"][A]["values"] == [RATE[A]] * 2


def test_a_host_failing_mid_run_is_named_and_the_others_kept(
    tmp_path: Path, spy: list[tuple[WorkloadResult, Measurement, bool]]
) -> None:
    store = Store(tmp_path / "r.db")
    fake = FakeController(dies=(B, "rand-read-4k.1"))  # B goes away in the second replicate
    runner = RecordingRunner(responses={"fio": fake})
    opts = _options("seq-read,rand-read-4k")
    done = run_fleet(runner, store, FLEET, None, opts, lambda *_: None, prober=_prober)
    assert done.status == "partial" and done.failure is not None
    assert f"host {B} went away during the run" in str(done.failure)
    assert "marked partial" in done.failure.fix
    run = store.run(done.run_id)
    assert run["status"] == "partial" and B in run["error"]
    by_label = {h["label"]: h for h in _rows(store, "SELECT * FROM run_hosts")}
    assert by_label[B]["status"] == "failed" and "went away" in by_label[B]["error"]
    assert by_label[A]["status"] == "ok"
    # A's figure of the failed measurement is kept; the aggregate is stored but marked
    # partial, and the stop rule does not count it.
    rr = {r.workload.name: r for r in done.results}["rand-read-4k"]
    assert rr.partial and rr.per_host[A].values[-1] > 0
    assert len(rr.per_host[A].values) == len(rr.per_host[B].values) + 1
    assert len(rr.total.values) == len(rr.per_host[B].values)
    last = [m for _, m, _ in spy if m.workload == "rand-read-4k" and m.replicate == 1]
    assert [m.host for m in last] == [A, None, None]
    partial = [m for _, m, counted in spy if not counted]
    assert [m.config for m in partial] == [aggregate.SUM, aggregate.SLOWEST]
    assert all("partial: 1 of 2 hosts reported (missing: 10.0.0.2)" in m.warnings[0]
               for m in partial)  # fmt: skip
    assert any("partial: 1 of 2" in w for w in rr.warnings)
    stored = _rows(store, "SELECT host, config FROM measurements WHERE replicate = 1 AND "
                   "workload = 'rand-read-4k'")  # fmt: skip
    assert sorted((r["host"] or "", r["config"]) for r in stored) == sorted(
        [(A, f"{A}:/tank/a"), ("", aggregate.SUM), ("", aggregate.SLOWEST)]
    )
    # Only the survivor's data is removed; the failed host's leftovers are named.
    assert fake.jobs[-1] == ("cleanup", [A])
    assert any(f"host {B} failed" in n and "may remain under /tank/b" in n
               for n in done.session.notes)  # fmt: skip
    meta = json.loads(run["metadata"])["fleet"]
    assert list(meta["failures"]) == [B] and meta["options"]["seed"] == 5


def test_a_host_that_does_not_answer_is_refused_before_any_io(tmp_path: Path) -> None:
    store = Store(tmp_path / "r.db")
    fake = FakeController()

    def half(runner: Runner, host: hosts.Host, target: str | None) -> probe.HostInfo:
        info = _prober(runner, host, target)
        if host.address == B:
            info.reachable, info.error = False, f"host {B} did not answer (fio could not connect)"
        return info

    run_id = store.start_run("bench", "fleet:test", ["poolbench"], {})
    session = FleetSession(RecordingRunner(responses={"fio": fake}), store, run_id, FLEET,
                           None, _options("seq-read"), prober=half)  # fmt: skip
    with pytest.raises(UsageError, match=rf"1 of 2 host\(s\) cannot run.*{B} did not answer"):
        session.preflight()
    assert fake.jobs == [] and store.measurements(run_id) == []


def test_a_partial_aggregate_says_so_and_names_the_missing_host() -> None:
    fig = HostFigures(SIZE, SIZE // 4096, 1.0, 0.0, 0.0, 0.0, 0.0)
    whole = Aggregate({A: 8.0, B: 4.0}, {A: fig, B: fig}, [])
    assert (whole.total, whole.slowest_host, whole.warnings()) == (12.0, B, [])
    part = Aggregate({A: 8.0}, {A: fig}, [B])
    assert part.partial and part.total == 8.0
    assert part.warnings() == [
        f"partial: 1 of 2 hosts reported (missing: {B}); this sum is not the fleet's"
    ]


def test_a_stop_signal_mid_fleet_keeps_what_was_measured_and_says_so(tmp_path: Path) -> None:
    """SIGTERM (raised by the runner, where a signal lands) in the second measurement: the
    first one's rows are kept (2 hosts + sum + slowest), the run is interrupted by SIGTERM,
    and the command is told how many measurements were kept, to say so."""
    import signal

    from poolbench.system import stopping

    fake = FakeController()

    def stopped_in_the_second(argv: tuple[str, ...]) -> CommandResult:
        measured = [n for n, _ in fake.jobs if n.startswith(("seq-write.", "seq-read."))]
        if len(measured) == 1 and any(a.endswith(".fio") and ".host" in a for a in argv):
            raise stopping.Stopped(signal.SIGTERM)
        return fake(argv)

    store = Store(tmp_path / "r.db")
    said: list[tuple[int, ...]] = []
    runner = RecordingRunner(responses={"fio": stopped_in_the_second})
    with pytest.raises(stopping.Stopped):
        run_fleet(runner, store, FLEET, None, _options("seq-write", runs=3), lambda *_: None,
                  prober=_prober, on_interrupt=lambda *told: said.append(told))  # fmt: skip
    row = _rows(store, "SELECT id, status, stopped_by FROM runs")[0]
    assert (row["status"], row["stopped_by"]) == ("interrupted", "SIGTERM")
    assert said == [(row["id"], 4)] == [(row["id"], len(store.measurements(row["id"])))]
