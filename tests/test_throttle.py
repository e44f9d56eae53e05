"""Capped emulated disks ([disks] cap, system/throttle.py): the blkio rule is journaled before
it is set, read back, and removed by teardown only while it is still the one set. Pure: a
directory stands in for /sys/fs/cgroup/blkio (the real throttle is exercised by the demo test
in test_demo_capped.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from poolbench.backends.sources import cap_devices
from poolbench.errors import UsageError
from poolbench.safety.journal import Journal
from poolbench.study.model import parse
from poolbench.system import throttle
from poolbench.system.runner import RecordingRunner

MiB = 1 << 20


@pytest.fixture
def blkio(tmp_path: Path) -> Path:
    root = tmp_path / "blkio"
    root.mkdir()
    for f in ("blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device"):
        (root / f).write_text("")
    return root


class _Rules:
    """What the kernel's files do: a write sets (or with 0 removes) one device's rule."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def set_cap(majmin: str, bps: int, root: Path = self.root) -> None:
            for f in ("blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device"):
                lines = [ln for ln in (root / f).read_text().splitlines()
                         if not ln.startswith(majmin + " ")]  # fmt: skip
                if bps:
                    lines.append(f"{majmin} {bps}")
                (root / f).write_text("\n".join(lines) + "\n")

        monkeypatch.setattr(throttle, "set_cap", set_cap)
        monkeypatch.setattr(throttle, "device_number", lambda dev: f"7:{dev[-1]}")


def test_a_cap_is_journaled_set_read_back_and_removed(
    blkio: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _Rules(blkio).install(monkeypatch)
    journal = Journal(RecordingRunner(), tmp_path / "j.jsonl")
    cap_devices(journal, ["/dev/loop3", "/dev/loop4"], 20 * MiB, blkio)
    assert throttle.caps(blkio) == {"7:3": (20 * MiB, 20 * MiB), "7:4": (20 * MiB, 20 * MiB)}
    kinds = [e["kind"] for e in journal.entries]
    assert kinds == ["throttle", "throttle"]
    # a crash now: a fresh journal from the file undoes exactly these
    again = Journal.load(RecordingRunner(), tmp_path / "j.jsonl")
    assert again.teardown() == []
    assert throttle.caps(blkio) == {}


def test_a_rule_changed_since_is_left_alone(
    blkio: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _Rules(blkio).install(monkeypatch)
    journal = Journal(RecordingRunner(), None)
    cap_devices(journal, ["/dev/loop5"], 20 * MiB, blkio)
    throttle.set_cap("7:5", 7 * MiB, blkio)  # someone else's rule on the same device now
    left = journal.teardown()
    assert len(left) == 1 and "not ours; left alone" in left[0]
    assert throttle.caps(blkio) == {"7:5": (7 * MiB, 7 * MiB)}


def test_no_blkio_throttle_is_a_clear_refusal(tmp_path: Path) -> None:
    assert "no cgroup v1 blkio throttle" in throttle.unavailable(tmp_path)
    with pytest.raises(UsageError, match="cannot be capped at 20 MiB/s"):
        cap_devices(Journal(RecordingRunner(), None), ["/dev/loop1"], 20 * MiB, tmp_path)


def test_cap_is_a_loop_device_setting() -> None:
    base = '[factors]\nlayout = ["raidz1"]\n[disks]\ncount = 3\nsize = "1G"\n'
    assert parse('name = "c"\n' + base + "cap = 20\n").disks.cap == 20
    assert "capped at 20 MiB/s" in parse('name = "c"\n' + base + "cap = 20\n").disks.describe()
    with pytest.raises(UsageError, match='cap needs source = "loop"'):
        parse('name = "c"\n' + base + 'source = "files"\ncap = 20\n')
    for bad in ("0", "-5", "nan", '"fast"'):
        with pytest.raises(UsageError):
            parse('name = "c"\n' + base + f"cap = {bad}\n")
