import json
import math
from pathlib import Path

import pytest

from poolbench.records.latency import Latency
from poolbench.workloads.fioparse import (
    FioJobFailed,
    FioOutputError,
    extract_json,
    parse,
    percentile_from_bins,
)

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


# -- completion latency (issue 16 item 7) -------------------------------------------------------
def _raw_clat(name: str, section: str = "read") -> list[dict[str, object]]:
    text = (DATA / name).read_text()
    return [j[section]["clat_ns"] for j in extract_json(text)["jobs"]]


def _order_statistic(bins: dict[int, int], q: float) -> float:
    """The q-th percentile by brute force: every completion in a sorted list, the first one
    at which q% of them are reached (fio's definition), independent of the parser's loop."""
    values = sorted(v for v, count in bins.items() for _ in range(count))
    k = max(1, math.ceil(q / 100 * len(values) - 1e-9))
    return float(values[k - 1])


def test_recorded_rand_read_latency_is_fios_own() -> None:
    raw = _raw_clat("fio-rand-read-4k.jsonplus.json")[0]
    lat = parse((DATA / "fio-rand-read-4k.jsonplus.json").read_text(), "read").latency
    assert lat is not None and lat.direction == "read"
    assert lat.samples == raw["N"] == 25122
    assert lat.p(50) == 35072 and lat.p(90) == 44800 and lat.p(99) == 77312
    assert lat.p(99.9) == 177152 and lat.p(99.99) == 864256
    assert lat.p(50) <= lat.p(99) <= lat.p(99.9)  # type: ignore[operator]
    assert sum(lat.bins.values()) == lat.samples  # json+ bins: every completion
    assert lat.mean_ns == pytest.approx(37984.261922)
    # fio's percentiles are its histogram's: recomputed from the bins they are the same.
    for key, value in lat.percentiles.items():
        assert percentile_from_bins(lat.bins, float(key)) == value
        assert _order_statistic(dict(lat.bins), float(key)) == value
    assert lat.beyond(99.9) == pytest.approx(25.122)


def test_two_job_entries_merge_their_histograms() -> None:
    text = (DATA / "fio-rand-read-2jobs.jsonplus.json").read_text()
    raws = _raw_clat("fio-rand-read-2jobs.jsonplus.json")
    lat = parse(text, "read").latency
    assert lat is not None and len(raws) == 2
    assert lat.samples == sum(int(r["N"]) for r in raws)  # type: ignore[call-overload]
    merged: dict[int, int] = {}
    for r in raws:
        for k, v in r["bins"].items():  # type: ignore[attr-defined]
            merged[int(k)] = merged.get(int(k), 0) + v
    for q in (50, 90, 99, 99.9):
        assert lat.p(q) == _order_statistic(merged, q)
    # Neither job's own p99 is the merged one by accident of the fixture: they differ.
    assert lat.min_ns == min(float(r["min"]) for r in raws)  # type: ignore[arg-type]
    assert lat.max_ns == max(float(r["max"]) for r in raws)  # type: ignore[arg-type]


def test_metadata_latency_comes_from_the_read_section() -> None:
    text = (DATA / "fio-meta-create.jsonplus.json").read_text()
    lat = parse(text, "meta").latency
    assert lat is not None and lat.samples == 200
    assert lat.p(50) == 162816 and lat.p(99.9) == 3555328


def test_no_completions_and_plain_json_without_percentiles() -> None:
    res = parse((DATA / "fio-seq-write.json").read_text(), "write")
    assert res.latency is not None and res.latency.bins == {}  # plain json: no bins
    assert res.latency.samples > 0 and res.latency.p(50) is not None
    data = json.loads((DATA / "fio-rand-read-4k.jsonplus.json").read_text())
    data["jobs"][0]["read"]["clat_ns"] = {"min": 0, "max": 0, "mean": 0.0, "N": 0}
    assert parse(json.dumps(data), "read").latency is None


def test_latency_round_trips_through_json() -> None:
    lat = parse((DATA / "fio-rand-read-4k.jsonplus.json").read_text(), "read").latency
    assert lat is not None
    back = Latency.from_json(json.loads(json.dumps(lat.to_json())))
    assert back == lat


def test_job_files_ask_for_the_percentiles() -> None:
    from poolbench.workloads import fiojob, library

    for name in ("rand-read-4k", "seq-write", "meta-create-seq"):
        job = fiojob.render(library.get(name), fiojob.JobParams("/x", 64 * 1024 * 1024))
        lists = [ln for ln in job.splitlines() if ln.startswith("percentile_list=")]
        assert len(lists) == 1 and "clat_percentiles=1" in job
        asked = {float(q) for q in lists[0].split("=")[1].split(":")}
        assert {50.0, 90.0, 99.0, 99.9} <= asked and len(asked) <= 20  # fio's maximum


def test_recorded_sync_write_counts_fios_fsyncs() -> None:
    # Recorded: fio 3.33, 4 MiB of 4K random writes with fsync=1 and end_fsync=1.
    res = parse((DATA / "fio-sync-write-4k.json").read_text(), "write")
    assert (res.total_ios, res.fsyncs) == (1024, 1023)  # one after each write but the last
    assert parse((DATA / "fio-seq-write.json").read_text(), "write").fsyncs == 0


def test_steady_state_samples_are_the_seconds_fio_really_sampled() -> None:
    """fio's steady-state ring (`steadystate_duration=5s`) is printed whole: a 4.7 s seq-write
    of 96 MiB written 22 times (fiojob's options, loops=22, on ext4) filled four slots, then
    zeros."""
    res = parse((DATA / "fio-seq-write-loops22.json").read_text(), "write")
    assert res.runtime_s == pytest.approx(4.715) and res.io_bytes == 22 * 96 * 2**20
    assert len(res.steady_bw) == 4 and all(x > 0 for x in res.steady_bw)
    assert res.steady_criterion is not None
    # Two streams, time-based 3 s, group_reporting: job_runtime sums the two jobs (6098 ms),
    # the group ran 3.055 s: three samples, not five.
    two = parse((DATA / "fio-streams-write-2-3s.json").read_text(), "write")
    assert two.runtime_s == pytest.approx(3.055) and len(two.steady_bw) == 3
    assert 0.0 not in two.steady_bw


def test_no_steady_state_section_gives_no_samples() -> None:
    res = parse((DATA / "fio-seq-write.json").read_text(), "write")
    assert res.steady_bw == () and res.steady_criterion is None
