"""Machine-readable output as scripts use it (issue 29): a closed pipe is not an error, a run
is not compared with itself, and an export asked for two formats at once is refused instead
of silently giving the last one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import poolbench

from poolbench.errors import EXIT_INPUT, EXIT_USAGE
from report_store import build


@pytest.fixture
def db(tmp_path: Path) -> Path:
    build(tmp_path / "r.db").close()
    return tmp_path / "r.db"


def test_a_reader_that_goes_away_is_no_error(db: Path) -> None:
    """`poolbench report 1 | head -1`: exit 0 and nothing on stderr, like `cat | head`."""
    for args in (["report", "1"], ["export", "1", "--csv"], ["runs"]):
        p = subprocess.run(
            f"{sys.executable} -m poolbench {' '.join(args)} --db {db} | head -c 20",
            shell=True,
            capture_output=True,
            text=True,
            executable="/bin/bash",
        )  # fmt: skip  (the shell only builds the test's pipe; poolbench gets a list argv)
        assert p.stdout and p.stderr == "", (args, p.stderr)
        status = subprocess.run(
            ["bash", "-c", f"{sys.executable} -m poolbench {' '.join(args)} --db {db} "
             "| head -c 20 >/dev/null; echo ${PIPESTATUS[0]}"],
            capture_output=True, text=True,
        )  # fmt: skip
        assert status.stdout.strip() == "0", (args, status.stdout, status.stderr)


def test_an_error_is_still_an_error_when_stdout_is_dev_null(db: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "poolbench", "report", "99", "--db", str(db)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert p.returncode == EXIT_INPUT and "No run 99" in p.stderr


def test_a_run_is_not_compared_with_itself(db: Path) -> None:
    p = poolbench("compare", "1", "1", "--db", str(db))
    assert p.returncode == EXIT_USAGE and "compares run 1 with itself" in p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""


def test_export_refuses_two_formats_at_once(db: Path) -> None:
    p = poolbench("export", "1", "--csv", "--json", "--db", str(db))
    assert p.returncode == EXIT_USAGE and "Choose one format" in p.stderr and p.stdout == ""
    assert poolbench("export", "1", "--json", "--db", str(db)).stdout.startswith("{")
    assert poolbench("export", "1", "--csv", "--db", str(db)).stdout.startswith("run_id,")
