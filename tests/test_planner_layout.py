"""The layout grammar of `poolbench plan --layout`."""

from __future__ import annotations

import pytest

from poolbench.errors import UsageError
from poolbench.planner.layout import format_size, parse_layout, parse_size

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


@pytest.mark.parametrize("bad", ["", "raidz", "raidz4:3x1G", "mirror:", "mirror:2x1G +", "a:1G"])
def test_bad_layouts(bad: str) -> None:
    with pytest.raises(UsageError):
        parse_layout(bad)


def test_format_size_shortest() -> None:
    assert format_size(4 * 10**12) == "4TB"
    assert format_size(4 * TiB) == "4T"
    assert format_size(3145728777) == "3145728777"
