"""A real fleet on this machine: three hosts as network namespaces, each with its own tmpfs and
its own `fio --server` bound to its own address; the controller (poolbench) runs in a fourth
namespace that holds the bridge. Nothing is configured in the root namespace: every address in
10.231.7.0/24 lives inside a namespace this file creates, and everything is removed in finally
blocks (servers killed, namespaces deleted with their veths and bridge, tmpfs unmounted).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

HAS_IP = shutil.which("ip") is not None
HAS_FIO = shutil.which("fio") is not None

# Slow, yet on no disk, pool, cap or cache of the machine (its hosts are network namespaces
# with a tmpfs each, no cache drop: fleet/guards.py): it runs beside the machine's chain.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.root,
    pytest.mark.skipif(not HAS_IP, reason="`ip` (Debian: iproute2) is not installed"),
    pytest.mark.skipif(not HAS_FIO, reason="fio is not installed (Debian: fio)"),
]

SUBNET = "10.231.7"
CTL_ADDR = f"{SUBNET}.254"
# Run the real `poolbench` entry point (main(): exit codes, error paragraphs) with only the
# commands this test needs registered, so an unrelated command module cannot break it.
LAUNCH = (
    "import sys\n"
    "from poolbench.cli import main as m, bench_cmd, hosts_cmd, import_cmd\n"
    "for c in (bench_cmd.bench, hosts_cmd.hosts, import_cmd.import_):\n"
    "    m.cli.add_command(c)\n"
    "m._register = lambda: None\n"
    "m.main(sys.argv[1:])\n"
)


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), check=check, capture_output=True, text=True)


def _netns_available() -> str:
    probe = f"pbt{os.getpid()}probe"[:15]
    r = sh("ip", "netns", "add", probe, check=False)
    if r.returncode:
        return r.stderr.strip() or "ip netns add failed"
    sh("ip", "netns", "del", probe, check=False)
    return ""


@dataclass
class Fleet:
    tag: str
    ctl: str  # the controller's namespace
    root: Path
    namespaces: list[str] = field(default_factory=list)
    mounts: list[Path] = field(default_factory=list)
    servers: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    def ns(self, i: int) -> str:
        return f"{self.tag}h{i}"

    def addr(self, i: int) -> str:
        return f"{SUBNET}.{i}"

    def target(self, i: int) -> Path:
        return self.root / f"h{i}"

    def start_server(self, i: int) -> None:
        # Bound to the host's own address, never a wildcard.
        self.servers[i] = subprocess.Popen(
            ["ip", "netns", "exec", self.ns(i), "fio", f"--server={self.addr(i)}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for _ in range(100):
            r = sh("ip", "netns", "exec", self.ns(i), "ss", "-Hltn", check=False)
            if f"{self.addr(i)}:8765" in r.stdout:
                return
            time.sleep(0.05)
        raise RuntimeError(f"fio server in {self.ns(i)} did not start listening")

    def pids(self, i: int) -> list[int]:
        out = sh("ip", "netns", "pids", self.ns(i), check=False).stdout
        return [int(p) for p in out.split()]

    def kill_host(self, i: int) -> None:
        """The host dies: every process in its namespace is killed at once."""
        for pid in self.pids(i):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def fio_jobs(self, i: int, settle_s: float = 5.0) -> list[str]:
        """fio processes in host i's namespace other than its listening server, after giving
        the server's per-connection children a moment to exit."""
        server = self.servers.get(i)
        deadline = time.monotonic() + settle_s
        while True:
            rows = []
            for pid in self.pids(i):
                if server is not None and pid == server.pid:
                    continue
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                rows.append(f"{pid} {b' '.join(argv).decode(errors='replace')}")
            if not rows or time.monotonic() > deadline:
                return rows
            time.sleep(0.1)

    def poolbench(
        self, *args: str, db: Path, timeout: float = 300, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        argv = ["ip", "netns", "exec", self.ctl, sys.executable, "-c", LAUNCH, *args]
        full = {**os.environ, "POOLBENCH_DB": str(db), "COLUMNS": "200", **(env or {})}
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=full)

    def hostfile(self) -> Path:
        p = self.root / "fleet.hosts"
        lines = ["# three namespaces, each with its own tmpfs"]
        lines += [f"{self.addr(i)} {self.target(i)}" for i in (1, 2, 3)]
        p.write_text("\n".join(lines) + "\n")
        return p


def _teardown(f: Fleet) -> list[str]:
    problems = []
    for i in list(f.servers):
        f.kill_host(i)
    for proc in f.servers.values():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    for ns in [*f.namespaces, f.ctl]:
        r = sh("ip", "netns", "del", ns, check=False)  # takes its veths and bridge with it
        if r.returncode and "No such file" not in r.stderr:
            problems.append(f"netns del {ns}: {r.stderr.strip()}")
    for m in f.mounts:
        r = sh("umount", str(m), check=False)
        if r.returncode:
            sh("umount", "-l", str(m), check=False)
    return problems


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    reason = _netns_available()
    if reason:
        pytest.skip(f"network namespaces are unavailable: {reason}")
    tag = f"pbt{os.getpid() % 100000}"
    f = Fleet(tag=tag, ctl=f"{tag}c", root=tmp_path)
    try:
        sh("ip", "netns", "add", f.ctl)
        f.namespaces.append(f.ctl)
        sh("ip", "-n", f.ctl, "link", "set", "lo", "up")
        sh("ip", "-n", f.ctl, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", f.ctl, "addr", "add", f"{CTL_ADDR}/24", "dev", "br0")
        sh("ip", "-n", f.ctl, "link", "set", "br0", "up")
        for i in (1, 2, 3):
            ns = f.ns(i)
            sh("ip", "netns", "add", ns)
            f.namespaces.append(ns)
            # The veth pair is born inside the host's namespace, its peer moved into the
            # controller's: neither end ever exists in the root namespace.
            sh("ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", f"v{i}")
            sh("ip", "-n", ns, "link", "set", f"v{i}", "netns", f.ctl)
            sh("ip", "-n", f.ctl, "link", "set", f"v{i}", "master", "br0")
            sh("ip", "-n", f.ctl, "link", "set", f"v{i}", "up")
            sh("ip", "-n", ns, "addr", "add", f"{f.addr(i)}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            mnt = f.target(i)
            mnt.mkdir()
            sh("mount", "-t", "tmpfs", "-o", "size=48m", f"{tag}h{i}", str(mnt))
            f.mounts.append(mnt)
            f.start_server(i)
        yield f
    finally:
        problems = _teardown(f)
        left = [ns for ns in sh("ip", "netns", "list").stdout.split() if ns.startswith(tag)]
        mounted = [str(m) for m in f.mounts if os.path.ismount(m)]
        assert not problems and not left and not mounted, (problems, left, mounted)


def _rows(db: Path, sql: str, *args: object) -> list[sqlite3.Row]:
    c = sqlite3.connect(db)
    c.row_factory = sqlite3.Row
    try:
        return list(c.execute(sql, args))
    finally:
        c.close()


def test_hosts_check_names_every_host_and_its_fio(fleet: Fleet, tmp_path: Path) -> None:
    r = fleet.poolbench("hosts", "check", str(fleet.hostfile()), "--json", db=tmp_path / "r.db")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    fio_v = sh("fio", "--version").stdout.strip()
    assert [h["label"] for h in data["hosts"]] == [fleet.addr(i) for i in (1, 2, 3)]
    for h in data["hosts"]:
        assert h["reachable"] and h["error"] is None
        assert h["fio_version"] == fio_v and h["os"] == "Linux"
        assert h["clock_skew_s"] is not None and abs(h["clock_skew_s"]) < 2.0
        assert h["free_bytes"] is None  # fio cannot tell; said so, not invented
    assert data["notes"] == []

    # A host whose server is down, and a target that does not exist there: both named.
    fleet.kill_host(2)
    hf = tmp_path / "bad.hosts"
    hf.write_text(
        f"{fleet.addr(1)} /nonexistent/target\n{fleet.addr(2)} {fleet.target(2)}\n"
        f"{fleet.addr(3)}:8765\n"
    )
    r = fleet.poolbench(
        "hosts", "check", str(hf), "--path", str(fleet.target(3)), db=tmp_path / "r.db"
    )
    assert r.returncode == 1
    assert f"host {fleet.addr(2)} did not answer" in r.stderr
    assert f"host {fleet.addr(1)}: the target /nonexistent/target is not a directory" in r.stderr
    assert fleet.addr(3) not in r.stderr.split("not ready:")[1]
    assert "no authentication" in r.stdout


def test_bench_hosts_per_host_and_aggregate_results_stored(fleet: Fleet, tmp_path: Path) -> None:
    db = tmp_path / "fleet.db"
    r = fleet.poolbench(
        "bench", "--hosts", str(fleet.hostfile()), "--size", "8M",
        "--workloads", "seq-write,seq-read", "--min-runs", "2", "--max-runs", "2", "--json",
        "--seed", "7", db=db,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr + r.stdout
    out = json.loads(r.stdout)
    labels = [fleet.addr(i) for i in (1, 2, 3)]
    # The seed and each round's workload order are recorded, and are the order that ran.
    meta = json.loads(_rows(db, "SELECT metadata FROM runs")[0]["metadata"])["fleet"]
    assert meta["options"]["seed"] == 7
    orders = meta["round_orders"]
    assert len(orders) == 2 and all(sorted(o) == ["seq-read", "seq-write"] for o in orders)
    ran = [m["workload"] for m in _rows(
        db, "SELECT workload FROM measurements WHERE host = ? ORDER BY id", labels[0])]  # fmt: skip
    assert ran == [w for o in orders for w in o]
    assert out["status"] == "finished" and out["failures"] == {}
    for res in out["results"]:
        assert sorted(res["per_host"]) == labels
        assert res["sum"]["replicates"] == 2 and not res["partial"]
        for rep in range(2):
            host_vals = [res["per_host"][h]["values"][rep] for h in labels]
            assert res["sum"]["values"][rep] == pytest.approx(sum(host_vals))
            assert res["slowest"]["values"][rep] == pytest.approx(min(host_vals))
        # tmpfs has no disk: the device check is reported as not applied, per host.
        joined = " ".join(res["warnings"])
        assert all(f"host {h}: device check not applied" in joined for h in labels)
    for h in labels:
        notes = " ".join(out["not_applied"][h])
        assert "cache drop not verified" in notes and "working set vs RAM" in notes

    run_id = out["run_id"]
    run = _rows(db, "SELECT * FROM runs WHERE id = ?", run_id)[0]
    assert run["status"] == "finished" and run["uid"]
    hosts = _rows(db, "SELECT * FROM run_hosts WHERE run_id = ? ORDER BY label", run_id)
    fio_v = sh("fio", "--version").stdout.strip()
    assert [h["label"] for h in hosts] == labels
    assert all(h["fio_version"] == fio_v and h["status"] == "ok" for h in hosts)
    assert all(h["server_hostname"] == os.uname().nodename for h in hosts)
    ms = _rows(db, "SELECT * FROM measurements WHERE run_id = ?", run_id)
    assert len(ms) == 2 * 2 * (3 + 2)  # workloads × replicates × (hosts + sum + slowest)
    per_host = [m for m in ms if m["host"]]
    assert {m["host"] for m in per_host} == set(labels)
    for m in per_host:
        assert f"directory={fleet.target(labels.index(m['host']) + 1)}" in m["job_file"]
        assert "refill_buffers=1" in m["job_file"]
        assert m["app_bytes"] == 8 * 2**20
    cmds = [
        json.loads(c["argv"])
        for c in _rows(db, "SELECT argv FROM commands WHERE run_id = ?", run_id)
    ]
    together = [a for a in cmds if sum(x.startswith("--client=") for x in a) == 3]
    assert len(together) >= 4  # every measurement started on all three hosts by one controller
    # Nothing is left on the hosts: prepared data was unlinked through fio, writers unlink.
    for i in (1, 2, 3):
        assert list(fleet.target(i).iterdir()) == []
        assert fleet.fio_jobs(i) == []


def test_a_host_dying_mid_run_is_named_others_kept_nothing_left(
    fleet: Fleet, tmp_path: Path
) -> None:
    db = tmp_path / "fleet.db"
    killed = threading.Event()

    def killer() -> None:
        # Wait until the timed random-read job is running on all hosts, then kill host 2.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for p in Path("/proc").iterdir():
                try:
                    if p.name.isdigit() and b"rand-read-4k.0.host" in (p / "cmdline").read_bytes():
                        # Mid-run of the 5 s job even when the (shuffled) round puts it first
                        # and its server lays out the file before timing starts: a kill during
                        # that setup makes fio print no "disconnected" line for the host.
                        time.sleep(3.0)
                        fleet.kill_host(2)
                        killed.set()
                        return
                except OSError:
                    continue
            time.sleep(0.05)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    r = fleet.poolbench(
        "bench", "--hosts", str(fleet.hostfile()), "--size", "8M",
        "--workloads", "seq-read,rand-read-4k", "--runtime", "5",
        "--min-runs", "2", "--max-runs", "2", "--json",
        db=db,
    )  # fmt: skip
    t.join(timeout=5)
    assert killed.is_set()
    assert r.returncode == 1, r.stdout + r.stderr
    h2 = fleet.addr(2)
    assert f"host {h2} went away during the run" in r.stderr
    assert "marked partial" in r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "partial" and list(out["failures"]) == [h2]
    rr = next(x for x in out["results"] if x["workload"] == "rand-read-4k")
    assert sorted(rr["per_host"]) == [fleet.addr(1), fleet.addr(3)]
    assert rr["partial"]
    run = _rows(db, "SELECT * FROM runs WHERE id = ?", out["run_id"])[0]
    assert run["status"] == "partial" and h2 in run["error"]
    hosts = {
        h["label"]: h for h in _rows(db, "SELECT * FROM run_hosts WHERE run_id = ?", out["run_id"])
    }
    assert hosts[h2]["status"] == "failed" and "went away" in hosts[h2]["error"]
    agg = _rows(
        db,
        "SELECT * FROM measurements WHERE run_id = ? AND workload = 'rand-read-4k' "
        "AND host IS NULL",
        out["run_id"],
    )
    assert agg and all("partial: 2 of 3 hosts" in a["warnings"] for a in agg)
    kept = _rows(
        db,
        "SELECT host FROM measurements WHERE run_id = ? AND workload = 'rand-read-4k' "
        "AND host IS NOT NULL",
        out["run_id"],
    )
    assert sorted(k["host"] for k in kept) == [fleet.addr(1), fleet.addr(3)]
    # No fio job remains on any host; the survivors' data was removed, host 2's is named.
    assert fleet.pids(2) == []
    time.sleep(0.5)
    for i in (1, 3):
        assert fleet.fio_jobs(i) == [], fleet.fio_jobs(i)
        assert list(fleet.target(i).iterdir()) == []
    assert any(f"host {h2} failed" in n and "may remain" in n for n in out["notes"])
