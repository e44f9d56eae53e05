"""The one layout grammar: `poolbench plan --layout`, study files and the ZFS backend."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from poolbench.backends.base import Vdev, parse_topology
from poolbench.errors import UsageError
from poolbench.planner.layout import ClassVdev, Layout, VdevSpec, check_widths, parse_layout
from poolbench.units import format_size, parse_size

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("123", 123),
        ("1K", KiB),
        ("1536M", 1536 * MiB),
        ("4T", 4 * TiB),
        ("4TB", 4 * 10**12),
        ("4tb", 4 * 10**12),
        ("1.5T", 3 * TiB // 2),
        ("2GiB", 2 * GiB),
        ("1MB", 10**6),
        ("512B", 512),
        ("1P", 1 << 50),
    ],
)
def test_parse_size(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("bad", ["", "x", "4Q", "-1G", "0", "1..5G"])
def test_parse_size_refuses(bad: str) -> None:
    with pytest.raises(UsageError):
        parse_size(bad)


def test_issue_example() -> None:
    lay = parse_layout("raidz1:3x1G,2x1536M + mirror:2x4TB")
    assert len(lay.vdevs) == 2
    rz, mir = lay.vdevs
    assert (rz.kind, rz.parity, rz.devices) == ("raidz", 1, (GiB,) * 3 + (1536 * MiB,) * 2)
    assert (mir.kind, mir.devices) == ("mirror", (4 * 10**12,) * 2)
    assert lay.spec() == "raidz1:3x1G,2x1536M + mirror:2x4TB"
    assert lay.failures_tolerated == 1


def test_stripe_is_one_vdev_per_device() -> None:
    lay = parse_layout("stripe:3x1G")
    assert [v.kind for v in lay.vdevs] == ["disk"] * 3
    assert lay.spec() == "stripe:3x1G"
    assert lay.failures_tolerated == 0


def test_raidz_aliases_and_widths() -> None:
    assert parse_layout("raidz:3x1G").vdevs[0].parity == 1
    assert parse_layout("raidz3:4x1G").vdevs[0].failures_tolerated == 3
    with pytest.raises(UsageError, match="at least 4"):
        parse_layout("raidz3:3x1G")
    with pytest.raises(UsageError, match="at least 2"):
        parse_layout("mirror:1G")


def test_draid_grammar() -> None:
    v = parse_layout("draid2:4d:1s:8x1T").vdevs[0]
    assert (v.kind, v.parity, v.draid_data, v.draid_spares, v.width) == ("draid", 2, 4, 1, 8)
    assert v.spec() == "draid2:4d:1s:8x1T"
    # defaults as zpool create: data = min(children - spares - parity, 8), spares 0
    d = parse_layout("draid1:12x1T").vdevs[0]
    assert (d.draid_data, d.draid_spares) == (8, 0)
    assert parse_layout("draid2:4d:8c:1s:8x1T").vdevs[0].width == 8
    with pytest.raises(UsageError, match="children"):
        parse_layout("draid2:4d:9c:8x1T")
    with pytest.raises(UsageError, match="too many"):
        parse_layout("draid2:6d:1s:8x1T")
    with pytest.raises(UsageError, match="0 data disks"):
        parse_layout("draid1:0d:1s:6x1T")
    with pytest.raises(UsageError, match="0 data disks"):
        parse_layout("draid1:0d", (GiB,) * 6)


# OpenZFS's default data disks per group (draid_config_by_type in cmd/zpool/zpool_vdev.c:
# "limit a redundancy group to 8 data disks"), worked out by hand for each case:
# data = min(8, children - parity - spares).
DRAID_DEFAULTS = [
    # children, parity, spares, data
    (2, 1, 0, 1),  # 2 - 1 - 0 = 1
    (3, 2, 0, 1),  # 3 - 2 = 1
    (4, 1, 0, 3),
    (7, 2, 0, 5),  # the old study default (8) was wrong here: only 5 are left
    (7, 2, 1, 4),
    (10, 3, 2, 5),
    (11, 2, 1, 8),  # exactly 8 left
    (12, 1, 0, 8),  # 11 left, capped at 8
    (68, 2, 4, 8),
    (255, 3, 100, 8),
]


@pytest.mark.parametrize(("children", "parity", "spares", "data"), DRAID_DEFAULTS)
def test_draid_defaults_are_openzfs(children: int, parity: int, spares: int, data: int) -> None:
    head = f"draid{parity}" + (f":{spares}s" if spares else "")
    planned = parse_layout(f"{head}:{children}x1T").vdevs[0]
    assert (planned.draid_data, planned.draid_spares, planned.width) == (data, spares, children)
    # the study side reads the same text the same way
    (study,) = parse_topology(head, children)
    assert (study.kind, study.draid_data, study.draid_spares, study.width) == (
        f"draid{parity}", data, spares, children
    )  # fmt: skip


def test_draid_options_as_zpool_takes_them() -> None:
    plain = parse_layout("draid:5x1T").vdevs[0]  # draid = draid1
    assert (plain.parity, plain.draid_data) == (1, 4)
    a = parse_layout("draid2:1s:4d:7c:7x1T").vdevs[0]  # any order, upper case too
    b = parse_layout("draid2:4D:7C:1S:7x1T").vdevs[0]
    assert a == b and (a.draid_data, a.draid_spares) == (4, 1)
    # width before or after the options (both spellings studies have used)
    assert parse_topology("draid2:7:4d:1s", 7) == parse_topology("draid2:4d:1s:7", 7)
    with pytest.raises(UsageError, match="leave no data disks"):
        parse_layout("draid2:1s:3x1T")
    with pytest.raises(UsageError, match="OpenZFS allows 100"):
        parse_layout("draid1:101s:110x1T")
    with pytest.raises(UsageError, match="at most 255"):
        parse_layout("draid1:256x1T")


def test_widths_take_the_given_disks_in_order() -> None:
    disks = (4 * TiB,) * 3 + (2 * TiB,) * 2
    lay = parse_layout("raidz1:3 + mirror:2", disks)
    assert lay == parse_layout("raidz1:3x4T + mirror:2x2T")
    assert lay.widths() == "raidz1:3+mirror:2"
    assert parse_layout("raidz2", (GiB,) * 6) == parse_layout("raidz2:6x1G")
    assert parse_layout("stripe:2", (GiB,) * 4).disk_count == 2  # the rest stay unused
    with pytest.raises(UsageError, match="needs 6 disks but --disks has 5"):
        parse_layout("raidz1:3+raidz1:3", disks)
    with pytest.raises(UsageError, match="needs disks"):
        parse_layout("raidz2")
    with pytest.raises(UsageError, match="mixes device sizes and widths"):
        parse_layout("raidz1:3x1G + mirror:2", disks)
    with pytest.raises(UsageError, match="names disks too"):
        parse_layout("raidz1:3x1G", disks)
    with pytest.raises(UsageError, match="each needs a width"):
        parse_layout("raidz1 + mirror:2", disks)
    with pytest.raises(UsageError, match="a width of 0"):
        parse_layout("stripe:0", disks)


def test_vdev_classes_parse_into_their_own_list() -> None:
    T, G100 = 1 << 40, 100 << 30
    lay = parse_layout("raidz2:6x4T + log mirror:2x100G")
    assert lay.vdevs == (VdevSpec("raidz", (4 * T,) * 6, parity=2),)
    assert lay.classes == (ClassVdev("log", VdevSpec("mirror", (G100, G100))),)
    assert lay.disk_count == 8 and lay.failures_tolerated == 2  # a log does not count
    assert lay.spec() == "raidz2:6x4T + log mirror:2x100G"
    # a special vdev holds metadata: its loss is the pool's, so a 2-way mirror caps it at 1
    assert parse_layout("raidz2:6x4T + special mirror:2x500G").failures_tolerated == 1
    assert parse_layout("raidz2:6x4T + special 1x500G").failures_tolerated == 0
    assert parse_layout("raidz2:6x4T + dedup mirror:3x500G").failures_tolerated == 2
    spare = parse_layout("mirror:2x4T + spare 1x4T")
    assert spare.classes == (ClassVdev("spare", VdevSpec("disk", (4 * T,))),)
    assert spare.failures_tolerated == 1 and spare.spec() == "mirror:2x4T + spare 4T"
    cache = parse_layout("raidz1:4x4T + cache 2x1T")
    assert [c.cls for c in cache.classes] == ["cache", "cache"]
    assert cache.spec() == "raidz1:4x4T + cache 2x1T"
    # widths take the disks in the order written, class parts included
    disks = tuple(range(1, 11))
    lay = parse_layout("raidz2:6 + log mirror:2 + spare 1 + cache 1", [d << 30 for d in disks])
    assert [d >> 30 for d in lay.vdevs[0].devices] == [1, 2, 3, 4, 5, 6]
    assert [(c.cls, [d >> 30 for d in c.vdev.devices]) for c in lay.classes] == [
        ("log", [7, 8]), ("spare", [9]), ("cache", [10])]  # fmt: skip
    assert lay.widths() == "raidz2:6+log mirror:2+spare 1+cache 1"
    assert parse_layout(lay.spec()) == lay  # round trip


def test_vdev_classes_refuse_what_zpool_refuses() -> None:
    for bad, says in [
        ("log 1x1G", "no data vdevs"),
        ("raidz2:6x4T + log raidz1:3x1G", "zpool create refuses raidz1 there"),
        ("raidz2:6x4T + special draid1:4x1G", "a special vdev is a single disk or a mirror"),
        ("mirror:2x1G + spare mirror:2x1G", "a spare device is one disk"),
        ("mirror:2x1G + cache", "names the cache class but no devices"),
        ("mirror:2x1G + log mirror:1x1G", "a mirror needs at least 2"),
    ]:
        with pytest.raises(UsageError, match=says):
            parse_layout(bad)


def test_study_layouts_check_what_they_can_before_the_disks() -> None:
    for ok in ("raidz2", "raidz1:3+mirror:2", "draid2:4d:1s:7", "stripe:6", "draid1"):
        check_widths(ok)
    for bad, says in [
        ("raidz3:3", "raidz3 of 3 disks is impossible"),
        ("draid1:0d:1s:6", "0 data disks"),
        ("raidz1:3x1G", "Write a width"),
        ("mirror:1", "a mirror of 1 disk"),
        ("raidz1:3++mirror:2", "Empty part"),
    ]:
        with pytest.raises(UsageError, match=says):
            check_widths(bad)


def test_backend_topology_is_the_planner_layout() -> None:
    assert parse_topology("raidz1:3+mirror:2", 6) == (Vdev("raidz1", 3), Vdev("mirror", 2))
    assert parse_topology("stripe:3", 3) == (Vdev("stripe", 3),)
    with pytest.raises(UsageError, match="needs 4 disks but the study has 2"):
        parse_topology("raidz1:4", 2)
    with pytest.raises(UsageError, match="raidz3 of 3 disks is impossible"):
        parse_topology("raidz3", 3)


_GROUPS = st.one_of(
    st.builds(lambda n: ("stripe", 0, n), st.integers(1, 4)),
    st.builds(lambda n: ("mirror", 0, n), st.integers(2, 4)),
    st.builds(
        lambda p, extra: (f"raidz{p}", p, p + 1 + extra), st.integers(1, 3), st.integers(0, 8)
    ),
)


@given(
    st.lists(_GROUPS, min_size=1, max_size=4),
    st.lists(st.sampled_from([GiB, 1536 * MiB, 4 * TiB, 4 * 10**12]), min_size=48, max_size=48),
)
def test_spec_and_widths_round_trip(groups: list[tuple[str, int, int]], sizes: list[int]) -> None:
    text = " + ".join(f"{head}:{n}" for head, _, n in groups)
    lay = parse_layout(text, sizes)
    assert lay.disk_count == sum(n for _, _, n in groups)
    assert parse_layout(lay.spec()) == lay  # sized form, as plan prints it
    assert parse_layout(lay.widths(), sizes) == lay  # width form, as a study writes it
    assert all(isinstance(v, VdevSpec) for v in lay.vdevs) and isinstance(lay, Layout)


@pytest.mark.parametrize(
    "bad",
    ["", "raidz", "raidz4:3x1G", "mirror:", "mirror:2x1G +", "a:1G", "raidz1:4d:3x1G",
     "raidz1:3x1G:2x1G", "raidz1:١٢x1G", "mirror:2xinf", "raidz1:3x1.1T"],
)  # fmt: skip
def test_bad_layouts(bad: str) -> None:
    with pytest.raises(UsageError):
        parse_layout(bad)


def test_format_size_shortest() -> None:
    assert format_size(4 * 10**12) == "4TB"
    assert format_size(4 * TiB) == "4T"
    assert format_size(3145728777) == "3145728777"
