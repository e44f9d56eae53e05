"""The aging recipe (factors/aging.py): deterministic for a seed, stops at its fill target,
goes past the asked rounds only for a fragmentation target, and records what it reached.
Run on a directory in tmp with tiny sizes: no pool, no root."""

from __future__ import annotations

from pathlib import Path

import pytest

from poolbench.factors import aging
from poolbench.factors.aging import Op, Plan, Recipe

MiB = 1 << 20


def _ops(seed: int, rounds: int, usable: int = 8 * MiB, fill: int = 80) -> list[list[Op]]:
    plan = Plan(Recipe(seed, fill, rounds), usable)
    return [plan.fill()] + [plan.round() for _ in range(rounds)]


def test_the_same_seed_gives_the_same_operations_and_another_seed_others() -> None:
    assert _ops(7, 3) == _ops(7, 3)
    assert _ops(7, 3) != _ops(8, 3)
    # The first rounds of a longer recipe are the shorter recipe: a layout aged 3 rounds
    # went through exactly what one aged 1 round did, and then more.
    assert _ops(7, 3)[:2] == _ops(7, 1)


def test_each_round_deletes_overwrites_and_refills_to_exactly_the_target() -> None:
    usable = 8 * MiB
    plan = Plan(Recipe(1, 80, 3), usable)
    first = plan.fill()
    target = usable * 80 // 100
    assert {op.kind for op in first} == {"create"}
    assert sum(op.size for op in first) == plan.live_bytes == target
    for _ in range(3):
        before = len(plan.live)
        ops = plan.round()
        kinds = [op.kind for op in ops]
        # deletions first, then in-place overwrites, then creations
        assert kinds == sorted(kinds, key=["delete", "overwrite", "create"].index)
        assert kinds.count("delete") == int(before * aging.DELETE_SHARE)
        assert kinds.count("overwrite") == int((before - kinds.count("delete"))
                                               * aging.OVERWRITE_SHARE)  # fmt: skip
        assert plan.live_bytes == target
        for op in ops:
            if op.kind == "overwrite":  # inside the file
                assert op.offset >= 0 and op.offset + op.size <= plan.live[op.name]


def test_file_sizes_come_from_the_classes_and_small_pools_drop_the_large_ones() -> None:
    sizes = {s for s, _w in aging.SIZE_CLASSES}
    plan = Plan(Recipe(3, 90, 0), 64 * MiB)  # at most 1 MiB per file
    made = [op.size for op in plan.fill()]
    assert all(s in sizes for s in made[:-1])  # the last is cut to land on the target
    assert max(made) <= aging.max_file(64 * MiB) == 1 * MiB
    assert len(made) > 100  # enough files that deletions leave holes


def test_aging_a_directory_reaches_the_fill_and_records_its_age(tmp_path: Path) -> None:
    calls: list[int] = []

    def frag() -> tuple[float | None, str]:
        calls.append(1)
        return None, "none: a plain directory"

    usable = 4 * MiB
    rec = aging.age(tmp_path, usable, Recipe(5, 75, 2), frag)
    root = tmp_path / aging.DIRECTORY
    on_disk = sum(p.stat().st_size for p in root.rglob("f*"))
    assert on_disk == rec["live_bytes"] == usable * 75 // 100
    assert rec["files"] == len(list(root.rglob("f*")))
    assert rec["rounds"] == rec["rounds_asked"] == 2 and len(calls) == 1
    ops = rec["operations"]
    assert ops["delete"] > 0 and ops["overwrite"] > 0
    assert rec["bytes_written"] > rec["live_bytes"]  # rewritten and replaced bytes too
    assert rec["frag_percent"] is None and rec["frag_reached"] is None
    assert rec["frag_how"] == "none: a plain directory"


def test_the_same_seed_leaves_the_same_files(tmp_path: Path) -> None:
    def tree(d: Path) -> dict[str, int]:
        aging.age(d, 2 * MiB, Recipe(11, 60, 2), lambda: (None, ""))
        root = d / aging.DIRECTORY
        return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("f*")}

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert tree(tmp_path / "a") == tree(tmp_path / "b")


def test_a_fragmentation_target_adds_rounds_until_it_is_met_or_capped(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "n").mkdir()
    readings = iter([10.0, 20.0, 31.0, 40.0])
    rec = aging.age(tmp_path / "m", 1 * MiB, Recipe(2, 50, 1, frag_target=30, max_rounds=6),
                    lambda: (next(readings), "zpool get fragmentation"))  # fmt: skip
    assert (rec["rounds"], rec["frag_percent"], rec["frag_reached"]) == (3, 31.0, True)
    # Never reached: stops at the cap and says so.
    rec = aging.age(tmp_path / "n", 1 * MiB, Recipe(2, 50, 1, frag_target=90, max_rounds=3),
                    lambda: (5.0, "zpool get fragmentation"))  # fmt: skip
    assert (rec["rounds"], rec["frag_reached"]) == (3, False)


def test_a_full_filesystem_fails_the_trial_with_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*_a: object, **_k: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(aging, "_write", full)
    with pytest.raises(aging.AgingFailed, match="No space left on device.*Lower the fill"):
        aging.age(tmp_path, 1 * MiB, Recipe(1, 50, 0), lambda: (None, ""))
