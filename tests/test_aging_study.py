"""`poolbench study aging` without pools: its study file on each ZFS, the trial's aging step
(engine/trial.findings_for on a directory with a stated usable size), the facts read back
from the stored record, and the notes computed from them. The stacks' fragmentation
figures are parsed from their real output."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from poolbench.backends import fragmentation as frag
from poolbench.backends.base import Pool, PoolSpec
from poolbench.engine import trial
from poolbench.engine.records import TrialConfig
from poolbench.engine.subject import Options
from poolbench.errors import Unsupported, UsageError
from poolbench.factors import aging
from poolbench.safety.journal import Journal
from poolbench.store.factrows import FactRow
from poolbench.store.facts import facts_from_records
from poolbench.study import matrix
from poolbench.study.builtin import aging as study
from poolbench.study.builtin import registry
from poolbench.study.builtin.context import Context
from poolbench.study.estimate import estimate
from poolbench.study.model import parse
from poolbench.system.runner import RecordingRunner
from poolbench.workloads.library import parse_list

MiB = 1 << 20

E2FREEFRAG = """Device: /dev/md/pb1
Blocksize: 4096 bytes
Total blocks: 262144
Free blocks: 52000 (19.8%)

HISTOGRAM OF FREE EXTENT SIZES:
Extent Size Range :  Free extents   Free Blocks  Percent
    4K...    8K-  :          1000          1000    1.92%
   64K...  128K-  :           100          3000    5.77%
    1M...    2M-  :            40         16000   30.77%
   16M...   32M-  :             4         32000   61.54%
"""


def test_fragmentation_figures_read_as_openzfs_weighs_free_space() -> None:
    assert [frag.zfs_percent(v) for v in ("12", "12%", "-", "", None, "250")] == [
        12.0, 12.0, None, None, None, None,
    ]  # fmt: skip
    # OpenZFS's table: a 4K free segment counts 95%, 64K 60%, 1M 20%, 16M and larger 0%.
    assert [frag.frag_weight(s) for s in (4096, 65536, MiB, 16 * MiB, 1 << 40)] == [
        95, 60, 20, 0, 0,
    ]  # fmt: skip
    want = (95 * 1000 + 60 * 3000 + 20 * 16000 + 0 * 32000) / 52000
    assert frag.e2freefrag_percent(E2FREEFRAG) == round(want, 1) == 11.4
    assert frag.e2freefrag_percent("Device: x\nno histogram\n") is None


def test_the_study_file_ages_both_layouts_at_80_percent() -> None:
    ctx = Context(4, "1G", dialect="openzfs")
    s = parse(registry.study_text("aging", ctx))
    assert s.factors["aging"] == [0, 1, 3] and s.factors["fill"] == [80]
    assert s.factors["layout"] == ["mirror:2+mirror:2", "raidz1"]
    assert len(matrix.configs(s)) == 6 and "frag_target" not in s.factors
    # The aging is in the estimate: 3 rounds take longer than none.
    zero = parse(registry.study_text("aging", Context(4, "1G", options={"levels": "0"})))
    three = parse(registry.study_text("aging", Context(4, "1G", options={"levels": "3"})))
    assert estimate(three).seconds > estimate(zero).seconds


def test_zfs_fuse_says_fragmentation_is_not_recorded_and_refuses_a_target() -> None:
    ctx = Context(4, "1G", dialect="zfs-fuse")
    registry.build("aging", ctx)
    assert any("no fragmentation property" in line for line in ctx.said)
    with pytest.raises(Unsupported, match="zfs-fuse .* does not have; nothing was created"):
        registry.build("aging", Context(4, "1G", dialect="zfs-fuse", options={"frag": "30"}))
    s = parse(registry.study_text("aging", Context(4, "1G", options={"frag": "30"})))
    assert s.factors["frag_target"] == [30]
    for bad in ({"fill": "99"}, {"frag": "0"}, {"levels": "0,51"}):
        with pytest.raises(UsageError):
            registry.build("aging", Context(4, "1G", options=bad))


def test_a_frag_target_without_aging_is_refused() -> None:
    text = ('name = "x"\n[disks]\ncount = 3\nsize = "1G"\n[factors]\nlayout = ["raidz1"]\n'
            "frag_target = [30]\n")  # fmt: skip
    with pytest.raises(UsageError, match="'frag_target' needs an 'aging' factor"):
        parse(text)


class _Backend:
    name = "fake"

    def __init__(self) -> None:
        self.reads = 0

    def free_fragmentation(self, pool: Pool) -> tuple[float | None, str]:
        self.reads += 1
        return 7.0, "fake reading"


def test_the_trial_ages_its_pool_instead_of_prefilling_and_records_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = PoolSpec("zfs", "raidz1", (), "pbt1", tmp_path)
    usable = 40 * MiB  # room for the working set on top of 50%: check_room's rule
    # statfs of tmp would be the host's free space: the room for files is stated instead.
    monkeypatch.setattr(aging, "available", lambda _mnt: usable)
    pool = Pool(spec, tmp_path, [], {"usable_bytes": 999 * MiB})
    cfg = matrix.Config((("backend", "zfs"), ("layout", "raidz1"), ("aging", "2"),
                         ("fill", "50")))  # fmt: skip
    options = Options(workloads=parse_list("seq-write"), size=1 * MiB, seed=42)
    backend = _Backend()
    runner = RecordingRunner()
    findings = trial.findings_for(runner, Journal(runner, None), backend, pool,
                                  TrialConfig(cfg, 0, 0), options)  # type: ignore[arg-type]  # fmt: skip
    rec = findings.other["aging"]
    assert "fill" not in findings.other  # aged to the level, not filled in one pass
    assert (rec["rounds"], rec["seed"], rec["fill_percent_asked"]) == (2, 42, 50)
    assert rec["live_bytes"] == usable // 2 and rec["usable_bytes"] == usable
    assert backend.reads == 1 and rec["achieved_percent"] == 0.0  # statfs stated: no change
    assert (rec["frag_percent"], rec["frag_how"]) == (7.0, "fake reading")
    # Too full for the working set: refused before a byte is written.
    small = Pool(spec, tmp_path / "s", [], {})
    monkeypatch.setattr(aging, "available", lambda _mnt: 24 * MiB)
    with pytest.raises(UsageError, match="too little for a 1 MiB working set"):
        aging.age_pool(backend, small, dict(cfg.levels), 1 * MiB, 1)  # type: ignore[arg-type]


# -- facts and notes --------------------------------------------------------------------------
def _age(rounds: int, fill: float, frag_pct: float | None = None) -> dict[str, Any]:
    how = "none: zfs-fuse (pool version 23) has no fragmentation property"
    return {"rounds": rounds, "rounds_asked": rounds, "fill_percent_asked": 80,
            "achieved_percent": fill, "frag_percent": frag_pct, "frag_how": how}  # fmt: skip


def _rows(values: dict[tuple[str, int], list[float]]) -> list[FactRow]:
    rows = []
    for (layout, n), vals in values.items():
        key = f"backend=zfs layout={layout} aging={n} fill=80"
        for rep, v in enumerate(vals):
            rows.append(FactRow(config=key, workload="seq-write", replicate=rep, value=v,
                                guards={"aging": _age(n, 80.4 + n)}))  # fmt: skip
    return rows


def test_notes_state_each_age_each_fall_and_a_ranking_change_with_intervals() -> None:
    ctx = Context(4, "1G", dialect="zfs-fuse", options={"levels": "0,3"})
    meta = {"study_text": registry.study_text("aging", ctx)}
    pairs, raidz = "mirror:2+mirror:2", "raidz1"
    rows = _rows({(pairs, 0): [100.0, 101.0, 99.0], (raidz, 0): [120.0, 121.0, 119.0],
                  (pairs, 3): [90.0, 91.0, 89.0], (raidz, 3): [60.0, 61.0, 59.0]})  # fmt: skip
    facts = facts_from_records(meta, rows)
    ages = facts.configs[0].ages
    assert [(a.rounds, a.fill_achieved) for a in ages] == [(0, 80.4)] * 3
    lines = study.notes(ctx, facts)
    text = "\n".join(lines)
    assert "  raidz1 aging=3: 3 round(s); fill 80% asked, 83.4–83.4% reached (statfs)" in text
    assert "fragmentation: none: zfs-fuse (pool version 23)" in lines[0]
    # raidz1 fell from 120 to 60: 2.00x slower, with its Fieller interval
    fall = next(line for line in lines if line.startswith("  raidz1: aged 3"))
    assert "2.00× slower (CI 0.49–0.52×)" in fall
    assert "  aged 0: raidz1 first, vs mirror:2+mirror:2: 1.20× faster" in text
    assert f"ranking changed at 3 round(s): {pairs} overtook raidz1" in text
    assert "not a change they show" not in text and "seq-read" not in text


def test_a_ranking_flip_inside_the_noise_is_not_called_a_change() -> None:
    ctx = Context(4, "1G", dialect="zfs-fuse", options={"levels": "0,1"})
    meta = {"study_text": registry.study_text("aging", ctx)}
    pairs, raidz = "mirror:2+mirror:2", "raidz1"
    rows = _rows({(pairs, 0): [100.0, 120.0, 80.0], (raidz, 0): [101.0, 121.0, 81.0],
                  (pairs, 1): [101.0, 121.0, 81.0], (raidz, 1): [100.0, 120.0, 80.0]})  # fmt: skip
    lines = study.notes(ctx, facts_from_records(meta, rows))
    flip = [line for line in lines if "ranking changed" in line]
    assert len(flip) == 1 and flip[0].endswith("not a change they show")


def test_a_frag_target_where_no_fragmentation_is_reported_is_refused() -> None:
    aging.check("zfs", "openzfs", {"aging": "1", "frag_target": "30"})
    aging.check("btrfs", "", {"aging": "1"})
    for backend, dialect, who in (("zfs", "zfs-fuse", "zfs-fuse (pool version 23)"),
                                  ("btrfs", "", "the btrfs backend")):  # fmt: skip
        with pytest.raises(Unsupported, match=f"which {re.escape(who)} does not report"):
            aging.check(backend, dialect, {"aging": "1", "frag_target": "30"})
