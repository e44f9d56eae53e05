"""`poolbench record`, in process: what it refuses (a path that does not exist, a regular
file, a directory, no root, no blktrace), what it does about debugfs (a mounted one used
and left as it was; otherwise mounted, journaled, and unmounted after, also on error; a
crash's journal found by cleanup), and what it stores. blktrace and blkparse are answered
by a recording runner; a file stands in for /proc/self/mountinfo."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from tests.test_trace_model import SAMPLE
from tests.test_trace_model import _record as _binary

from poolbench.cli.main import main
from poolbench.engine import cleanup
from poolbench.engine.replay import record as rec
from poolbench.errors import (
    EXIT_INPUT,
    EXIT_USAGE,
    CommandLineError,
    PoolbenchError,
    Refused,
    UsageError,
)
from poolbench.system.runner import CommandResult, RecordingRunner
from poolbench.workloads import tracefile

DEBUGFS_LINE = "40 22 0:7 / /sys/kernel/debug rw,relatime shared:15 - debugfs debugfs rw\n"
ROOT_LINE = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = 0
    try:
        main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out + out.err


def test_a_path_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist, so there is nothing to record"):
        rec.check_device(tmp_path / "sdz")


def test_a_regular_file_or_directory_is_not_a_block_device(tmp_path: Path) -> None:
    f = tmp_path / "disk.img"
    f.write_bytes(b"")
    with pytest.raises(UsageError, match="is a regular file, not a block device"):
        rec.check_device(f)
    with pytest.raises(UsageError, match="is a directory, not a block device"):
        rec.check_device(tmp_path)
    with pytest.raises(UsageError, match="is a character device, not a block device"):
        rec.check_device(Path("/dev/null"))


def test_seconds_root_and_tools_are_checked_first(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(CommandLineError, match="1 to 3600 seconds"):
        rec.check_can_record(RecordingRunner(), 0)
    monkeypatch.setattr(rec.os, "geteuid", lambda: 1000)
    with pytest.raises(Refused, match="needs root"):
        rec.check_can_record(RecordingRunner(), 5)
    monkeypatch.setattr(rec.os, "geteuid", lambda: 0)
    with pytest.raises(PoolbenchError, match="'blktrace' is not installed"):
        rec.check_can_record(RecordingRunner(installed={"blkparse"}), 5)


def test_a_mounted_debugfs_is_used_and_left_as_it_was(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text(ROOT_LINE + DEBUGFS_LINE.replace("/sys/kernel/debug", "/mnt/dbg"))
    runner = RecordingRunner()
    with rec.debugfs(runner, tmp_path / "j", info) as root:
        assert root == "/mnt/dbg"
    assert runner.argvs == [] and list((tmp_path / "j").iterdir()) == []


def _mount_table(info: Path) -> RecordingRunner:
    """A runner whose mount and umount change the stand-in mount table, as the kernel's."""

    def mount(argv: Sequence[str]) -> CommandResult:
        info.write_text(info.read_text() + DEBUGFS_LINE)
        return CommandResult(tuple(argv), 0, "", "", 0.0)

    def umount(argv: Sequence[str]) -> CommandResult:
        info.write_text(info.read_text().replace(DEBUGFS_LINE, ""))
        return CommandResult(tuple(argv), 0, "", "", 0.0)

    return RecordingRunner({"mount": mount, "umount": umount})


def test_debugfs_is_mounted_journaled_and_unmounted_even_on_error(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text(ROOT_LINE)
    runner = _mount_table(info)
    journals = tmp_path / "j"
    with (  # noqa: PT012
        pytest.raises(RuntimeError, match="blktrace died"),
        rec.debugfs(runner, journals, info) as root,
    ):
        assert root == "/sys/kernel/debug"
        (journal,) = list(journals.iterdir())  # written before the mount
        assert journal.name.startswith("record-pid")
        assert json.loads(journal.read_text())["source"] == "debugfs"
        raise RuntimeError("blktrace died")
    assert runner.argvs == [
        ("mount", "-t", "debugfs", "debugfs", "/sys/kernel/debug"),
        ("umount", "/sys/kernel/debug"),
    ]
    assert info.read_text() == ROOT_LINE and list(journals.iterdir()) == []


def test_cleanup_finds_a_crashed_recordings_journal(tmp_path: Path) -> None:
    stale = tmp_path / "record-pid999999999.jsonl"
    stale.write_text(json.dumps({"kind": "mount", "mountpoint": "/nonexistent/dbg",
                                 "source": "debugfs"}) + "\n")  # fmt: skip
    assert cleanup.stale_journals(tmp_path) == [stale]
    (outcome,) = cleanup.cleanup(RecordingRunner(), tmp_path)
    assert outcome.undone == 1 and outcome.left == [] and not stale.exists()


def _recorder(tmp_path: Path) -> tuple[RecordingRunner, Path]:
    info = tmp_path / "mountinfo"
    info.write_text(ROOT_LINE + DEBUGFS_LINE)

    def blkparse(argv: Sequence[str]) -> CommandResult:
        Path(argv[argv.index("-o") + 1]).write_text(SAMPLE)
        return CommandResult(tuple(argv), 0, "", "", 0.0)

    def blktrace(argv: Sequence[str]) -> CommandResult:
        """blktrace's per-CPU binary files holding the SAMPLE's five queue events."""
        from poolbench.workloads import blktracebin as b

        w, r = b.QUEUE | (b.TC_WRITE << 16), b.QUEUE | (1 << 16)
        events = [(0, 0, 4096, w), (4, 8, 4096, w), (8, 16, 8192, w), (20, 4096, 16384, r),
                  (150, 0, 4096, r)]  # fmt: skip
        out = Path(argv[argv.index("-D") + 1]) / "trace.blktrace.0"
        out.write_bytes(b"".join(_binary(ms * 1_000_000, sec, n, act)
                                 for ms, sec, n, act in events))  # fmt: skip
        return CommandResult(tuple(argv), 0, "=== loop0 ===\n  CPU  0: 5 events\n", "", 0.0)

    return RecordingRunner({"blkparse": blkparse, "blktrace": blktrace}), info


def test_record_stores_the_trace_its_iolog_and_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rec, "check_device", lambda d: Path("/dev/sdq"))
    monkeypatch.setattr(rec.os, "geteuid", lambda: 0)
    runner, info = _recorder(tmp_path)
    db = tmp_path / "r.db"
    done = rec.record(runner, Path("/dev/sdq"), 2, "t1", db, tmp_path / "j", info)
    target = tmp_path / "traces" / "t1"
    assert done.path == target and done.method == "blktrace"
    assert done.notes == ["debugfs already mounted at /sys/kernel/debug: used and left as it was"]
    assert runner.argvs[0] == ("blktrace", "-d", "/dev/sdq", "-r", "/sys/kernel/debug", "-w",
                               "2", "-D", str(target), "-o", "trace")  # fmt: skip
    assert runner.argvs[1][:5] == ("blkparse", "-i", "trace", "-D", str(target))
    stored = tracefile.load_summary(target)
    summary = stored.summary
    assert (summary.ios, summary.bytes) == (5, 36864) and summary == done.summary
    assert stored.device == "/dev/sdq" and stored.seconds == 2
    assert stored.how["binary_check"] == "the binary files hold the same I/Os"
    assert "5 events" in (target / "blktrace.log").read_text()
    assert (target / "trace.iolog").read_text().count(" trace ") == 5 + 3  # add, open, close
    with pytest.raises(UsageError, match="already stored"):
        rec.record(runner, Path("/dev/sdq"), 2, "t1", db, tmp_path / "j", info)


def test_a_failed_recording_leaves_no_half_stored_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rec, "check_device", lambda d: Path("/dev/sdq"))
    monkeypatch.setattr(rec.os, "geteuid", lambda: 0)
    _runner, info = _recorder(tmp_path)
    failing = RecordingRunner({"blktrace": CommandResult(("blktrace",), 1, "", "busy", 0.0)})
    with pytest.raises(PoolbenchError, match="exit code 1"):
        rec.record(failing, Path("/dev/sdq"), 2, "t1", tmp_path / "r.db", tmp_path / "j", info)
    assert not (tmp_path / "traces" / "t1").exists()
    silent = RecordingRunner({"blktrace": "BLKTRACESETUP: No such device\n"})  # exit 0, no files
    with pytest.raises(PoolbenchError, match=r"blktrace \(exit code 0\) wrote no trace .* No such"):
        rec.record(silent, Path("/dev/sdq"), 2, "t1", tmp_path / "r.db", tmp_path / "j", info)
    assert not (tmp_path / "traces" / "t1").exists()


def test_cli_refusals_are_one_paragraph_and_exit_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run_cli(["record", str(tmp_path / "nope"), "--seconds", "1"], capsys)
    assert code == EXIT_INPUT and "does not exist" in out and "Traceback" not in out
    f = tmp_path / "f.img"
    f.write_text("x")
    code, out = run_cli(["record", str(f), "--seconds", "1"], capsys)
    assert code == EXIT_INPUT and "regular file, not a block device" in out
    code, out = run_cli(["record"], capsys)
    assert code == EXIT_USAGE and "needs a DEVICE and --seconds" in out


def test_cli_lists_stored_traces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    code, out = run_cli(["record", "--list", "--db", str(db)], capsys)
    assert code == 0 and "no recorded traces" in out
    d = tmp_path / "traces" / "morning"
    d.mkdir(parents=True)
    from poolbench.workloads import blkparse
    from poolbench.workloads.tracestats import summarize

    s = summarize(blkparse.parse(SAMPLE))
    tracefile.save_summary(d, {"trace": s.to_json(), "device": "/dev/sdq", "seconds": 2})
    code, out = run_cli(["record", "--list", "--db", str(db)], capsys)
    row = next(ln for ln in out.splitlines() if ln.startswith("morning"))
    assert row.split() == ["morning", "/dev/sdq", "2", "5", "0.0", "40%", "26.7"]
    assert all(len(ln) <= 80 for ln in out.splitlines())


FTRACE = """\
# tracer: blk
             fio-4242    [001] .....  1234.500000:   7,9    Q   W 0 + 8 [fio]
             fio-4242    [001] .....  1234.504000:   7,9    Q   W 8 + 8 [fio]
             fio-4242    [000] .....  1234.508000:   7,9    Q  RS 2048 + 16 [fio]
CPU:1 [LOST 3 EVENTS]
"""


def test_a_kernel_in_lockdown_records_through_the_blk_tracer_and_puts_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """blktrace's relay files refused (EPERM, kernel lockdown): the same queue events come
    from the kernel's blk tracer in tracefs, each setting journaled and put back after."""
    from poolbench.engine.replay import blkftrace

    tracefs = tmp_path / "tracing"
    tracefs.mkdir()
    (tracefs / "current_tracer").write_text("nop\n")
    (tracefs / "trace_pipe").write_text(FTRACE)
    trace = tmp_path / "sys" / "loop9" / "trace"
    trace.mkdir(parents=True)
    (trace / "enable").write_text("0\n")
    (trace / "act_mask").write_text("disabled\n")  # as the kernel reads it, tracing off
    info = tmp_path / "mountinfo"
    info.write_text(ROOT_LINE + DEBUGFS_LINE + DEBUGFS_LINE.replace(
        "/sys/kernel/debug", str(tracefs)).replace("debugfs", "tracefs"))  # fmt: skip
    monkeypatch.setattr(blkftrace, "SYS_BLOCK", tmp_path / "sys")
    monkeypatch.setattr(rec, "check_device", lambda d: Path("/dev/loop9"))
    monkeypatch.setattr(rec.os, "geteuid", lambda: 0)
    refused = (
        "Thread 0 failed open /sys/kernel/debug/block/loop9/trace0: 1/Operation not "
        "permitted\nFAILED to start thread on CPU 0: 1/Operation not permitted\n"
    )
    seen: dict[str, str] = {}

    def blkparse(argv: Sequence[str]) -> CommandResult:
        raise AssertionError("the blk tracer's text is parsed directly")

    def blktrace(argv: Sequence[str]) -> CommandResult:
        (trace / "enable").write_text("1\n")  # its BLKTRACESETUP, left behind when refused
        return CommandResult(tuple(argv), 0, refused, "", 0.0)

    runner = RecordingRunner({"blktrace": blktrace, "blkparse": blkparse})
    real_drain = blkftrace.drain

    def drain(pipe: Path, seconds: float, out: Path) -> int:
        seen.update({p.name: p.read_text().strip() for p in trace.iterdir()})
        seen["current_tracer"] = (tracefs / "current_tracer").read_text().strip()
        return real_drain(pipe, 0.05, out)

    monkeypatch.setattr(blkftrace, "drain", drain)
    done = rec.record(runner, Path("/dev/loop9"), 1, "t1", tmp_path / "r.db", tmp_path / "j",
                      info)  # fmt: skip
    # while recording: blk tracer on, queue events only, the device enabled
    assert seen == {"current_tracer": "blk", "act_mask": "queue", "enable": "1"}
    # after: every setting as it was, nothing left in the journal
    assert (tracefs / "current_tracer").read_text().strip() == "nop"
    assert (trace / "enable").read_text().strip() == "0"
    assert list((tmp_path / "j").iterdir()) == []
    assert done.method == "ftrace"
    assert any("Operation not permitted" in n for n in done.notes)
    assert any("dropped 3 events" in n for n in done.notes)
    s = done.summary
    assert (s.ios, s.writes, s.reads, s.bytes) == (3, 2, 1, 4096 + 4096 + 8192)
    assert s.span_s == pytest.approx(0.008) and s.locality["sequential"] == 1
    how = tracefile.load_summary(done.path).how
    assert how["method"] == "ftrace" and how["lost_events"] == 3
    # a device traced by someone else already: refused, its settings untouched
    (trace / "enable").write_text("1\n")
    runner = RecordingRunner({"blktrace": CommandResult(("blktrace",), 0, refused, "", 0.0)})
    with pytest.raises(PoolbenchError, match="being traced already"):
        rec.record(runner, Path("/dev/loop9"), 1, "t2", tmp_path / "r.db", tmp_path / "j", info)
    assert (tracefs / "current_tracer").read_text().strip() == "nop"
    assert not (tmp_path / "traces" / "t2").exists()


def test_a_killed_recordings_kernel_settings_are_put_back_by_cleanup(tmp_path: Path) -> None:
    enable = tmp_path / "enable"
    enable.write_text("1\n")
    tracer = tmp_path / "current_tracer"
    tracer.write_text("function\n")  # someone else's since: left alone
    stale = tmp_path / "j" / "record-pid999999999.jsonl"
    stale.parent.mkdir()
    stale.write_text(
        json.dumps({"kind": "setting", "path": str(tracer), "before": "nop", "after": "blk"})
        + "\n"
        + json.dumps({"kind": "setting", "path": str(enable), "before": "0", "after": "1"})
        + "\n"
    )
    (outcome,) = cleanup.cleanup(RecordingRunner(), stale.parent)
    assert enable.read_text().strip() == "0"
    assert tracer.read_text().strip() == "function"
    assert outcome.left and "not the 'blk' poolbench set; left alone" in outcome.left[0]
