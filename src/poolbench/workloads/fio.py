"""Run fio through the runner and return parsed results."""

from __future__ import annotations

import re
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


def run_job(runner: Runner, job_text: str, job_path: Path, direction: str) -> FioResult:
    """Write the job file, run fio on it, parse its JSON; fio's own error is shown on failure."""
    job_path.write_text(job_text)
    try:
        res = runner.run(["fio", "--output-format=json", str(job_path)])
    except CommandError as exc:
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
