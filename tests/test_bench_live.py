"""`bench` on a filesystem that holds data (issue 42 item 5): before it writes, it says how much
free space it needs and where it will write, refuses when the space is not there, writes only
in its own directory and removes it (the user's files are byte for byte what they were, and
nothing else is left), and records the fill level it ran at. Real fio on a directory of the
test's own; no pool, no device."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from tests.conftest import needs_fio

from poolbench.engine.bench_run import BenchRun
from poolbench.engine.replicates import policy
from poolbench.engine.subject import Options
from poolbench.errors import UsageError
from poolbench.store import fingerprints
from poolbench.store.db import Store
from poolbench.system.runner import LocalRunner
from poolbench.workloads.library import parse_list

MiB = 1 << 20


@contextmanager
def _no_bar() -> Iterator[Callable[[str, int, int], None]]:
    yield lambda what, done, total: None


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}  # fmt: skip


@needs_fio
@pytest.mark.usefixtures("machine")  # it drops the page cache: the machine's chain
def test_a_bench_among_the_users_files_says_its_space_and_leaves_them_alone(
    tmp_path: Path,
) -> None:
    target = tmp_path / "live"
    (target / "photos").mkdir(parents=True)
    (target / "photos" / "a.jpg").write_bytes(os.urandom(3 * MiB))
    (target / "notes.txt").write_text("the user's\n")
    before = _digest(target)
    store = Store(tmp_path / "r.db")
    said: list[str] = []
    options = Options(parse_list("seq-write,seq-read"), size=4 * MiB, min_window_s=0,
                      stop=policy(2, 2, 0.5), seed=1)  # fmt: skip
    done = BenchRun(LocalRunner(), store, target, options).run(
        _no_bar, lambda r, k: None, said.append
    )
    (text,) = said
    ws = done.session.working_set
    assert ws is not None and ws.needed_bytes == int(4 * MiB * 1.1)
    assert text.startswith(f"needs {ws.needed_bytes / MiB:,.0f} MiB free (working set 4 MiB")
    assert f"writes only in {target}/.poolbench-run{done.run_id}-{os.getpid()}" in text
    assert _digest(target) == before  # the user's files as they were, nothing else left
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt", "photos"]
    (fp,) = fingerprints.of_run(store, done.run_id)
    st = os.statvfs(target)
    assert fp.fingerprint.fill == pytest.approx(1 - st.f_bfree / st.f_blocks, abs=0.01)
    assert done.session.fingerprint == fp.fingerprint


def test_below_the_space_it_needs_it_refuses_before_writing(tmp_path: Path) -> None:
    target = tmp_path / "live"
    target.mkdir()
    (target / "keep").write_text("x")
    free = os.statvfs(target).f_bavail * os.statvfs(target).f_frsize
    options = Options(parse_list("seq-write"), size=(free // MiB + 1) * MiB, min_window_s=0,
                      stop=policy(2, 2, 0.5), seed=1)  # fmt: skip
    said: list[str] = []
    with pytest.raises(UsageError, match="Not enough free space") as exc:
        BenchRun(LocalRunner(), Store(tmp_path / "r.db"), target, options).run(
            _no_bar, lambda r, k: None, said.append
        )
    assert "needs" in str(exc.value) and said == []
    assert [p.name for p in target.iterdir()] == ["keep"]
