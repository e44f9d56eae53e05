"""Every example study loads and expands as expected; every invalid one fails precisely."""

from __future__ import annotations

from pathlib import Path

import pytest

from poolbench.errors import UsageError
from poolbench.study import matrix
from poolbench.study.model import load, parse

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

EXPECTED_TRIALS = {
    "btrfs-profiles.toml": 3 * 3,
    # The built-in studies' files (tests/test_studies_builtin.py checks each against
    # `poolbench study NAME`).
    "parity.toml": 3 * 3,
    "ashift.toml": 2 * 3 * 3,
    "vdev-source.toml": 3 * 3,
    "mirror.toml": 3 * 3,
    "recordsize.toml": 3 * 3,
    "compression.toml": 4 * 3 * 3,
    "fs-compare.toml": 10 * 3,  # (zfs, btrfs, md+ext3, md+ext4, md+xfs) × (parity1, parity2)
    "concurrency.toml": 2 * 3,
    "fill.toml": 5 * 3,
    "resilver.toml": 3 * 3,
    "width.toml": 7 * 3,
    "capacity.toml": 5 * 2 * 2,
    "sync-slog.toml": 3 * 3 * 3,
    "geometry.toml": 4 * 2 * 3,  # on a dataset and a zvol
    "qd-curve.toml": 2 * 3,
    "special.toml": 4 * 3,
    "expand.toml": 1 * 3,
    "volblocksize.toml": 2 * 3 * 3,
    "database.toml": 2 * 3 * 2 * 2 * 3,  # layout × recordsize × full_page_writes × logbias
    "l2arc.toml": 2 * 3,  # the pool alone and with a cache device
    "aging.toml": 2 * 3 * 3,  # mirror pairs and raidz1 × 0, 1, 3 aging rounds
    "slow-disk.toml": 4 * 2 * 3,  # mirror:2, raidz1, raidz2, dRAID × with/without a slow disk
    "dedup.toml": 1 * 2 * 3,  # mirror:2 × dedup off, on
    "prefetch.toml": 1 * 2 * 3,  # mirror:2 × prefetch on, off
}

INVALID = {
    "unknown-key.toml": ":2: replicate: unknown key",
    "unknown-factor.toml": "unknown factor 'blocksize'",
    "no-layout.toml": "needs a 'layout' factor",
    "bad-toml.toml": "not valid TOML",
    "unknown-workload.toml": "Unknown workload 'sequential-read'",
    "too-few-replicates.toml": ":2: replicates: must be at least 2.",
    "bad-size.toml": "'lots' is not a size",
    "duplicate-level.toml": "factor 'layout' lists a level twice",
}


def test_every_example_is_listed_here() -> None:
    assert {p.name for p in EXAMPLES.glob("*.toml")} == set(EXPECTED_TRIALS)
    assert {p.name for p in (EXAMPLES / "invalid").glob("*.toml")} == set(INVALID)


@pytest.mark.parametrize("name", sorted(EXPECTED_TRIALS))
def test_example_loads_and_expands(name: str) -> None:
    study, text = load(EXAMPLES / name)
    trials = matrix.plan(study, seed=1)
    assert len(trials) == EXPECTED_TRIALS[name]
    assert text.startswith("#")


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_example_fails_with_its_message(name: str) -> None:
    with pytest.raises(UsageError) as info:
        load(EXAMPLES / "invalid" / name)
    assert INVALID[name] in str(info.value)
    assert name in str(info.value)  # the message names the file


def test_order_is_interleaved_and_reproducible() -> None:
    study = parse('name="x"\nreplicates=4\n[factors]\nlayout=["raidz1","raidz2","raidz3"]\n')
    a, b = matrix.plan(study, 5), matrix.plan(study, 5)
    assert [t.config.key for t in a] == [t.config.key for t in b]
    # Every round holds every configuration once: replicates are interleaved, not batched.
    for r in range(4):
        assert sorted(t.config.key for t in a if t.replicate == r) == sorted(
            c.key for c in matrix.configs(study)
        )
    assert [t.config.key for t in matrix.plan(study, 6)] != [t.config.key for t in a]


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="Cannot read the study file"):
        load(tmp_path / "nope.toml")
