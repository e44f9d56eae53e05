"""Host lists (pure): a host file of `host[:port] [path]` lines, or a comma-separated list.

    # fleet.hosts: one host per line; the path is where that host's target is mounted
    nas1.mgmt.example            /tank/bench
    10.0.5.12:8766               /srv/scratch
    [fd00::12]                   /mnt/pool

A line without a path uses the PATH given to `poolbench bench --hosts`. `#` starts a comment.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from poolbench import is_digits
from poolbench.errors import UsageError

DEFAULT_PORT = 8765  # fio's default server port


@dataclass(frozen=True)
class Host:
    address: str  # a host name or an IP address, as the user wrote it
    port: int = DEFAULT_PORT
    path: str | None = None  # the target directory on that host, if the host file gives one

    @property
    def is_ipv6(self) -> bool:
        try:
            return ipaddress.ip_address(self.address).version == 6
        except ValueError:
            return False

    @property
    def label(self) -> str:
        """How poolbench names the host in messages and in the store."""
        addr = f"[{self.address}]" if self.is_ipv6 else self.address
        return addr if self.port == DEFAULT_PORT else f"{addr}:{self.port}"

    @property
    def connect(self) -> str:
        """fio's connect string: `host,port` (`ip6:addr,port` for IPv6)."""
        return f"{'ip6:' if self.is_ipv6 else ''}{self.address},{self.port}"

    def target(self, default: str | None) -> str:
        path = self.path or default
        if not path:
            raise UsageError(
                f"No target path for host {self.label}.",
                "Give PATH after --hosts, or a path after the host in the host file.",
            )
        return path


WILDCARDS = {"0.0.0.0", "::", "*", ""}


def parse_host(text: str, where: str = "") -> Host:
    """`host`, `host:port`, `[v6addr]:port`, each optionally followed by a path."""
    parts = text.split()
    if not parts or len(parts) > 2:
        raise UsageError(
            f"{where}'{text}' is not a host.", "Write `host[:port] [path]`, e.g. nas1:8765 /tank."
        )
    spec, path = parts[0], (parts[1] if len(parts) == 2 else None)
    port = DEFAULT_PORT
    if spec.startswith("["):
        addr, sep, rest = spec[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise UsageError(
                f"{where}'{spec}' is not a valid [IPv6]:port.", "Example: [fd00::2]:8765"
            )
        port_text = rest[1:] if rest else ""
    elif spec.count(":") > 1:  # a bare IPv6 address, no port
        addr, port_text = spec, ""
    else:
        addr, _, port_text = spec.partition(":")
    if port_text:
        if not is_digits(port_text) or not 0 < int(port_text) < 65536:
            raise UsageError(f"{where}'{port_text}' in '{spec}' is not a port number (1-65535).")
        port = int(port_text)
    if addr in WILDCARDS:
        raise UsageError(
            f"{where}'{spec}' is a wildcard address, not a host.",
            "Name each fio server by its management address.",
        )
    if path is not None and not path.startswith("/"):
        raise UsageError(
            f"{where}the path '{path}' for {addr} is not absolute.",
            "Write the target's absolute path on that host, e.g. /tank/bench.",
        )
    return Host(addr, port, path)


def parse_list(text: str) -> list[Host]:
    return _unique([parse_host(p.strip()) for p in text.split(",") if p.strip()], text)


def parse_file(path: Path) -> list[Host]:
    hosts: list[Host] = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        body = line.split("#", 1)[0].strip()
        if body:
            hosts.append(parse_host(body, where=f"{path}:{n}: "))
    return _unique(hosts, str(path))


def load(spec: str) -> list[Host]:
    """A host file if `spec` names an existing file, else a comma-separated list."""
    p = Path(spec)
    hosts = parse_file(p) if p.is_file() else parse_list(spec)
    if not hosts:
        raise UsageError(
            f"No hosts in '{spec}'.",
            "Give a host file (one `host[:port] [path]` per line) or a list like h1,h2:8766.",
        )
    return hosts


def _unique(hosts: list[Host], source: str) -> list[Host]:
    seen: set[tuple[str, int]] = set()
    for h in hosts:
        key = (h.address, h.port)
        if key in seen:
            raise UsageError(
                f"Host {h.label} is listed twice in '{source}'.",
                "List each fio server once (a host measured twice would count twice).",
            )
        seen.add(key)
    return hosts
