"""The one size grammar and the one --disks grammar (poolbench.units), by example and by
property (hypothesis): round trips, and every kind of refusal as a UsageError."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poolbench.errors import UsageError
from poolbench.units import (
    BINARY_UNITS,
    DECIMAL_UNITS,
    MAX_BYTES,
    DiskList,
    format_size,
    format_sizes,
    parse_disks,
    parse_size,
    parse_sizes,
)

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("123", 123),
        ("512B", 512),
        ("4K", 4 * 1024),
        ("4k", 4 * 1024),
        ("4KiB", 4 * 1024),
        ("4KB", 4000),
        ("512M", 512 * MiB),
        ("500GB", 500 * 10**9),
        ("4T", 4 * TiB),
        ("4TiB", 4 * TiB),
        ("4tib", 4 * TiB),
        ("4TB", 4 * 10**12),
        ("4tb", 4 * 10**12),
        ("1.5G", 3 * GiB // 2),
        ("1.5T", 3 * TiB // 2),
        ("0.5K", 512),
        ("2.25KB", 2250),
        (" 8M ", 8 * MiB),
        ("1P", 1 << 50),
        ("1PB", 10**15),
        ("8191P", 8191 << 50),  # below 2^63
    ],
)
def test_sizes(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("", "not a size"),
        ("   ", "not a size"),
        ("x", "not a size"),
        ("4Q", "not a size"),
        ("4XB", "not a size"),
        ("-1G", "not a size"),
        ("+1G", "not a size"),
        ("inf", "not a size"),
        ("nan", "not a size"),
        ("Infinity", "not a size"),
        ("1e3", "not a size"),
        ("1E400", "not a size"),
        ("1_000", "not a size"),
        ("0x10", "not a size"),
        ("1..5G", "not a size"),
        (".5G", "not a size"),
        ("5.G", "not a size"),
        ("4²", "ASCII"),
        ("١٢", "ASCII"),  # Arabic-Indic 12: int() takes it, zpool would not
        ("１２M", "ASCII"),  # fullwidth digits
        ("4\u00a0G", "ASCII"),  # no-break space
        ("1.1T", "not a whole number of bytes"),
        ("0.3K", "not a whole number of bytes"),
        ("0.5", "not a whole number of bytes"),
        ("0", "zero"),
        ("0G", "zero"),
        ("8192P", "larger than any device"),  # 2^63
        ("9" * 20, "larger than any device"),
        ("9" * 5000, "not a size"),  # never reaches int(): no 5,000-digit conversion
    ],
)
def test_refusals(bad: str, says: str) -> None:
    with pytest.raises(UsageError, match=says) as err:
        parse_size(bad)
    assert err.value.fix  # every refusal says how to write it instead


def test_minimum_is_named() -> None:
    assert parse_size("1M", minimum=MiB) == MiB
    with pytest.raises(UsageError, match="at least 1M"):
        parse_size("1023K", what="working set", minimum=MiB)


def test_format_size_shortest_exact() -> None:
    assert format_size(4 * 10**12) == "4TB"
    assert format_size(4 * TiB) == "4T"
    assert format_size(1536 * MiB) == "1536M"
    assert format_size(3145728777) == "3145728777"
    assert format_sizes((GiB, GiB, GiB, 1536 * MiB)) == "3x1G,1536M"


# -- properties ------------------------------------------------------------------------------
UNITS = {**BINARY_UNITS, **DECIMAL_UNITS}


@given(st.integers(min_value=1, max_value=MAX_BYTES))
def test_format_then_parse_is_identity(n: int) -> None:
    assert parse_size(format_size(n)) == n


@given(st.sampled_from(sorted(UNITS)), st.integers(min_value=1, max_value=10**6), st.booleans())
def test_number_with_unit_is_number_times_factor(unit: str, k: int, lower: bool) -> None:
    factor = UNITS[unit]
    text = f"{k}{unit.lower() if lower else unit}"
    if k * factor > MAX_BYTES:
        with pytest.raises(UsageError):
            parse_size(text)
    else:
        assert parse_size(text) == k * factor


@given(
    st.sampled_from(["K", "M", "G", "T", "KiB", "GiB", "KB", "MB", "GB", "TB"]),
    st.integers(min_value=0, max_value=10**4),
    st.integers(min_value=1, max_value=999),
)
def test_fractions_whole_bytes_or_refused(unit: str, whole: int, frac: int) -> None:
    factor = UNITS[unit[0] if unit.endswith("iB") else unit]
    exact = (whole * 1000 + frac) * factor
    text = f"{whole}.{frac:03d}{unit}"
    if exact % 1000:
        with pytest.raises(UsageError, match="whole number"):
            parse_size(text)
    else:
        assert parse_size(text) == exact // 1000


NON_ASCII_DIGITS = [chr(c) for c in range(0x80, 0x3000) if unicodedata.category(chr(c)) == "Nd"]


@given(st.sampled_from(NON_ASCII_DIGITS), st.sampled_from(["", "G", "K"]))
def test_no_digit_outside_ascii_is_a_size(digit: str, unit: str) -> None:
    assert int(digit) in range(10)  # Python would take it ...
    with pytest.raises(UsageError, match="ASCII"):
        parse_size(f"1{digit}{unit}")  # ... poolbench does not


@settings(max_examples=300)
@given(st.text(max_size=30))
def test_any_text_is_a_size_or_a_usage_error(text: str) -> None:
    try:
        n = parse_size(text)
    except UsageError as exc:
        assert exc.problem and exc.fix
    else:
        assert 1 <= n <= MAX_BYTES and text.isascii()


# A disk is at least 1 MiB: a bare number under that is refused (the next test).
@given(st.lists(st.integers(min_value=MiB, max_value=1 << 45), min_size=1, max_size=20))
def test_disk_lists_round_trip(sizes: list[int]) -> None:
    text = format_sizes(sizes)
    assert parse_sizes(text) == tuple(sizes)
    assert parse_disks(text) == DiskList(sizes=tuple(sizes))


@given(st.integers(min_value=1, max_value=MiB - 1), st.integers(1, 99), st.sampled_from("KMGT"))
def test_a_bare_number_under_a_mib_is_refused_naming_the_entry(
    n: int, frac: int, unit: str
) -> None:
    # `6x4,5T` is 4.5T written with a decimal comma: ',' made it a 4-byte disk and a 5T one
    text = f"6x{n},{frac}{unit}"
    with pytest.raises(UsageError) as exc:
        parse_disks(text)
    assert f"the entry '6x{n}' gives a disk of {n} byte" in exc.value.problem
    assert f"Did you mean {n}.{frac}{unit}?" in exc.value.problem
    with pytest.raises(UsageError, match=f"the entry '{n}' gives a disk of {n} byte"):
        parse_sizes(f"{n}")
    assert parse_sizes(f"{MiB}") == (MiB,)  # bare bytes from 1 MiB on are a disk


# -- --disks ---------------------------------------------------------------------------------
def test_disks_forms() -> None:
    assert parse_disks("5x512M").sizes == (512 * MiB,) * 5
    assert parse_disks("2x4TB,3x2T").sizes == (4 * 10**12,) * 2 + (2 * TiB,) * 3
    assert parse_disks("2X1G, 512M").sizes == (GiB, GiB, 512 * MiB)
    assert parse_disks("/dev/sdb,/dev/sdc").devices == ("/dev/sdb", "/dev/sdc")
    assert len(parse_disks("/dev/sdb")) == 1


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("", "empty"),
        ("5x", "not a size"),
        ("x512M", "not a size"),
        ("0x1G", "out of range"),
        ("-2x1G", "not a size"),
        ("99999x1G", "out of range"),
        ("5000x1G,5001x1G", "more than 10000 disks"),
        ("١٢x1G", "ASCII"),
        ("2x1G,,2x1G", "empty entry"),
        ("/dev/sdb,2x1G", "mixes sizes and devices"),
        ("/dev/sdb,/dev/sdb", "twice"),
        ("5xinf", "not a size"),
    ],
)
def test_disks_refusals(bad: str, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        parse_disks(bad)


def test_disks_limit_is_the_callers() -> None:
    with pytest.raises(UsageError, match="more than 64 disks"):
        parse_disks("65x1G", limit=64)
