"""The ssh hosts harness itself (tests/plugins/ssh_hosts.py): a plain `ssh` reaches each host
as root with the test's key and the test's known_hosts, lands in that host's own network and
mount namespaces, and each host's /var/lib/poolbench is its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.plugins.ssh_hosts import SshFleet

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
