"""Run fio through the runner and return parsed results."""

from __future__ import annotations

import contextlib
import os
import re
import signal
from pathlib import Path

from poolbench.system.runner import CommandError, Runner
from poolbench.workloads.fioparse import FioJobFailed, FioResult, parse

MIN_FIO = (3, 0)


def fio_version(runner: Runner) -> str:
    out = runner.run(["fio", "--version"], mutates=False).stdout.strip()
    m = re.search(r"fio-(\d+)\.(\d+)", out)
    if not m or (int(m.group(1)), int(m.group(2))) < MIN_FIO:
        from poolbench.errors import ToolMissingError

        raise ToolMissingError(
            f"poolbench needs fio ≥ 3.0, found '{out}'.", "Install a current fio (Debian: fio)."
        )
    return out


def kill_strays(job_path: Path) -> list[int]:
    """Kill fio processes still running our job file (or any job file under the directory
    `job_path`) after fio's main process ended.

    fio runs each job in a forked process that makes itself a session leader, so when the main
    fio process crashes its job processes escape the runner's process-group cleanup and would
    go on for ever. The job file path is unique to this poolbench run, so matching it cannot
    hit anyone else's fio.
    """
    needle = str(job_path).encode()
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"fio") and any(a.startswith(needle) for a in argv[1:]):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
    return killed


def run_job(runner: Runner, job_text: str, job_path: Path, direction: str) -> FioResult:
    """Write the job file, run fio on it, parse its JSON; fio's own error is shown on failure.
    json+ is fio's JSON plus the completion-latency histogram bins (kept in the store)."""
    job_path.write_text(job_text)
    try:
        res = runner.run(["fio", "--output-format=json+", str(job_path)])
    except BaseException as exc:
        if not runner.dry_run:
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
