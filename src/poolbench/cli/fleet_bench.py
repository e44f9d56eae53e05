"""The `--hosts` side of `poolbench bench`: one fio controller drives every host's fio server
(see hosts_cmd.py and docs/fleet.md for why poolbench never starts a server itself).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from poolbench.cli.common import check_replicates, cli_size, open_store, say_bench_interrupted
from poolbench.engine.replicates import policy
from poolbench.errors import CommandLineError, UsageError
from poolbench.fleet import hosts as hostlist
from poolbench.fleet import table
from poolbench.fleet.controller import Controller
from poolbench.fleet.records import FleetOptions, check_workloads
from poolbench.fleet.run import FleetRun, run_fleet
from poolbench.system.runner import LocalRunner, format_argv
from poolbench.workloads.library import parse_list


# -- poolbench bench --hosts ----------------------------------------------------------------------
def bench_fleet(params: dict[str, Any]) -> None:
    """`poolbench bench --hosts ...`; `params` are the bench command's parameters."""
    if params.get("scratch_size"):
        raise CommandLineError("--scratch cannot be combined with --hosts.", "Drop one of them.")
    if not params.get("size"):
        raise CommandLineError(
            "--hosts needs --size: poolbench cannot see the hosts' RAM to apply the ≥ 2× RAM rule.",
            "Pass a working set per host of at least 2× the largest host's RAM, e.g. --size 64G.",
        )
    min_runs, max_runs = int(params["min_runs"]), int(params["max_runs"])
    check_replicates(min_runs, max_runs)
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
        seed=params.get("seed"),
    )
    check_workloads(options.workloads)
    if any(w.trace for w in options.workloads):  # the iolog lives on this machine only
        raise UsageError(
            "A recorded trace (trace:NAME) is replayed on this machine only, not with --hosts.",
            "Replay it on each host with `poolbench bench PATH --workloads trace:NAME`.",
        )
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
        on_interrupt=say_bench_interrupted(store.path),
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
    targets = {h.label: h.target(default) for h in fleet}
    controller = Controller(LocalRunner(dry_run=True), fleet, targets, options, run_id=0)
    for w in options.workloads:
        argv = format_argv(controller.dry_argv(w))
        err.print(f"[dim]would run:[/] {escape(argv)}", highlight=False)
        for i, (label, text) in enumerate(controller.job_texts(w).items()):
            err.print(f"[dim]{w.name}.host{i}.fio ({escape(label)}):[/]", highlight=False)
            err.print(text, highlight=False, markup=False)
    err.print("dry run: nothing was run on any host (run id 0 stands for the real one).")
