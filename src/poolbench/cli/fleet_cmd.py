"""`poolbench fleet`: poolbench itself on every host of a fleet, over SSH (docs/fleet.md).

Agentless, as Ansible and pbench fan out: OpenSSH's client with shared connections
(fleet/ssh.py), poolbench installed on each host by the user, no daemon of ours anywhere.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from poolbench.errors import PoolbenchError
from poolbench.fleet import sshhosts
from poolbench.fleet.readiness import HostCheck, check_fleet
from poolbench.fleet.ssh import open_transport
from poolbench.system.runner import LocalRunner

SSH_CONFIG_HELP = "ssh's configuration file (ssh -F) in place of ~/.ssh/config."


@click.group()
def fleet() -> None:
    """poolbench on every host of a fleet, over SSH: check the hosts before a study.

    HOSTFILE holds one host per line: `[user@]host[:port] [disks=DISKS] [poolbench=PATH]`
    (docs/fleet.md). Keys, users and jump hosts come from your ~/.ssh/config; every call runs
    with BatchMode (never a prompt) and a time limit.
    """


@fleet.command("check")
@click.argument("hostfile", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@click.option("--ssh-config", type=click.Path(dir_okay=False, path_type=Path), help=SSH_CONFIG_HELP)
def check(hostfile: Path, as_json: bool, ssh_config: Path | None) -> None:
    """Whether every host in HOSTFILE is ready for a study: reachable over SSH, its clock,
    poolbench there (the same version as here, its core, root), its ZFS, and its disks
    checked by its own safety layer. Read-only on every host. Exit 1 if any is not ready.

    Example: poolbench fleet check fleet.ssh
    """
    hosts = sshhosts.load(hostfile)
    if ssh_config is not None and not ssh_config.is_file():
        raise PoolbenchError(
            f"--ssh-config {ssh_config} is not a file.", "Give ssh's configuration file (ssh -F)."
        )
    with open_transport(LocalRunner(), ssh_config) as transport:
        checks = check_fleet(transport, hosts)
    if as_json:
        click.echo(json.dumps({"hosts": [c.to_json() for c in checks]}, indent=2))
        for c in checks:  # the reasons the error below points at, on stderr beside the JSON
            for p in c.problems:
                click.echo(f"{c.label}: {p}", err=True)
    else:
        _render(checks)
    failed = [c for c in checks if not c.ready]
    if failed:
        raise PoolbenchError(
            f"{len(failed)} of {len(checks)} host(s) are not ready: "
            + ", ".join(c.label for c in failed)
            + " (each with its reason above).",
            "Fix what is named for each host, then run `poolbench fleet check` again.",
        )


def _render(checks: list[HostCheck]) -> None:
    console = Console(width=None if sys.stdout.isatty() else 120)
    t = Table(title="fleet hosts (over SSH)", title_justify="left")
    for col in ("host", "ready", "poolbench", "ZFS", "clock skew", "disks"):
        t.add_column(col)
    for c in checks:
        skew = "–"
        if c.skew_s is not None and c.skew_bound_s is not None:
            skew = f"{c.skew_s:+.2f} s (±{c.skew_bound_s:.2f})"
        t.add_row(
            escape(c.label),
            "[green]yes[/]" if c.ready else "[red]no[/]",
            escape(c.version or "–"),
            escape(c.zfs or "–"),
            skew,
            escape(c.disks),
        )
    console.print(t)
    for c in checks:
        for p in c.problems:
            console.print(f"[red]{escape(c.label)}:[/] {escape(p)}", highlight=False)
        for w in c.warnings:
            console.print(f"[yellow]warning:[/] {escape(c.label)}: {escape(w)}", highlight=False)
