"""One size grammar, really: the same strings fed to every entry point that takes a size a
user or a study file types give the same bytes (units.parse_size: 4K = 4KiB = 4096, 4KB =
4000), or a refusal from all of them. Before, `4TB` was 4×10^12 in units, 4 TiB in the HTML
report's size axis, and not a record size at all."""

from __future__ import annotations

import pytest

from poolbench.errors import UsageError
from poolbench.planner.layout import parse_devices, parse_layout
from poolbench.report.html_charts import _size_bytes
from poolbench.study.model import parse as parse_study
from poolbench.units import parse_size
from poolbench.workloads.workload import parse_record_size

# (text, bytes): binary units, decimal units, fractions that come out whole
SIZES = [
    ("512", 512),
    ("4K", 4096),
    ("4k", 4096),
    ("4KiB", 4096),
    ("4KB", 4000),
    ("128K", 128 * 1024),
    ("1M", 1 << 20),
    ("1MiB", 1 << 20),
    ("1MB", 10**6),
    ("1.5G", 3 << 29),
    ("4T", 4 << 40),
    ("4TB", 4 * 10**12),
]
BAD = ["", "-1G", "1e3", "inf", "4X", "²", "1.1T", "0"]


@pytest.mark.parametrize(("text", "want"), SIZES)
def test_every_entry_point_reads_a_size_the_same(text: str, want: int) -> None:
    assert parse_size(text) == want
    assert _size_bytes(text) == want  # the HTML report's size axis (recordsize curves)
    if want >= 512 and want & (want - 1) == 0 and want <= 64 << 20:
        assert parse_record_size(text) == want
    else:
        with pytest.raises(UsageError, match="record size|power of two"):
            parse_record_size(text)
    if want >= 64 << 20:  # a layout's member size (planner grammar) and its --disks list
        assert parse_devices(f"3x{text}") == (want,) * 3
        layout = parse_layout(f"raidz1:3x{text}")
        assert layout.vdevs[0].devices == (want,) * 3
    if want >= 1 << 20:  # a study's working set (1M at least) and its disks (64M at least)
        study = parse_study(
            f'name = "s"\n[disks]\ncount = 3\nsize = "{text if want >= 64 << 20 else "1G"}"\n'
            f'[factors]\nlayout = ["raidz1"]\n[workloads]\nnames = ["seq-write"]\n'
            f'size = "{text}"\n'
        )
        assert parse_size(study.workloads.size) == want
        assert want < 64 << 20 or study.disks.size_bytes == want


@pytest.mark.parametrize("text", BAD)
def test_every_entry_point_refuses_the_same_text(text: str) -> None:
    with pytest.raises(UsageError):
        parse_size(text)
    assert _size_bytes(text) is None
    with pytest.raises(UsageError):
        parse_record_size(text)
    with pytest.raises(UsageError):
        parse_study(
            'name = "s"\n[disks]\ncount = 3\nsize = "1G"\n[factors]\nlayout = ["raidz1"]\n'
            f'[workloads]\nnames = ["seq-write"]\nsize = "{text}"\n'
        )
