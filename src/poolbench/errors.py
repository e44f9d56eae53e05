"""Errors the user can act on, and the exit code of each.

Every error poolbench raises on purpose is a `PoolbenchError`: one paragraph that names the
problem and the fix. The CLI prints it and exits with the error's `exit_code`, one of
EXIT_CODES below: the one table of exit codes, documented in docs/cli.md (a test keeps the
two equal). Scripts can tell a mistyped command line (2) from a study file or run that does
not exist (5), a device poolbench refused to touch (6) and a run that failed (1).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2  # click's own code for a command line it refuses; poolbench's checks use it too
EXIT_BUG = 3
EXIT_TRIALS_FAILED = 4  # the study finished, but K of its trials failed (stored, resumable)
EXIT_INPUT = 5
EXIT_REFUSED = 6
EXIT_UNSUPPORTED = 7  # what this machine lacks (zfs-fuse: dRAID, sync, ...); nothing created
# A stop signal: 128 + its number, as shells report a command a signal ended. Each takes the
# Ctrl-C path (system/stopping.py): children stopped, everything torn down, the run kept.
EXIT_HANGUP = 129  # SIGHUP: the terminal or SSH session closed
EXIT_INTERRUPTED = 130  # SIGINT: Ctrl-C
EXIT_TERMINATED = 143  # SIGTERM: kill, timeout, systemctl stop

# (code, name, when): the table docs/cli.md shows, in this order.
EXIT_CODES: tuple[tuple[int, str, str], ...] = (
    (EXIT_OK, "ok", "the command did what was asked"),
    (EXIT_FAILURE, "failure", "a run or command failed while working: fio, zpool or another "
     "tool failed or is missing, a pool was not what was asked, a host did not answer, the "
     "store failed while in use (locked, disk full)"),
    (EXIT_USAGE, "usage", "the command line was refused: an unknown command or option, a "
     "missing argument, a flag's value or a combination of flags poolbench cannot use"),
    (EXIT_BUG, "bug", "an internal error: the traceback is printed, please report it"),
    (EXIT_TRIALS_FAILED, "trials failed", "a study finished but some trials failed; each is "
     "stored with its reason and `poolbench run --resume RUN` measures them"),
    (EXIT_INPUT, "input", "what the command line names was refused: a study or host file "
     "that is not valid, a run or store that does not exist or is damaged, a device, "
     "workload or target that does not exist, a path that cannot be written"),
    (EXIT_REFUSED, "refused", "refused for safety before anything was changed: a device in "
     "use, one that changed between planning and its first write, a destruction not "
     "confirmed, or a zfs-fuse pool of an earlier run that could not be destroyed"),
    (EXIT_UNSUPPORTED, "unsupported", "this machine lacks what the command asks: its ZFS "
     "or kernel cannot run what the study asks (dRAID, sync on zfs-fuse, a disk cap or slow "
     "member without a blkio throttle, ...) or a part it needs is missing (PostgreSQL, the "
     "untar tarball), named as `poolbench doctor` names it and refused before anything was "
     "created; `poolbench doctor` itself exits 7 only when poolbench's core (fio, and a ZFS "
     "or a directory to bench) is missing"),
    (EXIT_HANGUP, "hangup", "stopped by SIGHUP (the terminal or SSH session closed): "
     "torn down as for Ctrl-C, what was finished is kept, the run is resumable"),
    (EXIT_INTERRUPTED, "interrupted", "stopped by Ctrl-C (SIGINT): everything created is torn "
     "down, what was finished is kept, and the command that resumes the run is printed"),
    (EXIT_TERMINATED, "terminated", "stopped by SIGTERM (kill, timeout, systemctl stop): torn "
     "down as for Ctrl-C, what was finished is kept, the run is resumable"),
)  # fmt: skip


class PoolbenchError(Exception):
    """A known failure: `problem` says what went wrong, `fix` what the user can do."""

    exit_code = EXIT_FAILURE

    def __init__(self, problem: str, fix: str = "") -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(self.paragraph())

    def paragraph(self) -> str:
        problem = self.problem.rstrip()
        # Sentences are not glued: "...lists a level twice Fix the lines..." reads as one.
        if self.fix and problem and problem[-1] not in ".!?":
            problem += "."
        return f"{problem} {self.fix}".strip()


class UsageError(PoolbenchError):
    """Bad input: what the command line names (a study file, a run, a path, a name)."""

    exit_code = EXIT_INPUT


class CommandLineError(UsageError):
    """The command line itself: a flag's value or a combination of flags that click's types
    cannot check. Exits 2, as click's own usage errors do."""

    exit_code = EXIT_USAGE


class Unsupported(UsageError):
    """A study asks for what this machine's ZFS lacks (zfs-fuse has no dRAID, no sync
    property, ...): refused before anything is created. `capability` is the id of what is
    missing in poolbench/capabilities.py, the list `poolbench doctor` shows."""

    exit_code = EXIT_UNSUPPORTED

    def __init__(self, problem: str, fix: str = "", capability: str = "") -> None:
        super().__init__(problem, fix)
        self.capability = capability


class Refused(PoolbenchError):
    """Refused for safety before anything was changed (a device in use, or changed)."""

    exit_code = EXIT_REFUSED


class ToolMissingError(PoolbenchError):
    """An external program poolbench needs is not installed."""


class TrialsFailed(PoolbenchError):
    """A study ran to its end, but some trials failed (each stored with its reason)."""

    exit_code = EXIT_TRIALS_FAILED

    def __init__(self, problem: str, fix: str = "", run_id: int = 0) -> None:
        super().__init__(problem, fix)
        self.run_id = run_id
