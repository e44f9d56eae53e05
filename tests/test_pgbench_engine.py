"""One pgbench measurement in process, with a recording runner standing in for PostgreSQL:
the commands and their order, the cluster's settings, the figures from pgbench's recorded
output, device bytes per transaction from the counters, the warm label, and the server
always stopped and its cluster removed (on success, on a failure, and by `poolbench cleanup`
after a kill -9). A stand-in `postgres` process plays the server, so the stop is real."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from poolbench.engine import cleanup
from poolbench.engine.pgbench_run import DRY_SOCKDIR, Pgbench, PgRequest
from poolbench.guards import devices
from poolbench.guards.devices import Counters, MountInfo, Target
from poolbench.guards.workingset import WorkingSet
from poolbench.records.findings import Findings
from poolbench.safety.journal import Journal
from poolbench.system import pgserver
from poolbench.system.runner import CommandError, CommandResult, RecordingRunner
from poolbench.workloads import pgbench

DATA = Path(__file__).resolve().parent / "data" / "pgbench"
GiB = 1 << 30
WRITTEN = 9_000_000  # what the fake counters say the devices wrote in the window
LOADED = 16_000_000  # what the fake load puts in base/


class FakeServer:
    """Answers the PostgreSQL commands as the real programs would, on disk."""

    def __init__(self, fail_run: bool = False, interrupt: bool = False) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.fail_run = fail_run
        self.interrupt = interrupt  # Ctrl-C lands during the timed run
        self.conf = ""

    def __call__(self, argv: Sequence[str]) -> CommandResult | str:
        args = list(argv[4:] if argv[0] == "runuser" else argv)
        tool, rest = os.path.basename(args[0]), args[1:]
        datadir = Path(rest[rest.index("-D") + 1]) if "-D" in rest else None
        if tool == "pg_ctl" and rest[-1] == "start":
            assert datadir is not None
            self.conf = (datadir / "postgresql.conf").read_text()
            self._start(datadir)
        elif tool == "pg_ctl" and rest[-1] == "stop":
            for p in self.procs:
                p.terminate()
                p.wait()
        elif tool == "pgbench" and "-i" in rest:
            base = Path(self._datadir) / "base" / "5"
            base.mkdir(parents=True, exist_ok=True)
            with open(base / "16384", "wb") as fh:
                fh.truncate(LOADED)  # sparse: its size is what counts
        elif tool == "pgbench":
            if self.interrupt:
                raise KeyboardInterrupt
            if self.fail_run:
                return CommandResult(tuple(argv), 2, "", "connection to server failed", 0.1)
            prefix = rest[rest.index("--log-prefix") + 1]
            for i, f in enumerate(sorted(DATA.glob("tpcb-c2-T1.log.*"))):
                shutil.copy(f, f"{prefix}.4242" + (f".{i}" if i else ""))
            return (DATA / "tpcb-c2-T1.stdout").read_text()
        return ""

    def _start(self, datadir: Path) -> None:
        self._datadir = str(datadir)
        code = "import time; time.sleep(120)"
        p = subprocess.Popen(["postgres", "-c", code, "-D", str(datadir)],
                             executable=sys.executable)  # fmt: skip
        self.procs.append(p)
        # pg_ctl -w returns once the server runs; a process a moment old may not have
        # exec'd yet (its /proc cmdline still empty)
        while not Path(f"/proc/{p.pid}/cmdline").read_bytes().startswith(b"postgres"):
            time.sleep(0.001)
        (datadir / "postmaster.pid").write_text(f"{p.pid}\n{datadir}\n")

    def alive(self) -> bool:
        return any(p.poll() is None for p in self.procs)

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.kill()


@pytest.fixture
def counters(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = iter([0, WRITTEN])

    def fake(names: Sequence[str], *_a: object) -> dict[str, Counters]:
        return {n: Counters(0, next(reads)) for n in names}

    monkeypatch.setattr(devices, "read_counters", fake)


def _request(tmp_path: Path, ram: int = 24 * GiB) -> PgRequest:
    work = tmp_path / "work"
    work.mkdir()
    target = Target(str(work), MountInfo(str(work), "zfs", "pool", ""), devices=["loop9"])
    ws = WorkingSet(16 << 20, ram, None, 10 * GiB, False, (16 << 20) / ram)
    return PgRequest(work, target, ws, 2, 1, {"full_page_writes": "off"}, tmp_path / "j")


@pytest.fixture(autouse=True)
def reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    # pytest's tmp_path is 0700: the check is tested on its own (tests/test_pgbench.py)
    monkeypatch.setattr(pgserver, "check_reachable", lambda _d: None)


def _tools(runner: RecordingRunner) -> list[str]:
    out = []
    for argv in runner.argvs:
        args = argv[4:] if argv[0] == "runuser" else argv
        out.append(" ".join([os.path.basename(args[0]), *[a for a in args[1:] if a in (
            "start", "stop", "-i", "-T", "CHECKPOINT")]]))  # fmt: skip
    return out


def test_a_measurement_from_initdb_to_stop(
    tmp_path: Path, server: FakeServer, counters: None
) -> None:
    runner = RecordingRunner({"runuser": server, str(pgserver.bindir()): server})
    runner.responses |= {str(pgserver.bindir() / t): server for t in
                         ("initdb", "pg_ctl", "pgbench", "psql")}  # fmt: skip
    req = _request(tmp_path)
    findings = Findings()
    op = Pgbench(runner).measure(pgbench.workload("pgbench-tpcb"), req, findings)
    assert _tools(runner) == [
        "initdb", "pg_ctl start", "pgbench -i", "psql CHECKPOINT", "pgbench -T",
        "psql CHECKPOINT", "pg_ctl stop",
    ]  # fmt: skip
    if os.geteuid() == 0:  # PostgreSQL refuses root: every program runs as its user
        assert all(a[:4] == ("runuser", "-u", "postgres", "--") for a in runner.argvs)
    # Unix socket only, in its own directory; the study's setting applied
    assert "listen_addresses = ''" in server.conf and "full_page_writes = off" in server.conf
    sock = server.conf.split("unix_socket_directories = '")[1].split("'")[0]
    run = next(a for a in runner.argvs if "-T" in a)
    assert run[run.index("-h") + 1] == sock and run[run.index("-c") + 1] == "2"
    assert run[run.index("-T") + 1] == "1" and "-l" in run
    # the figures: pgbench's TPS, its transactions, the log's latencies
    assert (op.value, op.ops, op.device_bytes) == (1025.010868, 1021, WRITTEN)
    assert op.latency is not None and op.latency.percentiles["99"] == 8_800_000
    pg = findings.to_json()["pgbench"]
    assert pg["device_bytes_per_txn"] == round(WRITTEN / 1021, 1)
    assert pg["data_bytes"] == LOADED and pg["scale"] == 1 and pg["transactions"] == 1021
    assert pg["latency_ms"]["p95"] == 5.556 and pg["settings"]["full_page_writes"] == "off"
    # 16 MB against 24 GiB of RAM: warm, and said so
    assert pg["cache"]["label"] == "warm"
    assert any(w.startswith("warm: the database (15 MiB, scale 1)") for w in op.warnings)
    # stopped and removed, the journal gone with it
    assert not server.alive()
    assert not (req.workdir / "pgdata").exists() and not Path(sock).exists()
    assert not list(req.journals.glob("*.jsonl"))


def test_a_database_larger_than_twice_ram_is_cold(
    tmp_path: Path, server: FakeServer, counters: None
) -> None:
    runner = RecordingRunner({"runuser": server})
    runner.responses |= {str(pgserver.bindir() / t): server for t in
                         ("initdb", "pg_ctl", "pgbench", "psql")}  # fmt: skip
    findings = Findings()
    op = Pgbench(runner).measure(
        pgbench.workload("pgbench-tpcb"), _request(tmp_path, ram=LOADED // 3), findings
    )
    assert findings.to_json()["pgbench"]["cache"]["label"] == "cold"
    assert not any(w.startswith("warm") for w in op.warnings)


def test_a_failed_run_still_stops_the_server(tmp_path: Path, counters: None) -> None:
    server = FakeServer(fail_run=True)
    runner = RecordingRunner({"runuser": server})
    runner.responses |= {str(pgserver.bindir() / t): server for t in
                         ("initdb", "pg_ctl", "pgbench", "psql")}  # fmt: skip
    req = _request(tmp_path)
    try:
        with pytest.raises(CommandError, match="connection to server failed"):
            Pgbench(runner).measure(pgbench.workload("pgbench-select"), req, Findings())
        assert not server.alive() and _tools(runner)[-1] == "pg_ctl stop", _tools(runner)
        assert not (req.workdir / "pgdata").exists()
    finally:
        server.kill()


def test_ctrl_c_during_the_run_stops_the_server(tmp_path: Path, counters: None) -> None:
    server = FakeServer(interrupt=True)
    runner = RecordingRunner({"runuser": server})
    runner.responses |= {str(pgserver.bindir() / t): server for t in
                         ("initdb", "pg_ctl", "pgbench", "psql")}  # fmt: skip
    req = _request(tmp_path)
    try:
        with pytest.raises(KeyboardInterrupt):
            Pgbench(runner).measure(pgbench.workload("pgbench-tpcb"), req, Findings())
        assert not server.alive() and _tools(runner)[-1] == "pg_ctl stop"
        assert not (req.workdir / "pgdata").exists()
        assert not list(req.journals.glob("*.jsonl"))
    finally:
        server.kill()


def test_cleanup_stops_a_server_left_by_a_killed_poolbench(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A journal whose poolbench is gone (kill -9): cleanup stops the server on its data
    directory (pg_ctl, then signals: the stand-in ignores pg_ctl here) and removes both
    directories."""
    datadir, sockdir = tmp_path / "pgdata", tmp_path / "sock"
    datadir.mkdir()
    sockdir.mkdir()
    server._start(datadir)
    dead = subprocess.Popen(["true"])
    dead.wait()
    journals = tmp_path / "journals"
    journals.mkdir()
    journal = Journal(RecordingRunner(), journals / f"pgbench-pid{dead.pid}.jsonl")
    journal.postgres_intent(str(datadir), str(sockdir), "/usr/lib/postgresql/15/bin")
    runner = RecordingRunner()  # pg_ctl "succeeds" without stopping it: signals must
    monkeypatch.setattr(pgserver, "GRACE_S", 0.3)
    outcomes = cleanup.cleanup(runner, journals)
    assert [o.left for o in outcomes] == [[]]
    assert not server.alive()
    assert not datadir.exists() and not sockdir.exists()
    assert not list(journals.iterdir())
    stop = runner.argvs[0]
    assert stop[-1] == "stop" and "immediate" in stop


def test_cleanup_leaves_a_server_it_did_not_start(tmp_path: Path) -> None:
    """postmaster.pid naming a process that is not a postgres on this data directory (a
    stale file, a reused pid) stops nothing."""
    datadir, sockdir = tmp_path / "pgdata", tmp_path / "sock"
    datadir.mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (datadir / "postmaster.pid").write_text(f"{other.pid}\n")
        assert pgserver.postmaster_pid(datadir) is None
        runner = RecordingRunner()
        pgserver.stop(runner, Path("/x/bin"), datadir, sockdir)
        assert runner.argvs == [] and other.poll() is None and not datadir.exists()
    finally:
        other.kill()
        other.wait()


def test_the_journal_entry_names_what_cleanup_needs(tmp_path: Path) -> None:
    path = tmp_path / "pgbench-pid1.jsonl"
    Journal(RecordingRunner(), path).postgres_intent("/p/data", "/tmp/pb-pg-x", "/b")
    assert json.loads(path.read_text()) == {
        "kind": "postgres", "datadir": "/p/data", "sockdir": "/tmp/pb-pg-x", "bindir": "/b",
    }  # fmt: skip


def test_the_dry_run_prints_the_commands_a_measurement_runs(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dry run is the measurement itself under a runner that prints: the same commands
    in the same order, the server's stop with its wait (-w -t) included."""
    monkeypatch.setattr(devices, "read_counters", lambda names, *_a: {n: Counters(0, 0)
                                                                      for n in names})  # fmt: skip
    real = RecordingRunner({"runuser": server})
    real.responses |= {str(pgserver.bindir() / t): server for t in
                       ("initdb", "pg_ctl", "pgbench", "psql")}  # fmt: skip
    req = _request(tmp_path)
    Pgbench(real).measure(pgbench.workload("pgbench-tpcb"), req, Findings())
    dry = RecordingRunner(dry_run=True)
    Pgbench(dry).measure(pgbench.workload("pgbench-tpcb"), req, Findings())
    run = next(a for a in real.argvs if "-T" in a)
    sockdir = run[run.index("-h") + 1]  # a fresh private directory; the dry run names one
    printed = [tuple(a.replace(sockdir, str(DRY_SOCKDIR)) for a in argv) for argv in real.argvs]
    assert dry.argvs == printed and len(printed) == 7
    assert printed[-1][-6:] == ("-m", "immediate", "-w", "-t", "30", "stop")
    assert not (req.workdir / "pgdata").exists() and not list(req.journals.glob("*"))
