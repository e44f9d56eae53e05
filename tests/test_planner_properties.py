"""Properties of the capacity arithmetic (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from poolbench.planner.capacity import plan_pool
from poolbench.planner.layout import Layout, VdevSpec
from poolbench.planner.rules import RULE_SETS
from poolbench.planner.space import (
    deflate_ratio,
    leaf_asize,
    psize_to_asize,
    whole_disk_partition_bytes,
)

MiB, GiB, TiB = 1 << 20, 1 << 30, 1 << 40

rule_sets = st.sampled_from(RULE_SETS)
ashifts = st.sampled_from([9, 12, 13])
disk_sizes = st.integers(min_value=128 * MiB, max_value=40 * TiB)


@settings(max_examples=300, deadline=None)
@given(
    parity=st.integers(1, 3),
    extra=st.integers(0, 20),
    psize_sectors=st.integers(1, 2048),
    ashift=st.sampled_from([9, 12, 13]),
)
def test_raidz_allocation_is_multiple_of_parity_plus_one(
    parity: int, extra: int, psize_sectors: int, ashift: int
) -> None:
    spec = VdevSpec("raidz", (1,) * (parity + 1 + extra), parity=parity)
    psize = psize_sectors * 512
    asize = psize_to_asize(spec, psize, ashift)
    sectors = asize >> ashift
    assert asize % (1 << ashift) == 0
    assert sectors % (parity + 1) == 0
    # holds the data and at least `parity` parity sectors per row
    data = -(-psize // (1 << ashift))
    assert sectors >= data + parity


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from(["disk", "mirror", "raidz1", "raidz2", "raidz3"]),
    width=st.integers(4, 12),
    size=disk_sizes,
    grow=st.integers(0, 2 * TiB),
    rules=rule_sets,
    ashift=ashifts,
)
def test_monotonic_in_disk_size(
    kind: str, width: int, size: int, grow: int, rules: object, ashift: int
) -> None:
    def lay(s: int) -> Layout:
        if kind == "disk":
            return Layout((VdevSpec("disk", (s,)),))
        if kind == "mirror":
            return Layout((VdevSpec("mirror", (s, s)),))
        return Layout((VdevSpec("raidz", (s,) * width, parity=int(kind[-1])),))

    a = plan_pool(lay(size), ashift, rules)  # type: ignore[arg-type]
    b = plan_pool(lay(size + grow), ashift, rules)  # type: ignore[arg-type]
    assert b.size_bytes >= a.size_bytes
    assert b.usable_bytes >= a.usable_bytes


@settings(max_examples=200, deadline=None)
@given(width=st.integers(4, 16), size=disk_sizes, rules=rule_sets, ashift=ashifts)
def test_more_parity_never_gives_more_space(
    width: int, size: int, rules: object, ashift: int
) -> None:
    usable = [
        plan_pool(
            Layout((VdevSpec("raidz", (size,) * width, parity=p),)),
            ashift,
            rules,  # type: ignore[arg-type]
        ).usable_bytes
        for p in (1, 2, 3)
    ]
    assert usable[0] >= usable[1] >= usable[2]


@settings(max_examples=200, deadline=None)
@given(size=disk_sizes, rules=rule_sets, ashift=ashifts, width=st.integers(2, 4))
def test_usable_within_bounds(size: int, rules: object, ashift: int, width: int) -> None:
    p = plan_pool(Layout((VdevSpec("mirror", (size,) * width),)), ashift, rules)  # type: ignore[arg-type]
    assert 0 < p.usable_bytes < p.size_bytes <= leaf_asize(size) <= size
    assert p.usable_bytes + p.slop_bytes == p.dspace


@settings(max_examples=200, deadline=None)
@given(size=st.integers(100 * MiB, 40 * TiB))
def test_whole_disk_partition_is_a_little_smaller(size: int) -> None:
    part = whole_disk_partition_bytes(size)
    assert part % MiB == 0
    # 1 MiB in front, 8 MiB partition 9, 33 sectors of backup GPT, up to 2047 sectors of
    # alignment and up to 511 bytes of a partial sector
    assert 9 * MiB + 33 * 512 <= size - part <= 9 * MiB + (33 + 2047) * 512 + 511


@settings(max_examples=200, deadline=None)
@given(
    parity=st.integers(1, 3),
    width=st.integers(4, 20),
    ashift=ashifts,
    psize=st.integers(1, 1 << 20),
)
def test_deflate_ratio_bounds(parity: int, width: int, ashift: int, psize: int) -> None:
    if width < parity + 1:
        return
    spec = VdevSpec("raidz", (1,) * width, parity=parity)
    ratio = deflate_ratio(spec, ashift)
    # never better than the data fraction of a full stripe
    assert ratio <= 512 * (width - parity) // width + 1
    assert psize_to_asize(spec, psize, ashift) >= psize


@settings(max_examples=100, deadline=None)
@given(
    parity=st.integers(1, 3),
    data=st.integers(1, 10),
    spares=st.integers(0, 2),
    more=st.integers(0, 8),
    size=st.integers(1 * GiB, 20 * TiB),
    ashift=ashifts,
)
def test_draid_space_below_raw_data_share(
    parity: int, data: int, spares: int, more: int, size: int, ashift: int
) -> None:
    from poolbench.planner.rules import OZ_21

    children = data + parity + spares + more
    spec = VdevSpec(
        "draid", (size,) * children, parity=parity, draid_data=data, draid_spares=spares
    )
    p = plan_pool(Layout((spec,)), ashift, OZ_21)
    assert p.size_bytes <= (children - spares) * size
    assert p.dspace <= p.size_bytes * data // (data + parity) + 1
    assert psize_to_asize(spec, 4096, ashift) % ((data + parity) << ashift) == 0
