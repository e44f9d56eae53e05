"""bench/validate_speed.py without root: the studies it writes are valid studies, and its
predicted column is the planner's figure in the unit poolbench stores."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from poolbench.study.model import parse

MiB = 1 << 20


@pytest.fixture(scope="module")
def vs() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "bench" / "validate_speed.py"
    spec = importlib.util.spec_from_file_location("validate_speed", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["validate_speed"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_every_layout_and_pass_is_a_valid_study(vs: ModuleType) -> None:
    args = vs.parse_args([])
    for name, (layout, _) in vs.LAYOUTS.items():
        for pass_name, (workloads, recordsize, cache) in vs.PASSES.items():
            study = parse(vs.study_text(name, layout, pass_name, args))
            assert study.factors["layout"] == [layout]
            assert study.factors["recordsize"] == [recordsize]
            assert study.factors["primarycache"] == [cache]
            assert study.workloads.names == list(workloads)


def test_predicted_column_is_in_stored_units(vs: ModuleType) -> None:
    args = vs.parse_args(["--mibps", "25", "--iops", "200"])
    preds = vs.predicted("raidz2:4", args)
    # raidz2 of 4, 128K records, transfer-bound: reads draw on all 4 members (4 × 25 MiB/s);
    # writes 64 data of 66 sectors per block spread evenly: 4 × 25 × 32/33.
    got = vs.row("raidz2:4", "seq-read", {"mean": 100.0, "device_per_app": 1.0, "warnings": []},
                 preds["seq-read"])  # fmt: skip
    assert got["predicted"] == 100.0 and got["ratio"] == 1.0 and got["within"]
    w = vs.row("raidz2:4", "seq-write", {"mean": 40.0, "device_per_app": 2.09, "warnings": []},
               preds["seq-write"])  # fmt: skip
    assert w["predicted"] == pytest.approx(4 * 25 * 32 / 66, abs=0.05)
    # The planner's allocation table: 66 sectors for 32 → 2.0625.
    assert w["planner_write_amp"] == pytest.approx(66 / 32, abs=1e-3)
    # Outside ±15 % is flagged.
    far = vs.row("raidz2:4", "seq-read", {"mean": 50.0, "device_per_app": 1.0, "warnings": []},
                 preds["seq-read"])  # fmt: skip
    assert not far["within"]


def test_member_shares_and_device_reads_per_read(vs: ModuleType) -> None:
    # Two replicates of a 4-member random read, as `poolbench export --json` gives them: the
    # members' read requests and bytes (guards JSON) and the application's reads (ops).
    def row(ios: list[int], kib: list[int], ops: int) -> dict[str, object]:
        members = {f"loop{i}": {"read_ios": n, "read_bytes": k << 10}
                   for i, (n, k) in enumerate(zip(ios, kib, strict=True))}  # fmt: skip
        return {"ops": ops, "guards": {"members": members}}

    rows = [row([207, 236, 267, 289], [85, 213, 287, 415], 500),
            row([207, 236, 267, 289], [85, 213, 287, 415], 500)]  # fmt: skip
    assert vs._member_read_shares(rows, "read_ios") == [0.207, 0.236, 0.267, 0.289]
    assert vs._member_read_shares(rows, "read_bytes") == [0.085, 0.213, 0.287, 0.415]
    assert vs._device_reads_per_read(rows) == pytest.approx(1998 / 1000)
    # No member record (files, or a store from before read_ios): no figure, not zero.
    assert vs._member_read_shares([{"ops": 5, "guards": {}}], "read_ios") == []
    assert vs._device_reads_per_read([{"ops": 5, "guards": "{}"}]) is None
    got = vs.row(
        "raidz2:4",
        "rand-read-4k",
        {"mean": 480.0, "device_per_app": 4.4, "warnings": []},
        vs.predicted("raidz2:4", vs.parse_args([]))["rand-read-4k"],
    )
    assert got["member_request_shares"] == [] and got["device_reads_per_read"] is None
