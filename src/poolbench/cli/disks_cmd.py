"""`poolbench disks`: every block device and whether poolbench may use it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from poolbench.engine.screen.jobs import ScreenOptions
from poolbench.errors import CommandLineError
from poolbench.safety.blockdevice import BlockDevice
from poolbench.safety.claims import claim_devices
from poolbench.safety.inventory import protected_paths, scan
from poolbench.system.runner import LocalRunner
from poolbench.units import parse_size


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "K", "M", "G", "T", "P"):
        if size < 1024 or unit == "P":
            return f"{size:.0f}{unit}" if unit == "B" else f"{size:.1f}{unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _status(d: BlockDevice) -> Text:
    """One word or two for the table; the reasons follow the table, one line each."""
    if not d.reasons:
        return Text("free", style="green")
    if d.overridable:
        return Text("in use (override)", style="yellow")
    return Text("in use", style="bold red")


def _row(table: Table, d: BlockDevice, indent: str = "") -> None:
    sectors = f"{d.logical_sector or '?'}/{d.physical_sector or '?'}"
    table.add_row(  # device names are data, never markup
        Text(indent + d.path), _size(d.size_bytes), "hdd" if d.rotational else "ssd",
        Text(sectors + (" 512e" if d.advice else ""), style="yellow" if d.advice else ""),
        _status(d),
    )  # fmt: skip
    for p in d.partitions:
        _row(table, p, indent + "└ ")


def _details(d: BlockDevice) -> list[Text]:
    """What the table leaves out, under the device's name: its identity, every reason it is
    in use and the override (or none), wrapped at words to the terminal's width."""
    lines: list[Text] = []
    ident = [
        x
        for x in (
            d.model,
            f"serial {d.serial}" if d.serial else None,
            *d.by_id,
            f"file {d.loop_backing_file}" if d.loop_backing_file else None,
        )
        if x
    ]
    lines += [Text(x, style="dim") for x in ident]  # fmt: skip
    if d.advice:
        lines.append(Text("⚠ 512e (4K physical sectors): use ashift=12", style="yellow"))
    for r in d.reasons:
        lines.append(Text(f"• {r.detail}", style="" if r.overridable else "red"))
    if d.reasons:
        how = f"override: --destroy-data-on {d.override_id}" if d.overridable else "no override"
        lines.append(Text(how, style="dim"))
    for p in d.partitions:
        lines += (
            [Text(f"  {p.path}:")] + [Text("  " + t.plain, style=t.style) for t in _details(p)]
            if _details(p)
            else []
        )
    return lines


def _print_inventory(console: Console, devices: list[BlockDevice]) -> None:
    table = Table(title="poolbench disks", title_justify="left")
    table.add_column("device", no_wrap=True)
    table.add_column("size", no_wrap=True, justify="right")
    table.add_column("type", no_wrap=True)
    table.add_column("sectors L/P", no_wrap=True)
    table.add_column("status")
    for d in devices:
        _row(table, d)
    console.print(table)
    for d in devices:
        details = _details(d)
        if details:
            console.print(Text(f"{d.path}:", style="bold"))
            for line in details:  # a hanging indent: a wrapped path stays under its line
                console.print(Padding(line, (0, 0, 0, 2)), overflow="fold")


def _screen(devices: tuple[str, ...], destroy_data_on: tuple[str, ...], yes: bool,
            db: Path | None, scratch_dir: Path | None, as_json: bool,
            options: ScreenOptions, tests_text: str | None) -> None:  # fmt: skip
    if tests_text:
        tests = tuple(t.strip() for t in tests_text.split(",") if t.strip())
        options = dataclasses.replace(options, tests=tests)
    if not devices:
        raise CommandLineError(
            "--screen needs the DEVICES to measure.",
            "Name them: poolbench disks --screen /dev/sdb /dev/sdc ('poolbench disks' lists them).",
        )
    from poolbench.cli.disks_screen import ScreenRequest, run_screen  # fio, stats: on use

    run_screen(ScreenRequest(devices, options, destroy_data_on, yes, db, scratch_dir, as_json))


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
@click.option(
    "--screen",
    "do_screen",
    is_flag=True,
    help="Measure DEVICES all at once with fio, one alone against it (read-only unless "
    "--write-tests), and store the figures: slow disks, a path that limits them together, "
    "zoned/SMR, sectors, write cache.",
)
@click.option(
    "--write-tests",
    "write_tests",
    is_flag=True,
    help="With --screen: also the write tests (sequential, random, the sustained write that "
    "exposes SMR). DESTROYS the data: the disks are claimed first.",
)
@click.option("--yes", is_flag=True, help="With --write-tests: do not ask before overriding.")
@click.option("--runtime", type=float, default=30.0, show_default=True, metavar="SECONDS",
              help="With --screen: length of each timed fio run.")  # fmt: skip
@click.option(
    "--repeats",
    type=int,
    default=3,
    show_default=True,
    metavar="N",
    help="With --screen: runs of each test per disk, interleaved across disks.",
)
@click.option(
    "--sustain",
    type=float,
    default=600.0,
    show_default=True,
    metavar="SECONDS",
    help="With --write-tests: length of the sustained random write.",
)
@click.option("--interval", type=float, default=5.0, show_default=True, metavar="SECONDS",
              help="With --screen: how often the sustained write's rate is read.")  # fmt: skip
@click.option("--tests", "tests_text", default=None, metavar="TEST[,TEST]",
              help="With --screen: only these tests (default all: seq-read, seq-write, "
              "rand-read-4k-qd1, rand-read-4k-qd32, rand-write-4k-qd1, rand-write-4k-qd32, "
              "sustain-write).")  # fmt: skip
@click.option("--sustain-bs", "sustain_bs", default="4K", show_default=True, metavar="SIZE",
              help="With --write-tests: block size of the sustained random write.")  # fmt: skip
def disks(
    devices: tuple[str, ...], destroy_data_on: tuple[str, ...], as_json: bool, show_all: bool,
    db: Path | None, scratch_dir: Path | None,
    do_screen: bool = False, write_tests: bool = False, yes: bool = False,
    runtime: float = 30.0, repeats: int = 3, sustain: float = 600.0, interval: float = 5.0,
    tests_text: str | None = None, sustain_bs: str = "4K",
) -> None:  # fmt: skip
    """List every block device and whether poolbench may use it.

    With DEVICES, check instead whether poolbench would claim exactly those devices, the way a
    destructive command would (nothing is written, nothing is asked): exit 0 if it would,
    1 with every reason and the override to type if not.

    A device is free only if nothing was found on it: no mount, no filesystem, RAID, LVM or
    swap signature, no partition table, no ZFS label (imported, exported or destroyed pool),
    no holder (dm, md, loop), and it carries neither the root filesystem nor poolbench's
    store or scratch directory. Read-only: nothing is written. Run as root to see everything.

    With --screen, measure DEVICES all at once with fio and store the figures (slow disks,
    a path that limits them together, SMR, sectors, write cache); read-only unless
    --write-tests.

    Example: poolbench disks --json | jq '.devices[] | select(.status == "free") | .path'
    """
    if do_screen or write_tests:
        bs = parse_size(sustain_bs, what="--sustain-bs")
        opts = ScreenOptions(runtime, repeats, sustain, interval, write_tests, sustain_bs=bs)
        return _screen(devices, destroy_data_on, yes, db, scratch_dir, as_json, opts, tests_text)
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
        raise CommandLineError("--destroy-data-on needs the DEVICES it applies to.", "")
    inv = scan(runner, protect=protected_paths(db, scratch_dir))
    if as_json:
        click.echo(json.dumps(inv.as_dict(include_empty=show_all), indent=2))
        return
    console = Console()
    _print_inventory(console, list(inv.top(include_empty=show_all)))
    for w in inv.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")
