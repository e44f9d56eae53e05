from pathlib import Path

import pytest

from poolbench.workloads.fioparse import FioJobFailed, FioOutputError, extract_json, parse

DATA = Path(__file__).parent / "data"


def test_parses_recorded_seq_write() -> None:
    res = parse((DATA / "fio-seq-write.json").read_text(), "write")
    assert res.io_bytes == 16 * 1024 * 1024
    assert res.runtime_s > 0
    assert res.fio_version == "fio-3.33"
    assert res.mib_s == pytest.approx(16 / res.runtime_s)


def test_junk_lines_before_and_after_json_are_ignored() -> None:
    text = (DATA / "fio-seq-write.json").read_text()
    junk = (
        "note: both iodepth >= 1 and synchronous I/O engine are selected, queue depth will "
        "be capped at 1\nfio: {weird} brace in a warning\n"
    )
    res = parse(junk + text + "\nfio: terminating on signal 2\n", "write")
    assert res.io_bytes == 16 * 1024 * 1024


def test_recorded_enospc_output_starts_with_junk_and_fails_the_job() -> None:
    text = (DATA / "fio-enospc.json").read_text()
    assert text.startswith("fio: pid=")  # a real fio run mixes its error into stdout
    with pytest.raises(FioJobFailed, match="No space left on device"):
        parse(text, "write")


def test_no_json_is_a_clear_error() -> None:
    with pytest.raises(FioOutputError, match="no JSON"):
        extract_json("fio: failed parsing job file\n")
    with pytest.raises(FioOutputError, match="empty"):
        extract_json("")
