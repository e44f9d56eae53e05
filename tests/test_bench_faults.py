"""Bad input and faults: a clear message, a non-zero exit, nothing left behind, results kept."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import needs_fio, poolbench, sh

from poolbench.errors import EXIT_INPUT, EXIT_USAGE

pytestmark = [needs_fio]


def test_missing_target(tmp_path: Path) -> None:
    p = poolbench("bench", str(tmp_path / "nope"), "--db", str(tmp_path / "r.db"))
    assert p.returncode == EXIT_INPUT
    assert "does not exist" in p.stderr and "Traceback" not in p.stderr


def test_fio_missing_gives_the_install_hint(tmp_path: Path) -> None:
    p = poolbench(
        "bench", str(tmp_path), "--db", str(tmp_path / "r.db"), env={"PATH": "/nonexistent"}
    )
    assert p.returncode == 1
    assert "'fio' is not installed" in p.stderr and "Debian package: fio" in p.stderr


def test_unknown_workload_and_bad_ranges(tmp_path: Path) -> None:
    p = poolbench("bench", str(tmp_path), "--workloads", "seq-wrte", "--db", str(tmp_path / "r.db"))
    assert p.returncode == EXIT_INPUT and "Unknown workload 'seq-wrte'" in p.stderr
    p = poolbench("bench", str(tmp_path), "--replicates", "1", "--db", str(tmp_path / "r.db"))
    assert p.returncode == EXIT_USAGE and "--replicates 1 / --max-replicates 10" in p.stderr
    p = poolbench("bench", "--db", str(tmp_path / "r.db"))
    assert p.returncode == EXIT_USAGE and "--scratch" in p.stderr


def test_not_enough_space_is_refused_up_front(tmpfs: Path, tmp_path: Path) -> None:
    p = poolbench("bench", str(tmpfs), "--size", "1G", "--db", str(tmp_path / "r.db"))
    assert p.returncode == EXIT_INPUT  # the target named is too small: input refused
    assert "Not enough free space" in p.stderr and "--size" in p.stderr
    assert list(tmpfs.iterdir()) == []


@pytest.mark.usefixtures("machine")  # a read-only tmpfs mounted here
def test_read_only_target(tmp_path: Path) -> None:
    mnt = tmp_path / "ro"
    mnt.mkdir()
    sh("mount", "-t", "tmpfs", "-o", "size=16m,ro", "pbro", str(mnt))
    try:
        p = poolbench("bench", str(mnt), "--size", "4M", "--db", str(tmp_path / "r.db"))
    finally:
        sh("umount", str(mnt), check=False)
    assert p.returncode == EXIT_INPUT  # the target named cannot be written: input refused
    # root passes access(2) on a read-only mount: the failure must still be a clear one.
    assert "Read-only file system" in p.stderr or "not writable" in p.stderr
    assert "Traceback" not in p.stderr


def _fake_fio_dir(tmp_path: Path, crash_on: str) -> Path:
    """A `fio` on PATH that runs the real one but SIGKILLs it mid-run for one workload.

    Every call's arguments are appended to bin/calls, so a test can tell which jobs ran
    before the crash (the workload order within a round is shuffled per run)."""
    real = shutil.which("fio")
    d = tmp_path / "bin"
    d.mkdir()
    script = d / "fio"
    script.write_text(
        "#!/bin/bash\n"
        f'echo "$*" >> "{d / "calls"}"\n'
        f'if [[ "$*" == *{crash_on}* ]]; then\n'
        f'  "{real}" "$@" & pid=$!; sleep 0.3; kill -9 $pid; wait $pid; exit $?\n'
        "fi\n"
        f'exec "{real}" "$@"\n'
    )
    script.chmod(0o755)
    return d


def test_fio_crashing_mid_run_keeps_finished_results(tmpfs: Path, tmp_path: Path) -> None:
    bindir = _fake_fio_dir(tmp_path, "seq-read.1.fio")
    db = tmp_path / "r.db"
    p = poolbench(
        "bench",
        str(tmpfs),
        "--size",
        "64M",
        "--workloads",
        "seq-write,seq-read",
        "--min-runs",
        "3",
        "--max-runs",
        "3",
        "--db",
        str(db),
        env={"PATH": f"{bindir}:{os.environ['PATH']}"},
    )
    assert p.returncode == 1, p.stderr
    assert "exit code 137" in p.stderr and "seq-read.1.fio" in p.stderr
    con = sqlite3.connect(db)
    assert con.execute("SELECT status FROM runs").fetchone()[0] == "failed"
    # Every job fio finished before the crash is kept, in the order it ran: all of round 0
    # and, if the shuffled round 1 put seq-write first, its write too.
    jobs = re.findall(r"([a-z0-9-]+)\.(\d+)\.fio", (bindir / "calls").read_text())
    ran = [(w, int(r)) for w, r in jobs]
    assert ran[-1] == ("seq-read", 1)
    finished = ran[:-1]
    assert sorted(finished[:2]) == [("seq-read", 0), ("seq-write", 0)]
    assert finished[2:] in ([], [("seq-write", 1)])
    rows = con.execute("SELECT workload, replicate FROM measurements ORDER BY id").fetchall()
    assert rows == finished
    assert list(tmpfs.iterdir()) == []
    # fio's job processes outlive a SIGKILLed main process; poolbench must stop them.
    left = subprocess.run(["pgrep", "-f", str(tmpfs)], capture_output=True, text=True).stdout
    assert left == ""


def test_ctrl_c_stops_fio_keeps_results_and_exits_130(tmpfs: Path, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "poolbench",
            "bench",
            str(tmpfs),
            "--size",
            "96M",
            "--workloads",
            "seq-write,seq-read",
            "--min-runs",
            "10",
            "--max-runs",
            "10",
            "--db",
            str(db),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.2)
            if db.exists():
                try:
                    n = (
                        sqlite3.connect(db)
                        .execute("SELECT count(*) FROM measurements")
                        .fetchone()[0]
                    )
                except sqlite3.Error:
                    continue
                if n >= 2:
                    break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Interrupted" in err and "kept" in err
    con = sqlite3.connect(db)
    assert con.execute("SELECT status FROM runs").fetchone()[0] == "interrupted"
    assert con.execute("SELECT count(*) FROM measurements").fetchone()[0] >= 2
    assert list(tmpfs.iterdir()) == []
    left = subprocess.run(["pgrep", "-f", str(tmpfs)], capture_output=True, text=True).stdout
    assert left == ""


@pytest.mark.parametrize("bad", ["0", "abc", "5X"])
def test_bad_size(tmp_path: Path, bad: str) -> None:
    p = poolbench("bench", str(tmp_path), "--size", bad, "--db", str(tmp_path / "r.db"))
    assert p.returncode == EXIT_USAGE and "size" in p.stderr.lower()
