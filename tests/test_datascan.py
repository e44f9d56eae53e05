"""The `plan --data` scanner on hostile trees: symlink loops, hard links, sparse files,
unreadable directories, files changing during the scan, sampling (no root needed)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from poolbench.errors import UsageError
from poolbench.system import datascan
from poolbench.system.datascan import scan_tree


def test_sizes_links_and_loops(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one").write_bytes(b"x" * 1000)  # 2 units of 512 B
    (tmp_path / "a" / "two").write_bytes(b"x" * 5000)  # 10 units
    (tmp_path / "empty").write_bytes(b"")
    os.link(tmp_path / "a" / "two", tmp_path / "two-again")  # the same file, counted once
    os.symlink(".", tmp_path / "a" / "loop")  # a symlink loop: never followed
    os.symlink(tmp_path / "a" / "one", tmp_path / "to-one")
    r = scan_tree(tmp_path)
    assert r.counts == {0: 1, 2: 1, 10: 1}
    assert r.logical_bytes == 6000
    assert r.notes["hardlinks_skipped"] == 1
    assert r.notes["symlinks_skipped"] == 2
    assert r.notes["dirs"] == 2


def test_sparse_file_is_logical_size_with_allocation_stated(tmp_path: Path) -> None:
    with open(tmp_path / "sparse", "wb") as fh:
        fh.truncate(10 << 20)  # 10 MiB of hole
    (tmp_path / "dense").write_bytes(os.urandom(8192))
    r = scan_tree(tmp_path)
    assert r.logical_bytes == (10 << 20) + 8192
    assert r.allocated_bytes < 1 << 20  # the hole is not allocated on the scanned filesystem
    assert r.notes["sparse_files"] == 1


def test_unreadable_directory_is_counted_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # root reads any directory whatever its mode, so the refusal is what scandir raises
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "f").write_bytes(b"x")
    (tmp_path / "ok").write_bytes(b"y" * 600)
    real = os.scandir

    def scandir(path: str) -> object:
        if path.endswith("locked"):
            raise PermissionError(13, "Permission denied", path)
        return real(path)

    monkeypatch.setattr(datascan.os, "scandir", scandir)
    r = scan_tree(tmp_path)
    assert r.counts == {2: 1}
    assert r.notes["unreadable"] == 1
    assert r.notes["unreadable_examples"] == (str(tmp_path / "locked"),)


def test_a_file_changed_during_the_scan_is_reported(tmp_path: Path) -> None:
    (tmp_path / "old").write_bytes(b"x")
    (tmp_path / "new").write_bytes(b"x")
    future = time.time() + 3600  # written after the scan began, as a busy tree's file is
    os.utime(tmp_path / "new", (future, future))
    assert scan_tree(tmp_path).notes["changed_during_scan"] == 1


def test_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such|No such"):
        scan_tree(tmp_path / "nope")


def test_sampling_states_its_error_and_covers_the_total(tmp_path: Path) -> None:
    # 10000 files of 1..4000 bytes; past 1000 one in 10 is measured. The estimate of the total
    # must lie within its stated 95% error of the exact total (seeded: deterministic).
    sizes = [(i * 7919) % 4000 + 1 for i in range(10000)]
    for i, s in enumerate(sizes):
        (tmp_path / f"f{i}").write_bytes(b"z" * s)
    exact = sum(sizes)
    r = scan_tree(tmp_path, sample_over=1000, sample_every=10)
    assert r.notes["sampled_files"] > 800
    err = float(r.notes["total_error_95"])  # type: ignore[arg-type]
    assert 0 < err < 0.1  # about 1.96 × sqrt(90 × 900 × E[x²]) / 20 MB = 6.4%
    assert abs(r.logical_bytes - exact) <= err * r.logical_bytes
    assert sum(r.counts.values()) == 1000 + 10 * int(r.notes["sampled_files"])  # type: ignore[call-overload]


def test_the_root_may_be_a_symlink_to_the_tree(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f").write_bytes(b"x" * 513)  # 2 units
    os.symlink(tmp_path / "real", tmp_path / "link")
    assert scan_tree(tmp_path / "link").counts == {2: 1}


def test_progress_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for d in range(3):
        (tmp_path / f"d{d}").mkdir()
        (tmp_path / f"d{d}" / "f").write_bytes(b"x" * 100)
    monkeypatch.setattr(datascan, "PROGRESS_SECONDS", 0.0)  # every directory, not every 2 s
    seen: list[tuple[int, int, int]] = []
    scan_tree(tmp_path, progress=lambda *a: seen.append(a))
    assert seen and seen[-1] == (3, 300, 4)  # files, bytes, directories (the root too)
