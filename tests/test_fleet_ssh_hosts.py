"""The ssh hosts harness itself (tests/plugins/ssh_hosts.py): a plain `ssh` reaches each host
as root with the test's key and the test's known_hosts, lands in that host's own network and
mount namespaces, and each host's /var/lib/poolbench is its own."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tests.plugins.ssh_hosts import SshFleet, SshHost

pytestmark = [pytest.mark.untimed]


def test_plain_ssh_reaches_each_host_as_root_in_its_own_namespaces(ssh_hosts: SshFleet) -> None:
    machine_passwd = Path("/etc/passwd").read_text()
    for i, host in enumerate(ssh_hosts.hosts):
        probe = "id -u; ip -4 -o addr show dev eth0; getent passwd sshd"
        r = ssh_hosts.ssh(host, "sh", "-c", probe)
        assert r.returncode == 0, r.stderr
        uid, addr, privsep = r.stdout.splitlines()
        assert uid == "0"
        assert f" {host.address}/24 " in addr  # it is that host's namespace, not another's
        assert privsep.startswith("sshd:x:64999:")  # the host's own passwd copy
        # Each host's store directory is its own: what one writes, the others do not see.
        w = ssh_hosts.ssh(host, "sh", "-c", f"echo host{i} > /var/lib/poolbench/mark")
        assert w.returncode == 0, w.stderr
    for i, host in enumerate(ssh_hosts.hosts):
        r = ssh_hosts.ssh(host, "cat", "/var/lib/poolbench/mark")
        assert r.stdout.strip() == f"host{i}"
        assert (host.store / "mark").read_text().strip() == f"host{i}"
    assert Path("/etc/passwd").read_text() == machine_passwd  # the machine's is untouched
    assert not Path("/var/lib/poolbench/mark").exists()


def test_ssh_refuses_a_key_the_host_does_not_know(ssh_hosts: SshFleet, tmp_path: Path) -> None:
    """Key-only login: without the test's key (no agent, no password) the host refuses."""
    import subprocess

    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    host = ssh_hosts.hosts[0]
    r = subprocess.run(
        ["ip", "netns", "exec", ssh_hosts.ctl, "ssh", "-F", "/dev/null",
         "-o", f"IdentityFile={other}", "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
         "-o", f"UserKnownHostsFile={ssh_hosts.known_hosts}",
         f"root@{host.address}", "true"],
        capture_output=True, text=True, timeout=20,
    )  # fmt: skip
    assert r.returncode == 255
    assert "Permission denied (publickey)" in r.stderr


def test_fleet_check_names_each_host_that_is_not_ready_and_why(
    ssh_hosts: SshFleet,
    make_loop_fs,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    """`poolbench fleet check` over real ssh to three hosts and a port nothing listens on:
    the ready host's poolbench, ZFS and clock; a host whose disk is in use (mounted ext4)
    refused by that host's own safety layer (its ext4 signature); a host without poolbench;
    the dead port named with ssh's reason. Read-only: the mounted disk is untouched."""
    import json
    import subprocess
    import sys

    import poolbench

    here = str(Path(sys.executable).parent / "poolbench")
    busy = make_loop_fs("64M")
    before = Path("/proc/self/mountinfo").read_text().count(busy.device)
    h0, h1, h2 = ssh_hosts.hosts
    hostfile = tmp_path / "fleet.ssh"
    hostfile.write_text(
        f"root@{h0.address}  disks=2x64M  poolbench={here}\n"
        f"root@{h1.address}  disks={busy.device}  poolbench={here}\n"
        f"root@{h2.address}  disks=2x64M   # poolbench is not on its PATH\n"
        f"root@{h0.address}:2222  poolbench={here}  # no sshd on that port\n"
    )
    r = subprocess.run(
        ["ip", "netns", "exec", ssh_hosts.ctl, here, "fleet", "check", str(hostfile),
         "--ssh-config", str(ssh_hosts.ssh_config), "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    doc = {h["host"]: h for h in json.loads(r.stdout)["hosts"]}
    ready = doc[f"root@{h0.address}"]
    assert ready["ready"] and ready["problems"] == [], ready
    assert ready["poolbench"] == poolbench.__version__ and ready["disks"] == "2x64M sparse files"
    assert ready["zfs"].startswith("zfs-fuse")  # what this machine's doctor says
    # The same machine's clock: the skew is within its bound plus a millisecond of rounding.
    assert abs(ready["clock_skew_s"]) <= ready["clock_skew_bound_s"] + 0.001
    busy_host = doc[f"root@{h1.address}"]
    assert not busy_host["ready"] and busy_host["disks"] == "refused"
    # The host's sshd runs in a mount namespace made before the disk was mounted: there it
    # is not mounted, but its ext4 signature is read there and refused.
    assert f"{busy.device} (64.0 MiB" in busy_host["problems"][0]
    assert "ext4" in busy_host["problems"][0], busy_host["problems"]
    missing = doc[f"root@{h2.address}"]
    assert missing["reachable"] and "poolbench is not installed there" in missing["problems"][0]
    dead = doc[f"root@{h0.address}:2222"]
    assert not dead["reachable"] and "Connection refused" in dead["problems"][0]
    assert "3 of 4 host(s) are not ready" in r.stderr
    assert Path("/proc/self/mountinfo").read_text().count(busy.device) == before


FLEET_STUDY = """name = "fleet-btrfs"
replicates = 2
max_replicates = 2

[disks]
count = 2
size = "256M"
source = "loop"

[factors]
backend = ["btrfs"]
layout = ["raid0", "raid1"]

[workloads]
names = ["seq-write"]
size = "48M"
min_window = 0.5
"""


CAP_MIB = 20  # each disk of the first two hosts; the third host's at half that


@contextlib.contextmanager
def _capped_loops(tmp_path: Path, caps_mib: list[int]) -> Iterator[list[list[str]]]:
    """Two loop devices per host over sparse files, each host's capped at its rate (blkio
    throttle, reads and writes); all detached and uncapped after."""
    import os
    import subprocess

    from poolbench.system import throttle

    if throttle.unavailable():
        pytest.skip(f"no blkio throttle here: {throttle.unavailable()}")
    made: list[str] = []
    capped: list[str] = []
    try:
        per_host = []
        for h, cap in enumerate(caps_mib):
            devs = []
            for i in range(2):
                img = tmp_path / f"h{h}d{i}.img"
                img.touch()
                os.truncate(img, 256 << 20)
                dev = subprocess.run(
                    ["losetup", "--find", "--show", "--direct-io=on", str(img)],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.strip()
                made.append(dev)
                majmin = throttle.device_number(dev)
                throttle.set_cap(majmin, cap << 20)
                capped.append(majmin)
                devs.append(dev)
            per_host.append(devs)
        yield per_host
    finally:
        for majmin in capped:
            throttle.set_cap(majmin, 0)
        for dev in made:
            subprocess.run(["losetup", "--detach", dev], check=False)


def test_fleet_run_on_three_hosts_survives_a_cut_link_and_resume_collects_it(
    ssh_hosts: SshFleet, tmp_path: Path
) -> None:
    """`poolbench fleet run` over real ssh: the same study and seed on three hosts at once,
    each in its own namespaces with its own store and its own two loop devices, the third
    host's capped at half the others' rate. One host's link is cut once its study has begun:
    the controller names it and the others are collected; the cut host's study goes on
    there, and once the link is back `--resume TAG` collects it. Every host's runs end up in
    the local store tagged with their host; the fleet's answer names the half-speed host
    (its figures about half its peers', as the caps say) and compares the layouts over the
    three hosts; nothing is left running anywhere."""
    import sys

    here = str(Path(sys.executable).parent / "poolbench")
    hosts = ssh_hosts.hosts
    with _capped_loops(tmp_path, [CAP_MIB, CAP_MIB, CAP_MIB // 2]) as disks:
        hostfile = tmp_path / "fleet.ssh"
        hostfile.write_text("".join(f"root@{h.address} disks={','.join(d)} poolbench={here}\n"
                                    for h, d in zip(hosts, disks, strict=True)))  # fmt: skip
        _run_cut_and_resume(ssh_hosts, hostfile, tmp_path, here)


def _run_cut_and_resume(ssh_hosts: SshFleet, hostfile: Path, tmp_path: Path, here: str) -> None:
    import json
    import re
    import sqlite3
    import subprocess
    import threading
    import time

    hosts = ssh_hosts.hosts
    study = tmp_path / "study.toml"
    study.write_text(FLEET_STUDY)
    db = tmp_path / "local.db"
    base = ["ip", "netns", "exec", ssh_hosts.ctl, here, "fleet", "run",
            "--ssh-config", str(ssh_hosts.ssh_config), "--db", str(db)]  # fmt: skip
    cut = hosts[1]
    cut_done = threading.Event()

    def cut_when_begun() -> None:  # once the cut host's study stored its run
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not cut_done.is_set():
            if list((cut.store / "fleet").glob("*/store.db")):
                subprocess.run(["ip", "-n", cut.name, "link", "set", "eth0", "down"], check=True)
                cut_done.set()
                return
            time.sleep(0.1)

    watcher = threading.Thread(target=cut_when_begun)
    watcher.start()
    try:
        first = subprocess.run(
            [*base, str(hostfile), str(study), "--seed", "7", "--poll", "0.5", "--link-grace", "4",
             "--no-screen", "--together"],
            capture_output=True, text=True, timeout=400,
        )  # fmt: skip
    finally:
        cut_done.set()
        watcher.join()
        subprocess.run(["ip", "-n", cut.name, "link", "set", "eth0", "up"], check=True)
    print(first.stdout[-3000:], first.stderr[-2000:])
    assert first.returncode == 1, first.stderr
    tag = re.search(r"fleet run (\S+): 3 host\(s\), seed 7", first.stdout)
    assert tag, first.stdout
    assert f"[root@{cut.address}] link lost" in first.stdout

    assert f"root@{cut.address}: link lost" in first.stderr
    assert f"--resume {tag[1]}" in first.stderr
    # Resumed once the link is back: the cut host's study went on there and is collected.
    second = subprocess.run([*base, "--resume", tag[1], "--poll", "0.5"],
                            capture_output=True, text=True, timeout=400)  # fmt: skip
    print(second.stdout[-3000:], second.stderr[-2000:])
    assert second.returncode == 0, second.stderr
    # --together: one start time, the clocks' skew stated, each host started on time.
    assert "every host starts its study at " in first.stdout and "so they start within" in (
        first.stdout
    )
    late = re.findall(r"\[(\S+)\] fleet start: started (\S+) s after it", first.stdout)
    # (the cut host's line may come before its cut or, from its log, after the resume)
    started = {h for h, _ in late} | {
        h for h, _ in re.findall(r"\[(\S+)\] fleet start: started (\S+) s after it", second.stdout)
    }
    assert started == {f"root@{h.address}" for h in hosts}
    assert all(0 <= float(s) < 0.5 for _, s in late), late
    conn = sqlite3.connect(db)
    runs = conn.execute("SELECT id, status, origin, argv FROM runs ORDER BY id").fetchall()
    by_host = {json.loads(o)["fleet_host"]: (i, s, json.loads(a)) for i, s, o, a in runs}
    assert set(by_host) == {f"root@{h.address}" for h in hosts}
    for h in hosts:
        run_id, status, argv = by_host[f"root@{h.address}"]
        assert status == "finished" and argv[argv.index("--seed") + 1] == "7"
        # Every measurement the host stored, here: its own store read on the machine (the
        # host's /var/lib is an overlay whose upper directory the test can read).
        (theirs,) = (h.store / "fleet").glob("*/store.db")
        there = sqlite3.connect(theirs)
        q = "SELECT config, workload, replicate, value FROM measurements WHERE run_id = ?"
        rows = conn.execute(q + " ORDER BY id", (run_id,)).fetchall()
        assert rows == there.execute(q + " ORDER BY id", (1,)).fetchall() and rows
        there.close()
        per_config = conn.execute(
            "SELECT COUNT(*) FROM measurements WHERE run_id = ? GROUP BY config", (run_id,)
        ).fetchall()
        assert per_config == [(2,), (2,)]  # two layouts, two replicates each
    # The fleet's answer: the third host's disks run at half the others' cap, so its figures
    # are about half its peers' on both layouts, and it alone is named slow.
    means = {
        (json.loads(o)["fleet_host"], c): v
        for o, c, v in conn.execute(
            "SELECT r.origin, m.config, AVG(m.value) FROM measurements m JOIN runs r "
            "ON r.id = m.run_id GROUP BY r.id, m.config"
        )
    }
    slow, peers = f"root@{hosts[2].address}", [f"root@{h.address}" for h in hosts[:2]]
    for config in {c for _, c in means}:
        ratio = means[(slow, config)] / (sum(means[(p, config)] for p in peers) / 2)
        assert 0.35 <= ratio <= 0.65, (config, means)
    assert f"warning: {slow} is slower than its peers on seq-write" in second.stdout
    assert not any(f"warning: {p} is slower" in second.stdout for p in peers)
    assert "Over the fleet" in second.stdout and "over 3 host(s)" in second.stdout
    # Every guard warning a host stored is said under the answer with its host: a figure a
    # host cannot vouch for is not averaged in silently.
    stored = conn.execute(
        "SELECT r.origin, m.config, m.warnings FROM measurements m JOIN runs r ON r.id = m.run_id"
    ).fetchall()
    for origin, config, warnings in stored:
        for w in json.loads(warnings):
            line = f"⚠ {json.loads(origin)['fleet_host']} {config} seq-write: {w}"
            assert line[:100] in second.stdout.replace("\n", " "), line
    for h in hosts:  # nothing of the study left running in any host's namespace
        pids = subprocess.run(["ip", "netns", "pids", h.name], capture_output=True, text=True)
        cmds = [Path(f"/proc/{p}/cmdline").read_bytes() for p in pids.stdout.split()]
        assert not [c for c in cmds if b"poolbench" in c], cmds


def test_ctrl_c_stops_every_hosts_study_cleanly_and_resume_finishes_them(
    ssh_hosts: SshFleet, tmp_path: Path
) -> None:
    """Ctrl-C to `poolbench fleet run` once every host's study has begun: each host's study
    gets its own Ctrl-C (torn down there: no loop device, mount or process of it left, its
    run interrupted and resumable), the controller exits 130; `--resume TAG` resumes each
    (`run --resume` there) and collects the three finished runs."""
    import json
    import re
    import signal
    import sqlite3
    import subprocess
    import sys
    import time

    from poolbench.errors import EXIT_INPUT

    here = str(Path(sys.executable).parent / "poolbench")
    hosts = ssh_hosts.hosts
    hostfile = tmp_path / "fleet.ssh"
    hostfile.write_text("".join(f"root@{h.address} disks=2x256M poolbench={here}\n" for h in hosts))
    study = tmp_path / "study.toml"
    # Four replicates, not two: the Ctrl-C must find every host's study still running, and
    # the three refusals asked first took long enough on a loaded machine for a two-replicate
    # study on one host to finish before it (its run "finished", not "interrupted").
    study.write_text(FLEET_STUDY.replace("replicates = 2", "replicates = 4"))
    db = tmp_path / "local.db"
    base = ["ip", "netns", "exec", ssh_hosts.ctl, here, "fleet", "run", "--poll", "0.5",
            "--ssh-config", str(ssh_hosts.ssh_config), "--db", str(db)]  # fmt: skip
    loops_before = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    ctl = subprocess.Popen([*base, str(hostfile), str(study)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not all(list((h.store / "fleet").glob("*/store.db")) for h in hosts):
            assert time.monotonic() < deadline and ctl.poll() is None
            time.sleep(0.1)

        # A second fleet study asked of each host meanwhile (as a new fleet run would ask):
        # refused there by name (one fleet study per host: they would share its disks).
        def ask_another(h: SshHost) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["ip", "netns", "exec", ssh_hosts.ctl, "ssh", "-F", str(ssh_hosts.ssh_config),
                 f"root@{h.address}", here, "fleet", "host-start", "other", "--", "runs"],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip

        with ThreadPoolExecutor(len(hosts)) as pool:  # at once: the studies keep running
            answers = list(pool.map(ask_another, hosts))
        for other in answers:
            assert other.returncode == EXIT_INPUT, other.stderr
            assert (
                "Fleet run 20" in other.stderr and "is still going on this host" in other.stderr
            ), other.stderr
        ctl.send_signal(signal.SIGINT)
        out, err = ctl.communicate(timeout=120)
    finally:
        if ctl.poll() is None:
            ctl.kill()
    print(out[-2000:], err[-2000:])
    assert ctl.returncode == 130, err
    assert out.count("stopped (Ctrl-C there") == 3
    tag = re.search(r"fleet run (\S+): 3 host\(s\)", out)
    assert tag, out
    # Each host's study tears down there on its own Ctrl-C: wait for the three to end.
    for h in hosts:
        (store,) = (h.store / "fleet").glob("*/store.db")
        deadline = time.monotonic() + 120
        while True:
            pids = subprocess.run(["ip", "netns", "pids", h.name], capture_output=True, text=True)
            cmds = [Path(f"/proc/{p}/cmdline").read_bytes() for p in pids.stdout.split()]
            if not [c for c in cmds if b"poolbench" in c]:
                break
            assert time.monotonic() < deadline, cmds
            time.sleep(0.2)
        there = sqlite3.connect(store)
        assert there.execute("SELECT status FROM runs").fetchall() == [("interrupted",)]
        there.close()
    assert subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout == loops_before
    for h in hosts:  # the studies mounted in their host's own mount namespace: seen from there
        pids = subprocess.run(["ip", "netns", "pids", h.name], capture_output=True, text=True)
        assert pids.stdout.split()  # its sshd
        for p in pids.stdout.split():
            assert " btrfs " not in Path(f"/proc/{p}/mounts").read_text()
    second = subprocess.run([*base, "--resume", tag[1], "--json"], capture_output=True,
                            text=True, timeout=400)  # fmt: skip
    print(second.stdout[-2000:], second.stderr[-2000:])
    assert second.returncode == 0, second.stderr
    # --json: the progress on stderr, one document on stdout
    assert second.stderr.count("resumed (study.toml") == 3
    doc = json.loads(second.stdout)
    assert doc["tag"] == tag[1] and {h["state"] for h in doc["hosts"]} == {"collected"}
    assert sorted(h["remote_status"] for h in doc["hosts"]) == ["finished"] * 3
    assert {r["config"] for r in doc["answer"]["rows"]} == {
        "backend=btrfs layout=raid0", "backend=btrfs layout=raid1"
    }  # fmt: skip
    assert all(len(r["hosts"]) == 3 for r in doc["answer"]["rows"])
    conn = sqlite3.connect(db)
    runs = conn.execute("SELECT status, origin FROM runs").fetchall()
    assert sorted(json.loads(o)["fleet_host"] for _, o in runs) == sorted(
        f"root@{h.address}" for h in hosts
    )
    assert {s for s, _ in runs} == {"finished"}
