"""`poolbench workloads`: the workload library with one-line definitions."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from poolbench.workloads.library import DEFAULT_BENCH, SPECIAL, catalogue, get
from poolbench.workloads.workload import parse_record_size


@click.command()
@click.option("--record", default="128k", show_default=True, help="Record size for the iozone set.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable list.")
def workloads(record: str, as_json: bool) -> None:
    """List every workload poolbench can run, with its definition.

    Parametrised families take their parameter from the name: rand-read-64k,
    iozone-bread-512k, streams-write-6, meta-create-rand. A block trace recorded with
    `poolbench record` replays as trace:NAME (its own timing) or trace-fast:NAME (as fast
    as possible), with its fidelity measured (docs/replay.md).

    Example: poolbench workloads --record 1m
    """
    items = catalogue(parse_record_size(record)) + [get(n) for n in SPECIAL]
    if as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "name": w.name,
                        "family": w.family,
                        "unit": w.unit,
                        "summary": w.summary,
                        "cold": w.cold,
                        "cached_by_design": w.cached_by_design,
                        "fio": w.fio,
                    }
                    for w in items
                ],
                indent=2,
            )
        )
        return
    table = Table(title="poolbench workloads (default for bench: " + ", ".join(DEFAULT_BENCH) + ")")
    table.add_column("name", no_wrap=True)
    table.add_column("unit")
    table.add_column("definition")
    for w in items:
        table.add_row(w.name, w.unit, w.summary)
    table.add_row("trace:NAME", "IOPS", "Replay of a block trace recorded with `poolbench "
                  "record` at its own timing (trace-fast:NAME: as fast as possible), "
                  "O_DIRECT, with its fidelity measured per I/O.")  # fmt: skip
    Console().print(table)
