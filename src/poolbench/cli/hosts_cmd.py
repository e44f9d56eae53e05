"""`poolbench hosts check` and the `--hosts` side of `poolbench bench`: fio's client/server mode.

fio's server has no authentication: anyone who can reach its port can make it write files
where it runs. poolbench never starts one; run `fio --server=MGMT_ADDRESS` yourself, bound to a
management network address (never a wildcard), as shown in docs/fleet.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from poolbench.cli.common import cli_size, open_store
from poolbench.engine.replicates import policy
from poolbench.errors import PoolbenchError, UsageError
from poolbench.fleet import hosts as hostlist
from poolbench.fleet import probe, table
from poolbench.fleet.run import FleetRun, run_fleet
from poolbench.fleet.session import FleetOptions, FleetSession, check_workloads
from poolbench.system.runner import LocalRunner, format_argv
from poolbench.workloads.library import parse_list

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


# -- poolbench bench --hosts ----------------------------------------------------------------------
def bench_fleet(params: dict[str, Any]) -> None:
    """`poolbench bench --hosts ...`; `params` are the bench command's parameters."""
    if params.get("scratch_size"):
        raise UsageError("--scratch cannot be combined with --hosts.", "Drop one of them.")
    if not params.get("size"):
        raise UsageError(
            "--hosts needs --size: poolbench cannot see the hosts' RAM to apply the ≥ 2× RAM rule.",
            "Pass a working set per host of at least 2× the largest host's RAM, e.g. --size 64G.",
        )
    min_runs, max_runs = int(params["min_runs"]), int(params["max_runs"])
    if not 2 <= min_runs <= max_runs:
        raise UsageError(f"--min-runs {min_runs} / --max-runs {max_runs} are not a valid range.")
    fleet = hostlist.load(str(params["hosts_spec"]))
    path = params.get("path")
    options = FleetOptions(
        workloads=parse_list(str(params["workload_names"])),
        size=cli_size(str(params["size"]), "--size"),
        compressibility=int(params["compressibility"]),
        runtime_s=int(params["runtime"]),
        iodepth=int(params["iodepth"]),
        numjobs=int(params["numjobs"]),
        stop=policy(min_runs, max_runs, float(params["ci_target"]) / 100),
    )
    check_workloads(options.workloads)
    default = str(path) if path is not None else None
    for h in fleet:
        h.target(default)  # every host has a target, or say which does not
    err = Console(stderr=True)
    if params.get("dry_run"):
        _dry_run(fleet, default, options, err)
        return
    store = open_store(params.get("db"))
    done = run_fleet(
        LocalRunner(),
        store,
        fleet,
        default,
        options,
        lambda desc, n, total: err.print(f"[dim]{n}/{total}[/] {escape(desc)}", highlight=False),
    )
    _show(done, store.path, options, bool(params.get("as_json")))
    if done.failure is not None:
        raise done.failure


def _show(done: FleetRun, db: Path, options: FleetOptions, as_json: bool) -> None:
    session = done.session
    infos = list(session.infos.values())
    if as_json:
        click.echo(
            json.dumps(
                {
                    "run_id": done.run_id,
                    "db": str(db),
                    "status": done.status,
                    "failures": session.failures,
                    "hosts": [i.as_dict() for i in infos],
                    "not_applied": session.not_applied,
                    "notes": session.notes,
                    "results": table.as_json(done.results, options.stop),
                },
                indent=2,
            )
        )
        return
    head = (
        f"poolbench bench --hosts — run {done.run_id}: {len(session.hosts)} hosts, started "
        f"together by one fio controller ({session.controller_fio}); working set "
        f"{options.size / 2**20:,.0f} MiB per host; data {options.compressibility}% "
        "compressible; writes include fsync"
    )
    console = Console(width=None if sys.stdout.isatty() else 120)
    table.render(
        console, done.results, infos, session.not_applied, session.notes, head, options.stop
    )
    console.print(f"stored as run {done.run_id} ({done.status}) in {db}", markup=False)


def _dry_run(
    fleet: list[hostlist.Host], default: str | None, options: FleetOptions, err: Console
) -> None:
    session = FleetSession(LocalRunner(dry_run=True), None, 0, fleet, default, options)  # type: ignore[arg-type]
    for w in options.workloads:
        err.print(f"[dim]would run:[/] {escape(format_argv(session.dry_argv(w)))}", highlight=False)
        for i, (label, text) in enumerate(session.job_texts(w).items()):
            err.print(f"[dim]{w.name}.host{i}.fio ({escape(label)}):[/]", highlight=False)
            err.print(text, highlight=False, markup=False)
    err.print("dry run: nothing was run on any host (run id 0 stands for the real one).")
