"""The fio version floor (workloads/fio.py): derived from the engines the workloads use,
checked before anything is built, refused in one paragraph that says what and why."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from tests.conftest import poolbench

from poolbench.errors import ToolMissingError
from poolbench.workloads import fio
from poolbench.workloads.library import get


def test_versions_are_parsed_from_what_fio_prints() -> None:
    assert fio.parse_version("fio-3.33\n") == (3, 33)
    assert fio.parse_version("fio-3.27-12-gabcdef0") == (3, 27)
    assert fio.parse_version("fio version unknown") is None


@pytest.mark.parametrize("text", ["fio-3.25", "fio-3.26-5-g1", "fio-2.99", "garbage"])
def test_too_old_or_unreadable_fio_is_refused_with_the_reason(text: str) -> None:
    with pytest.raises(ToolMissingError) as exc:
        fio.require_version(text)
    assert "3.27" in exc.value.problem and "filedelete" in exc.value.problem
    assert "Install fio 3.27" in exc.value.fix


@pytest.mark.parametrize("text", ["fio-3.27", "fio-3.33", "fio-4.0"])
def test_new_enough_fio_passes(text: str) -> None:
    assert fio.require_version(text + "\n") == text


def test_the_floor_is_the_engine_the_delete_workloads_need() -> None:
    # If the delete workloads stop using filedelete, the floor's reason must be revisited.
    assert get("meta-delete-seq").fio["ioengine"] == "filedelete"
    assert fio.MIN_FIO == (3, 27)


def test_a_run_with_an_old_fio_stops_before_building_anything(tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "fio"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho fio-3.25\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    study = tmp_path / "s.toml"
    study.write_text('name = "old-fio"\n[disks]\ncount = 1\nsize = "128M"\n'
                     '[factors]\nbackend = ["zfs"]\nlayout = ["stripe"]\n'
                     '[workloads]\nnames = ["seq-write"]\nsize = "8M"\n')  # fmt: skip
    env = {"PATH": f"{fake.parent}:{os.environ['PATH']}"}
    p = poolbench("run", str(study), "--dry-run", "--db", str(tmp_path / "r.db"), env=env)
    assert p.returncode != 0
    assert "needs fio 3.27 or newer" in p.stderr and "fio-3.25" in p.stderr
    assert "Traceback" not in p.stderr
    assert not (tmp_path / "r.db").exists()
