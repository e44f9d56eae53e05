"""Hosts with their own OpenSSH server, for the fleet's ssh tests (docs/testing.md).

Each host is a network namespace with its own address on a bridge that lives in a controller
namespace (nothing is configured in the machine's own namespace), and its own `sshd` started
by the fixture: key-only root login with a key made for the test, a private known_hosts.

The server is the one scripts/setup.sh unpacked into .venv/sshd (never installed: installing
openssh-server would start a service on the machine). sshd 9.2 wants its privilege-separation
user `sshd` and /run/sshd: each host's sshd runs in its own mount namespace where /etc/passwd
and /etc/group are bind-mounted copies that add that user, /run is a private tmpfs, and
/var/lib is an overlay whose upper directory is the host's own: its /var/lib/poolbench (store,
journals) apart from the others', as on real machines, and made there, not on the machine.
The machine's /etc/passwd and /var/lib are never changed.

Everything is removed after, whatever happened: servers killed, namespaces deleted (with their
veths and bridge), keys and copies in the test's tmp dir.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.plugins.tiers import machine_fixture

REPO = Path(__file__).resolve().parents[2]
SSHD_DIR = REPO / ".venv" / "sshd"
SUBNET = "10.231.9"
CTL_ADDR = f"{SUBNET}.254"
PRIVSEP_UID = 64_999  # the `sshd` user exists only in each host's own passwd copy
HOSTS = 3


def _sh(*argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), check=check, capture_output=True, text=True, timeout=timeout)


@dataclass(frozen=True)
class SshHost:
    name: str  # its network namespace
    address: str
    root: Path  # its private files: /var/lib's overlay, passwd copy, config, log

    @property
    def store(self) -> Path:
        """The host's /var/lib/poolbench, as the machine sees it."""
        return self.root / "var-lib" / "poolbench"


@dataclass(frozen=True)
class SshFleet:
    ctl: str  # the controller's namespace: ssh runs there
    hosts: list[SshHost]
    key: Path  # the test's private key (root's on every host)
    known_hosts: Path
    ssh_config: Path  # IdentityFile, UserKnownHostsFile, StrictHostKeyChecking for the test

    def ssh(
        self, host: SshHost, *argv: str, timeout: float = 20
    ) -> subprocess.CompletedProcess[str]:
        """A plain `ssh` from the controller's namespace to `host`, running argv there."""
        return _sh(
            "ip", "netns", "exec", self.ctl,
            "ssh", "-F", str(self.ssh_config), f"root@{host.address}", "--", shlex.join(argv),
            check=False, timeout=timeout,
        )  # fmt: skip


def _sshd_binary() -> tuple[Path, str]:
    sshd = SSHD_DIR / "root" / "usr" / "sbin" / "sshd"
    lib_path = SSHD_DIR / "lib-path"
    if not sshd.is_file() or not lib_path.is_file():
        pytest.skip("OpenSSH's server is not unpacked in .venv/sshd: run scripts/setup.sh")
    return sshd, lib_path.read_text().strip()


def _write_host_files(host: SshHost, pubkey: str, host_key: Path) -> Path:
    host.root.mkdir(parents=True)
    host.store.parent.mkdir()
    (host.root / "overlay-work").mkdir()
    passwd = Path("/etc/passwd").read_text()
    passwd += f"sshd:x:{PRIVSEP_UID}:65534:privilege separation:/run/sshd:/usr/sbin/nologin\n"
    (host.root / "passwd").write_text(passwd)
    (host.root / "group").write_text(Path("/etc/group").read_text())
    keys = host.root / "authorized_keys"
    keys.write_text(pubkey)
    config = host.root / "sshd_config"
    config.write_text(
        f"ListenAddress {host.address}\nPort 22\nHostKey {host_key}\n"
        "PermitRootLogin prohibit-password\nPubkeyAuthentication yes\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
        f"AuthorizedKeysFile {keys}\n"
        # The keys live in the test's tmp dir, whose parents sshd's strict checks would refuse.
        "StrictModes no\nPidFile none\nLogLevel INFO\n"
        "AcceptEnv LANG LC_*\n"
    )
    return config


def _start_sshd(host: SshHost, sshd: Path, lib_path: str, config: Path) -> subprocess.Popen[str]:
    """sshd -D in the host's network namespace and its own mount namespace (see the module).
    -r: no re-exec per connection, which would drop LD_LIBRARY_PATH (the unpacked libwrap)."""
    upper = host.store.parent
    script = " && ".join(
        [
            f"mount --bind {shlex.quote(str(host.root / 'passwd'))} /etc/passwd",
            f"mount --bind {shlex.quote(str(host.root / 'group'))} /etc/group",
            "mount -t tmpfs -o size=1m,mode=755 pbsshrun /run",
            "mkdir -m 755 /run/sshd",
            # An overlay, so that /var/lib/poolbench can be made where the machine has none
            # without making it on the machine: it lands in the host's upper directory.
            f"mount -t overlay -o lowerdir=/var/lib,upperdir={shlex.quote(str(upper))},"
            f"workdir={shlex.quote(str(host.root / 'overlay-work'))} pbsshvarlib /var/lib",
            "mkdir -p /var/lib/poolbench",
            f"LD_LIBRARY_PATH={shlex.quote(lib_path)} exec {shlex.quote(str(sshd))} -D -e -r"
            f" -f {shlex.quote(str(config))}",
        ]
    )
    log = (host.root / "sshd.log").open("w")
    return subprocess.Popen(
        ["ip", "netns", "exec", host.name, "unshare", "--mount", "--propagation", "private",
         "sh", "-c", script],
        stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip


def _wait_listening(fleet: SshFleet, host: SshHost, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log = (host.root / "sshd.log").read_text()
            raise RuntimeError(f"sshd on {host.name} exited: {log}")
        listening = f"src {host.address}:22"
        r = _sh("ip", "netns", "exec", host.name, "ss", "-Hltn", listening, check=False)
        if r.stdout.strip():
            return
        time.sleep(0.1)
    raise RuntimeError(f"sshd on {host.name} did not listen within 10 s")


@machine_fixture(slow=True)
def ssh_hosts(tmp_path: Path) -> Iterator[SshFleet]:
    """Three hosts, each with its own sshd; ssh to them from `fleet.ctl` (module docstring)."""
    sshd, lib_path = _sshd_binary()
    tag = f"{os.getpid() % 100000}"
    ctl = f"pbsc{tag}"
    hosts = [
        SshHost(f"pbsh{tag}h{i}", f"{SUBNET}.{i + 1}", tmp_path / f"host{i}") for i in range(HOSTS)
    ]
    made: list[str] = []
    procs: list[subprocess.Popen[str]] = []
    try:
        keys = tmp_path / "keys"
        keys.mkdir(mode=0o700)
        _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "id"), "-C", "pbtest")
        _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "hostkey"), "-C", "h")
        known = keys / "known_hosts"
        hostkey_pub = (keys / "hostkey.pub").read_text().split()
        known.write_text("".join(f"{h.address} {hostkey_pub[0]} {hostkey_pub[1]}\n" for h in hosts))
        config = keys / "ssh_config"
        config.write_text(
            f"Host *\n  IdentityFile {keys / 'id'}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {known}\n  GlobalKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking yes\n  BatchMode yes\n  ConnectTimeout 5\n"
        )
        _sh("ip", "netns", "add", ctl)
        made.append(ctl)
        _sh("ip", "-n", ctl, "link", "add", "br0", "type", "bridge")
        _sh("ip", "-n", ctl, "addr", "add", f"{CTL_ADDR}/24", "dev", "br0")
        _sh("ip", "-n", ctl, "link", "set", "br0", "up")
        _sh("ip", "-n", ctl, "link", "set", "lo", "up")
        pubkey = (keys / "id.pub").read_text()
        for i, host in enumerate(hosts):
            _sh("ip", "netns", "add", host.name)
            made.append(host.name)
            _sh("ip", "-n", host.name, "link", "add", "eth0", "type", "veth",
                "peer", "name", f"v{i}", "netns", ctl)  # fmt: skip
            _sh("ip", "-n", ctl, "link", "set", f"v{i}", "master", "br0", "up")
            _sh("ip", "-n", host.name, "addr", "add", f"{host.address}/24", "dev", "eth0")
            _sh("ip", "-n", host.name, "link", "set", "eth0", "up")
            _sh("ip", "-n", host.name, "link", "set", "lo", "up")
            config_file = _write_host_files(host, pubkey, keys / "hostkey")
            procs.append(_start_sshd(host, sshd, lib_path, config_file))
        fleet = SshFleet(ctl, hosts, keys / "id", known, config)
        for host, proc in zip(hosts, procs, strict=True):
            _wait_listening(fleet, host, proc)
        yield fleet
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=5)
        # A study still running on a host (a test that failed mid-run) gets its Ctrl-C and
        # time to tear its pools and loop devices down, as on a real host: a SIGKILL would
        # leave them attached on this machine.
        _stop_studies(made)
        # A connection's own sshd child or a shell it ran may outlive the listener: whatever
        # still runs in a host's namespace is ended before the namespace goes.
        for name in reversed(made):
            for pid in _sh("ip", "netns", "pids", name, check=False).stdout.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            _sh("ip", "netns", "del", name, check=False)


def _stop_studies(namespaces: list[str], grace_s: float = 90.0) -> None:
    """SIGINT to every poolbench process in the hosts' namespaces, then wait (bounded) for
    them to end."""

    def studies() -> list[int]:
        found = []
        for name in namespaces:
            for pid in _sh("ip", "netns", "pids", name, check=False).stdout.split():
                with contextlib.suppress(OSError):
                    if b"poolbench" in Path(f"/proc/{pid}/cmdline").read_bytes():
                        found.append(int(pid))
        return found

    for pid in studies():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + grace_s
    while studies() and time.monotonic() < deadline:
        time.sleep(0.2)
