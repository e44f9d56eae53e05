"""The fleet's host file (pure): the hosts poolbench reaches over SSH, one per line.

    # fleet.ssh: [user@]host[:port] then key=value settings for that host
    root@nas1.mgmt.example   disks=/dev/sdb,/dev/sdc,/dev/sdd,/dev/sde
    root@10.20.0.12:2222     disks=/dev/sdb,/dev/sdc,/dev/sdd,/dev/sde
    admin@[fd00::13]         disks=4x8G  poolbench=/opt/poolbench/bin/poolbench

`disks=` are that host's disks as `poolbench study --disks` takes them (its own device names, or
COUNTxSIZE sparse files); `poolbench=` is the command on that host when it is not on the PATH
of a non-interactive SSH session (pipx puts it in ~/.local/bin, which often is not). Everything
else about the connection (keys, jump hosts, host key checking) is the user's ~/.ssh/config:
poolbench adds only the options its transport needs (fleet/ssh.py). `#` starts a comment.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from poolbench import is_digits
from poolbench.errors import UsageError
from poolbench.fleet.ssh import SshTarget

SETTINGS = ("disks", "poolbench")
FORMAT = "[user@]host[:port] [disks=DISKS] [poolbench=PATH]"


@dataclass(frozen=True)
class FleetHost:
    target: SshTarget
    disks: str | None = None  # as `study --disks` takes them, on that host
    poolbench: str = "poolbench"  # the command on that host

    @property
    def label(self) -> str:
        return self.target.label


def parse_line(text: str, where: str = "") -> FleetHost:
    words = text.split()
    target = parse_target(words[0], where)
    settings: dict[str, str] = {}
    for word in words[1:]:
        key, sep, value = word.partition("=")
        if not sep or key not in SETTINGS or not value:
            raise UsageError(
                f"{where}'{word}' is not a setting of host {target.label}.",
                f"Write `{FORMAT}` (settings: {', '.join(SETTINGS)}).",
            )
        if key in settings:
            raise UsageError(f"{where}{key}= is given twice for host {target.label}.")
        settings[key] = value
    if "poolbench" in settings and not settings["poolbench"].startswith("/"):
        raise UsageError(
            f"{where}poolbench={settings['poolbench']} for {target.label} is not an absolute path.",
            "Give the command's absolute path on that host, e.g. "
            "poolbench=/root/.local/bin/poolbench.",
        )
    return FleetHost(target, settings.get("disks"), settings.get("poolbench", "poolbench"))


def parse_target(spec: str, where: str = "") -> SshTarget:
    """`host`, `user@host`, `host:port`, `user@[v6addr]:port`."""
    user, at, rest = spec.rpartition("@")
    if at and not user:
        raise UsageError(f"{where}'{spec}' has an empty user name.", f"Write `{FORMAT}`.")
    if rest.startswith("["):
        host, sep, tail = rest[1:].partition("]")
        if not sep or (tail and not tail.startswith(":")):
            raise UsageError(
                f"{where}'{spec}' is not a valid [IPv6]:port.", "Example: [fd00::2]:22"
            )
        port_text = tail[1:]
    elif rest.count(":") > 1:  # a bare IPv6 address, no port
        host, port_text = rest, ""
    else:
        host, _, port_text = rest.partition(":")
    if not host or host.startswith("-"):
        raise UsageError(f"{where}'{spec}' names no host.", f"Write `{FORMAT}`.")
    port = None
    if port_text:
        if not is_digits(port_text) or not 0 < int(port_text) < 65536:
            raise UsageError(f"{where}'{port_text}' in '{spec}' is not a port number (1-65535).")
        port = int(port_text)
    return SshTarget(host, user or None, port)


def load(path: Path) -> list[FleetHost]:
    """The hosts of a host file, each once; a file with none is refused."""
    try:
        text = path.read_text()
    except OSError as e:
        raise UsageError(
            f"Cannot read the host file {path}: {e.strerror}.",
            f"Give a file with one `{FORMAT}` per line.",
        ) from None
    hosts: list[FleetHost] = []
    seen: set[tuple[str, int | None]] = set()
    for n, line in enumerate(text.splitlines(), 1):
        body = line.split("#", 1)[0].strip()
        if not body:
            continue
        host = parse_line(body, where=f"{path}:{n}: ")
        key = (host.target.host, host.target.port)
        if key in seen:
            raise UsageError(
                f"{path}:{n}: host {host.label} is listed twice.",
                "List each host once (a host measured twice would count twice).",
            )
        seen.add(key)
        hosts.append(host)
    if not hosts:
        raise UsageError(f"No hosts in {path}.", f"Write one `{FORMAT}` per line.")
    return hosts
