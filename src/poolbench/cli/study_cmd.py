"""`poolbench study NAME --disks ...`: the built-in studies (see poolbench.studies)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from poolbench import studies
from poolbench.backends.md import MdBackend
from poolbench.backends.zfs import ZfsBackend
from poolbench.cli.common import MAX_ID, check_disk_count, cli_size, db_option, open_store
from poolbench.cli.run_cmd import execute_study
from poolbench.errors import UsageError
from poolbench.study import consistency
from poolbench.study.model import parse
from poolbench.system.runner import LocalRunner

# Study options: the CLI spelling → the key studies.Context.options uses.
STUDY_OPTIONS = {
    "widths": "Disk counts / raidz widths (parity, width), e.g. 4,6.",
    "levels": "The study's main factor levels (ashift values, mirror widths, fill percents, "
    "recordsizes, compression algorithms, parities, vdev sources...).",
    "layouts": "Layouts to compare, e.g. raidz1,mirror:2+mirror:2.",
    "records": "Application record / I/O sizes (mirror, recordsize), e.g. 64k,1m.",
    "tests": "iozone tests (mirror), e.g. write,read,randread.",
    "streams": "Concurrent stream counts (concurrency), e.g. 1,2,6.",
    "compressibility": "Data compressibility percentages (compression), e.g. 0,50,75.",
    "backends": "Stacks (fs-compare), e.g. zfs,btrfs.",
    "tarball": "Source tree to untar (fs-compare).",
    "slice_size": "Slice per disk (vdev-source), e.g. 256M.",
    "replicates": "Replicates per configuration (at least 2).",
    "max_replicates": "Most replicates while a CI is wider than the target.",
    "workloads": "Replace the study's workloads, e.g. seq-write,seq-read.",
    "size": "Working set per configuration, e.g. 256M.",
    "runtime": "Seconds per time-based workload.",
}


def _context(name: str, disks: str | None, options: dict[str, str]) -> studies.Context:
    b = studies.get(name)
    count, size = b.default_disks
    devices: tuple[str, ...] = ()
    if disks:
        if disks.startswith("/"):
            devices = tuple(d.strip() for d in disks.split(",") if d.strip())
            check_disk_count(len(devices), disks)
        else:
            c, _, s = disks.lower().partition("x")
            if not (c.isascii() and c.isdigit()) or len(c) > 6 or not s or "," in disks:
                raise UsageError(
                    f"--disks '{disks}' is neither COUNTxSIZE nor a list of /dev paths.",
                    "Example: --disks 5x512M or --disks /dev/sdb,/dev/sdc (a study's disks "
                    "are all one size).",
                )
            count, size = int(c), s.upper()
            check_disk_count(count, disks)
            cli_size(size, "--disks")
    probe = LocalRunner(dry_run=True)  # read-only probes still run
    zfs = ZfsBackend(probe).check()
    md = MdBackend(probe).check()
    return studies.Context(
        disk_count=count,
        disk_size=size,
        devices=devices,
        dialect=zfs.dialect or "openzfs",
        has_md=md.ok,
        md_reason=md.reason,
        options=options,
    )


def _rows(db: Path | None, run_id: int) -> list[dict[str, Any]]:
    store = open_store(db, "read")
    rows = []
    for m in store.measurements(run_id):
        guards = json.loads(m["guards"] or "{}")
        rows.append(
            {
                "config": m["config"],
                "workload": m["workload"],
                "replicate": m["replicate"],
                "value": m["value"],
                "guards": guards,
                "pool": guards.get("pool") or {},
            }
        )
    store.close()
    return rows


def _list(console: Console) -> None:
    t = Table(title="built-in studies: poolbench study NAME --disks COUNTxSIZE|/dev/...")
    t.add_column("study", no_wrap=True)
    t.add_column("question")
    t.add_column("default disks", no_wrap=True)
    t.add_column("its options")
    for b in studies.STUDIES.values():
        t.add_row(
            b.name,
            b.question,
            f"{b.default_disks[0]}x{b.default_disks[1]}",
            ", ".join(f"--{k.replace('_', '-')}" for k in b.options),
        )
    console.print(t)
    console.print("Each is also an editable study file: examples/<study>.toml (poolbench run).")


# Study options that are one number: typed here, so `--replicates abc` is a usage error.
_INT_OPTIONS = {
    "replicates": click.IntRange(2, 100),
    "max_replicates": click.IntRange(2, 1000),
    "runtime": click.IntRange(1, 3600),
}


def _study_options(f: Any) -> Any:
    for key, help_text in reversed(STUDY_OPTIONS.items()):
        kind = _INT_OPTIONS.get(key, click.STRING)
        f = click.option(
            f"--{key.replace('_', '-')}", key, type=kind, default=None, help=help_text
        )(f)
    return f


@click.command()
@click.argument("name", required=False)
@click.option("--list", "list_", is_flag=True, help="List the built-in studies.")
@click.option("--disks", default=None, help="COUNTxSIZE sparse-file disks, or /dev/sdb,/dev/sdc.")
@click.option("--dry-run", is_flag=True, help="Print the plan, its duration and every command.")
@click.option("--print-toml", is_flag=True, help="Print the study file and exit.")
@click.option(
    "--seed",
    type=click.IntRange(0, MAX_ID),
    default=None,
    help="Trial order seed (recorded either way).",
)
@click.option(
    "--scratch-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where sparse-file disks and mountpoints go (default /var/tmp/poolbench).",
)
@click.option(
    "--destroy-data-on",
    "destroy_data_on",
    multiple=True,
    metavar="ID",
    help="Use this in-use device anyway, destroying its data (see `poolbench run`).",
)
@click.option("--yes", is_flag=True, help="Do not ask before destroying overridden devices.")
@_study_options
@db_option
def study(
    name: str | None,
    list_: bool,
    disks: str | None,
    dry_run: bool,
    print_toml: bool,
    seed: int | None,
    scratch_dir: Path | None,
    destroy_data_on: tuple[str, ...],
    yes: bool,
    db: Path | None,
    **opts: str | None,
) -> None:
    """Run a built-in study: one question storage builders ask, answered with statistics.

    Studies: parity, ashift, vdev-source, mirror, recordsize, compression, fs-compare,
    concurrency, fill, resilver, width, capacity (`--list` says what each asks).

    Example: poolbench study parity --disks 6x1G --widths 4,6
    """
    console = Console()
    if list_ or not name:
        _list(console)
        if not name:
            return
        return
    options = {k: v for k, v in opts.items() if v is not None}
    ctx = _context(name, disks, options)
    data = studies.build(name, ctx)
    text = studies.to_toml(name, data)
    if print_toml:
        click.echo(text, nl=False)
        return
    study_obj = parse(text, f"study {name}")
    b = studies.get(name)
    consistency.check_tarball(study_obj)  # refused at --dry-run already
    console.print(Text(f"study {name}: {b.question}", style="bold"))
    for line in b.pre_notes(ctx) if b.pre_notes else []:
        console.print(Text(f"note: {line}", style="yellow"))
    run_id = execute_study(
        study_obj,
        text,
        db=db,
        dry_run=dry_run,
        seed=seed,
        scratch_dir=scratch_dir,
        console=console,
        destroy_data_on=destroy_data_on,
        yes=yes,
    )
    if dry_run or b.notes is None:
        return
    for line in b.notes(ctx, _rows(db, run_id)):
        console.print(Text(line), soft_wrap=True)
