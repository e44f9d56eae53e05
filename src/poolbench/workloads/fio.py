"""Run fio through the runner and return parsed results."""

from __future__ import annotations

import contextlib
import os
import re
import signal
from collections.abc import Sequence
from pathlib import Path

from poolbench import is_digits
from poolbench.system.runner import CommandError, Runner
from poolbench.workloads import fiolimit
from poolbench.workloads.fioparse import FioJobFailed, FioResult, parse

# The oldest fio that runs every workload poolbench ships, and why (fio's git history):
# the filedelete engine (meta-delete-*) first shipped in fio-3.27 (2021-05), filestat
# (meta-stat-*) in fio-3.18, filecreate (meta-create-*) and bw_bytes in the JSON output in
# fio-3.2; nanosecond latencies (lat_ns, clat_ns) in fio-3.0. Debian 11 ships 3.25, which
# fails the delete workloads only after the pools are built: refused at start instead.
MIN_FIO = (3, 27)
WHY_MIN_FIO = (
    "the metadata workloads use fio's filedelete engine (first in fio 3.27) and filestat "
    "engine (fio 3.18)"
)


def parse_version(text: str) -> tuple[int, int] | None:
    """`fio --version` output ("fio-3.33", "fio-3.27-12-gabcdef") -> (3, 33)."""
    m = re.search(r"fio-(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def require_version(text: str) -> str:
    """The version text if it is new enough; otherwise one paragraph saying what and why."""
    found = parse_version(text)
    if found is None or found < MIN_FIO:
        from poolbench.capabilities import doctor_hint
        from poolbench.errors import ToolMissingError

        want = ".".join(map(str, MIN_FIO))
        raise ToolMissingError(
            f"poolbench needs fio {want} or newer, but `fio --version` says "
            f"'{text.strip() or '(nothing)'}': {WHY_MIN_FIO}, and an older fio would fail "
            "them only after the pools were built.",
            f"Install fio {want} or newer (Debian 12: 3.33, Ubuntu 22.04: 3.28; or build it "
            "from https://github.com/axboe/fio) and put it first on PATH. " + doctor_hint("fio"),
        )
    return text.strip()


def fio_version(runner: Runner) -> str:
    """`fio --version`, refused (ToolMissingError) below MIN_FIO."""
    return require_version(runner.run(["fio", "--version"], mutates=False).stdout)


def _ours(job_path: Path) -> dict[int, int]:
    """The fio processes running our job file (or any job file under the directory
    `job_path`), each with its parent's pid. The job file path is unique to this poolbench
    run, so matching it cannot hit anyone else's fio."""
    needle = str(job_path).encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not is_digits(entry.name):
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            # stat: "pid (comm) state ppid ...": the comm may hold spaces, the ")" ends it
            ppid = int((entry / "stat").read_bytes().rpartition(b")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if argv and argv[0].endswith(b"fio") and any(a.startswith(needle) for a in argv[1:]):
            found[int(entry.name)] = ppid
    return found


def kill_strays(job_path: Path) -> list[int]:
    """Kill fio processes still running our job file (or any job file under the directory
    `job_path`) after fio's main process ended.

    fio runs each job in a forked process that makes itself a session leader, so when the main
    fio process crashes its job processes escape the runner's process-group cleanup and would
    go on for ever.
    """
    killed = []
    for pid in _ours(job_path):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed


def jobs_started(job_path: Path) -> bool:
    """Whether fio running `job_path` has forked its job processes (its setup is done and its
    I/O begins): a fio process of ours whose parent is one too."""
    ours = _ours(job_path)
    return any(ppid in ours for ppid in ours.values())


def command(job_path: Path, extra_args: Sequence[str] = ()) -> list[str]:
    """The fio command `run_job` runs on a job file (the one spelling: a dry run prints it)."""
    return ["fio", "--output-format=json+", *extra_args, str(job_path)]


def run_job(
    runner: Runner, job_text: str, job_path: Path, direction: str, extra_args: Sequence[str] = ()
) -> FioResult:
    """Write the job file, run fio on it, parse its JSON; fio's own error is shown on failure.
    json+ is fio's JSON plus the completion-latency histogram bins (kept in the store).
    `extra_args`: fio's command-line options (before the job file). fio runs under the
    limit its job implies (workloads/fiolimit.py). A dry run writes no job file and runs
    nothing (the runner prints the command): its result is `planned`, nothing measured."""
    if runner.dry_run:
        runner.run(command(job_path, extra_args), timeout=fiolimit.limit_s(job_text, extra_args))
        return planned(direction)
    job_path.write_text(job_text)
    try:
        res = runner.run(command(job_path, extra_args),
                         timeout=fiolimit.limit_s(job_text, extra_args))  # fmt: skip
    except BaseException as exc:
        kill_strays(job_path)
        if not isinstance(exc, CommandError):
            raise
        # fio exits non-zero when a job fails; its JSON (if any) names the errno.
        try:
            parse(exc.result.stdout, direction)
        except FioJobFailed as job_exc:
            tail = exc.result.stderr.strip().splitlines()[-5:]
            raise FioJobFailed(
                job_exc.problem + (" fio said: " + " | ".join(tail) if tail else ""),
                job_exc.fix,
            ) from exc
        except Exception:
            pass
        raise
    return parse(res.stdout, direction)


def planned(direction: str) -> FioResult:
    """A dry run's answer for a fio run: nothing moved, in no time (no figure is made of it)."""
    return FioResult(direction, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, "", 0)
