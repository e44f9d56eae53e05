"""A streaming read after a streaming write reads the files that write left, instead of
laying the same bytes out again (fiojob.writes_prepared_data, Workspace.lay_out): only when
the write wrote exactly those files whole, in order, in the prepare's records, with the same
data; any other write (random, another size or data) still has the read's data laid out
afresh, and so does a file the write left short."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from tests.conftest import needs_fio

from poolbench.engine.workspace import Workspace
from poolbench.system.runner import LocalRunner, RecordingRunner
from poolbench.workloads import fio, fiojob
from poolbench.workloads.library import get

MiB = 1 << 20


def _params(root: Path, size: int = 4 * MiB, **kw: object) -> fiojob.JobParams:
    base = fiojob.JobParams(str(root), size, runtime_s=1, min_window_s=0)
    return replace(base, **kw)  # type: ignore[arg-type]


def test_only_a_whole_sequential_write_of_the_same_files_and_data_counts() -> None:
    p = _params(Path("/mnt/p/ws"))
    read = get("seq-read")
    assert fiojob.writes_prepared_data(get("seq-write"), p, read, p)
    # random and in-place writes change the layout the read would meet
    assert not fiojob.writes_prepared_data(get("rand-write-4k"), p, read, p)
    assert not fiojob.writes_prepared_data(get("iozone-rewrite-128k"), p, read, p)
    # another working set, another data pattern, another file set, a block device
    assert not fiojob.writes_prepared_data(get("seq-write"), replace(p, size_bytes=MiB), read, p)
    assert not fiojob.writes_prepared_data(
        get("seq-write"), replace(p, compressibility=50), read, p
    )
    assert not fiojob.writes_prepared_data(get("streams-write-2"), p, read, p)
    dev = replace(p, device="/dev/zvol/p/v")
    assert not fiojob.writes_prepared_data(get("seq-write"), dev, read, dev)
    # a read that needs no data (a write) is never "prepared" by another write
    assert not fiojob.writes_prepared_data(get("seq-write"), p, get("seq-write"), p)


def _run(ws: Workspace, name: str, params: fiojob.JobParams) -> None:
    w = get(name)
    ws.lay_out(w, params)
    fio.run_job(LocalRunner(), fiojob.render(w, params), ws.jobs_dir / f"{name}.fio", w.direction)


@needs_fio
def test_a_read_after_a_streaming_write_reads_its_files_and_after_a_random_write_not(
    tmp_path: Path,
) -> None:
    ws = Workspace(LocalRunner(), tmp_path, 1)
    ws.create()
    p = _params(ws.root)
    data = ws.root / fiojob.file_names(p, 1)[0]
    read = get("seq-read")
    prepare_job = ws.jobs_dir / "prepare-seq-read.fio"  # written each time the data is laid out

    def laid_out_by_prepare() -> bool:
        ran = prepare_job.exists()
        prepare_job.unlink(missing_ok=True)
        return ran

    assert ws.lay_out(read, p) is None  # nothing written yet: laid out by the prepare job
    assert laid_out_by_prepare() and data.stat().st_size == 4 * MiB

    _run(ws, "seq-write", p)
    assert ws.lay_out(read, p) == "seq-write"  # the write's own file, whole: kept
    assert not laid_out_by_prepare() and data.stat().st_size == 4 * MiB

    _run(ws, "rand-write-4k", p)  # in place, random: the layout is no longer the prepare's
    assert ws.lay_out(read, p) is None
    assert laid_out_by_prepare() and data.stat().st_size == 4 * MiB  # laid out afresh

    _run(ws, "seq-write", p)
    with data.open("r+b") as f:  # a write that stopped early leaves a short file
        f.truncate(MiB)
    assert ws.lay_out(read, p) is None
    assert laid_out_by_prepare() and data.stat().st_size == 4 * MiB


@pytest.mark.parametrize("other", ["seq-read", "rand-read-4k"])
def test_reads_in_a_row_keep_what_is_there(tmp_path: Path, other: str) -> None:
    ws = Workspace(LocalRunner(), tmp_path, 2)
    ws.create()
    p = _params(ws.root)
    ws.lay_out(get("seq-read"), p)
    (ws.jobs_dir / "prepare-seq-read.fio").unlink()
    assert ws.lay_out(get(other), p) is None
    assert not any(ws.jobs_dir.iterdir())  # nothing laid out again


def test_a_dry_run_shows_the_prepare_job_only_where_the_real_run_lays_data_out(
    tmp_path: Path,
) -> None:
    # a dry run's fio answers as a recorded one did (the job's figures do not matter here)
    answer = (Path(__file__).parent / "data" / "fio-rand-read-4k.jsonplus.json").read_text()
    runner = RecordingRunner(responses={"fio": answer}, dry_run=True)
    ws = Workspace(runner, tmp_path, 3)
    ws.create()  # a dry run's: nothing made
    p = _params(ws.root)

    def prepared(names: list[str]) -> list[str]:
        runner.calls.clear()
        for n in names:
            ws.lay_out(get(n), p)
            ws.wrote(get(n), p)  # its timed job ran (the session says so after it)
        return [Path(a).name for argv in runner.argvs for a in argv if "prepare-" in a]

    assert prepared(["seq-write", "seq-read"]) == []  # the read reads what the write left
    # an in-place write finds its data there; the read after it lays its own out, once
    assert prepared(["rand-write-4k", "seq-read", "seq-read"]) == ["prepare-seq-read.fio"]
    # metadata: the files meta-create leaves are what meta-stat and meta-delete find, and
    # after the delete a stat needs them made again
    assert prepared(["meta-create-seq", "meta-stat-seq", "meta-delete-seq"]) == []
    assert prepared(["meta-stat-seq", "meta-stat-seq"]) == ["prepare-meta.fio"]
    # on a fresh workspace the in-place write lays its data out first
    ws = Workspace(runner, tmp_path, 3)
    assert prepared(["rand-write-4k", "seq-read"]) == [
        "prepare-rand-write-4k.fio", "prepare-seq-read.fio"
    ]  # fmt: skip
    assert not ws.root.exists()  # a dry run made no directory, wrote no job file
