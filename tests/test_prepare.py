"""The prepare job lays data out in large records plus one tail write per file (issue 16.6):
with the shipped concurrency example (307M over 6 streams) the old gcd rule gave bs=2."""

from __future__ import annotations

import configparser
import json
import re
from pathlib import Path

from tests.conftest import needs_fio, poolbench

from poolbench.study.model import load
from poolbench.system.runner import LocalRunner
from poolbench.units import parse_size
from poolbench.workloads import fio, fiojob
from poolbench.workloads.library import get

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "concurrency.toml"
KiB = 1024


def _sections(job: str) -> dict[str, dict[str, str]]:
    cp = configparser.ConfigParser(interpolation=None)
    cp.optionxform = str  # type: ignore[assignment,method-assign]
    cp.read_string(job)
    return {s: dict(cp[s]) for s in cp.sections()}


def _check_layout(job: str, names: list[str], file_size: int) -> None:
    """Every file is written whole, once, in records of >= 64K except a single tail write."""
    secs = _sections(job)
    for n in names:
        mine = [o for s, o in secs.items() if o.get("filename") == n]
        small = [o for o in mine if int(o["bs"]) < 64 * KiB]
        assert len(small) <= 1, mine  # at most the tail
        assert all(int(o["size"]) == int(o["bs"]) for o in small)  # the tail is one write
        covered = sorted((int(o.get("offset", 0)), int(o["size"])) for o in mine)
        assert covered[0][0] == 0 and sum(sz for _, sz in covered) == file_size
        assert all(a + la == b for (a, la), (b, _) in zip(covered, covered[1:], strict=False))


def test_shipped_concurrency_example_prepares_in_large_records() -> None:
    study, _ = load(EXAMPLE)
    size = parse_size(study.workloads.size)
    readers = [get(n) for n in study.workloads.names if get(n).needs_data]
    assert readers, "the example has reading workloads that need data laid out"
    for w in readers:
        params = fiojob.JobParams(directory="/pool/dir", size_bytes=size)
        job = fiojob.render_prepare(w, params)
        assert job is not None
        per_file = size // w.streams
        _check_layout(job, fiojob.file_names(params, w.streams), per_file)
        whole = [o for o in _sections(job).values() if "filename" in o and "offset" not in o]
        assert whole and {o["bs"] for o in whole} == {str(fiojob.PREPARE_BS)}


def test_the_dry_run_of_the_example_shows_its_prepare_jobs(zfs_fuse: None, tmp_path: Path) -> None:
    p = poolbench("run", str(EXAMPLE), "--dry-run", "--db", str(tmp_path / "r.db"))
    assert p.returncode == 0, p.stderr
    out = p.stdout + p.stderr
    # What the real run's Workspace lays out (the dry run walks it): streams-read-1 after
    # streams-write-6, which wrote other files, discards its data.0 and lays it out again;
    # streams-read-2 and -6 find the files streams-write-2 and -6 left whole. Once in each
    # configuration's trial.
    prepared = re.findall(r"/jobs/(prepare-[\w-]+\.fio)", out)
    assert prepared == ["prepare-streams-read-1.fio"] * 2, prepared


@needs_fio
def test_a_small_real_prepare_writes_every_byte_then_the_streams_read_it(tmp_path: Path) -> None:
    w = get("streams-read-6")
    size = 6 * (3 * 2**20 + 12345) + 5  # odd: 3 whole records and a 12,345-byte tail per file
    params = fiojob.JobParams(directory=str(tmp_path), size_bytes=size)
    per_file = size // 6
    job = fiojob.render_prepare(w, params)
    assert job is not None
    res = fio.run_job(LocalRunner(), job, tmp_path / "p.fio", "write")
    assert res.io_bytes == 6 * per_file
    assert res.total_ios == 6 * (3 + 1)  # not ~per_file/gcd writes
    for n in fiojob.file_names(params, 6):
        data = (tmp_path / n).read_bytes()
        assert len(data) == per_file
        # The tail job did not truncate or zero the records written before it, and wrote
        # random bytes itself (fio's generator leaves some zero bytes in a small odd-sized
        # buffer: seen up to 13% here, never the whole record).
        assert data[:4096].count(0) < 64 and data[-12345:].count(0) < 12345 // 4
    read = fio.run_job(LocalRunner(), fiojob.render(w, params), tmp_path / "r.fio", "read")
    assert read.io_bytes == 6 * 3 * 2**20  # fio reads the whole 1 MiB records of each file
    # What is stored must serialize (the latency goes in as its own JSON form).
    latency = read.latency.to_json() if read.latency is not None else None
    json.dumps({**read.__dict__, "latency": latency})
