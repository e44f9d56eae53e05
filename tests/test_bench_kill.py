"""A bench killed with SIGKILL on the user's filesystem: its working directory was journaled
before it existed, so `poolbench cleanup` stops the fio it left running and removes the
directory, and nothing else under the target is touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import needs_fio, poolbench
from tests.procs import processes_matching

pytestmark = needs_fio


def _fio_under(root: Path) -> list[int]:
    """fio processes whose command line names a file under `root`."""
    return [pid for pid, argv in processes_matching(str(root)) if argv.split()[0].endswith("fio")]


def test_a_killed_bench_leaves_its_directory_to_cleanup(tmp_path: Path) -> None:
    target, db = tmp_path / "data", tmp_path / "r.db"
    target.mkdir()
    (target / "users-file").write_text("keep me")
    # A long run of the same write: fio is running whenever the kill lands.
    bench = subprocess.Popen(
        [sys.executable, "-m", "poolbench", "bench", str(target), "--size", "32M",
         "--workloads", "rand-write-4k", "--runtime", "30", "--replicates", "3",
         "--max-replicates", "3", "--db", str(db)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        work: list[Path] = []
        while time.monotonic() < deadline:
            work = list(target.glob(".poolbench-run*"))
            if work and _fio_under(work[0]):
                break
            assert bench.poll() is None, "the bench ended before fio ran"
            time.sleep(0.1)
        assert work and _fio_under(work[0]), "fio never ran in the bench's directory"
        os.kill(bench.pid, signal.SIGKILL)  # poolbench only: its fio is left running
        bench.wait(timeout=30)
        assert work[0].is_dir() and _fio_under(work[0])
        journals = list((db.parent / "journals").glob("bench-pid*.jsonl"))
        assert [j.name for j in journals] == [f"bench-pid{bench.pid}.jsonl"]

        p = poolbench("cleanup", "--db", str(db), timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        assert not work[0].exists() and _fio_under(work[0]) == []
        assert sorted(x.name for x in target.iterdir()) == ["users-file"]
        assert (target / "users-file").read_text() == "keep me"
        assert list((db.parent / "journals").glob("bench-pid*.jsonl")) == []
    finally:
        if bench.poll() is None:
            os.killpg(bench.pid, signal.SIGKILL)
        for pid in _fio_under(target):
            os.kill(pid, signal.SIGKILL)
