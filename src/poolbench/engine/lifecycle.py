"""One run's life in the store, the same for `run`, `bench` and `bench --hosts`: a run row is
started, owned by this process, every command run is logged with it, and it ends as finished,
partial, interrupted (Ctrl-C, SIGTERM or SIGHUP, named: what was measured is kept) or failed
(with the error), whatever happens in between.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from poolbench import is_digits
from poolbench.records.run_metadata import RunMetadataJson
from poolbench.store import queries
from poolbench.store.db import Store
from poolbench.system import probes, stopping, watchdog
from poolbench.system.runner import Runner


def command_line() -> list[str]:
    """This invocation's command line, as stored with the run."""
    return ["poolbench", *sys.argv[1:]]


def first_metadata() -> RunMetadataJson:
    """What every run's metadata begins with: the machine, and the time limits' scale when
    an invocation ran with one other than 1."""
    metadata: RunMetadataJson = {"machine": probes.machine()}
    if (scales := watchdog.time_limit_scales()) is not None:
        metadata["time_limit_scales"] = scales
    return metadata


def start(store: Store, kind: str, name: str, metadata: RunMetadataJson,
          argv: Sequence[str] | None = None) -> int:  # fmt: skip
    """A new run row, status 'running', owned by this process; returns its id."""
    run_id = store.start_run(kind, name, command_line() if argv is None else argv, metadata)
    store.set_owner(run_id, owner_id())
    return run_id


def reopen(store: Store, run_id: int) -> int:
    """An interrupted run, running again (`--resume`), now owned by this process."""
    store.finish_run(run_id, "running")
    store.set_owner(run_id, owner_id())
    return run_id


def owner_id(pid: int | None = None) -> str | None:
    """Who runs a run: "BOOT_ID:PID:START", the kernel's boot id, the pid and the process's
    start time in clock ticks (a pid is reused, after a reboot or not; the three together
    are not). None where /proc cannot tell."""
    pid = os.getpid() if pid is None else pid
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    if len(fields) < 20 or fields[0] == "Z":
        return None  # an exited process its parent has not reaped
    return f"{boot}:{pid}:{fields[19]}"  # starttime, field 22 of stat(5)


def owner_alive(owner: str | None) -> bool:
    """Whether the process that `owner` names still runs (on this boot of this machine)."""
    if not owner:
        return False
    pid = owner.split(":")[1] if owner.count(":") == 2 else ""
    return is_digits(pid) and owner_id(int(pid)) == owner


@dataclass
class Outcome:
    """How the run ends; the body may mark it partial (some results kept, not all)."""

    run_id: int
    status: str = "failed"
    error: str | None = None
    partial: bool = False
    stopped_by: str | None = None  # the signal that stopped it

    def mark_partial(self, error: str) -> None:
        self.partial, self.error = True, error


@contextmanager
def tracked(
    store: Store,
    run_id: int,
    *,
    on_interrupt: Callable[[int], None] | None = None,
    before_finish: Callable[[Outcome], None] | None = None,
) -> Iterator[Outcome]:
    """Run the body as run `run_id` and record how it ended. On Ctrl-C, SIGTERM or SIGHUP
    (system/stopping.py) the run is interrupted, with the signal's name, and `on_interrupt`
    is told how many measurements were kept; an error raised on the way out of a signal (a
    teardown that left something) keeps the run interrupted, with that error. A signal held
    until the body's last teardown ended stops the run here. `before_finish` runs last,
    whatever happened (to store what the body learnt, e.g. a fleet's failed hosts)."""
    outcome = Outcome(run_id)
    try:
        yield outcome
        stopping.check()
        outcome.status = "partial" if outcome.partial else "finished"
    except KeyboardInterrupt as exc:
        outcome.status, outcome.stopped_by = "interrupted", stopping.name_of(exc)
        if on_interrupt is not None:
            on_interrupt(queries.measurement_count(store, run_id))
        raise
    except Exception as exc:
        outcome.error = str(exc)
        sig = stopping.received()
        if sig is not None:
            outcome.status, outcome.stopped_by = "interrupted", stopping.signal_name(sig)
        raise
    finally:
        if before_finish is not None:
            before_finish(outcome)
        store.finish_run(run_id, outcome.status, outcome.error, outcome.stopped_by)


class CommandLog:
    """Stores the commands a runner ran with the run, as they are run (a dry run stores
    nothing)."""

    def __init__(self, runner: Runner, store: Store | None, run_id: int) -> None:
        self.runner = runner
        self.store = store
        self.run_id = run_id
        self._flushed = 0

    def flush(self) -> None:
        if self.runner.dry_run or self.store is None:
            return
        calls = self.runner.calls[self._flushed :]
        if calls:
            self.store.add_commands(self.run_id, calls)
            self._flushed += len(calls)
