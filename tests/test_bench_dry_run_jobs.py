"""`bench --dry-run` prints each fio job file under the command that would run it, as the
first replicate would write it: the figures in it are the options given."""

from __future__ import annotations

import zlib
from pathlib import Path

from tests.conftest import poolbench


def _job(out: str, name: str) -> dict[str, str]:
    """The key=value lines of the job printed under `job NAME:`."""
    lines = out.splitlines()
    start = lines.index(f"  job {name}:") + 1
    job: dict[str, str] = {}
    for line in lines[start:]:
        if not line.startswith("    "):
            break
        key, _, value = line.strip().partition("=")
        if value:
            job[key] = value
    return job


def test_bench_dry_run_prints_every_job_with_the_options_given(tmp_path: Path) -> None:
    p = poolbench(
        "bench", str(tmp_path), "--dry-run", "--size", "64M", "--runtime", "12",
        "--workloads", "seq-read,rand-read-4k", "--seed", "7", "--db", str(tmp_path / "r.db"),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    out = p.stderr
    # each job right under its command, the prepare job (laying out the data) first
    lines = out.splitlines()
    for name in ("prepare-seq-read.fio", "seq-read.fio", "rand-read-4k.fio"):
        at = lines.index(f"  job {name}:")
        assert lines[at - 1].startswith("would run: fio --output-format=json")
        assert lines[at - 1].endswith(f" {name}")
    rand = _job(out, "rand-read-4k.fio")
    assert rand["size"] == str(64 * 2**20)
    assert (rand["rw"], rand["bs"], rand["runtime"]) == ("randread", "4096", "12")
    # replicate 1's offsets: fio's seed from (session seed, workload, replicate 0)
    assert rand["randseed"] == str(zlib.crc32(b"7:rand-read-4k:0") & 0x7FFFFFFF)
    seq = _job(out, "seq-read.fio")
    assert (seq["rw"], seq["bs"], seq["size"]) == ("read", str(2**20), str(64 * 2**20))
    assert _job(out, "prepare-seq-read.fio")["rw"] == "write"
    assert "dry run: nothing was changed." in out
    assert not any(tmp_path.glob(".poolbench*"))  # nothing written to the target
