"""Running a study from the command line, shared by `run`, `study` and `demo`: the
preflight, the claims on real devices, the dry-run listing and the measuring loop's progress.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

from poolbench.cli.claiming import claim_from_cli
from poolbench.cli.common import (
    PlainProgress,
    progress_bar,
)
from poolbench.engine import study_lifecycle, trial_loop
from poolbench.engine.trial_loop import TrialDone
from poolbench.errors import TrialsFailed
from poolbench.planner.performance import DiskSpeed
from poolbench.report import terminal
from poolbench.safety.claims import ClaimSet
from poolbench.study import estimate, matrix, pilot
from poolbench.study.model import Study
from poolbench.system.probes import ram_bytes
from poolbench.system.runner import Runner


class DryRunLog:
    """A dry run's commands, collected and printed at once: one console.print per command
    (each parsing markup, highlighting and wrapping) made a 2,000-trial dry run take 8 s."""

    def __init__(self) -> None:
        self.parts: list[tuple[str, str]] = []  # (style, text): cheap to collect

    def command(self, argv: str) -> None:
        self.parts += [("dim", "would run: "), ("", argv + "\n")]

    def heading(self, line: str) -> None:
        self.parts.append(("bold", f"— {line}\n"))

    def flush(self, console: Console) -> None:
        if self.parts:
            emit(console, self.parts)
            self.parts = []


def emit(console: Console, parts: list[tuple[str, str]]) -> None:
    """Print a large block: styled on a terminal, plain when redirected to a file or pipe
    (rich's rendering of 10,000 lines costs more than the dry run itself). The text is never
    parsed as markup either way: paths and levels are data."""
    plain = "".join(text for _, text in parts).rstrip("\n")
    if console.is_terminal:
        text = Text()
        for style, part in parts:
            text.append(part, style=style or None)
        text.rstrip()
        console.print(text, highlight=False, soft_wrap=True)
    else:
        console.file.write(plain + "\n")
        console.file.flush()


# A dry run prints the commands of one trial for at most this many configurations (every
# configuration is still validated by the preflight): simulating and printing 14 commands for
# each of 2,500 configurations took most of a 10,000-trial dry run's time, for 35,000 lines no
# one reads. --all-commands prints them all.
DRY_RUN_CONFIGS = 200
# `run` and `study`: the screen a real run makes of disks with no recent one (about 40 s a
# disk, engine/screen/check.py) can be skipped, never silently.
no_screen_option = click.option(
    "--no-screen",
    "no_screen",
    is_flag=True,
    help="Real disks: do not screen those with no recent screen first (about 1 min, all "
    "at once). "
    "The run then says, and stores, that a slow disk among them was not looked for.",
)


def _print_dry_run(
    sr: trial_loop.StudyRun,
    study: Study,
    console: Console,
    err: Console,
    log: DryRunLog,
    all_commands: bool = False,
) -> None:
    """The plan (every trial, in order), its estimated duration, then the commands of one
    trial per configuration; each part printed in one piece (see DryRunLog)."""
    plan = matrix.plan(study, sr.seed or 0)
    lines = [
        f"plan for study '{study.name}' (seed {sr.seed}): {len(plan)} trials, "
        f"{len(sr.configs)} configurations × {study.replicates} replicates "
        f"(up to {study.max_replicates} while a CI is wider than ±{study.ci_target}%)"
    ]
    lines.append(study.disks.describe())
    lines.append(estimate.working_set_text(study, ram_bytes()))
    lines += [f"  {t.index + 1:>3}. replicate {t.replicate + 1}: {t.config.key}" for t in plan]
    found = pilot.find(sr.store, set(study.workloads.names), os.uname().nodename)
    lines += [
        estimate.estimate(study).text(),
        estimate.detectable_text(study, *((found.cv, found.run_id) if found else (None, None))),
        "commands of one trial per configuration:",
    ]
    emit(console, [("", "\n".join(lines))])
    shown = sr.configs if all_commands else sr.configs[:DRY_RUN_CONFIGS]
    try:
        for i, cfg in enumerate(shown):
            log.heading(cfg.key)
            sr.trial(cfg, 0, i)
    finally:
        log.flush(err)
    if len(shown) < len(sr.configs):
        err.print(
            f"(commands shown for the first {len(shown)} of {len(sr.configs)} configurations; "
            "the others differ only in their levels and were all validated: "
            "--all-commands prints every one)",
            markup=False,
            highlight=False,
        )
    err.print("dry run: nothing was changed.")


class _CliHooks:
    """The engine's questions and news (engine/study_lifecycle.py), on the terminal: notes and
    progress on stderr, a line per trial when stderr is no terminal, the confirmation
    before data is destroyed asked there too."""

    def __init__(self, err: Console, log: DryRunLog, destroy_data_on: Sequence[str], yes: bool):
        self.err, self.log = err, log
        self.destroy_data_on, self.yes = destroy_data_on, yes

    def note(self, message: str) -> None:
        self.err.print(message, markup=False, highlight=False)

    def command(self, argv: str) -> None:
        self.log.command(argv)

    def claim(self, runner: Runner, devices: Sequence[str], store: Path, scratch: Path) -> ClaimSet:
        return claim_from_cli(runner, devices, self.destroy_data_on, self.yes, store, scratch)

    def progress(self) -> AbstractContextManager[Callable[[str, int, int], None]]:
        return progress_bar(self.err, plain_lines=False)

    def trial_done(self) -> TrialDone | None:
        if self.err.is_terminal:
            return None
        # under nohup or into a log: a line per finished trial
        return PlainProgress(lambda line: self.note(line)).trial_done

    def interrupted(self, run_id: int, kept: int, resume: str) -> None:
        from poolbench.system import stopping

        stopping.say(
            f"Interrupted: everything created was torn down; {kept} measurement(s) kept in run "
            f"{run_id}. Finish it with: {resume}"
        )


def _answer(
    outcome: study_lifecycle.StudyOutcome,
    console: Console,
    disk: DiskSpeed | None,
    request: study_lifecycle.StudyRequest,
) -> int:
    """The stored run's report, which ends with the answer: nothing is printed after it."""
    store, run_id, failed = outcome.store, outcome.run_id, outcome.failed
    console.print(f"stored as run {run_id} in {store.path}", markup=False)
    terminal.render_stored(console, store, run_id, disk=disk)
    if failed:
        raise TrialsFailed(
            f"Study finished, {len(failed)} trial(s) failed (each torn down; the reasons are "
            f"in the table above and stored with run {run_id}).",
            f"Measure them again with: {request.resume_command(store.path, run_id)}",
            run_id,
        )
    return run_id


def execute_study(
    request: study_lifecycle.StudyRequest,
    *,
    dry_run: bool,
    console: Console | None = None,
    destroy_data_on: Sequence[str] = (),
    yes: bool = False,
    all_commands: bool = False,
    disk: DiskSpeed | None = None,
) -> int:
    """Shared by `run`, `study` and `demo`: engine.study_lifecycle, shown. Returns the run id.
    What the run is (the study, its store, seed, scratch dir, whether its disks are
    screened) travels in `request`; the rest is how it is shown and confirmed."""
    err = Console(stderr=True)
    console = console or Console()
    log = DryRunLog()
    hooks = _CliHooks(err, log, destroy_data_on, yes)
    if not dry_run:
        return _answer(study_lifecycle.run_study(request, hooks), console, disk, request)
    try:
        with study_lifecycle.prepared(request, hooks, dry_run=True) as (sr, _):
            log.flush(err)  # what the probes would have run (real devices: the claims)
            _print_dry_run(sr, request.study, console, err, log, all_commands)
    finally:
        log.flush(err)
    return 0
