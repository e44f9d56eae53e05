"""Errors the user can act on.

Every error poolbench raises on purpose is a `PoolbenchError`: one paragraph that names the
problem and the fix. The CLI prints it and exits 1 (pre-commit's convention: 1 for a known
failure, 3 for a bug, 130 for Ctrl-C); 4 is a study that finished with some trials failed;
2 (click's usage code) is a study this machine's ZFS cannot run (Unsupported), refused
before anything was created.
"""

from __future__ import annotations

EXIT_FAILURE = 1
EXIT_UNSUPPORTED = 2  # what this ZFS lacks (zfs-fuse: dRAID, sync, ...); nothing created
EXIT_BUG = 3
EXIT_TRIALS_FAILED = 4  # the study finished, but K of its trials failed (stored, resumable)
EXIT_INTERRUPTED = 130


class PoolbenchError(Exception):
    """A known failure: `problem` says what went wrong, `fix` what the user can do."""

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
    """Bad input: a flag, a path, a study file."""


class Unsupported(UsageError):
    """A study asks for what this machine's ZFS lacks (zfs-fuse has no dRAID, no sync
    property, ...): refused before anything is created, exit 2."""


class ToolMissingError(PoolbenchError):
    """An external program poolbench needs is not installed."""


class TrialsFailed(PoolbenchError):
    """A study ran to its end, but some trials failed (each stored with its reason)."""

    def __init__(self, problem: str, fix: str = "", run_id: int = 0) -> None:
        super().__init__(problem, fix)
        self.run_id = run_id
