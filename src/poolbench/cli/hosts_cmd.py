"""`poolbench hosts check` and the `--hosts` side of `poolbench bench`: fio's client/server mode.

fio's server has no authentication: anyone who can reach its port can make it write files
where it runs. poolbench never starts one; run `fio --server=MGMT_ADDRESS` yourself, bound to a
management network address (never a wildcard), as shown in docs/fleet.md.
"""

from __future__ import annotations

import json
import sys

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from poolbench.errors import PoolbenchError
from poolbench.fleet import hosts as hostlist
from poolbench.fleet import probe
from poolbench.system.runner import LocalRunner

SECURITY = (
    "fio's server has no authentication: bind each one to a management address "
    "(fio --server=10.0.0.5), never a wildcard, and firewall its port (8765). poolbench never "
    "starts a server itself."
)


@click.group()
def hosts() -> None:
    """Check the hosts of a fleet before `poolbench bench --hosts`.

    Each host runs `fio --server=ADDRESS`, bound to its management address. fio's server has no
    authentication: never bind it to a wildcard address; firewall port 8765.
    """


@hosts.command("check")
@click.argument("hostfile")
@click.option(
    "--path",
    default=None,
    help="Target directory for hosts whose line gives none (checked to exist there).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
def check(hostfile: str, path: str | None, as_json: bool) -> None:
    """Reachability, fio version, target and clock skew of every host in HOSTFILE.

    HOSTFILE holds one `host[:port] [path]` per line (or give a comma list: h1,h2:8766).
    Free space at the target cannot be asked of a fio server; it is reported as unknown.

    fio's server has no authentication: bind it to a management address, never a wildcard.

    Example: poolbench hosts check fleet.hosts --path /tank/bench
    """
    fleet = hostlist.load(hostfile)
    runner = LocalRunner()
    from poolbench.workloads.fio import fio_version

    controller = fio_version(runner)
    infos = [probe.probe(runner, h, path) for h in fleet]
    notes = [i.skew_warning for i in infos if i.skew_warning]
    note = probe.version_note(infos, controller)
    if note:
        notes.insert(0, note)
    failed = [i for i in infos if not i.ok]
    if as_json:
        click.echo(
            json.dumps(
                {
                    "controller_fio": controller,
                    "hosts": [{**i.as_dict(), "free_bytes": None} for i in infos],
                    "notes": notes,
                },
                indent=2,
            )
        )
    else:
        _render_check(infos, notes, controller)
    if failed:
        raise PoolbenchError(
            f"{len(failed)} of {len(infos)} host(s) are not ready: "
            + "; ".join(i.error or i.label for i in failed)
            + ".",
            "Start `fio --server=ADDRESS` there (bound to the management address) and check "
            "the target path.",
        )


def _render_check(infos: list[probe.HostInfo], notes: list[str], controller: str) -> None:
    console = Console(width=None if sys.stdout.isatty() else 120)
    t = Table(title=f"fio servers (controller {escape(controller)})", title_justify="left")
    for col in ("host", "answers", "server", "fio", "target", "clock skew", "free space"):
        t.add_column(col)
    for i in infos:
        skew = "–"
        if i.clock_skew_s is not None and i.clock_uncertainty_s is not None:
            skew = f"{i.clock_skew_s:+.1f} s (±{i.clock_uncertainty_s:.1f})"
        t.add_row(
            escape(i.label),
            "[green]yes[/]" if i.ok else f"[red]no[/]: {escape(str(i.error))}",
            escape(f"{i.server_hostname} ({i.os} {i.arch})") if i.server_hostname else "–",
            escape(i.fio_version or "–"),
            escape(i.path or "(not checked)"),
            skew,
            "unknown (fio cannot report it)",
        )
    console.print(t)
    for n in notes:
        console.print(f"[yellow]warning:[/] {escape(n)}", highlight=False)
    console.print(SECURITY, highlight=False)
