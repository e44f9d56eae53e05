"""Ask each fio server who it is, which fio it runs, whether the target exists, what time it is.

fio has no "probe only" command, so poolbench sends each server a job that does no I/O
(`ioengine=null`) with `directory=` set to the target, one server at a time:

* the server's probe reply (printed by the controller in `normal` output) gives its host name,
  OS, architecture and fio version: `hostname=nas1, be=0, 64-bit, os=Linux, arch=x86-64,
  fio=fio-3.33, flags=1`;
* `directory=` makes the server refuse the job if the target is not a directory there;
* `write_lat_log` with `log_unix_epoch=1` makes the server send back latency samples stamped
  with *its* clock (Unix milliseconds), which the controller writes to a local file; compared
  with the controller's clock before and after the run, that bounds the clock skew.

Free space at the target cannot be asked for: fio's protocol has no statfs, and a fallocate
probe is not reliable (fio ignores a failed `fallocate=native` silently). It is reported as
unknown; a working set that does not fit fails at its first write with ENOSPC, named per host.
"""

from __future__ import annotations

import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from poolbench import is_digits
from poolbench.fleet import clientout
from poolbench.fleet.hosts import Host
from poolbench.system.runner import Runner
from poolbench.system.watchdog import CommandTimedOut, scaled

PROBE_TIMEOUT_S = 30.0
SKEW_WARN_S = 2.0
_PROBE_RE = re.compile(
    r"hostname=(?P<hostname>[^,]*), be=\d+, (?P<bits>\d+)-bit, os=(?P<os>[^,]*), "
    r"arch=(?P<arch>[^,]*), fio=(?P<fio>[^,\s]*)"
)


class HostInfoJson(TypedDict):
    """A host's probe as `hosts --json` prints it and a fleet run's metadata keeps it."""

    label: str
    address: str
    port: int
    path: str | None
    reachable: bool
    server_hostname: str | None
    os: str | None
    arch: str | None
    fio_version: str | None
    clock_skew_s: float | None
    clock_uncertainty_s: float | None
    error: str | None


@dataclass
class HostInfo:
    label: str
    address: str
    port: int
    path: str | None
    reachable: bool = False
    server_hostname: str | None = None
    os: str | None = None
    arch: str | None = None
    fio_version: str | None = None
    clock_skew_s: float | None = None  # server clock minus controller clock, bounded
    clock_uncertainty_s: float | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.reachable and self.error is None

    @property
    def skew_warning(self) -> str:
        if self.clock_skew_s is None or abs(self.clock_skew_s) < SKEW_WARN_S:
            return ""
        return (
            f"host {self.label}'s clock is {self.clock_skew_s:+.1f} s off this machine's: "
            "timestamps from it do not line up with the others; run NTP/chrony on the fleet"
        )

    def as_dict(self) -> HostInfoJson:
        return {
            "label": self.label,
            "address": self.address,
            "port": self.port,
            "path": self.path,
            "reachable": self.reachable,
            "server_hostname": self.server_hostname,
            "os": self.os,
            "arch": self.arch,
            "fio_version": self.fio_version,
            "clock_skew_s": self.clock_skew_s,
            "clock_uncertainty_s": self.clock_uncertainty_s,
            "error": self.error,
        }


def probe_job(target: str | None, log_base: Path) -> str:
    lines = ["[probe]", "ioengine=null", "rw=read", "bs=4k", "size=64k"]
    if target:
        lines.append(f"directory={target}")
    lines += [f"write_lat_log={log_base}", "log_unix_epoch=1", ""]
    return "\n".join(lines)


def parse_probe_reply(stdout: str) -> dict[str, str] | None:
    m = _PROBE_RE.search(stdout)
    return m.groupdict() if m else None


def skew(server_ms: int, before: float, after: float) -> tuple[float, float]:
    """(skew, uncertainty) in seconds from a server timestamp taken between before and after."""
    ts = server_ms / 1000.0
    if ts < before:
        return ts - before, after - before
    if ts > after:
        return ts - after, after - before
    return 0.0, after - before


def _first_stamp(log_dir: Path) -> int | None:
    for f in sorted(log_dir.glob("probe_lat.*")):
        for line in f.read_text().splitlines():
            first = line.split(",", 1)[0].strip()
            if is_digits(first):
                return int(first)
    return None


def probe(runner: Runner, host: Host, default_target: str | None) -> HostInfo:
    target = host.path or default_target
    info = HostInfo(host.label, host.address, host.port, target)
    with tempfile.TemporaryDirectory(prefix="poolbench-probe-") as tmp:
        job = Path(tmp) / "probe.fio"
        logs = Path(tmp) / "logs"
        logs.mkdir()
        job.write_text(probe_job(target, logs / "probe"))
        argv = ["fio", "--output-format=normal,json", f"--client={host.connect}", str(job)]
        before = time.time()
        limit = scaled(PROBE_TIMEOUT_S)
        try:
            res = runner.run(argv, check=False, mutates=False, timeout=limit)
        except CommandTimedOut:
            info.error = f"host {host.label} did not answer within {limit:.0f} s"
            return info
        after = time.time()
        reply = parse_probe_reply(res.stdout)
        if reply:
            info.reachable = True
            info.server_hostname = reply["hostname"]
            info.os, info.arch, info.fio_version = reply["os"], reply["arch"], reply["fio"]
        out = clientout.parse(res.stdout, res.stderr, [host], "read")
        if host.label in out.errors:
            msg = out.errors[host.label]
            if reply and target and "not a directory" in msg:
                msg = f"host {host.label}: the target {target} is not a directory there"
            info.error = msg
            return info
        stamp = _first_stamp(logs)
        if stamp is not None:
            info.clock_skew_s, info.clock_uncertainty_s = skew(stamp, before, after)
    return info


def version_note(infos: list[HostInfo], controller: str) -> str:
    """Empty when every server runs the controller's fio version, else what differs."""
    versions = {i.label: i.fio_version for i in infos if i.fio_version}
    if all(v == controller for v in versions.values()):
        return ""
    listed = ", ".join(f"{k} {v}" for k, v in versions.items())
    return (
        f"fio versions differ (controller {controller}; {listed}): results from different fio "
        "versions may not be comparable; install the same fio everywhere"
    )
