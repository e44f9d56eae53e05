"""The `slow_member` trial factor: one member made slow on purpose, the first disk of the
trial's pool throttled to a share of its peers' speed, to measure what one slow disk costs a
layout and whether the slow-member guard (guards/members.py, engine/slow_members.py) names it.

The throttle is the cgroup v1 blkio cap of system/throttle.py, set only on a loop device the
study made itself, whose peers run at the study's `[disks] cap`: "half as fast as its peers"
needs the peers' speed to be known and held, which a capped loop device gives and a real
disk does not. The cap is journaled before it is set (safety/journal.py `throttle_set`), so
the trial's teardown lifts it, on success, on error and on Ctrl-C, and `poolbench cleanup`
after a crash.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from poolbench import capabilities
from poolbench.errors import UsageError
from poolbench.factors.base import BeforePool, Factor, Levels, Preflight
from poolbench.factors.specs import Spec, int_in
from poolbench.records import sections
from poolbench.safety.journal import Journal
from poolbench.system import throttle as blkio

if TYPE_CHECKING:
    from poolbench.study.model import Disks

MiB = 1 << 20
KEY = "slow_member"
NONE = 100  # the level at which no member is slow
POSITION = 0  # the member made slow: the first disk in the pool's order


def check(disks: Disks, levels: Mapping[str, str]) -> None:
    """Refuse, before anything is made, a slow member whose peers' speed is not known."""
    level = levels.get(KEY)
    if level is None or int(level) >= NONE:
        return
    if disks.source != "loop" or not disks.cap:
        raise UsageError(
            f"slow_member={level} throttles one member to {level}% of its peers' speed, which "
            'needs loop disks the study makes with a known speed ([disks] source = "loop" '
            f"and cap); this study's disks are {disks.source}"
            + ("" if disks.cap else " without a cap")
            + ".",
            "Set [disks] cap (MiB/s per loop disk, e.g. cap = 40), or use `poolbench study "
            "slow-disk`, which sets it.",
        )


def check_throttle(disks: Disks, configs: Sequence[Mapping[str, str]], why: str = "") -> None:
    """Refuse, before anything is made, a study that caps its disks where no cap can be set
    (`why`: system/throttle.py's reason, read here when not given). A slow member that is
    not slowed would be a study of nothing, so its fix is to get a throttle, not to drop it."""
    why = why or blkio.unavailable()
    if not disks.cap or not why:
        return
    slowed = any(int(c.get(KEY, NONE)) < NONE for c in configs)
    if not slowed:
        raise capabilities.unsupported(
            "blkio-throttle",
            f"The study caps its disks at {disks.cap:g} MiB/s, but {why}.",
            "Remove [disks] cap to measure the sparse files as they are.",
        )
    raise capabilities.unsupported(
        "blkio-throttle",
        f"The study slows one disk to a share of its peers' {disks.cap:g} MiB/s with a cgroup "
        f"v1 blkio throttle, but {why}; nothing was created. Without the throttle no disk "
        "would be slower than its peers and the study would measure nothing.",
        "Boot with the v1 blkio hierarchy (systemd.unified_cgroup_hierarchy=0, systemd 255 "
        "and older), or where no cgroup hierarchy is mounted at all, mount one as root: "
        "mount -t cgroup -o blkio blkio /sys/fs/cgroup/blkio (on a tmpfs at /sys/fs/cgroup).",
    )


def whole_disk(device: str, sys_class: Path = Path("/sys/class/block")) -> str:
    """The disk a partition is on (the throttle caps whole disks), else the device."""
    name = Path(device).resolve().name
    entry = sys_class / name
    if (entry / "partition").exists():
        return f"/dev/{entry.resolve().parent.name}"
    return device


def throttle(
    journal: Journal, disks: Disks, devices: Sequence[str], levels: Mapping[str, str]
) -> sections.SlowRecord | None:
    """Cap the first member at `slow_member`% of the peers' cap (journaled first, read back);
    None when the configuration has no slow member."""
    from poolbench.backends.sources import cap_devices

    level = levels.get(KEY)
    if level is None or int(level) >= NONE or not devices:
        return None
    check(disks, levels)
    assert disks.cap is not None  # check() refused a study without one
    peer = float(disks.cap)
    slow = peer * int(level) / 100
    device = whole_disk(devices[POSITION])
    cap_devices(journal, [device], int(slow * MiB))
    return sections.SlowRecord(
        device=Path(device).name,
        position=POSITION,
        percent=int(level),
        peer_mib_s=peer,
        cap_mib_s=round(slow, 3),
        how="cgroup v1 blkio throttle (root cgroup, reads and writes), journaled and lifted "
        "at teardown",
    )


class SlowMember(Factor):
    """The first member capped before the pool is built; lifted at teardown."""

    specs = (
        Spec(
            KEY,
            "one member's speed as a percent of its peers' (blkio throttle; 100: "
            "none slow): 1..100",
            int_in(1, 100),
        ),
    )
    order = 60  # its cap is set before the pool is built; after the pool's data is laid down
    section = sections.SLOW_MEMBER

    def check_study(self, disks: Disks, configs: Sequence[Levels]) -> None:
        check_throttle(disks, configs)

    def check(self, at: Preflight) -> None:
        check(at.disks, at.levels)

    def before_pool(self, at: BeforePool) -> sections.SlowRecord | None:
        return throttle(at.journal, at.disks, at.devices, at.levels)


FACTOR = SlowMember()
