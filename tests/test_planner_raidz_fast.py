"""The raidz member counts (`raidz_work`, `raidz_mixed`) against the slow reference that lays
every block out one by one with `raidz_columns`, the way the model first did it. The fast
path sums each block's pattern as runs and the mixed starts in closed form; both must give
the same integers (and so the same figures) on every layout, width, ashift and block size."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poolbench.planner.layout import VdevSpec
from poolbench.planner.performance import (
    DiskSpeed,
    Speed,
    member_read_share,
    predict_vdev,
    vdev_multipliers,
)
from poolbench.planner.raidz_work import (
    ColumnWork,
    first_column_step,
    raidz_columns,
    raidz_mixed,
    raidz_work,
)


def raidz_work_reference(
    width: int, parity: int, ashift: int, psize: int, start: int = 0
) -> ColumnWork:
    """Blocks of `psize` back to back from sector `start`, each laid out by `raidz_columns`,
    counted over at least 8 MiB and 64 blocks."""
    sector = 1 << ashift
    read, written, ios = [0] * width, [0] * width, [0] * width
    offset, blocks = start, 0
    while (offset - start) * sector < 8 << 20 or blocks < 64:
        blk = raidz_columns(width, parity, ashift, offset * sector, psize)
        for dev in range(width):
            read[dev] += blk.read[dev]
            written[dev] += blk.written[dev]
            ios[dev] += 1 if blk.read[dev] else 0
        offset += blk.asize
        blocks += 1
    s = -(-psize // sector)
    return ColumnWork(
        s * blocks, max(read), max(written), blocks, max(ios), sum(written), tuple(read),
        tuple(ios),
    )  # fmt: skip


def raidz_mixed_reference(width: int, parity: int, ashift: int, psize: int) -> tuple[float, float]:
    """`raidz_work_reference` at every start `first_column_step` allows, summed."""
    read, ios = [0] * width, [0] * width
    data = blocks = 0
    for start in range(0, width, first_column_step(width, parity)):
        w = raidz_work_reference(width, parity, ashift, psize, start)
        read = [a + b for a, b in zip(read, w.read_by_member, strict=True)]
        ios = [a + b for a, b in zip(ios, w.ios_by_member, strict=True)]
        data, blocks = data + w.data_sectors, blocks + w.blocks
    return data / max(read), blocks / max(ios)


PSIZES = [512, 1536, 4096, 12288, 65536, 131072, 1 << 20]
# Every width up to 18 (the reference lays out thousands of blocks for tiny blocks at ashift
# 9, so the exhaustive grid takes the sizes a pool is planned with; the random tests below
# take any size).
GRID = [4096, 12288, 131072, 1 << 20]


@pytest.mark.slow  # the reference, every width to 18 at four ashifts (hypothesis samples the rest)
@pytest.mark.parametrize("parity", [1, 2, 3])
@pytest.mark.parametrize("ashift", [9, 12, 13, 16])
def test_every_small_width_matches_the_reference(parity: int, ashift: int) -> None:
    for width in range(parity + 1, 19):
        for psize in GRID:
            for start in (0, 3):
                fast = raidz_work(width, parity, ashift, psize, start)
                assert fast == raidz_work_reference(width, parity, ashift, psize, start), (
                    width, parity, ashift, psize, start,
                )  # fmt: skip
            assert raidz_mixed(width, parity, ashift, psize) == raidz_mixed_reference(
                width, parity, ashift, psize
            ), (width, parity, ashift, psize)


@settings(max_examples=60, deadline=None)
@given(
    parity=st.integers(1, 3),
    extra=st.integers(1, 254),
    ashift=st.integers(9, 16),
    psize=st.one_of(st.sampled_from(PSIZES), st.integers(1, 1 << 21)),
    start=st.integers(0, 600),
)
def test_any_layout_matches_the_reference(
    parity: int, extra: int, ashift: int, psize: int, start: int
) -> None:
    width = min(parity + extra, 255)
    fast = raidz_work(width, parity, ashift, psize, start)
    assert fast == raidz_work_reference(width, parity, ashift, psize, start)


@pytest.mark.slow  # the reference walks every start offset of vdevs up to 123 wide
@settings(max_examples=20, deadline=None)
@given(
    parity=st.integers(1, 3),
    extra=st.integers(1, 120),
    ashift=st.integers(9, 16),
    psize=st.sampled_from(PSIZES),
)
def test_mixed_starts_match_the_reference(parity: int, extra: int, ashift: int, psize: int) -> None:
    width = parity + extra
    assert raidz_mixed(width, parity, ashift, psize) == raidz_mixed_reference(
        width, parity, ashift, psize
    )


def test_wide_vdevs_match_the_reference() -> None:
    """The widths a 200-disk search tries, where the raidz1 swap and the mixed starts meet."""
    for width, parity in ((200, 1), (199, 1), (200, 2), (255, 3), (128, 1)):
        assert raidz_mixed(width, parity, 12, 131072) == raidz_mixed_reference(
            width, parity, 12, 131072
        )
        assert raidz_work(width, parity, 12, 131072) == raidz_work_reference(
            width, parity, 12, 131072
        )


@settings(max_examples=40, deadline=None)
@given(
    kind=st.sampled_from(["disk", "mirror", "raidz", "draid"]),
    width=st.integers(2, 40),
    parity=st.integers(1, 3),
    size=st.integers(1 << 30, 1 << 44),
    medium=st.sampled_from(["media", "transfer"]),
)
def test_figures_remembered_by_shape_are_the_figures_of_the_vdev(
    kind: str, width: int, parity: int, size: int, medium: str
) -> None:
    """predict_vdev looks a vdev's figures up by its shape: members of any size give the
    figures vdev_multipliers computes for that very vdev."""
    if kind == "raidz" and width < parity + 1:
        return
    data = max(1, min(8, width - parity)) if kind == "draid" else 0
    p = parity if kind in ("raidz", "draid") else 0
    if kind == "draid" and width - p < 2:
        return
    spec = VdevSpec(kind, tuple(size + i for i in range(width)), p, data, 0)  # type: ignore[arg-type]
    disk = DiskSpeed(180e6, 170e6, 150, 140, "test", medium)  # type: ignore[arg-type]
    sr, sw, rr, rw = vdev_multipliers(spec, 131072, 12, disk.medium)
    rr *= member_read_share(spec, disk, 131072, 12)  # a seeking member moves its column
    assert predict_vdev(spec, disk) == Speed(sr * 180e6, sw * 170e6, rr * 150, rw * 140)
