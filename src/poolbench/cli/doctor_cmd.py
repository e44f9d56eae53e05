"""`poolbench doctor`: what this machine offers poolbench, found or missing, and how to add it."""

from __future__ import annotations

import json
import textwrap
from typing import TypedDict

import click

from poolbench import __version__
from poolbench.capabilities import CORE, GROUP_TITLES
from poolbench.engine.doctor import Checkup, examine
from poolbench.errors import Unsupported


@click.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON document (docs/cli.md).")
def doctor(as_json: bool) -> None:
    """Every capability poolbench uses, found on this machine or missing, with what provides
    it, what a missing one disables and the one command that adds it here.

    Reads only: nothing is installed, started or changed. Exits 0 when the core is here
    (fio, and a ZFS or at least a directory to bench), 7 when it is not.

    Example: poolbench doctor --json
    """
    from poolbench.system.runner import LocalRunner

    result = examine(LocalRunner(dry_run=True))
    if as_json:
        click.echo(json.dumps(_document(result), indent=2))
    else:
        click.echo(_text(result))
    missing = result.core_missing
    if missing:
        names = "; ".join(f"{result.get(c).capability.name} [{c}]" for c in missing)
        adds = [a for a in (result.get(c).add for c in missing) if a]
        raise Unsupported(
            f"poolbench's core is missing here: {names}.",
            ("Add it: " + "; ".join(adds) + ".") if adds else "See the lines above.",
            capability=missing[0],
        )


class HostJson(TypedDict):
    distribution: str
    apt: bool
    root: bool


class ZfsJson(TypedDict):
    in_use: str  # openzfs | zfs-fuse | none
    version: str
    answers: bool
    openzfs_installed: bool
    openzfs_traces: list[str]


class CapabilityJson(TypedDict):
    id: str
    name: str
    group: str
    found: bool
    detail: str
    provides: str
    disables: str
    packages: list[str]
    since: str | None
    add: str | None


class DoctorJson(TypedDict):
    """`doctor --json` (docs/cli.md)."""

    poolbench: str
    core_ok: bool
    core_missing: list[str]
    host: HostJson
    zfs: ZfsJson
    capabilities: list[CapabilityJson]


def _document(result: Checkup) -> DoctorJson:
    zfs = result.zfs
    return {
        "poolbench": __version__,
        "core_ok": not result.core_missing,
        "core_missing": result.core_missing,
        "host": {"distribution": result.distribution, "apt": result.apt, "root": result.root},
        "zfs": {
            "in_use": result.zfs_in_use,
            "version": zfs.avail.version,
            "answers": zfs.avail.ok,
            "openzfs_installed": zfs.host.openzfs,
            "openzfs_traces": zfs.host.traces(),
        },
        "capabilities": [
            {
                "id": f.id,
                "name": f.capability.name,
                "group": f.capability.group,
                "found": f.found,
                "detail": f.detail,
                "provides": f.capability.provides,
                "disables": f.capability.disables,
                "packages": list(f.capability.packages),
                "since": f.capability.since or None,
                "add": f.add or None,
            }
            for f in result.findings
        ],
    }


def _wrap(text: str, indent: str) -> str:
    return textwrap.fill(text, 100, initial_indent=indent, subsequent_indent=indent + "  ")


def _text(result: Checkup) -> str:
    who = "as root" if result.root else "not as root"
    zfs = result.zfs
    lines = [f"poolbench {__version__} doctor: {result.distribution}, {who}",
             f"ZFS in use: {result.zfs_in_use}"
             + (f" ({zfs.avail.version})" if zfs.avail.version else "")
             + ("; OpenZFS is installed or loaded here" if zfs.host.openzfs else "")]  # fmt: skip
    group = ""
    for f in result.findings:
        cap = f.capability
        if cap.group != group:
            group = cap.group
            lines += ["", GROUP_TITLES[group]]
        mark = "ok     " if f.found else "MISSING"
        lines.append(_wrap(f"{mark} {cap.name} [{cap.id}]: {f.detail}", "  "))
        if not f.found:
            lines.append(_wrap(f"disables: {cap.disables}", "          "))
            lines.append(_wrap(f"add: {f.add}" if f.add else f"needs: {cap.provides}",
                               "          "))  # fmt: skip
    found = sum(f.found for f in result.findings)
    core = [f for f in result.findings if f.capability.group == CORE]
    lines += ["", (f"The core is here ({', '.join(f.capability.name for f in core if f.found)})"
                   if not result.core_missing else "The core is MISSING")
              + f"; {found} of {len(result.findings)} capabilities found."]  # fmt: skip
    return "\n".join(lines)
