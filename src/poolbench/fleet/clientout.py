"""Read what fio's controller (`fio --client=... --output-format=json`) printed (pure).

What fio 3.33 prints in client mode, as observed (tests/test_hosts_units.py keeps samples):

* stdout starts with the servers' text, each line prefixed `<server hostname> `, then one JSON
  object with `client_stats` (not `jobs`): one entry per job group per server, each carrying
  the `hostname` and `port` it was reached at, plus an `All clients` sum when more than one
  server reported. `disk_util` entries carry `hostname`/`port` too. With several servers,
  `global options` is an object with duplicate keys (one set per server); poolbench ignores it.
* A server that cannot be reached: stderr `fio: failed to connect to H:P`; fio goes on with
  the others and may still exit 0.
* A server that dies mid-run: stderr `client: host=H disconnected`, exit code 1; the JSON
  holds the other servers' results only.
* A job file a server refuses (e.g. `directory=` missing there): the server's
  `fio: ...` lines on stdout, no entry for that server, exit code 0.

So a host is judged by whether its entry is in the JSON, never by the exit code alone.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from poolbench.fleet.hosts import Host
from poolbench.records.jsontypes import JsonObject
from poolbench.records.latency import Latency
from poolbench.workloads.fioentry import FioJob
from poolbench.workloads.fioparse import latency

ALL_CLIENTS = "All clients"


@dataclass(frozen=True)
class HostFigures:
    """What one host measured in one fio run (its job groups summed)."""

    io_bytes: int
    total_ios: int
    runtime_s: float
    bw_bytes: float
    iops: float
    within_run_bw_dev: float
    lat_mean_ns: float
    latency: Latency | None = None  # fio's completion latency on that host (clat percentiles)


class DiskUtilJson(TypedDict):
    """A DiskUtil as the guards' `device` section keeps it (fleet runs)."""

    name: str
    read_ios: int
    write_ios: int
    util_percent: float


@dataclass(frozen=True)
class DiskUtil:
    """fio's per-server disk statistics: I/O counts and busy time, no byte counts."""

    name: str
    read_ios: int
    write_ios: int
    util_percent: float

    def as_dict(self) -> DiskUtilJson:
        return {
            "name": self.name,
            "read_ios": self.read_ios,
            "write_ios": self.write_ios,
            "util_percent": self.util_percent,
        }


@dataclass
class FleetOutput:
    figures: dict[str, HostFigures] = field(default_factory=dict)  # by host label
    errors: dict[str, str] = field(default_factory=dict)  # by host label: what went wrong
    disks: dict[str, list[DiskUtil]] = field(default_factory=dict)
    controller_version: str = ""


def find_json(text: str) -> JsonObject | None:
    """The controller's JSON object (it has `client_stats`), ignoring text around it."""
    decoder = json.JSONDecoder()
    for m in re.finditer(r"(?m)^\{", text):
        try:
            obj, _end = decoder.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and "client_stats" in obj:
            return obj
    return None


def _figures(entries: list[FioJob], section: str) -> HostFigures:
    sides = [e.side(section) for e in entries]
    return HostFigures(
        io_bytes=sum(s.io_bytes for s in sides),
        total_ios=sum(s.total_ios for s in sides),
        runtime_s=max(s.runtime_ms for s in sides) / 1000.0,
        bw_bytes=sum(s.bw_bytes for s in sides),
        iops=sum(s.iops for s in sides),
        within_run_bw_dev=max(s.bw_dev_kib for s in sides) * 1024.0,
        lat_mean_ns=sides[0].lat_mean_ns,
        latency=latency(entries, section),
    )


def _key(entry: Mapping[str, object]) -> tuple[str, int]:
    port = entry.get("port")
    return str(entry.get("hostname", "")), int(port or 0) if isinstance(port, int | str) else 0


def _lines_about(host: Host, text: str) -> list[str]:
    pats = (f"{host.address}:{host.port}", f"host={host.address} ", f"<{host.address}>")
    lines = text.splitlines()
    found: list[str] = []
    for i, ln in enumerate(lines):
        if any(p in ln + " " for p in pats):
            # fio prints the reason on the line before "failed to connect to H:P".
            if i and lines[i - 1].startswith("fio: connect") and "failed to connect" in ln:
                found.append(lines[i - 1].strip())
            found.append(ln.strip())
    return found


def _server_complaints(stdout: str) -> list[str]:
    """`<name> fio: ...` lines: a server refusing its job (not attributable by address)."""
    return [ln.strip() for ln in stdout.splitlines() if re.match(r"^<[^>]*> fio: ", ln) is not None]


def parse(stdout: str, stderr: str, hosts: list[Host], direction: str) -> FleetOutput:
    """Per-host figures, and for every host without a result a message that names it."""
    data = find_json(stdout) or {}
    out = FleetOutput()
    out.controller_version = str(data.get("fio version", ""))
    section = "read" if direction in ("read", "meta") else "write"
    by_key = _entries_by_host(data)
    disks = _disks_by_host(data)
    complaints = _server_complaints(stdout)
    for h in hosts:
        key = (h.address, h.port)
        entries = by_key.get(key)
        if key in disks:
            out.disks[h.label] = disks[key]
        if not entries:
            out.errors[h.label] = _no_result_message(h, stdout, stderr, bool(data), complaints)
            continue
        failed = _failed_job_message(h, entries)
        if failed:
            out.errors[h.label] = failed
            continue
        try:
            out.figures[h.label] = _figures(entries, section)
        except (KeyError, TypeError, ValueError) as exc:
            out.errors[h.label] = f"host {h.label}: unreadable result from fio ({exc!r})"
    return out


def _entries_by_host(data: JsonObject) -> dict[tuple[str, int], list[FioJob]]:
    """fio's per-client job results grouped by (address, port); the all-clients sum is dropped."""
    by_key: dict[tuple[str, int], list[FioJob]] = {}
    for job in map(FioJob.from_json, data.get("client_stats") or []):
        if job.name != ALL_CLIENTS:
            by_key.setdefault((job.hostname, job.port), []).append(job)
    return by_key


def _disks_by_host(data: JsonObject) -> dict[tuple[str, int], list[DiskUtil]]:
    """fio's per-client disk utilisation grouped by (address, port)."""
    disks: dict[tuple[str, int], list[DiskUtil]] = {}
    for du in data.get("disk_util") or []:
        disks.setdefault(_key(du), []).append(
            DiskUtil(
                str(du.get("name", "?")),
                int(du.get("read_ios", 0)),
                int(du.get("write_ios", 0)),
                float(du.get("util", 0.0)),
            )
        )
    return disks


def _no_result_message(
    h: Host, stdout: str, stderr: str, had_json: bool, complaints: list[str]
) -> str:
    """Why host h has no result, from what fio printed about it (most specific cause first)."""
    said = _lines_about(h, stderr + "\n" + stdout)
    if any("failed to connect" in s for s in said):
        why = "did not answer (fio could not connect)"
    elif any("disconnected" in s for s in said):
        why = "went away during the run (connection lost)"
    elif said:
        why = "returned an error"
    elif had_json:
        why = "returned no result (its fio server refused the job)"
        said = complaints
    else:
        why = "returned no result (fio's controller printed none)"
        said = [ln for ln in (stderr + stdout).strip().splitlines() if ln][-5:]
    return f"host {h.label} {why}" + (f"; fio said: {' | '.join(said[-5:])}" if said else "")


def _failed_job_message(h: Host, entries: list[FioJob]) -> str:
    """The first job of host h that reported an errno, as a message; "" when none failed."""
    failed = [e for e in entries if e.error]
    if not failed:
        return ""
    err = failed[0].error
    reason = os.strerror(err) if 0 < err < 200 else f"error {err}"
    return f"host {h.label}: fio job '{failed[0].name}' failed: {reason} (errno {err})"
