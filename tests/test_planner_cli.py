"""`poolbench plan` end to end through click (no I/O)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from poolbench.cli.plan_cmd import plan


def test_layout_json_exact_form() -> None:
    res = CliRunner().invoke(
        plan,
        [
            "--layout",
            "raidz2:6x4T",
            "--ashift",
            "12",
            "--zfs-version",
            "2.3",
            "--whole-disk",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    for key in ("size_bytes", "usable_bytes", "slop_bytes", "deflate_ratio", "vdevs"):
        assert key in doc
    assert doc["usable_bytes"] == 17_426_125_160_448  # see test_planner_capacity.py
    v = doc["vdevs"][0]
    assert (v["asize_bytes"], v["metaslab_count"], v["metaslab_size_bytes"]) == (
        26_388_187_840_512,
        1535,
        1 << 34,
    )
    assert [a["block_bytes"] for a in v["allocation"]] == [1 << s for s in range(12, 21)]
    assert doc["predicted_speed"]["model"] is True
    assert doc["resilience"]["model"] is True


def test_layout_table() -> None:
    res = CliRunner().invoke(
        plan,
        ["--layout", "raidz1:3x1G + mirror:2x2G", "--zfs-version", "zfs-fuse", "--ashift", "9"],
    )
    assert res.exit_code == 0, res.output
    assert "zpool list SIZE" in res.output and "MODEL" in res.output


def test_search_json() -> None:
    res = CliRunner().invoke(
        plan,
        ["--disks", "2x3T,3x2T", "--min-failures", "1", "--json", "--disk-speed", "180M,250iops"],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["candidates"][0]["pareto"] is True
    assert all(c["failures_tolerated"] >= 1 for c in doc["candidates"])


def test_needs_exactly_one_mode() -> None:
    res = CliRunner().invoke(plan, [])
    assert res.exit_code != 0
    assert "exactly one of --layout and --disks" in str(res.exception)
