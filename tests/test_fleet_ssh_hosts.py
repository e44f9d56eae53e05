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
