"""`poolbench fleet check`: is every host of a fleet ready to run a study? Over SSH, read-only.

Per host, in this order (a step that fails ends that host's check, the others go on):
1. **reachable**: a first call opens the shared connection; ssh's own reason when it cannot.
2. **clock**: the host's `date +%s.%N` against this machine's clock taken before and after the
   call: the skew, with the call's half round trip as its bound.
3. **poolbench there**: `poolbench doctor --json` on the host (found? the same version as
   here? its core: fio and a ZFS; root; which ZFS answers there).
4. **its disks**: `poolbench disks DISKS` on the host, its own safety layer: exit 0 when it
   would claim them, else its reasons (in use, mounted, a signature, ...). Sparse-file disks
   (COUNTxSIZE) need no check.
Nothing is written on any host: doctor and disks only read.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from poolbench import __version__
from poolbench.fleet.ssh import SSH_FAILED, Transport
from poolbench.fleet.sshhosts import FleetHost

CALL_TIMEOUT = 30.0  # one short remote call, connection included
DOCTOR_TIMEOUT = 120.0  # doctor probes every tool (zpool, fio, PostgreSQL...) on the host
DISKS_TIMEOUT = 120.0  # blkid, wipefs and zdb on each disk
SKEW_WARN_S = 2.0
NOT_FOUND = 127  # the remote shell's status for a command it cannot find
EXIT_REFUSED = 6  # `poolbench disks DEVICES` refusing one (errors.EXIT_REFUSED)
SPARSE = re.compile(r"^\d+x\d+(\.\d+)?[KMGT]i?B?$", re.IGNORECASE)


@dataclass
class HostCheck:
    label: str
    reachable: bool = False
    version: str | None = None
    zfs: str | None = None
    skew_s: float | None = None
    skew_bound_s: float | None = None
    disks: str = "-"
    problems: list[str] = field(default_factory=list)  # each what is wrong and the fix
    warnings: list[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return self.reachable and not self.problems

    def to_json(self) -> dict[str, object]:
        return {
            "host": self.label, "ready": self.ready, "reachable": self.reachable,
            "poolbench": self.version, "zfs": self.zfs, "clock_skew_s": self.skew_s,
            "clock_skew_bound_s": self.skew_bound_s, "disks": self.disks,
            "problems": self.problems, "warnings": self.warnings,
        }  # fmt: skip


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"


def check_host(transport: Transport, host: FleetHost, clock: Callable[[], float]) -> HostCheck:
    out = HostCheck(host.label)
    t0 = clock()
    first = transport.run(host.target, ["date", "+%s.%N"], timeout=CALL_TIMEOUT)
    if first.returncode == SSH_FAILED:
        out.problems.append(
            f"unreachable over SSH: {_last_line(first.stderr)}. Check the address, that sshd "
            "runs there and that your key logs in without a prompt (ssh -o BatchMode=yes HOST)."
        )
        return out
    out.reachable = True
    # The first call also opened the connection: the clock is read again on the shared one,
    # whose round trip bounds the skew tightly.
    t0 = clock()
    again = transport.run(host.target, ["date", "+%s.%N"], timeout=CALL_TIMEOUT)
    t1 = clock()
    try:
        remote = float(again.stdout.strip())
    except ValueError:
        out.warnings.append(f"its clock could not be read: {_last_line(again.stdout)}")
    else:
        out.skew_s = remote - (t0 + t1) / 2
        out.skew_bound_s = (t1 - t0) / 2
        if abs(out.skew_s) > SKEW_WARN_S:
            out.warnings.append(
                f"its clock is {out.skew_s:+.1f} s off this machine's: timestamps of its "
                "rows will not line up with the others' (run NTP/chrony on every host)"
            )
    if not _doctor(transport, host, out):
        return out
    _disks(transport, host, out)
    return out


def _doctor(transport: Transport, host: FleetHost, out: HostCheck) -> bool:
    r = transport.run(host.target, [host.poolbench, "doctor", "--json"], timeout=DOCTOR_TIMEOUT)
    if r.returncode == NOT_FOUND:
        out.problems.append(
            f"poolbench is not installed there ({host.poolbench} not found): install it on the "
            "host (pipx install poolbench), or give poolbench=PATH in the host file"
        )
        return False
    try:
        doc = json.loads(r.stdout)
        version, core_ok = str(doc["poolbench"]), bool(doc["core_ok"])
        root, zfs = bool(doc["host"]["root"]), doc["zfs"]
    except (ValueError, KeyError, TypeError):
        out.problems.append(
            f"`{host.poolbench} doctor --json` there did not answer as poolbench does "
            f"(exit {r.returncode}: {_last_line(r.stderr or r.stdout)})"
        )
        return False
    out.version = version
    out.zfs = f"{zfs.get('in_use') or 'none'}" + (
        f" ({zfs['version']})" if zfs.get("version") else ""
    )
    if version != __version__:
        out.problems.append(
            f"poolbench {version} there, {__version__} here: a fleet's figures are compared "
            "only when every host measures the same way; install the same version everywhere"
        )
    if not core_ok:
        missing = ", ".join(str(m) for m in doc.get("core_missing", [])) or "its core"
        out.problems.append(f"it lacks {missing}: run `poolbench doctor` there for the fix")
    if not root:
        out.problems.append("the SSH user is not root there: studies build pools; log in as root")
    return True


def _disks(transport: Transport, host: FleetHost, out: HostCheck) -> None:
    if host.disks is None:
        out.disks = "the study's"
        out.warnings.append(
            "no disks= in the host file: a study there uses its own [disks] (sparse files, or "
            "the devices it names, checked there when it starts)"
        )
        return
    if SPARSE.match(host.disks):
        out.disks = f"{host.disks} sparse files"
        return
    devices = [d for d in host.disks.split(",") if d]
    r = transport.run(host.target, [host.poolbench, "disks", *devices], timeout=DISKS_TIMEOUT)
    if r.returncode == 0:
        out.disks = f"{len(devices)} free"
        return
    out.disks = "refused" if r.returncode == EXIT_REFUSED else f"exit {r.returncode}"
    reasons = [ln.strip() for ln in r.stderr.splitlines() if ln.strip()]
    out.problems.append(
        "its disks cannot be claimed there: " + " ".join(reasons).removeprefix("error: ")
        if reasons
        else f"`poolbench disks` there exited {r.returncode} without a reason"
    )


def check_fleet(
    transport: Transport,
    hosts: Sequence[FleetHost],
    clock: Callable[[], float] = time.time,
) -> list[HostCheck]:
    """Every host at once (a host that does not answer costs its own time limit, not the
    others'), in the host file's order."""
    with ThreadPoolExecutor(max_workers=min(16, len(hosts))) as pool:
        return list(pool.map(lambda h: check_host(transport, h, clock), hosts))
