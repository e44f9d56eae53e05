"""Real fio: the rendered jobs do what their definitions say."""

from pathlib import Path

import pytest
from tests.conftest import needs_fio

from poolbench.system.runner import LocalRunner
from poolbench.workloads import fio, fiojob
from poolbench.workloads.library import get

pytestmark = needs_fio


def _iolog_offsets(job_text: str, tmp: Path) -> list[int]:
    log = tmp / "io.log"
    fio.run_job(LocalRunner(), job_text + f"write_iolog={log}\n", tmp / "j.fio", "read")
    return [int(line.split()[3]) for line in log.read_text().splitlines() if " read " in line]


def test_backwards_read_reads_every_record_once_last_first(tmp_path: Path) -> None:
    bs, size = 64 * 1024, 2 * 2**20
    params = fiojob.JobParams(directory=str(tmp_path), size_bytes=size)
    w = get("iozone-bread-64k")
    prep = fiojob.render_prepare(w, params)
    assert prep
    fio.run_job(LocalRunner(), prep, tmp_path / "p.fio", "write")
    offsets = _iolog_offsets(fiojob.render(w, params), tmp_path)
    n = size // bs
    assert sorted(offsets) == [i * bs for i in range(n)]  # each record exactly once
    # After the first I/O, strictly descending from the last record.
    assert offsets[1:] == [i * bs for i in range(n - 1, 0, -1)]


def test_stride_read_offsets(tmp_path: Path) -> None:
    bs, size = 4096, 2**20
    params = fiojob.JobParams(directory=str(tmp_path), size_bytes=size)
    w = get("iozone-strideread-4k")
    prep = fiojob.render_prepare(w, params)
    assert prep
    fio.run_job(LocalRunner(), prep, tmp_path / "p.fio", "write")
    offsets = _iolog_offsets(fiojob.render(w, params), tmp_path)
    assert offsets == [i * 17 * bs for i in range(len(offsets))]
    assert len(offsets) == size // bs // 17


def test_read_job_refuses_to_lay_out_a_missing_file(tmp_path: Path) -> None:
    params = fiojob.JobParams(directory=str(tmp_path), size_bytes=2**20)
    with pytest.raises(Exception):  # noqa: B017 - fio refuses; poolbench always prepares data
        fio.run_job(
            LocalRunner(), fiojob.render(get("seq-read"), params), tmp_path / "r.fio", "read"
        )
    assert not (tmp_path / "data.0").exists()


def test_seq_write_runtime_includes_the_fsync(tmp_path: Path) -> None:
    params = fiojob.JobParams(directory=str(tmp_path), size_bytes=8 * 2**20)
    res = fio.run_job(
        LocalRunner(), fiojob.render(get("seq-write"), params), tmp_path / "w.fio", "write"
    )
    assert res.io_bytes == 8 * 2**20
    assert res.runtime_s > 0
