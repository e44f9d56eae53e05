"""`poolbench study NAME --resume RUN`: a built-in study's run finished as it was started.

The same as `poolbench run --resume RUN` (the stored study text and seed, only the missing
measurements), and what only `study` shows: the study's question before, its notes after,
which need the options the run was started with (read back from its stored command line).
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from click.core import ParameterSource

from poolbench.cli.common import open_store
from poolbench.engine import trial_loop
from poolbench.engine.study_lifecycle import StudyRequest
from poolbench.errors import CommandLineError, UsageError
from poolbench.store.db import resume_command
from poolbench.study.builtin import registry
from poolbench.study.builtin.context import Context
from poolbench.study.model import Study

# What --resume may be given with: where things go and how they are shown, never what is
# measured (the run keeps its own disks, options and seed).
KEEPS = {"name", "resume", "db", "scratch_dir", "no_screen", "dry_run", "destroy_data_on",
         "yes", "list_", "verbose"}  # fmt: skip


def refuse_changes(ctx: click.Context, run_id: int) -> None:
    """A study option, --disks or --seed given with --resume is refused: the run is finished
    as it was started (an option from the environment, POOLBENCH_MIN_WINDOW, is not given)."""
    given = [
        p.opts[0]
        for p in ctx.command.params
        if p.name is not None
        and p.name not in KEEPS
        and ctx.get_parameter_source(p.name) == ParameterSource.COMMANDLINE
    ]
    if given:
        raise CommandLineError(
            f"--resume {run_id} finishes the run as it was started, so {', '.join(given)} "
            "cannot change it.",
            "Leave them out (the run keeps its own disks, options and seed), or start a new "
            "run without --resume.",
        )


def request(
    command: click.Command,
    name: str,
    run_id: int,
    db: Path | None,
    scratch_dir: Path | None,
    screen: bool,
) -> tuple[StudyRequest, Context]:
    """The stored run as a request, and the context its notes are written for (`command`:
    `study` itself, which reads back the options of the run's stored command line)."""
    registry.get(name)  # an unknown study is refused by name
    store = open_store(db, "read")
    try:
        study, text, seed = trial_loop.load_resume(store, run_id)
        argv = json.loads(store.run(run_id)["argv"])
        path = store.path
    finally:
        store.close()
    if study.name != name:
        raise UsageError(
            f"Run {run_id} is a run of study '{study.name}', not of '{name}'.",
            f"Resume it with: {resume_command(path, run_id)}",
        )
    req = StudyRequest(study, text, db, run_id, seed, scratch_dir, screen=screen,
                       command=f"study {name}")  # fmt: skip
    words = [str(a) for a in argv] if isinstance(argv, list) else []
    return req, _context(study, _stored_options(command, words, name))


def _context(study: Study, options: dict[str, str]) -> Context:
    from poolbench.engine.offers import probe

    offers = probe()
    d = study.disks
    return Context(
        disk_count=d.count,
        disk_size=d.size,
        devices=tuple(d.devices),
        dialect=offers.dialect,
        has_md=offers.has_md,
        md_reason=offers.md_reason,
        options=options,
    )


def _stored_options(command: click.Command, words: list[str], name: str) -> dict[str, str]:
    """The study options of a run's stored command line (`poolbench study NAME --widths
    4,6 ...`), as the study's notes read them; none for a run started otherwise."""
    at = next((i for i in range(len(words) - 1) if words[i : i + 2] == ["study", name]), None)
    if at is None:
        return {}
    try:
        parsed = command.make_context("study", words[at + 1 :], resilient_parsing=True)
    except click.ClickException:
        return {}
    keys = registry.cli_options()
    aliases = {"old_min_runs": "replicates", "old_max_runs": "max_replicates"}
    options: dict[str, str] = {}
    for key, value in parsed.params.items():
        key = aliases.get(key, key)
        if key in keys and value is not None:
            options[key] = str(value)
    return options
