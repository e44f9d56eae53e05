"""One process runner for every external command.

Every program poolbench starts (fio, zpool, mkfs, losetup, ...) goes through a `Runner`:
argument lists only (never a shell string), each call logged with its duration and exit code,
a dry-run mode that records what would run, and a recording runner for tests. The call log is
what the store saves as "every command run" for reproducibility. Every command runs under a
time limit (system/watchdog.py): the caller's `timeout`, else its program's default.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from poolbench.capabilities import install_hint
from poolbench.errors import PoolbenchError, ToolMissingError
from poolbench.system import stopping, watchdog
from poolbench.system.watchdog import CommandTimedOut, Limit, Stuck

log = logging.getLogger("poolbench.runner")

STDERR_TAIL_LINES = 15


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration_s: float
    dry_run: bool = False


@dataclass(frozen=True)
class CallRecord:
    """One line of the call log: what ran, when, how long, how it ended."""

    argv: tuple[str, ...]
    started_at: float
    duration_s: float
    returncode: int | None
    dry_run: bool = False
    mutates: bool = True  # as the caller said: a dry run runs only the calls that do not

    def as_dict(self) -> dict[str, object]:
        return {
            "argv": list(self.argv),
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 6),
            "returncode": self.returncode,
            "dry_run": self.dry_run,
        }


class CommandError(PoolbenchError):
    """A command exited non-zero. Shows argv, exit code and the tail of stderr."""

    def __init__(self, result: CommandResult, fix: str = "") -> None:
        self.result = result
        tail = "\n".join(result.stderr.strip().splitlines()[-STDERR_TAIL_LINES:])
        problem = (
            f"Command failed with exit code {result.returncode}: {format_argv(result.argv)}"
            + ("\n  stderr (last lines):\n    " + tail.replace("\n", "\n    ") if tail else "")
        )
        super().__init__(problem, fix)


def format_argv(argv: Sequence[str]) -> str:
    """A copy-pasteable rendering of argv, for messages and dry-run output only."""
    import shlex

    return " ".join(shlex.quote(a) for a in argv)


class Runner(Protocol):
    """What every runner offers. `check=True` raises CommandError on a non-zero exit.
    `timeout`: the command's time limit in seconds; None takes its program's default
    (watchdog.limit_for), and a program without one (fio, pgbench, tar, ...) must be given
    one. A command past its limit raises CommandTimedOut."""

    dry_run: bool
    calls: list[CallRecord]

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        input_text: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        mutates: bool = True,
        reap_group: bool = True,
    ) -> CommandResult: ...

    def which(self, program: str) -> str | None: ...


def _validate_argv(argv: Sequence[str]) -> tuple[str, ...]:
    if isinstance(argv, str):  # a shell string would be one program name with spaces
        raise TypeError("Runner takes an argument list, never a shell string")
    args = tuple(argv)
    if not args or not all(isinstance(a, str) for a in args):
        raise TypeError(f"argv must be a non-empty list of str, got {argv!r}")
    return args


@dataclass
class LocalRunner:
    """Runs commands on this machine.

    With `dry_run=True`, commands marked `mutates=True` (the default) are not run: they are
    recorded and printed through `echo`, and answer with exit code 0 and empty output.
    Read-only probes (`mutates=False`) still run, so a dry run can plan against reality.
    """

    dry_run: bool = False
    echo: Callable[[str], None] | None = None
    calls: list[CallRecord] = field(default_factory=list)

    def which(self, program: str) -> str | None:
        return shutil.which(program)

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        input_text: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        mutates: bool = True,
        reap_group: bool = True,
    ) -> CommandResult:
        """Run argv. `reap_group=False` for a command that starts a daemon on purpose."""
        args = _validate_argv(argv)
        stopping.check()  # a stop signal held by a teardown or a transaction: no new command
        started = time.time()
        if self.dry_run and mutates:
            self.calls.append(CallRecord(args, started, 0.0, 0, dry_run=True))
            if self.echo:
                self.echo(format_argv(args))
            return CommandResult(args, 0, "", "", 0.0, dry_run=True)
        limit = watchdog.limit_for(args, timeout)  # MissingLimit: a call site forgot it
        _check_installed(args[0])
        full_env = None
        if env is not None:
            full_env = dict(os.environ)
            full_env.update(env)
        t0 = time.monotonic()
        try:
            returncode, out, err = _spawn(args, input_text, full_env, limit, reap_group)
        except BaseException:
            # Ctrl-C or a timeout: the command was stopped (fio keeps writing otherwise).
            duration = time.monotonic() - t0
            self.calls.append(CallRecord(args, started, duration, None))
            log.info("interrupted after %.3fs: %s", duration, format_argv(args))
            raise
        duration = time.monotonic() - t0
        self.calls.append(CallRecord(args, started, duration, returncode))
        log.debug("rc=%d %.3fs: %s", returncode, duration, format_argv(args))
        result = CommandResult(args, returncode, out, err, duration)
        if check and returncode != 0:
            raise CommandError(result)
        return result


def _check_installed(program: str) -> None:
    if shutil.which(program) is None and not os.path.exists(program):
        hint = install_hint(os.path.basename(program))
        raise ToolMissingError(f"'{program}' is not installed or not on PATH.", hint)


def _spawn(
    args: tuple[str, ...],
    input_text: str | None,
    env: dict[str, str] | None,
    limit: Limit,
    reap_group: bool,
) -> tuple[int, str, str]:
    """Run one command to its end: (return code, stdout, stderr). On any exception (Ctrl-C,
    the limit running out) the command is stopped before the exception goes on."""
    # Output goes to temporary files, not pipes: a program whose main process dies while
    # its children live on (fio forks one process per job) would otherwise hold the pipe
    # open and hang the read. Each command runs in its own process group, so that on
    # Ctrl-C, a timeout or a crash every process it started can be stopped together.
    with tempfile.TemporaryFile("w+") as out_f, tempfile.TemporaryFile("w+") as err_f:
        # A stop signal while the child is being started is held (a child started but not
        # yet known here could not be stopped) and raised inside the try, which stops it.
        with stopping.deferred():
            proc = subprocess.Popen(
                args,
                stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
                stdout=out_f,
                stderr=err_f,
                text=True,
                env=env,
                start_new_session=True,
            )
        t0 = time.monotonic()
        try:
            stopping.check()
            # communicate, not a write then wait: a child that never reads its input (hung
            # in a pool) must not block the write past the limit either
            proc.communicate(input_text, timeout=limit.seconds)
        except subprocess.TimeoutExpired:
            # Its SIGTERM, then SIGKILL, each grace bounded, whole: a stop signal arriving
            # meanwhile cannot cut it short.
            with stopping.deferred(f"waiting for {os.path.basename(args[0])} to end"):
                stuck = _stop(proc)
            raise CommandTimedOut(args, limit, time.monotonic() - t0, stuck) from None
        except BaseException:
            # Its SIGTERM, then SIGKILL, whole: a stop signal arriving meanwhile (a second
            # one) cannot cut it short; each grace is bounded (watchdog.TERM/KILL_GRACE_S).
            with stopping.deferred(
                f"waiting for {os.path.basename(args[0])} to end (SIGKILL after "
                f"{watchdog.secs(watchdog.scaled(watchdog.TERM_GRACE_S))} s)"
            ):
                for s in _stop(proc):
                    watchdog.announce(f"left behind, it could not be killed: {s.describe()}")
            raise
        finally:
            if reap_group:
                _kill_group(proc.pid)
        out_f.seek(0)
        err_f.seek(0)
        return proc.returncode, out_f.read(), err_f.read()


def _kill_group(pgid: int) -> None:
    """Kill whatever is left of a command's process group (orphaned children)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


# Commands that could not be killed (asleep in the kernel): kept so that Python neither
# waits for them nor warns that they still run; the kernel reaps them if their I/O returns.
_ABANDONED: list[subprocess.Popen[str]] = []


def _stop(proc: subprocess.Popen[str]) -> list[Stuck]:
    """SIGTERM the command's process group (fio then stops its jobs cleanly), then SIGKILL;
    never waits more than TERM_GRACE_S + KILL_GRACE_S (each scaled). Returns the processes
    of the group still there after SIGKILL (stuck in uninterruptible sleep), left behind."""
    if proc.poll() is not None:
        return []
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return []
    graces = (watchdog.scaled(watchdog.TERM_GRACE_S), watchdog.scaled(watchdog.KILL_GRACE_S))
    for sig, grace in zip((None, signal.SIGKILL), graces, strict=True):
        if sig is not None:
            _kill_group(proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
            return []
    _ABANDONED.append(proc)
    members = watchdog.group_members(proc.pid) or [proc.pid]
    return [s for pid in members if (s := watchdog.describe_process(pid)) is not None]


@dataclass
class RecordingRunner:
    """A runner for tests: records every call and answers from scripted responses.

    `responses` maps a program name (argv[0]) or a full argv tuple to a result, or to a
    callable that builds one from argv. Unscripted calls answer exit 0 with empty output.
    """

    responses: dict[object, object] = field(default_factory=dict)
    dry_run: bool = False
    calls: list[CallRecord] = field(default_factory=list)
    installed: set[str] | None = None

    def which(self, program: str) -> str | None:
        if self.installed is None or program in self.installed:
            return f"/usr/bin/{program}"
        return None

    @property
    def argvs(self) -> list[tuple[str, ...]]:
        return [c.argv for c in self.calls]

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        input_text: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        mutates: bool = True,
        reap_group: bool = True,
    ) -> CommandResult:
        args = _validate_argv(argv)
        if not (self.dry_run and mutates):  # what a real run would start: the same rule
            watchdog.limit_for(args, timeout)
        self.calls.append(CallRecord(args, time.time(), 0.0, 0, self.dry_run, mutates))
        spec = self.responses.get(args, self.responses.get(args[0]))
        if callable(spec):
            spec = spec(args)
        if spec is None:
            result = CommandResult(args, 0, "", "", 0.0)
        elif isinstance(spec, CommandResult):
            result = spec
        elif isinstance(spec, str):
            result = CommandResult(args, 0, spec, "", 0.0)
        else:
            raise TypeError(f"bad scripted response for {args}: {spec!r}")
        if check and result.returncode != 0:
            raise CommandError(result)
        return result
