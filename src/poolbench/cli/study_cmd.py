"""`poolbench study NAME --disks ...`: the built-in studies (see poolbench.study.builtin)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from poolbench.cli.common import (
    MAX_ID,
    MIN_WINDOW_ENV,
    FiniteFloat,
    WholeNumber,
    a_path,
    db_option,
    old_flag,
    open_store,
    pick,
)
from poolbench.cli.study_exec import execute_study, no_screen_option
from poolbench.engine.study_lifecycle import StudyRequest
from poolbench.errors import TrialsFailed
from poolbench.study import consistency
from poolbench.study.builtin import registry
from poolbench.study.builtin.base import StudyFile
from poolbench.study.builtin.context import Context, parse_disks
from poolbench.study.model import parse


def _context(name: str, disks: str | None, options: dict[str, str]) -> Context:
    from poolbench.engine.offers import probe

    count, size, devices = parse_disks(disks, registry.get(name).default_disks)
    offers = probe()
    return Context(
        disk_count=count,
        disk_size=size,
        devices=devices,
        dialect=offers.dialect,
        has_md=offers.has_md,
        md_reason=offers.md_reason,
        options=options,
    )


def _notes(db: Path | None, run_id: int, ctx: Context, name: str) -> list[str]:
    """The study's notes, from the facts the store holds about the finished run."""
    from poolbench.store.facts import study_facts

    b = registry.get(name)
    if b.notes is None:
        return []
    store = open_store(db, "read")
    try:
        return b.notes(ctx, study_facts(store, run_id))
    finally:
        store.close()


def _announce(console: Console, name: str, ctx: Context, shape: list[str]) -> None:
    """The study's question, what building it changed about the request, its own notes,
    and (--files-from) the drawn distribution."""
    b = registry.get(name)
    console.print(Text(f"study {name}: {b.question}", style="bold"))
    for line in [*ctx.said, *(b.pre_notes(ctx) if b.pre_notes else [])]:
        console.print(Text(f"note: {line}", style="yellow"))
    for line in shape:
        console.print(Text(line))


def _files_from(
    text: str | None, seed: int | None, db: Path | None, ctx: Context
) -> tuple[Callable[[StudyFile], None] | None, list[str]]:
    """--files-from @NAME: what changes the built study (the untar workload's drawn tree),
    and the list that receives the drawn distribution, shown before the plan."""
    shape: list[str] = []
    if text is None:
        return None, shape
    from poolbench.cli import files_from

    uf = files_from.load(text, seed, db)

    def adjust(study: StudyFile) -> None:
        drawn, said = files_from.draw_for(study, uf)
        ctx.announce(said)
        shape.extend(files_from.shape_lines(drawn, uf))
        files_from.apply(study, uf, drawn)

    return adjust, shape


def _list(console: Console) -> None:
    t = Table(title="built-in studies: poolbench study NAME --disks COUNTxSIZE|/dev/...")
    t.add_column("study", no_wrap=True)
    t.add_column("question")
    t.add_column("default disks", no_wrap=True)
    t.add_column("its options")
    for b in registry.STUDIES.values():
        t.add_row(
            b.name,
            b.question,
            f"{b.default_disks[0]}x{b.default_disks[1]}",
            ", ".join(f"--{k.replace('_', '-')}" for k in b.options),
        )
    console.print(t)
    console.print(
        "Each is also an editable study file: poolbench study NAME --print-toml > NAME.toml, "
        "then poolbench run NAME.toml (a checkout has them in examples/)."
    )


# Study options that are one number: typed here, so `--replicates abc` is a usage error.
_INT_OPTIONS = {
    "replicates": WholeNumber(2, 100),
    "max_replicates": WholeNumber(2, 1000),
    "runtime": WholeNumber(1, 3600),
    "min_window": FiniteFloat(0, 3600),
}


def _study_options(f: Any) -> Any:
    for key, help_text in reversed(registry.cli_options().items()):
        kind = _INT_OPTIONS.get(key, click.STRING)
        env = MIN_WINDOW_ENV if key == "min_window" else None
        f = click.option(
            f"--{key.replace('_', '-')}", key, type=kind, default=None, help=help_text, envvar=env
        )(f)
    return f


def _replicate_aliases(opts: dict[str, Any]) -> None:
    """bench's old --min-runs/--max-runs, accepted here too: one vocabulary everywhere."""
    old_min, old_max = opts.pop("old_min_runs", None), opts.pop("old_max_runs", None)
    opts["replicates"] = pick(("--replicates", opts.get("replicates")), ("--min-runs", old_min))
    opts["max_replicates"] = pick(
        ("--max-replicates", opts.get("max_replicates")), ("--max-runs", old_max)
    )


@click.command()
@click.argument("name", required=False)
@click.option("--list", "list_", is_flag=True, help="List the built-in studies.")
@click.option("--disks", default=None, help="COUNTxSIZE sparse-file disks, or /dev/sdb,/dev/sdc.")
@click.option("--dry-run", is_flag=True, help="Print the plan, its duration and every command.")
@click.option("--print-toml", is_flag=True, help="Print the study file and exit.")
@click.option(
    "--seed",
    type=WholeNumber(0, MAX_ID),
    default=None,
    help="Trial order seed (recorded either way).",
)
@click.option(
    "--scratch-dir",
    callback=a_path,
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
@no_screen_option
@click.option(
    "--resume",
    type=WholeNumber(1, MAX_ID),
    default=None,
    metavar="RUN",
    help="Finish an interrupted run of this study, as it was started: only the missing "
    "measurements are made (as `poolbench run --resume RUN`), then its answer and notes.",
)
@click.option(
    "--files-from",
    "files_from",
    default=None,
    metavar="@NAME",
    help="Also write files of a saved histogram's sizes (plan --data PATH --save-data NAME): "
    "untar of a tree drawn from it with --seed, scaled to the study's working set.",
)
@_study_options
@old_flag("--min-runs", "old_min_runs", _INT_OPTIONS["replicates"])
@old_flag("--max-runs", "old_max_runs", _INT_OPTIONS["max_replicates"])
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
    no_screen: bool,
    resume: int | None,
    files_from: str | None,
    db: Path | None,
    **opts: str | None,
) -> None:
    """Run a built-in study: one question storage builders ask, answered with statistics.

    `--list` names every study, what it asks and which options it takes.

    Example: poolbench study parity --disks 6x1G --widths 4,6
    """
    console = Console()
    if list_ or not name:
        _list(console)
        return
    if resume is not None:
        from poolbench.cli import study_resume

        here = click.get_current_context()
        study_resume.refuse_changes(here, resume)
        request, ctx = study_resume.request(
            here.command, name, resume, db, scratch_dir, not no_screen
        )
        _announce(console, name, ctx, [f"resuming run {resume}: only its missing measurements"])
        _measure_and_notes(console, request, ctx, name, dry_run, destroy_data_on, yes)
        return
    _replicate_aliases(opts)
    # Context options are the raw text of each option (typed ones were checked by click).
    options = {k: str(v) for k, v in opts.items() if v is not None}
    ctx = _context(name, disks, options)
    adjust, shape = _files_from(files_from, seed, db, ctx)
    text = registry.study_text(name, ctx, adjust)
    # Validated before it is printed: --print-toml never hands out a file `run` refuses.
    study_obj = parse(text, f"study {name}")
    if print_toml:
        click.echo(text, nl=False)
        return
    consistency.check_tarball(study_obj)  # refused at --dry-run already
    _announce(console, name, ctx, shape)
    request = StudyRequest(study_obj, text, db, seed=seed, scratch_dir=scratch_dir,
                           screen=not no_screen, command=f"study {name}")  # fmt: skip
    _measure_and_notes(console, request, ctx, name, dry_run, destroy_data_on, yes)


def _measure_and_notes(
    console: Console,
    request: StudyRequest,
    ctx: Context,
    name: str,
    dry_run: bool,
    destroy_data_on: tuple[str, ...],
    yes: bool,
) -> None:
    """The study measured (or its dry run shown), then its answer and its own notes."""
    failed: TrialsFailed | None = None
    try:
        run_id = execute_study(
            request,
            dry_run=dry_run,
            console=console,
            destroy_data_on=destroy_data_on,
            yes=yes,
        )
    except TrialsFailed as exc:  # the other trials were measured: their notes still apply
        failed, run_id = exc, exc.run_id
    if dry_run:
        return
    for line in _notes(request.db, run_id, ctx, name):
        console.print(Text(line), soft_wrap=True)
    if failed is not None:
        raise failed
