"""When the slow-member guard can name a throttled disk (study/builtin/slow_guard.py), held
against the guard itself: per-member byte counters sampled every 0.1 s as the Sampler reads
them, for windows whose members move what the layout makes them move at their caps, go
through guards/members.py's rule, and the model must say "visible" exactly when the rule
names the slow member, and never name a healthy one."""

from __future__ import annotations

import pytest

from poolbench.guards import members
from poolbench.guards.devices import Counters
from poolbench.study.builtin import slow_disk, slow_guard
from poolbench.study.builtin.context import Context
from poolbench.study.builtin.slow_guard import NEEDED_S, view

MiB = 1 << 20


def window(moves: dict[str, tuple[float, float]], direction: str) -> list[members.MemberRate]:
    """Counters sampled every 0.1 s while each member moves `MiB` at `MiB/s` from time 0."""
    end = max(mib / rate for mib, rate in moves.values())
    samples = []
    for i in range(int(end / 0.1) + 3):
        t = round(i * 0.1, 6)
        c = {}
        for name, (mib, rate) in moves.items():
            done = int(min(mib, rate * t) * MiB)
            c[name] = Counters(done, 0) if direction == "read" else Counters(0, done)
        samples.append((t, c))
    return members.rates(samples)


def test_the_model_restates_the_guards_rule() -> None:
    for name in ("SLOW_FRACTION", "RESOLUTION_SAMPLES", "SAMPLE_INTERVAL"):
        assert getattr(slow_guard, name) == getattr(members, name), name


# (layout kind, width, data disks, workload, window MiB, slow, peer, dialect,
#  each member's MiB in the window: slow first, then the peers')
CASES = [
    # zfs-fuse mirror read, as tests/test_slow_disk_real.py runs it: 4 MiB per side, 0.2 s
    ("mirror", 2, 1.0, "seq-read", 8, 10, 20, "zfs-fuse", [4, 4]),
    ("mirror", 2, 1.0, "seq-read", 16, 10, 20, "zfs-fuse", [8, 8]),
    # raidz1:3 write: 8 MiB of data is 12 MiB with parity, 4 per member
    ("raidz", 3, 2.0, "seq-write", 8, 10, 20, "zfs-fuse", [4, 4, 4]),
    ("raidz", 3, 2.0, "seq-write", 16, 2, 4, "zfs-fuse", [8, 8, 8]),
    ("mirror", 2, 1.0, "seq-write", 16, 2, 4, "zfs-fuse", [16, 16]),
    # a member at 80% of its peers: within the guard's 25%
    ("mirror", 2, 1.0, "seq-write", 64, 16, 20, "zfs-fuse", [64, 64]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[3]}-{c[4]}M-{c[7]}")
def test_the_model_says_visible_exactly_when_the_guard_names_the_slow_member(
    case: tuple[str, int, float, str, int, int, int, str, list[float]],
) -> None:
    kind, width, data, wl, size, slow, peer, dialect, each = case
    rates = [slow] + [peer] * (len(each) - 1)
    moves = {
        f"loop{i}": (mib, rate) for i, (mib, rate) in enumerate(zip(each, rates, strict=False))
    }
    got = window(moves, "write" if wl == "seq-write" else "read")
    flagged = [line.split()[1] for line in members.slow_members(got)]
    seen = view(kind, width, data, wl, size, slow, peer, dialect)
    assert seen is not None
    assert flagged == (["loop0"] if seen.visible else []), (flagged, seen)


def test_the_gap_and_the_window_that_would_show_it() -> None:
    """At 8 MiB and 20/10 MiB/s the slow side is busy 4 × (1/10 - 1/20) = 0.2 s longer, under
    the 0.3 s; 0.3 / 0.05 = 6 MiB per member, i.e. windows over 12 MiB show it."""
    seen = view("mirror", 2, 1.0, "seq-read", 8, 10, 20, "zfs-fuse")
    assert seen is not None and not seen.visible and pytest.approx(0.3) == NEEDED_S
    assert seen.gap_s == pytest.approx(0.2)
    assert "0.20 s longer" in seen.why and "windows over 12 MiB would show it" in seen.why
    raidz = view("raidz", 4, 3.0, "seq-write", 30, 10, 20, "zfs-fuse")  # 10 MiB per member
    assert raidz is not None and raidz.visible and raidz.gap_s == pytest.approx(0.5)
    steered = view("mirror", 2, 1.0, "seq-read", 256, 10, 40, "openzfs")
    assert steered is not None and not steered.visible and "stream's side" in steered.why
    assert view("raidz", 3, 2.0, "seq-read", 64, 10, 20, "openzfs") is None  # parity's place


def test_the_study_notes_say_whether_the_guard_could_name_it() -> None:
    """Through the study's own helpers: its layouts, its window (--size, else a tenth of a
    disk between 8M and 256M)."""
    assert slow_disk.window_mib(Context(3, "128M", options={"size": "16m"})) == 16
    assert slow_disk.window_mib(Context(4, "1G")) == 102
    assert slow_disk.window_mib(Context(4, "40G")) == 256
    assert slow_disk.window_mib(Context(3, "64M")) == 8
    w = slow_disk.guard_view("raidz1:3", 3, "seq-write", 8, 10, 20, "zfs-fuse")
    assert w is not None and not w.visible and w.gap_s == pytest.approx(0.2)
    d = slow_disk.guard_view("draid1:2d:4c:1s", 4, "seq-write", 16, 10, 20, "zfs-fuse")
    assert d is not None and d.visible  # 2 data disks' worth: 8 MiB each, 0.4 s
    assert slow_disk.guard_view("mirror:2+mirror:2", 4, "seq-write", 16, 10, 20, "zfs-fuse") is None


def test_openzfs_windows_paced_to_the_slow_member_show_nothing() -> None:
    """The guest's windows, as OpenZFS paces them: a 16 MiB mirror write with one side at 2
    of 4 MiB/s moved 16.9 MiB on each side in the same 5.4-6.1 s; the counters advance
    together, the guard names no one, and the model says it cannot."""
    paced = window({"loop0": (16.9, 16.9 / 5.6), "loop1": (16.9, 16.9 / 5.6)}, "write")
    assert members.slow_members(paced) == []
    for kind, wl in (("mirror", "seq-write"), ("raidz", "seq-write"), ("mirror", "seq-read")):
        seen = view(kind, 3 if kind == "raidz" else 2, 2.0 if kind == "raidz" else 1.0, wl,
                    16, 2, 4, "openzfs")  # fmt: skip
        assert seen is not None and not seen.visible, (kind, wl)
