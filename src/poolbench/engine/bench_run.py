"""`poolbench bench` as one run: measure one mounted filesystem (or a scratch ext4 poolbench
makes for the purpose) under the run lifecycle, and keep what the header needs to say."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from poolbench.engine import lifecycle, scratch
from poolbench.engine.session import Session
from poolbench.engine.subject import Options, Subject, WorkloadResult
from poolbench.engine.trial_loop import default_paths
from poolbench.guards.devices import MountInfo, Target
from poolbench.guards.workingset import WorkingSet
from poolbench.safety.journal import Journal
from poolbench.store import history
from poolbench.store.db import Store
from poolbench.system.runner import Runner

MiB = 1024 * 1024
ProgressBar = Callable[[], AbstractContextManager[Callable[[str, int, int], None]]]


@dataclass
class BenchResult:
    run_id: int
    results: list[WorkloadResult]
    session: Session  # its working set, device target and fio version, for the header


@dataclass
class BenchRun:
    runner: Runner
    store: Store
    path: Path | None  # None: a scratch filesystem of `scratch_bytes`
    options: Options
    scratch_bytes: int | None = None
    scratch_size: str | None = None  # as the user wrote it, for the record
    record_as: str | None = None  # the series' stable name (`--record-as`), else the target

    def __post_init__(self) -> None:
        if self.scratch_bytes is not None and self.options.size is None:
            # The scratch image lives on this machine's disk; use half of it.
            self.options = replace(self.options, size=self.scratch_bytes // 2 // MiB * MiB)

    def _target(self, stack: ExitStack) -> Path:
        if self.scratch_bytes is None:
            assert self.path is not None
            return self.path
        journals = default_paths(self.store).journals
        return stack.enter_context(scratch.mounted(self.runner, self.scratch_bytes, journals))

    def dry_run(self, show_job: Callable[[str, str], None] | None = None) -> None:
        """Every command and fio job that would run (each job's text to `show_job`);
        nothing is run or stored."""
        with ExitStack() as stack:
            path = self._target(stack)
            session = Session(self.runner, self.store, 0, Subject.directory(path), self.options)
            session.show_job = show_job
            if self.scratch_bytes is None:
                session.preflight()
            else:  # the scratch filesystem does not exist: nothing to probe
                session.working_set = WorkingSet(self.options.size or 0, 0, None, 0, False, 0.0)
                session.device_target = Target(str(path), MountInfo(str(path), "ext4", "", ""))
            session.run()

    def run(
        self,
        progress_bar: ProgressBar,
        on_interrupt: Callable[[int, int], None],
        announce: Callable[[str], None] | None = None,
    ) -> BenchResult:
        """Measure and store as a new run; `on_interrupt(run_id, kept)` on Ctrl-C;
        `announce` is told the free space the run needs and where it writes, before it
        writes anything (refused before that when the space is not there)."""
        with ExitStack() as stack:
            path = self._target(stack)
            metadata = lifecycle.first_metadata()
            name = str(path if self.scratch_bytes is None else "scratch")
            run_id = lifecycle.start(self.store, "bench", name, metadata)
            if self.record_as is not None:
                history.set_series(self.store, run_id, self.record_as)
            subject = Subject.directory(path)
            session = Session(self.runner, self.store, run_id, subject, self.options)
            with lifecycle.tracked(
                self.store, run_id, on_interrupt=lambda kept: on_interrupt(run_id, kept)
            ):
                metadata.update(session.preflight())
                if announce is not None and session.working_set is not None:
                    announce(session.working_set.space_text(session.workspace.root))
                metadata["scratch"] = self.scratch_size
                self.store.update_metadata(run_id, metadata)
                with progress_bar() as update, ExitStack() as journaled:
                    if self.scratch_bytes is None:  # (the scratch filesystem has its own)
                        journals = default_paths(self.store).journals
                        root = session.workspace.root  # after preflight: the target is writable
                        journaled.enter_context(_journaled(self.runner, root, journals))
                    session.progress = update
                    results = session.run()
                # The seeded workload order of each round, for the record (and a replay).
                metadata["round_orders"] = session.round_orders
                self.store.update_metadata(run_id, metadata)
        return BenchResult(run_id, results, session)


@contextmanager
def _journaled(runner: Runner, workspace: Path, journals: Path) -> Iterator[None]:
    """The working directory a bench makes on the user's filesystem, journaled before it
    exists: after a kill -9 `poolbench cleanup` stops the fio it left and removes the
    directory (the session removes it itself on every other ending)."""
    journals.mkdir(parents=True, exist_ok=True)
    journal = Journal(runner, journals / f"bench-pid{os.getpid()}.jsonl")
    journal.path_created(str(workspace))
    try:
        yield
    except BaseException:
        journal.teardown()  # what it cannot undo stays journaled for `poolbench cleanup`;
        raise  # the error the user must see is the one that ended the bench, not this
    journal.teardown_or_raise(
        "The bench's working directory was left: ", "Remove it by hand if it is still there."
    )
