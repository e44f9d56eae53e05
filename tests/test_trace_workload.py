"""`trace:NAME` as a workload, in process: looked up beside the store, rendered as a fio
replay onto the target's file (or zvol), never repeated to fill a window, and its fio
per-I/O log turned into the stored fidelity record and warnings."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from poolbench.engine import window
from poolbench.engine.replay import check as replay_check
from poolbench.errors import UsageError
from poolbench.records.findings import Findings
from poolbench.workloads import fiojob, replay, tracefile
from poolbench.workloads.library import get, parse_list
from poolbench.workloads.tracestats import TraceIO, summarize

MS = 1_000_000
# 40 writes 4 ms apart, then 20 reads of 8 KiB: the trace every test here replays.
IOS = [TraceIO(i * 4 * MS, True, i * 4096, 4096) for i in range(40)] + [
    TraceIO((40 + i) * 4 * MS, False, i * 8192, 8192) for i in range(20)
]


@pytest.fixture
def stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A trace named 'db1' stored beside a store at tmp/r.db (as `record` leaves it)."""
    monkeypatch.setenv("POOLBENCH_DB", str(tmp_path / "r.db"))
    d = tracefile.traces_dir() / "db1"
    d.mkdir(parents=True)
    (d / "trace.iolog").write_text(replay.iolog(IOS))
    tracefile.save_summary(d, {"trace": summarize(IOS).to_json(), "device": "/dev/x"})
    return d


def test_trace_name_becomes_a_replay_workload(stored: Path) -> None:
    w = get("trace:db1")
    assert (w.name, w.family, w.unit, w.direction) == ("trace:db1", "trace", "IOPS", "mixed")
    assert w.trace == str(stored) and w.needs_data and w.cold
    assert w.trace_extent == 40 * 4096  # the writes reach further than the reads (160 KiB)
    assert "timed" in w.summary and "60 I/Os" in w.summary
    assert "as fast as possible" in get("trace-fast:db1").summary
    assert get(f"trace:{stored}").trace == str(stored)  # by its path too
    assert [x.name for x in parse_list("seq-write,trace:db1")] == ["seq-write", "trace:db1"]


def test_unknown_or_bad_trace_names_are_refused_with_the_known_ones(stored: Path) -> None:
    with pytest.raises(UsageError, match=r"No recorded trace .* recorded here: db1"):
        get("trace:nope")
    with pytest.raises(UsageError, match="not a trace name"):
        get("trace:a*b")
    with pytest.raises(UsageError, match="names no trace"):
        get("trace:")


def test_an_empty_trace_is_refused(stored: Path) -> None:
    tracefile.save_summary(stored, {"trace": summarize([]).to_json()})
    with pytest.raises(UsageError, match="holds no I/O"):
        get("trace:db1")


def _options(job: str) -> dict[str, str]:
    return dict(ln.split("=", 1) for ln in job.splitlines() if "=" in ln)


def test_replay_job_redirects_the_trace_to_the_targets_file(stored: Path) -> None:
    w = get("trace:db1")
    params = fiojob.JobParams(directory="/pool/pb/w", size_bytes=1 << 30)
    job = fiojob.render(w, params)
    o = _options(job)
    assert o["read_iolog"] == f"{stored}/trace.iolog"
    assert o["replay_redirect"] == "/pool/pb/w/data.0"
    # the per-I/O logs go outside the target: written inside the device window, they
    # would count as the layout's bytes
    assert o["write_lat_log"] == replay.lat_log_prefix("/pool/pb/w") and o["log_offset"] == "1"
    assert not o["write_lat_log"].startswith("/pool/")
    assert o["direct"] == "1" and o["end_fsync"] == "1"  # the trace writes
    assert o["refill_buffers"] == "1"  # never zeros
    # fio segfaults (3.33) on read_iolog with directory=; and filename= is the iolog's
    assert "directory" not in o and "filename" not in o and "replay_no_stall" not in o
    # the file laid out first is the trace's extent, not the working set
    assert fiojob.file_bytes(w, params) == 40 * 4096
    prep = fiojob.render_prepare(w, params)
    assert prep is not None and f"size={40 * 4096}" in prep


def test_fast_mode_and_a_zvol(stored: Path) -> None:
    w = get("trace-fast:db1")
    o = _options(fiojob.render(w, fiojob.JobParams("/d", 1 << 30, device="/dev/zvol/p/v")))
    assert o["replay_no_stall"] == "1" and o["replay_redirect"] == "/dev/zvol/p/v"


def test_a_replay_is_never_looped_to_fill_the_window(stored: Path) -> None:
    assert not window.extendable(get("trace:db1"))


def _lat_log(directory: Path, ios: list[TraceIO], lat: int = 200_000) -> None:
    """fio's total-latency log as it writes it: completion ms, latency ns, dir, size, offset."""
    rows = [f"{(io.t_ns + lat) // MS}, {lat}, {int(io.write)}, {io.length}, {io.offset}, 0"
            for io in ios]  # fmt: skip
    prefix = replay.lat_log_prefix(str(directory))
    Path(prefix + "_lat.1.log").write_text("\n".join(rows) + "\n")
    Path(prefix + "_clat.1.log").write_text("")


def _job_for(w_dir: Path) -> str:
    return fiojob.render(get("trace:db1"), fiojob.JobParams(str(w_dir), 1 << 30))


def test_fidelity_of_a_faithful_replay_is_stored_and_the_logs_removed(
    stored: Path, tmp_path: Path
) -> None:
    w_dir = tmp_path / "w"
    w_dir.mkdir()
    _lat_log(w_dir, IOS)
    findings = Findings()
    warnings = replay_check.check(get("trace:db1"), _job_for(w_dir), findings)
    rec = findings.other["replay"]
    assert warnings == [] and rec["faithful"] is True and rec["mode"] == "timed"
    assert rec["achieved"]["ios"] == 60 and rec["recorded"]["bytes"] == 40 * 4096 + 20 * 8192
    assert json.loads(json.dumps(rec)) == rec  # stored as JSON with the measurement
    assert not list(Path(replay.lat_log_prefix(str(w_dir))).parent.glob(
        Path(replay.lat_log_prefix(str(w_dir))).name + "_*"))  # fmt: skip


def test_fidelity_of_a_replay_that_lost_ios_and_ran_slow(stored: Path, tmp_path: Path) -> None:
    w_dir = tmp_path / "w"
    w_dir.mkdir()
    slow = [TraceIO(io.t_ns * 3, io.write, io.offset, io.length) for io in IOS[:-1]]
    # each I/O 11.9 ms of the 12 between issues: the target was busy all the time
    _lat_log(w_dir, slow, lat=11_900_000)
    findings = Findings()
    warnings = replay_check.check(get("trace:db1"), _job_for(w_dir), findings)
    assert findings.other["replay"]["faithful"] is False
    assert findings.other["replay"]["busy_share"] > 0.95
    # the log and the trace do not line up I/O for I/O, so no share is claimed
    assert findings.other["replay"]["target_late_share"] is None  # one I/O lost: no pairing
    text = " | ".join(warnings)
    assert "I/O count" in text and "could not keep the trace's rate" in text


def test_a_slow_replay_on_an_idle_target_is_blamed_on_fios_timing(
    stored: Path, tmp_path: Path
) -> None:
    w_dir = tmp_path / "w"
    w_dir.mkdir()
    # three times slower than recorded, each I/O 0.2 ms of the 12 between issues
    _lat_log(w_dir, [replace(io, t_ns=io.t_ns * 3) for io in IOS])
    findings = Findings()
    warnings = replay_check.check(get("trace:db1"), _job_for(w_dir), findings)
    rate = next(w for w in warnings if "the rate (IOPS)" in w)
    # every I/O took 0.2 ms of a 4 ms recorded gap: none of the delay is the target's
    assert "make only 0% of the delay" in rate and "fio's timed replay" in rate
    assert findings.other["replay"]["target_late_share"] == 0
    assert "could not keep" not in rate


def test_no_log_means_fidelity_unknown_never_assumed(stored: Path, tmp_path: Path) -> None:
    findings = Findings()
    warnings = replay_check.check(get("trace:db1"), _job_for(tmp_path), findings)
    assert findings.other["replay"]["faithful"] is None
    assert warnings and "fidelity unknown" in warnings[0]
    assert replay_check.check(get("seq-write"), "rw=write\n", Findings()) == []


def test_the_report_shows_how_many_replays_were_faithful_and_the_worst_table(
    stored: Path, tmp_path: Path
) -> None:
    docs = []
    for ios in (IOS, [replace(io, t_ns=io.t_ns * 3) for io in IOS]):
        w_dir = tmp_path / f"w{len(docs)}"
        w_dir.mkdir()
        _lat_log(w_dir, ios)
        findings = Findings()
        replay_check.check(get("trace:db1"), _job_for(w_dir), findings)
        docs.append(findings.other["replay"])
    lines = replay_check.report_lines("layout=mirror", "trace:db1", docs)
    assert lines[:2] == ["trace:db1 on layout=mirror:", "  1 of 2 replays faithful (timed)"]
    # the slowed replay's table: 59 gaps over 59 × 12 ms less the first I/O's 0.2 ms
    # latency (its issue time is clamped to 0) = 707.8 ms: 83.4 IOPS against 250.0
    rate = next(ln for ln in lines if "rate (IOPS)" in ln)
    assert rate.split()[2:] == ["250.0", "83.4", "±15%", "NO"]
    assert all(len(ln) <= 80 for ln in lines)
    assert replay_check.report_lines("c", "trace:db1", [{"faithful": None}]) == [
        "trace:db1 on c:",
        "  0 of 1 replays faithful (?)",
    ]


def test_a_fio_without_the_v3_iolog_is_refused_before_anything_runs(stored: Path) -> None:
    from poolbench.errors import ToolMissingError
    from poolbench.system.runner import RecordingRunner

    old = RecordingRunner({"fio": "fio-3.28\n"})
    assert replay_check.fio_version(old, [get("seq-write")]) == "fio-3.28"
    with pytest.raises(ToolMissingError, match="needs fio 3.31 or newer"):
        replay_check.fio_version(old, [get("seq-write"), get("trace:db1")])
    new = RecordingRunner({"fio": "fio-3.33\n"})
    assert replay_check.fio_version(new, [get("trace:db1")]) == "fio-3.33"


def test_a_fleet_refuses_a_trace_which_lives_on_this_machine(
    stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from poolbench.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["bench", "--hosts", "h1,h2", "/srv", "--size", "1G", "--workloads", "trace:db1"])
    out = capsys.readouterr()
    assert exc.value.code == 5 and "replayed on this machine only" in out.err + out.out


def test_a_slow_replay_of_slow_ios_is_blamed_on_the_target(stored: Path, tmp_path: Path) -> None:
    w_dir = tmp_path / "w"
    w_dir.mkdir()
    # every I/O took 11.9 ms against its 4 ms recorded gap: 59 × 7.9 = 466.1 ms lost by the
    # target. Issues read back from whole-millisecond completions: 12i - 0.9 ms (the first
    # clamped to 0), so the replay spans 707.1 ms against 236 recorded: 471.1 ms late
    _lat_log(w_dir, [replace(io, t_ns=io.t_ns * 3) for io in IOS], lat=11_900_000)
    findings = Findings()
    warnings = replay_check.check(get("trace:db1"), _job_for(w_dir), findings)
    assert findings.other["replay"]["target_late_share"] == pytest.approx(466.1 / 471.1, abs=1e-4)
    rate = next(w for w in warnings if "the rate (IOPS)" in w)
    assert "could not keep the trace's rate" in rate and "make 99% of the delay" in rate
