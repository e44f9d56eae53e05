"""`poolbench study slow-disk` without pools: its study file on each ZFS, the member throttle
(journaled before it is set, lifted by teardown, refused where the peers' speed is not
known), the computed expectations and the notes built from stored facts. The real run on
throttled loop devices is tests/test_slow_disk_real.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from poolbench.backends import sources
from poolbench.errors import Unsupported, UsageError
from poolbench.factors import slow_member as slow_disk
from poolbench.safety.journal import Journal
from poolbench.store.factrows import FactRow
from poolbench.store.facts import facts_from_records
from poolbench.study import matrix
from poolbench.study.builtin import registry
from poolbench.study.builtin import slow_disk as study
from poolbench.study.builtin.context import Context
from poolbench.study.model import Disks, parse
from poolbench.system import throttle
from poolbench.system.runner import RecordingRunner

MiB = 1 << 20


def test_the_study_file_on_each_zfs() -> None:
    s = parse(registry.study_text("slow-disk", Context(4, "1G", dialect="openzfs")))
    assert s.factors["slow_member"] == [100, 50] and s.disks.cap == 40
    assert s.factors["layout"] == ["mirror:2", "raidz1:4", "raidz2:4", "draid1:2d:4c:1s"]
    ctx = Context(4, "1G", dialect="zfs-fuse", options={"fraction": "1/4", "cap": "20"})
    s = parse(registry.study_text("slow-disk", ctx))
    assert s.factors["layout"] == ["mirror:2", "raidz1:4", "raidz2:4"]
    assert any("no dRAID: zfs-fuse" in line for line in ctx.said)
    assert s.factors["slow_member"] == [100, 25] and s.disks.cap == 20
    assert len(matrix.configs(s)) == 6
    for fraction, pct in (("0.5", 50), ("33%", 33), ("3/4", 75)):
        ctx = Context(3, "1G", options={"fraction": fraction})
        assert parse(registry.study_text("slow-disk", ctx)).factors["slow_member"][1] == pct


@pytest.mark.parametrize("bad", ["1", "0", "2/0", "half", "150%", "-1/2"])
def test_a_fraction_outside_0_to_1_is_refused(bad: str) -> None:
    with pytest.raises(UsageError, match="is not a share of the peers' speed"):
        registry.build("slow-disk", Context(4, "1G", options={"fraction": bad}))


def test_real_devices_and_uncapped_disks_are_refused_before_anything() -> None:
    with pytest.raises(UsageError, match="peers' speed is not known"):
        registry.build("slow-disk", Context(0, "1G", devices=("/dev/sdb", "/dev/sdc", "/dev/sdd")))
    with pytest.raises(UsageError, match=r"needs loop disks .* without a cap"):
        slow_disk.check(Disks(count=3, size="1G"), {"slow_member": "50"})
    slow_disk.check(Disks(count=3, size="1G"), {"slow_member": "100"})  # none slow: fine
    slow_disk.check(Disks(count=3, size="1G", cap=40), {"slow_member": "50"})


def test_the_first_member_is_capped_at_its_share_journaled_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake blkio root: the cap is journaled, then set, read back, and the teardown lifts
    it (and leaves a rule that is no longer ours alone)."""
    root = tmp_path / "blkio"
    root.mkdir()
    for f in ("blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device"):
        (root / f).write_text("")

    class FakeFiles:  # the kernel file keeps one line per device; set_cap rewrites it
        rules: dict[str, int] = {}

    def set_cap(majmin: str, bps: int, r: Path = root) -> None:
        if bps:
            FakeFiles.rules[majmin] = bps
        else:
            FakeFiles.rules.pop(majmin, None)
        for f in ("blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device"):
            (root / f).write_text("".join(f"{k} {v}\n" for k, v in FakeFiles.rules.items()))

    monkeypatch.setattr(throttle, "BLKIO", root)
    monkeypatch.setattr(throttle, "set_cap", set_cap)
    monkeypatch.setattr(throttle, "device_number", lambda dev: "7:3")
    monkeypatch.setattr(sources.throttle, "BLKIO", root)
    real = sources.cap_devices
    monkeypatch.setattr(sources, "cap_devices",
                        lambda j, d, b, root=root: real(j, d, b, root))  # fmt: skip
    journal = Journal(RecordingRunner(), tmp_path / "j.jsonl")
    disks = Disks(count=3, size="1G", cap=40)
    rec = slow_disk.throttle(journal, disks, ["/dev/loop3", "/dev/loop4", "/dev/loop5"],
                             {"slow_member": "25"})  # fmt: skip
    assert rec is not None
    assert (rec["device"], rec["position"], rec["cap_mib_s"], rec["peer_mib_s"]) == (
        "loop3", 0, 10.0, 40.0,
    )  # fmt: skip
    assert throttle.caps(root) == {"7:3": (10 * MiB, 10 * MiB)}
    assert '"kind": "throttle"' in (tmp_path / "j.jsonl").read_text()
    assert journal.teardown() == [] and throttle.caps(root) == {}
    assert slow_disk.throttle(journal, disks, ["/dev/loop3"], {"slow_member": "100"}) is None


def test_expectations_computed_from_the_caps() -> None:
    e = study.expected("raidz1:4", 4, "seq-write", 20.0, 40.0, "zfs-fuse")
    assert e is not None and (e.ratio, e.mib_s) == (0.5, 60.0)  # 20 MiB/s × 3 data disks
    e = study.expected("raidz2:4", 4, "seq-read", 20.0, 40.0, "openzfs")
    # from the slow disk in every block's data to the healthy 2 data disks × 40
    assert e is not None and (e.ratio, e.mib_s, e.high_ratio, e.high_mib_s) == (0.5, 40, 1, 80)
    e = study.expected("draid1:2d:4c:1s", 4, "seq-write", 20.0, 40.0, "openzfs")
    assert e is not None and e.mib_s == pytest.approx(20.0 * 3 * 2 / 3)
    e = study.expected("mirror:2", 4, "seq-read", 20.0, 40.0, "openzfs")
    # the stream kept on the slow side (20 of a healthy 80), or both sides busy: 40 + 20
    assert e is not None and (e.ratio, e.mib_s, e.high_ratio, e.high_mib_s) == (0.25, 20, 0.75, 60)
    assert "0.25–0.75× of the healthy figure, 20.0–60.0 MiB/s (OpenZFS" in e.text()
    e = study.expected("mirror:2", 4, "seq-read", 20.0, 40.0, "zfs-fuse")
    assert e is not None and (e.ratio, e.mib_s) == (0.5, 40.0)  # half the reads wait on it
    e = study.expected("mirror:2", 4, "seq-write", 20.0, 40.0, "zfs-fuse")
    assert e is not None and (e.ratio, e.mib_s) == (0.5, 20.0)  # every byte to both sides
    assert study.expected("mirror:2+mirror:2", 4, "seq-write", 20.0, 40.0, "openzfs") is None
    assert study.expected("raidz1:4", 4, "rand-read-4k", 20.0, 40.0, "openzfs") is None


def _guards(slow: bool, flagged: bool) -> dict[str, Any]:
    g: dict[str, Any] = {"members_slow": {"slow": {"loop3": {"slower": 0.5, "position": 0}}
                                          if flagged else {}}}  # fmt: skip
    if slow:
        g["slow_member"] = {"device": "loop3", "position": 0, "percent": 50,
                            "peer_mib_s": 40.0, "cap_mib_s": 20.0, "how": "blkio"}  # fmt: skip
    return g


def test_notes_put_the_cost_beside_the_expectation_and_the_guard() -> None:
    ctx = Context(3, "1G", dialect="zfs-fuse", options={"layouts": "raidz1:3"})
    meta = {"study_text": registry.study_text("slow-disk", ctx)}
    rows = []
    for level, values, flagged in ((100, [80.0, 81.0, 79.0], [False] * 3),
                                   (50, [40.0, 41.0, 39.0], [True, True, False])):  # fmt: skip
        key = f"backend=zfs layout=raidz1:3 slow_member={level}"
        for rep, (v, f) in enumerate(zip(values, flagged, strict=True)):
            rows.append(FactRow(config=key, workload="seq-write", replicate=rep, value=v,
                                guards=_guards(level != 100, f)))  # fmt: skip
    facts = facts_from_records(meta, rows)
    assert facts.configs[1].slow_flags["seq-write"] == ((0,), (0,), ())
    lines = study.notes(ctx, facts)
    assert lines[0].startswith("seq-write: one member at 50% of its peers' cap")
    assert len(lines) == 2  # nothing of the workloads not run (seq-read, rand-read-4k)
    line = lines[1]
    assert line.startswith("  raidz1:3: with the slow member 2.00× slower (CI")
    assert "expected 0.50× of the healthy figure ≈ 40.0 MiB/s (the slow disk's 20 MiB/s × 2" in line
    # and whether the window could show it: 102 MiB (a tenth of 1G) puts 51 MiB on each
    # member, which the slow one moves in 51 × (1/20 - 1/40) = 1.275 s longer than its peers
    assert line.endswith("the guard flagged disk 1 slow in 2 of 3 replicates (it can name it: "
                         "busy 1.28 s longer than its peers per window)")  # fmt: skip


def test_no_throttle_here_refuses_a_slow_member_before_anything_is_made() -> None:
    """Where no blkio throttle exists (a cgroup-v2-only host; the OpenZFS guest before it
    mounts one) a slow member cannot be slowed: refused as unsupported (exit 7), with how to
    get a throttle rather than the plain cap's "remove the cap" (the slow disk needs it)."""
    disks = Disks(count=3, size="1G", cap=40)
    levels = [{"layout": "mirror:2", "slow_member": s} for s in ("100", "50")]
    with pytest.raises(Unsupported) as e:
        slow_disk.check_throttle(disks, levels, why="no blkio here")
    assert e.value.exit_code == 7
    text = e.value.paragraph()
    assert "no blkio here" in text and "would measure nothing" in text
    assert "mount -t cgroup -o blkio" in text and "Remove [disks] cap" not in text
    with pytest.raises(Unsupported, match=r"caps its disks at 40 MiB/s, but no blkio"):
        slow_disk.check_throttle(disks, levels[:1], why="no blkio here")
    slow_disk.check_throttle(Disks(count=3, size="1G"), levels, why="no blkio here")  # no cap


@pytest.mark.usefixtures("machine")  # a ZFS study: zfs-fuse is started before the refusal
def test_the_cli_refuses_it_with_exit_7_and_no_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from poolbench.cli.main import main

    monkeypatch.setattr(throttle, "unavailable", lambda root=None: "no cgroup v1 blkio here")
    scratch = Path("/var/tmp/poolbench-test-refused")
    with pytest.raises(SystemExit) as e:
        main(["study", "slow-disk", "--disks", "3x128M", "--db", str(tmp_path / "r.db"),
              "--scratch-dir", str(scratch)])  # fmt: skip
    err = capsys.readouterr().err
    assert e.value.code == 7, err
    assert "no cgroup v1 blkio here" in err and "Traceback" not in err
    assert not (scratch.exists() and any(scratch.iterdir()))  # nothing was made
