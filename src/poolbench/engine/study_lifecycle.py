"""A study as one run: the lifecycle that `run`, `study` and `demo` share, and any other
caller (a test, a script) can drive in-process.

The engine decides and the caller speaks: what to show (notes, the dry run's commands,
progress, an interruption) and what to ask (the confirmation before data is destroyed) reach
the caller through `StudyHooks`; nothing here prints or prompts. The order is the safety
order: refuse what cannot work, start zfs-fuse if this machine's ZFS needs it, open the store
read-only, claim real devices, clean what an earlier crash left, preflight every
configuration, and only then open the store for writing and measure under the run lifecycle.
"""

from __future__ import annotations

import contextlib
import json
import shlex
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from poolbench.backends.base import Availability
from poolbench.engine import cleanup as cleanup_mod
from poolbench.engine import lifecycle, pgbench_run, trial_loop
from poolbench.engine.screen import check as screen_check
from poolbench.engine.zfs_daemon import zfs_available
from poolbench.safety.claims import ClaimSet
from poolbench.safety.guarded import GuardedRunner
from poolbench.store import queries
from poolbench.store.db import Store, db_option, default_path, resume_command
from poolbench.store.opening import Mode
from poolbench.study import consistency, estimate, matrix
from poolbench.study.model import Study
from poolbench.system import terminal, watchdog
from poolbench.system.runner import LocalRunner, Runner
from poolbench.workloads.library import parse_list

Progress = Callable[[str, int, int], None]


class StudyHooks(Protocol):
    """What a caller of run_study shows and answers."""

    def note(self, message: str) -> None:
        """A sentence the user should read (an assumption made, a crash cleaned up)."""

    def command(self, argv: str) -> None:
        """A dry run's command, as it would run."""

    def claim(self, runner: Runner, devices: Sequence[str], store: Path, scratch: Path) -> ClaimSet:
        """Claims on the real devices a study names (the caller may ask the user)."""

    def progress(self) -> AbstractContextManager[Progress]:
        """A progress display for the measuring loop: (what, done, total)."""

    def trial_done(self) -> trial_loop.TrialDone | None:
        """Called after each trial (a line per trial off a terminal), or None."""

    def interrupted(self, run_id: int, kept: int, resume: str) -> None:
        """Ctrl-C: everything created is torn down; `kept` measurements stay in the run."""


@dataclass(frozen=True)
class StudyRequest:
    study: Study
    text: str  # the study file as the user wrote it (stored with the run)
    db: Path | None = None  # the result store; None: the default one
    resume: int | None = None  # a run to finish instead of a new one
    seed: int | None = None
    scratch_dir: Path | None = None
    argv: Sequence[str] = field(default_factory=lifecycle.command_line)
    # False (--no-screen): real disks are not screened before the study; the run says so
    screen: bool = True
    # The command that resumes the run, as the user started it: "run", "study NAME", "demo"
    command: str = "run"

    def resume_command(self, store: Path, run_id: int) -> str:
        """The command that finishes the run, with this invocation's scratch directory and
        screen choice (a resume in another scratch directory would work, but not where the
        user chose to put the sparse files)."""
        line = resume_command(store, run_id, self.command)
        if self.scratch_dir is not None:
            line += f" --scratch-dir {shlex.quote(str(self.scratch_dir))}"
        return line + ("" if self.screen else " --no-screen")


@dataclass
class StudyOutcome:
    run_id: int
    store: Store
    failed: list[queries.FailedTrial]


def _open(db: Path | None, mode: Mode) -> Store:
    return Store(default_path() if db is None else db, mode)


def _check_up_front(study: Study, hooks: StudyHooks) -> None:
    """What the study leaves implicit is said; what cannot work is refused (dry runs too)."""
    consistency.check_tarball(study)  # the real run would fail on it, hours in
    pgbench_run.check_installed(parse_list(",".join(study.workloads.names)))
    if "backend" not in study.factors:
        hooks.note(
            f"note: the study names no backend; {matrix.DEFAULT_BACKEND} is assumed "
            f'(add backend = ["{matrix.DEFAULT_BACKEND}"] under [factors] to say so).'
        )


@contextlib.contextmanager
def prepared(
    request: StudyRequest, hooks: StudyHooks, *, dry_run: bool
) -> Iterator[tuple[trial_loop.StudyRun, dict[str, Availability]]]:
    """The study checked, its devices claimed and every configuration preflighted, nothing
    created yet; its store is open read-only (a refused study leaves no store behind)."""
    study = request.study
    _check_up_front(study, hooks)
    with zfs_daemon(study, dry_run):  # before the cleanup and the preflight ask ZFS
        runner: Runner = LocalRunner(dry_run=dry_run, echo=hooks.command)
        store = _open(request.db, "dry")
        paths = trial_loop.default_paths(store)
        if request.scratch_dir:
            paths.scratch = request.scratch_dir
        claims: ClaimSet | None = None
        if study.disks.source == "devices":
            # Real devices only through the safety layer: each one checked (mounted,
            # signatures, pool labels, holders, ...) and claimed now, before anything runs,
            # and re-checked right before the first destructive command by the guarded runner.
            claims = hooks.claim(runner, study.disks.devices, store.path, paths.scratch)
            runner = GuardedRunner(runner, claims)
            if dry_run:  # a real run screens the unscreened disks first (run_study)
                for line in screen_check.study_notes(store, claims, request.screen):
                    hooks.note(line)
        if not dry_run:  # the server's user must reach the clusters under the scratch dir
            pgbench_run.check_installed(parse_list(",".join(study.workloads.names)), paths.scratch)
            for outcome in cleanup_mod.cleanup(runner, paths.journals):
                if outcome.stuck:  # nothing of this study made yet
                    command = f"poolbench cleanup{db_option(store.path)}"
                    raise cleanup_mod.refuse_stuck(outcome, command)
                hooks.note(f"cleaned up after an earlier crash: {outcome.journal.name}")
        sr = trial_loop.StudyRun(
            runner,
            store,
            study,
            request.text,
            paths,
            seed=request.seed,
            argv=request.argv,
            claims=claims,
        )
        yield sr, sr.preflight()


def run_study(request: StudyRequest, hooks: StudyHooks) -> StudyOutcome:
    """Build, measure, store and tear down every trial of the study (or the trials a resumed
    run still owes). Returns the run; failed trials are in `failed` (each torn down, the rest
    measured); Ctrl-C tears down what was made, keeps what was measured, and re-raises."""
    with prepared(request, hooks, dry_run=False) as (sr, availability):
        _said_if_a_hangup_would_stop_it(sr, hooks, request.resume)
        sr.store.close()
        sr.store = _open(request.db, "write")
        if sr.claims is not None:  # real disks: each screened (or a recent screen reused)
            sr.not_screened = screen_check.before_study(
                sr.runner, sr.store, sr.claims, hooks.note, request.screen
            )
            for line in screen_check.study_notes(sr.store, sr.claims, request.screen):
                hooks.note(line)  # a slow disk? (or, --no-screen, none looked for)
        _start_or_reopen(sr, availability, request.resume)
        if sr.claims is not None:
            sr.claims.record_overrides(sr.store, sr.run_id)
        sr.resume_command = lambda: request.resume_command(sr.store.path, sr.run_id)
        return _measure(sr, hooks)


def _measure(sr: trial_loop.StudyRun, hooks: StudyHooks) -> StudyOutcome:
    store, run_id = sr.store, sr.run_id

    def interrupted(kept: int) -> None:
        hooks.interrupted(run_id, kept, sr.resume_line())

    try:
        with (
            lifecycle.tracked(store, run_id, on_interrupt=interrupted) as outcome,
            hooks.progress() as update,
        ):
            sr.progress = update
            sr.on_trial = hooks.trial_done()
            sr.run()
            failed = sr.failed()
            if failed:  # still "finished": every other trial was measured
                outcome.error = f"{len(failed)} trial(s) failed"
    finally:
        # The scratch root (default /var/tmp/poolbench) holds only trial directories, each
        # removed by its teardown; leave no empty directory behind either.
        with contextlib.suppress(OSError):
            sr.paths.scratch.rmdir()
    return StudyOutcome(run_id, store, failed)


# A study estimated to last longer than this, started where a dropped connection would stop
# it, says so before it starts (docs/long-runs.md).
LONG_STUDY_S = 600.0


def _said_if_a_hangup_would_stop_it(
    sr: trial_loop.StudyRun, hooks: StudyHooks, resume: int | None
) -> None:
    """One line before a long study starts in an SSH terminal outside tmux or screen."""
    why = terminal.hangup_risk()
    if why is None:
        return
    planned = estimate.estimate(sr.study)
    seconds = planned.planned_seconds
    if resume is not None:  # what is left of it
        cells = len(sr.configs) * sr.study.replicates * len(sr.workloads)
        done = queries.measurement_count(sr.store, resume)
        seconds *= max(0.0, 1 - done / cells) if cells else 1.0
    if seconds > LONG_STUDY_S:
        hooks.note(
            f"note: this study should take about {estimate.fmt_duration(seconds)} and {why}: "
            "if the connection drops, the hangup stops it (torn down, resumable). Start it "
            "in tmux or screen, or see docs/long-runs.md (nohup, systemd-run)."
        )


def _start_or_reopen(
    sr: trial_loop.StudyRun, availability: dict[str, Availability], resume: int | None
) -> None:
    """A new run row, or the resumed one (its metadata gains this invocation's pool token)."""
    if resume is None:
        meta = sr.metadata(availability)
        sr.run_id = lifecycle.start(sr.store, "study", sr.study.name, meta, sr.argv)
        return
    sr.run_id = lifecycle.reopen(sr.store, resume)
    meta = json.loads(sr.store.run(resume)["metadata"])  # the column as it was written
    earlier = meta.get("pool_tokens", [])
    scales = watchdog.time_limit_scales(meta.get("time_limit_scales"), len(earlier))
    if scales is not None:
        meta["time_limit_scales"] = scales
    meta["pool_tokens"] = [*earlier, sr.pool_token]
    if sr.not_screened:  # this invocation's trials ran on disks nobody screened
        meta["screen"] = sr.not_screened
    sr.store.update_metadata(resume, meta)


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
