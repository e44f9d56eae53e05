"""`poolbench plan` end to end through click (no I/O)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from poolbench.backends.base import parse_topology
from poolbench.cli import study_cmd
from poolbench.cli.plan_cmd import plan
from poolbench.engine.trial import GENERIC_LAYOUTS
from poolbench.errors import UsageError
from poolbench.planner.capacity import predicted_usable
from poolbench.study.model import load as load_study
from poolbench.study.model import parse as parse_study
from poolbench.units import parse_size

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


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


def test_needs_a_layout_or_disks() -> None:
    res = CliRunner().invoke(plan, [])
    assert res.exit_code != 0
    assert "Give --layout, --disks, or both" in str(res.exception)


# -- one size grammar, one layout grammar: plan and the studies agree (issue 11) -------------
def _plan_json(*args: str) -> dict[str, Any]:
    res = CliRunner().invoke(plan, [*args, "--json"])
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(res.output[res.output.index("{") :])
    return doc


def test_plan_and_study_read_6x4TB_as_the_same_disks() -> None:
    # 4TB is 4 × 10^12 bytes everywhere (4T would be 4 × 2^40).
    searched = _plan_json("--disks", "6x4TB", "--top", "1")
    assert searched["disks"] == [4 * 10**12] * 6
    laid_out = _plan_json("--layout", "raidz2", "--disks", "6x4TB")
    assert laid_out["raw_bytes"] == 6 * 4 * 10**12
    toml = CliRunner().invoke(study_cmd.study, ["capacity", "--disks", "6x4TB", "--print-toml"])
    assert toml.exit_code == 0, toml.output
    built = parse_study(toml.output)
    assert (built.disks.count, built.disks.size_bytes) == (6, 4 * 10**12)
    # and the prediction a study report shows is the planner's for the same layout
    predicted = predicted_usable("raidz2", 12, 6, built.disks.size_bytes, "2.3")
    assert predicted == laid_out["usable_bytes"]


def _example_layouts() -> list[tuple[str, str, int, str]]:
    out = []
    for path in sorted(EXAMPLES.glob("*.toml")):
        study = load_study(path)[0]
        if "zfs" not in [str(b) for b in study.factors.get("backend", ["zfs"])]:
            continue
        for level in study.factors["layout"]:
            if str(level) not in GENERIC_LAYOUTS:
                out.append((path.name, str(level), study.disks.count, study.disks.size))
    return out


@pytest.mark.parametrize(("example", "layout", "count", "size"), _example_layouts())
def test_every_example_layout_plans(example: str, layout: str, count: int, size: str) -> None:
    # dRAID needs OpenZFS 2.1+ and a special vdev 0.8+; every other example layout is
    # planned for zfs-fuse (v23).
    version = "2.3" if layout.startswith("draid") or "special" in layout else "v23"
    doc = _plan_json("--layout", layout, "--disks", f"{count}x{size}", "--zfs-version", version)
    # the same vdevs the ZFS backend builds for the study
    want = []
    for v in parse_topology(layout, count):
        want += [("disk", 1)] * v.width if v.kind == "stripe" else [(v.kind, v.width)]
    got = [(_kind(v["type"]), len(v["devices"])) for v in doc["vdevs"]]
    assert got == want, example
    assert all(d == parse_size(size) for v in doc["vdevs"] for d in v["devices"])


def _kind(type_name: str) -> str:
    return "mirror" if type_name.startswith("mirror") else type_name.split(":")[0]


def test_examples_have_zfs_layouts() -> None:
    assert len(_example_layouts()) >= 20  # the parametrized test above is not vacuous


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--layout", "draid1:0d:1s:6x1T"], "0 data disks"),
        (["--layout", "raidz2"], "needs disks"),
        (["--layout", "raidz2:6x4T", "--disks", "6x4T"], "names disks too"),
        (["--disks", "/dev/sdb,/dev/sdc"], "Give their sizes"),
        (["--disks", "5x١٢G"], "ASCII"),
        (["--disks", "99999x1G"], "out of range"),
        (
            ["--layout", "raidz2:6x4T + special mirror:2x1T", "--zfs-version", "v23"],
            "has no special vdevs",
        ),
        (
            ["--layout", "raidz2:6x4T", "--expand-to", "8", "--zfs-version", "2.2"],
            "needs OpenZFS 2.3 or later",
        ),
        (["--layout", "mirror:2x4T", "--expand-to", "3"], "grows one raidz vdev"),
        (["--disks", "6x4T", "--expand-to", "8"], "grows the raidz vdev of one --layout"),
        (["--layout", "raidz2:6x4T", "--slog", "mirror:2x1G"], "write them in the layout"),
        (["--disks", "6x4T", "--special", "raidz1:3x1G"], "refuses raidz1 there"),
        (["--disks", "6x4T", "--slog", "mirror:2"], "gives no device sizes"),
    ],
)
def test_plan_refuses_with_a_paragraph(args: list[str], says: str) -> None:
    res = CliRunner().invoke(plan, args)
    assert res.exit_code != 0
    assert isinstance(res.exception, UsageError) and says in str(res.exception)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--disks", "6x4TB", "--ure", "nan"], "--ure"),
        (["--disks", "6x4TB", "--afr", "inf"], "--afr"),
        (["--disks", "6x4TB", "--top", "-1"], "--top"),
    ],
)
def test_plan_refuses_bad_numbers_as_usage_errors(args: list[str], says: str) -> None:
    """Typed options: click refuses them (exit 2) and names the option."""
    res = CliRunner().invoke(plan, args)
    assert res.exit_code == 2 and says in res.output


def test_layout_with_classes_json() -> None:
    """Class vdevs in `plan --layout --json`: special in SIZE, not in usable; the resilience
    counts the special mirror and the notes say what each class risks."""
    doc = _plan_json(
        "--layout", "raidz2:6x1G + special mirror:2x512M + log 1x1G + spare 1G + cache 1G"
    )
    # raidz2:6x1G = 11 metaslabs of 512 MiB; the special mirror 15 of 32 MiB (see
    # test_planner_classes.py); the log's and the rest's space is in neither figure
    assert doc["size_bytes"] == (11 << 29) + 15 * (32 << 20)
    assert doc["usable_bytes"] == _plan_json("--layout", "raidz2:6x1G")["usable_bytes"]
    assert [c["class"] for c in doc["classes"]] == ["special", "log", "spare", "cache"]
    assert [c["in_size"] for c in doc["classes"]] == [True, False, False, False]
    assert doc["failures_tolerated"] == 1
    assert [v["class"] for v in doc["resilience"]["vdevs"]] == ["data", "special"]
    notes = " ".join(doc["class_notes"])
    assert "the pool is lost" in notes and "cannot be removed from this pool" in notes
    assert "single device" in notes and "hot spare" in notes and "L2ARC" in notes


def test_expand_to_json() -> None:
    doc = _plan_json("--layout", "raidz1:3x1G", "--expand-to", "4")
    e = doc["expansion"]
    # hand figures from test_planner_classes.test_raidz_expansion_by_hand
    assert (e["size_bytes"], e["usable_bytes"]) == (15 << 28, 2547515392)
    assert (e["record_charge_before_bytes"], e["record_charge_after_bytes"]) == (130944, 120032)
    assert (e["width_before"], e["width_after"], e["deflate_ratio_512ths"]) == (3, 4, 341)


def test_search_with_slog_and_special() -> None:
    plain = _plan_json("--disks", "6x4T", "--top", "100")
    res = _plan_json("--disks", "6x4T", "--special", "mirror:2x500G", "--slog", "1x100G",
                     "--top", "100")  # fmt: skip
    assert res["candidates"] and len(res["candidates"]) == len(plain["candidates"])
    for cand in res["candidates"]:
        assert cand["layout"][0].endswith(" + special mirror:2x500G + log stripe:100G")
        # a 2-way special mirror caps what any layout survives at 1 failure
        assert cand["failures_tolerated"] <= 1
    by_layout = {c["layout"][0]: c for c in plain["candidates"]}
    first = res["candidates"][0]
    base = by_layout[first["layout"][0].split(" + special")[0]]
    assert first["usable_bytes"] == base["usable_bytes"]  # special/log add no AVAIL
    assert first["size_bytes"] > base["size_bytes"]  # the special mirror adds SIZE
