"""One run's life in the store, the same for `run`, `bench` and `bench --hosts`: a run row is
started, every command run is logged with it, and it ends as finished, partial, interrupted
(Ctrl-C: what was measured is kept) or failed (with the error), whatever happens in between.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from poolbench.records.jsontypes import JsonObject
from poolbench.store import queries
from poolbench.store.db import Store
from poolbench.system.runner import Runner


def command_line() -> list[str]:
    """This invocation's command line, as stored with the run."""
    return ["poolbench", *sys.argv[1:]]


def start(store: Store, kind: str, name: str, metadata: JsonObject,
          argv: Sequence[str] | None = None) -> int:  # fmt: skip
    """A new run row, status 'running'; returns its id."""
    return store.start_run(kind, name, command_line() if argv is None else argv, metadata)


def reopen(store: Store, run_id: int) -> int:
    """An interrupted run, running again (`run --resume`)."""
    store.finish_run(run_id, "running")
    return run_id


@dataclass
class Outcome:
    """How the run ends; the body may mark it partial (some results kept, not all)."""

    run_id: int
    status: str = "failed"
    error: str | None = None
    partial: bool = False

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
    """Run the body as run `run_id` and record how it ended. On Ctrl-C, `on_interrupt` is told
    how many measurements were kept; `before_finish` runs last, whatever happened (to store
    what the body learnt, e.g. a fleet's failed hosts)."""
    outcome = Outcome(run_id)
    try:
        yield outcome
        outcome.status = "partial" if outcome.partial else "finished"
    except KeyboardInterrupt:
        outcome.status = "interrupted"
        if on_interrupt is not None:
            on_interrupt(queries.measurement_count(store, run_id))
        raise
    except Exception as exc:
        outcome.error = str(exc)
        raise
    finally:
        if before_finish is not None:
            before_finish(outcome)
        store.finish_run(run_id, outcome.status, outcome.error)


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
