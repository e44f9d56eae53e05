"""`poolbench disks`: every block device and whether poolbench may use it."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from poolbench.errors import UsageError
from poolbench.safety.claims import claim_devices
from poolbench.safety.inventory import BlockDevice, protected_paths, scan
from poolbench.system.runner import LocalRunner


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "K", "M", "G", "T", "P"):
        if size < 1024 or unit == "P":
            return f"{size:.0f}{unit}" if unit == "B" else f"{size:.1f}{unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _status(d: BlockDevice) -> Text:
    if not d.reasons:
        return Text("free", style="green")
    t = Text("in use", style="bold red" if not d.overridable else "yellow")
    for r in d.reasons:
        t.append(f"\n• {r.detail}", style="" if r.overridable else "red")
    if d.overridable:
        t.append(f"\noverride: --destroy-data-on {d.override_id}", style="dim")
    else:
        t.append("\nno override", style="dim")
    return t


def _row(table: Table, d: BlockDevice, indent: str = "") -> None:
    ident = "\n".join(
        x for x in (d.model, f"serial {d.serial}" if d.serial else None, *d.by_id,
                    f"file {d.loop_backing_file}" if d.loop_backing_file else None) if x
    )  # fmt: skip
    sectors = f"{d.logical_sector or '?'}/{d.physical_sector or '?'}"
    notes = Text(sectors)
    for a in d.advice:
        notes.append("\n⚠ 512e: use ashift=12", style="yellow")
        del a
    table.add_row(  # device names, models and serials are data, never markup
        escape(indent + d.path),
        _size(d.size_bytes),
        escape(ident or "-"),
        notes,
        "hdd" if d.rotational else "ssd",
        _status(d),
    )
    for p in d.partitions:
        _row(table, p, indent + "└ ")


@click.command()
@click.argument("devices", nargs=-1)
@click.option(
    "--destroy-data-on",
    "destroy_data_on",
    multiple=True,
    metavar="ID",
    help="With DEVICES: check whether this override would make an in-use device claimable.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable inventory.")
@click.option("--all", "show_all", is_flag=True, help="Also list empty devices (size 0).")
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Result store whose device is protected. Default: $POOLBENCH_DB or the XDG data dir.",
)
@click.option(
    "--scratch-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Scratch directory whose device is protected (default /var/tmp).",
)
def disks(
    devices: tuple[str, ...],
    destroy_data_on: tuple[str, ...],
    as_json: bool,
    show_all: bool,
    db: Path | None,
    scratch_dir: Path | None,
) -> None:
    """List every block device and whether poolbench may use it.

    With DEVICES, check instead whether poolbench would claim exactly those devices, the way a
    destructive command would (nothing is written, nothing is asked): exit 0 if it would,
    1 with every reason and the override to type if not.

    A device is free only if nothing was found on it: no mount, no filesystem, RAID, LVM or
    swap signature, no partition table, no ZFS label (imported, exported or destroyed pool),
    no holder (dm, md, loop), and it carries neither the root filesystem nor poolbench's
    store or scratch directory. Read-only: nothing is written. Run as root to see everything.

    Example: poolbench disks --json | jq '.devices[] | select(.status == "free") | .path'
    """
    runner = LocalRunner()
    if devices:
        claims = claim_devices(
            runner, devices, overrides=destroy_data_on, yes=True,
            protect=protected_paths(db, scratch_dir),
        )  # fmt: skip
        if as_json:
            click.echo(json.dumps(claims.as_dict(), indent=2))
            return
        for c in claims.claims:
            over = f" — its data would be DESTROYED ({len(c.overridden)} reason(s) overridden;" \
                " a destructive command asks first)" if c.overridden else ""  # fmt: skip
            click.echo(f"{c.path}: would be claimed{over}")
        return
    elif destroy_data_on:
        raise UsageError("--destroy-data-on needs the DEVICES it applies to.", "")
    inv = scan(runner, protect=protected_paths(db, scratch_dir))
    if as_json:
        click.echo(json.dumps(inv.as_dict(include_empty=show_all), indent=2))
        return
    table = Table(title="poolbench disks", show_lines=True)
    table.add_column("device", no_wrap=True)
    table.add_column("size", no_wrap=True, justify="right")
    table.add_column("model / serial / by-id", overflow="fold", max_width=36)
    table.add_column("sectors L/P", no_wrap=True)
    table.add_column("type", no_wrap=True)
    table.add_column("status", overflow="fold", ratio=1, min_width=30)
    for d in inv.top(include_empty=show_all):
        _row(table, d)
    console = Console()
    console.print(table)
    for w in inv.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")
