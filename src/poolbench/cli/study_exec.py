"""Running a study from the command line, shared by `run`, `study` and `demo`: the
preflight, the claims on real devices, the dry-run listing and the measuring loop's progress.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from rich.console import Console
from rich.text import Text

from poolbench.backends.base import Availability
from poolbench.cli.claiming import claim_from_cli
from poolbench.cli.common import (
    PlainProgress,
    open_store,
    progress_bar,
)
from poolbench.engine import cleanup as cleanup_mod
from poolbench.engine import lifecycle, study_run
from poolbench.engine.zfs_daemon import zfs_available
from poolbench.errors import TrialsFailed
from poolbench.planner.performance import DiskSpeed
from poolbench.report import terminal
from poolbench.safety.claims import ClaimSet
from poolbench.safety.guarded import GuardedRunner
from poolbench.store.db import resume_command
from poolbench.study import consistency, estimate, matrix, pilot
from poolbench.study.model import Study
from poolbench.system.probes import ram_bytes
from poolbench.system.runner import LocalRunner, Runner


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


def _print_dry_run(
    sr: study_run.StudyRun,
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


def _measure(
    sr: study_run.StudyRun,
    availability: dict[str, Availability],
    resume: int | None,
    console: Console,
    err: Console,
    disk: DiskSpeed | None = None,
) -> int:
    """The study as a stored run (new, or resumed), under the run lifecycle; then its
    table. Returns the run id."""
    store, claims = sr.store, sr.claims
    _start_or_reopen(sr, availability, resume)
    if claims is not None:
        claims.record_overrides(store, sr.run_id)

    def interrupted(kept: int) -> None:
        err.print(
            f"Interrupted: everything created was torn down; {kept} measurement(s) kept in run "
            f"{sr.run_id}. Finish it with: {resume_command(store.path, sr.run_id)}"
        )

    try:
        with (
            lifecycle.tracked(store, sr.run_id, on_interrupt=interrupted) as outcome,
            progress_bar(err, plain_lines=False) as update,
        ):
            sr.progress = update
            if not err.is_terminal:  # under nohup or into a log: a line per finished trial
                sr.on_trial = PlainProgress(
                    lambda line: err.print(line, markup=False, highlight=False)
                ).trial_done
            sr.run()
            failed = sr.failed()
            if failed:  # still "finished": every other trial was measured
                outcome.error = f"{len(failed)} trial(s) failed"
    finally:
        # The scratch root (default /var/tmp/poolbench) holds only trial directories, each
        # removed by its teardown; leave no empty directory behind either.
        with contextlib.suppress(OSError):
            sr.paths.scratch.rmdir()
    # The report's header says once that sparse-file disks show the method, not the
    # hardware, and the report ends with the answer and what to do next: nothing after it.
    console.print(f"stored as run {sr.run_id} in {store.path}", markup=False)
    terminal.render_stored(console, store, sr.run_id, disk=disk)
    if failed:
        raise TrialsFailed(
            f"Study finished, {len(failed)} trial(s) failed (each torn down; the reasons are "
            f"in the table above and stored with run {sr.run_id}).",
            f"Measure them again with: {resume_command(store.path, sr.run_id)}",
            sr.run_id,
        )
    return sr.run_id


def _start_or_reopen(
    sr: study_run.StudyRun, availability: dict[str, Availability], resume: int | None
) -> None:
    """A new run row, or the resumed one (its metadata gains this invocation's pool token)."""
    if resume is None:
        meta = sr.metadata(availability)
        sr.run_id = lifecycle.start(sr.store, "study", sr.study.name, meta, sr.argv)
        return
    sr.run_id = lifecycle.reopen(sr.store, resume)
    meta = json.loads(sr.store.run(resume)["metadata"])
    meta["pool_tokens"] = [*meta.get("pool_tokens", []), sr.pool_token]
    sr.store.update_metadata(resume, meta)


def _check_up_front(study: Study, err: Console) -> None:
    """What the study leaves implicit is said; what cannot work is refused (dry runs too)."""
    consistency.check_tarball(study)  # the real run would fail on it, hours in
    if "backend" not in study.factors:
        err.print(
            "note: the study names no backend; zfs is assumed "
            '(add backend = ["zfs"] under [factors] to say so).',
            markup=False,
            highlight=False,
        )


def execute_study(
    study: Study,
    text: str,
    *,
    db: Path | None,
    dry_run: bool,
    resume: int | None = None,
    seed: int | None = None,
    scratch_dir: Path | None = None,
    console: Console | None = None,
    destroy_data_on: Sequence[str] = (),
    yes: bool = False,
    all_commands: bool = False,
    disk: DiskSpeed | None = None,
) -> int:
    """Shared by `run`, `study` and `demo`. Returns the run id."""
    err = Console(stderr=True)
    console = console or Console()
    _check_up_front(study, err)
    with zfs_daemon(study, dry_run):  # before the cleanup and the preflight ask ZFS
        log = DryRunLog()
        runner: Runner = LocalRunner(dry_run=dry_run, echo=log.command)
        # Opened for writing only once the study passed its preflight: a refused study leaves
        # no new store (and no new directory) behind.
        store = open_store(db, "dry")
        paths = study_run.default_paths(store)
        if scratch_dir:
            paths.scratch = scratch_dir
        claims: ClaimSet | None = None
        if study.disks.source == "devices":
            # Real devices only through the safety layer: each one checked (mounted, signatures,
            # pool labels, holders, ...) and claimed now, before anything runs, and re-checked
            # right before the first destructive command by the guarded runner.
            claims = claim_from_cli(
                runner, study.disks.devices, destroy_data_on, yes, store.path, paths.scratch
            )
            runner = GuardedRunner(runner, claims)
        if not dry_run:
            _clean_earlier(runner, paths.journals, err)
        sr = study_run.StudyRun(
            runner,
            store,
            study,
            text,
            paths,
            seed=seed,
            argv=lifecycle.command_line(),
            claims=claims,
        )
        try:
            availability = sr.preflight()
        finally:
            log.flush(err)  # what the probes would have run (real devices: the claims)
        if dry_run:
            _print_dry_run(sr, study, console, err, log, all_commands)
            return 0
        store.close()
        sr.store = open_store(db, "write")
        return _measure(sr, availability, resume, console, err, disk)


def _clean_earlier(runner: Runner, journals: Path, err: Console) -> None:
    for outcome in cleanup_mod.cleanup(runner, journals):
        err.print(f"cleaned up after an earlier crash: {outcome.journal.name}", markup=False)


def _uses_zfs(study: Study) -> bool:
    return any(c.backend == "zfs" for c in matrix.configs(study))


@contextlib.contextmanager
def zfs_daemon(study: Study, dry_run: bool) -> Iterator[None]:
    """zfs-fuse started for a ZFS study when it is this machine's ZFS and none answers (as
    `demo` does); stopped afterwards only if started here. Never started where OpenZFS is
    (its kernel module answers, or is loaded): see engine/zfs_daemon.py."""
    if dry_run or not _uses_zfs(study):
        yield
        return
    with zfs_available(LocalRunner()):
        yield
