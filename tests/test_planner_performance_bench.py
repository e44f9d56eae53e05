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
