"""What `poolbench plan` prints reads right (issue 29): compared ashifts, the release whose
space rules a figure uses, decimal beside binary sizes, the binary-unit hint, zpool's vdev
labels, human partition sizes, the per-resilver risk, the warnings of a mixed-disk search,
80 columns, and errors that name what is wrong. Figures are computed here, not read back."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner, Result

from poolbench.cli.plan_cmd import plan
from poolbench.cli.plan_show import decimal, human_spec, vdev_label
from poolbench.errors import UsageError
from poolbench.planner.capacity import plan_pool
from poolbench.planner.layout import parse_layout
from poolbench.planner.rules import parse_zfs_version
from poolbench.units import TiB


def _run(*args: str, columns: int = 80) -> Result:
    return CliRunner(mix_stderr=False).invoke(plan, list(args), env={"COLUMNS": str(columns)})


def test_ashifts_are_compared_on_one_layout() -> None:
    res = _run("--layout", "raidz3:24x4T", "--ashift", "9,12", "--json")
    assert res.exit_code == 0, res.output + res.stderr
    docs = json.loads(res.output)["by_ashift"]
    rules = parse_zfs_version("2.3")
    for doc, ashift in zip(docs, (9, 12), strict=True):
        want = plan_pool(parse_layout("raidz3:24x4T"), ashift, rules).usable_bytes
        assert (doc["ashift"], doc["usable_bytes"]) == (ashift, want)
    # A 128K record on raidz3 of 24: 32 data sectors at 4K need 3 parity rows of 21 data
    # columns (2 rows) → 32 + 6 = 38, rounded up to 40 sectors; at 512 B 256 + 3·13 = 295 →
    # 296: the small sectors waste less, so ashift 9 holds more.
    assert docs[0]["usable_bytes"] > docs[1]["usable_bytes"]
    text = _run("--layout", "raidz3:24x4T", "--ashift", "9,12").output
    assert re.search(r"\b9 .*82\.7T", text) and re.search(r"\b12 .*76\.6T", text), text


@pytest.mark.parametrize("bad", ["9,17", "12,x", "²", "9" * 5000])
def test_bad_ashifts_are_refused(bad: str) -> None:
    res = _run("--layout", "raidz2:6x4TB", "--ashift", bad)
    assert res.exit_code != 0 and isinstance(res.exception, UsageError)
    assert "is not an ashift" in str(res.exception)


def test_a_search_takes_one_ashift() -> None:
    res = _run("--disks", "6x4TB", "--ashift", "9,12")
    assert isinstance(res.exception, UsageError) and "a search takes one" in str(res.exception)


def test_the_release_of_the_space_rules_is_printed() -> None:
    old = _run("--layout", "raidz3:24x4T", "--zfs-version", "0.6.3").output
    assert "space rules of ZFS on Linux 0.6.0 - 0.6.4.x" in old
    new = _run("--layout", "raidz3:24x4T").output
    assert "space rules of OpenZFS 2.1 and later" in new and "reserve" in new
    doc = json.loads(_run("--layout", "raidz3:24x4T", "--json").output)
    assert "OpenZFS 2.1 and later" in doc["zfs_rules_note"]


def test_decimal_sizes_beside_binary() -> None:
    # 6 × 4 TiB = 26,388,279,066,624 bytes = 26.39 TB (decimal) = 24T (zfs's 1024-based).
    assert decimal(6 * 4 * TiB) == "26.39 TB"
    out = _run("--layout", "raidz2:6x4T").output
    assert re.search(r"raw device bytes\s+24T\s+26\.39 TB\s+26,388,279,066,624", out), out


def test_a_binary_size_that_looks_like_a_sold_size_gets_a_hint() -> None:
    res = _run("--layout", "raidz2:6x4T")
    hint = " ".join(res.stderr.split())
    assert "4T is 4 TiB = 4.40 TB" in hint and "write 4TB for it" in hint
    assert "TiB" not in _run("--layout", "raidz2:6x4TB").stderr


def test_help_examples_use_decimal_units() -> None:
    text = CliRunner().invoke(plan, ["--help"]).output
    assert "6x4TB" in text and not re.search(r"x[0-9]+T\b", text), text


def test_vdevs_are_labelled_as_zpool_labels_them() -> None:
    layout = parse_layout("mirror:2x1T + mirror:2x1T + mirror:2x1T")
    assert [vdev_label(v, i) for i, v in enumerate(layout.vdevs)] == [
        "mirror-0", "mirror-1", "mirror-2",
    ]  # fmt: skip
    out = _run("--layout", "mirror:2x1TB + mirror:2x1TB + mirror:2x1TB").output
    for label in ("mirror-0", "mirror-1", "mirror-2"):
        assert out.count(label) == 2, out  # the vdev table and the resilience table


def test_partition_sizes_print_as_zfs_sizes() -> None:
    # A 2 TB disk partitioned by zpool create: partition 1 is 1,999,993,634,816 bytes,
    # 1.82 TiB; the tiered plans cut every disk there.
    layout = parse_layout("mirror:2x1907339M")
    assert human_spec(layout) == "mirror:2x1.82T"
    out = _run("--disks", "3x2TB,3x3TB", "--top", "40", columns=120).output
    assert "1.82T" in out and not re.search(r"\d{5,}M", out), out


def test_special_vdev_makes_size_and_raw_consistent() -> None:
    out = _run("--layout", "raidz2:6x4TB + special mirror:2x500GB").output
    assert "raw device bytes, class vdevs" in out
    assert "SIZE counts the special and dedup vdevs" in out


def test_risk_is_per_resilver() -> None:
    out = _run("--layout", "raidz2:6x4TB").output
    assert "P(lose pool)" in out and "per resilver" in out and "Not per year" in out


def test_a_mixed_disk_search_says_what_the_table_cannot() -> None:
    out = _run("--disks", "3x2TB,3x3TB").output
    # The first row is the stripe of all six, which survives nothing.
    assert "Warning: the first layout (stripe of 6) survives no disk failure" in out
    # raidz1 of 6 over 3 TB and 2 TB disks uses 1.82T of each 3 TB disk: 3 TB − 2 TB = 10^12
    # bytes (931G) left on each of the three.
    assert "leaves 931G (1.00 TB) of each of 3 disks unused" in out
    assert "tiered: every disk is cut into partitions" in out
    assert "Random writes are not predicted" in out


@pytest.mark.parametrize(
    "args",
    [
        ("--disks", "3x2TB,3x3TB"),
        ("--disks", "100x4TB,100x8TB", "--top", "8"),
        ("--layout", "raidz2:6x4TB + special mirror:2x500GB + log mirror:2x100GB"),
        ("--layout", "draid2:4d:1s:11x4TB"),
        ("--layout", "raidz2:6x4TB", "--expand-to", "8"),
        ("--layout", "raidz3:24x4TB", "--ashift", "9,12,13"),
    ],
)
def test_every_line_fits_80_columns(args: tuple[str, ...]) -> None:
    res = _run(*args)
    assert res.exit_code == 0, res.output + res.stderr
    long = [line for line in res.output.splitlines() if len(line) > 80]
    assert not long, long


def test_each_layout_takes_two_lines_at_80_columns() -> None:
    out = _run("--disks", "100x4TB,100x8TB", "--top", "5").output.splitlines()
    start = next(i for i, line in enumerate(out) if line.lstrip().startswith("─"))
    body = []
    for line in out[start + 1 :]:
        if not line.strip():
            break
        body.append(line)
    assert len(body) == 10, body  # 5 layouts × (name, layout) — no cell wraps further


def test_errors_name_what_is_wrong() -> None:
    res = _run("--layout", "raidz2:6x4,5T")
    # the offending entry, what it means, the likely intent and the grammar
    said = str(res.exception)
    assert "layout part 'raidz2:6x4,5T': the entry '6x4' gives a disk of 4 bytes" in said
    assert "(a size without a unit is bytes). Did you mean 4.5T?" in said
    assert "Write disks as COUNTxSIZE or SIZE with a unit" in said
    res = _run("--layout", "raid2:6x4TB")
    assert "Did you mean 'raidz2'?" in str(res.exception)
