"""The distribution and its package manager's state, read-only: /etc/os-release and dpkg's
status file. `poolbench doctor` names the distribution and suggests apt commands only on the
Debian family; the host's ZFS probe (zfs/host.py) reads which ZFS packages dpkg has."""

from __future__ import annotations

from pathlib import Path

DPKG_STATUS = Path("/var/lib/dpkg/status")
OS_RELEASE = Path("/etc/os-release")
# dpkg states in which a package's files are on the machine: apt would have to remove it to
# install a package that conflicts with it ("config-files" and "not-installed" are gone).
_ON_DISK = ("installed", "half-installed", "unpacked", "half-configured", "triggers-awaited",
            "triggers-pending")  # fmt: skip


def installed_packages(status: Path = DPKG_STATUS) -> dict[str, str]:
    """Package name -> version of every package dpkg has on the machine ({} without dpkg)."""
    try:
        text = status.read_text(errors="replace")
    except OSError:
        return {}
    found: dict[str, str] = {}
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line[:1] not in (" ", "\t") and ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        state = fields.get("Status", "").split()
        if "Package" in fields and state and state[-1] in _ON_DISK:
            found[fields["Package"]] = fields.get("Version", "")
    return found


def os_release(path: Path = OS_RELEASE) -> dict[str, str]:
    """/etc/os-release as a mapping (ID, ID_LIKE, VERSION_ID, PRETTY_NAME, ...), {} if absent."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.startswith("#"):
            out[key.strip()] = value.strip().strip("\"'")
    return out
