"""`poolbench record`: a block trace of a device, stored for `trace:NAME` replays."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click

from poolbench.cli.common import db_option
from poolbench.errors import CommandLineError


def _list(db: Path | None) -> None:
    from poolbench.workloads import tracefile

    traces = tracefile.stored(db)
    if not traces:
        click.echo(f"no recorded traces in {tracefile.traces_dir(db)}")
        return
    click.echo(f"{'name':<20} {'device':<14} {'s':>4} {'I/Os':>8} {'MiB':>8} {'reads':>6} "
               f"{'IOPS':>8}")  # fmt: skip
    for t in traces:
        s = t.summary
        seconds = "?" if t.seconds is None else t.seconds
        click.echo(
            f"{t.name[:20]:<20} {t.device[:14]:<14} "
            f"{seconds:>4} {s.ios:>8} {s.bytes / 2**20:>8.1f} "
            f"{s.read_share:>5.0f}% {s.iops:>8.1f}"
        )


@click.command()
@click.argument("device", required=False, type=click.Path(path_type=Path))
@click.option("--seconds", type=int, default=None, help="How long to record (1 to 3600).")
@click.option("--name", default=None, help="The trace's name (default: DEVICE-DATE-TIME).")
@click.option("--list", "list_", is_flag=True, help="List the recorded traces and stop.")
@db_option
def record(
    device: Path | None, seconds: int | None, name: str | None, list_: bool, db: Path | None
) -> None:
    """Record the block I/O of DEVICE for --seconds with blktrace, changing nothing on it.

    Run the workload you care about on DEVICE meanwhile. The trace is stored beside the
    result store (traces/NAME/) with its summary: I/O count, bytes, read/write mix, I/O
    sizes, offset locality, inter-arrival times and rate. Replay it on every layout with the
    workload trace:NAME (the recording's own timing) or trace-fast:NAME (as fast as
    possible); every replay measures its own fidelity to the trace. Needs root; mounts
    debugfs for the recording if none is mounted, and unmounts it after.

    Example: poolbench record /dev/sdb --seconds 60 --name db-morning
    """
    if list_:
        _list(db)
        return
    if device is None or seconds is None:
        raise CommandLineError(
            "record needs a DEVICE and --seconds (or --list).",
            "E.g. poolbench record /dev/sdb --seconds 60 --name db-morning.",
        )
    from poolbench.engine.replay.record import record as do_record
    from poolbench.store.db import default_path
    from poolbench.system.runner import LocalRunner
    from poolbench.workloads.tracestats import lines

    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    name = name or f"{device.name}-{stamp}"
    journals = (db if db is not None else default_path()).parent / "journals"
    click.echo(f"recording {device} for {seconds} s (blktrace; nothing on it is changed) ...")
    done = do_record(LocalRunner(), device, seconds, name, db, journals)
    click.echo(f"trace '{done.name}' stored in {done.path}")
    for note in done.notes:
        click.echo(f"note: {note}")
    tool = "blktrace" if done.method == "blktrace" else "the kernel's blk tracer (ftrace)"
    click.echo(
        f"measured: queue events of {device} over {seconds} s through {tool}, one per I/O "
        "submitted to the device (before merging)"
    )
    for line in lines(done.summary):
        click.echo("  " + line)
    where = f"trace:{done.path}" if db is not None else f"trace:{done.name}"
    click.echo(f"replay it with --workloads {where} (timed) or trace-fast:... (flat out)")
