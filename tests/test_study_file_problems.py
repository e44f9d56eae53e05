"""A study file with several mistakes gets every one found in one pass, each with its file
and line, in file order; settings that cannot work together likewise."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import poolbench

from poolbench.errors import UsageError
from poolbench.study.model import parse

MANY = """name = "bad"
replicate = 3
[disks]
count = 3
size = "1Q"
[factors]
layout = ["raid2", "raidz1"]
ashift = [12]
[workloads]
names = ["seq-wrte", "seq-read"]
size = "2Q"
"""


def _problem_lines(text: str, origin: str) -> list[str]:
    with pytest.raises(UsageError) as exc:
        parse(text, origin)
    assert exc.value.problem.startswith("The study file is not valid:\n")
    return [x.strip() for x in exc.value.problem.splitlines()[1:]]


def test_every_validation_problem_is_reported_with_its_line_in_file_order() -> None:
    lines = _problem_lines(MANY, "s.toml")
    assert [x.split(":")[1] for x in lines] == ["2", "5", "6", "10", "11"]
    assert lines[0] == (
        "s.toml:2: replicate: unknown key (a typo?); remove it or check the spelling "
        "against examples/."
    )
    assert lines[1].startswith("s.toml:5: disks.size: The size '1Q' is not a size.")
    assert "'raid2' is not a vdev type. Did you mean 'raidz2'?" in lines[2]
    assert lines[3].startswith("s.toml:10: workloads.names: Unknown workload 'seq-wrte'.")
    assert lines[4].startswith("s.toml:11: workloads.size: The working set '2Q' is not a size.")
    assert not any(x.endswith("..") for x in lines)


def test_every_consistency_problem_is_reported_with_its_line() -> None:
    text = (
        'name = "c"\nreplicates = 8\nmax_replicates = 4\n[disks]\ncount = 3\nsize = "10M"\n'
        '[factors]\nlayout = ["raidz1"]\n[workloads]\nsize = "4G"\n'
    )
    lines = _problem_lines(text, "c.toml")
    assert lines == [
        "c.toml:2: replicates = 8 is more than max_replicates = 4.",
        "c.toml:6: the disk size 10M (10,485,760 bytes) is under ZFS's minimum device size "
        "of 64 MiB (67,108,864 bytes, SPA_MINDEVSIZE): zpool create would refuse every pool "
        "of this study.",
        # raidz1 over 3 disks of 10 MiB: at most 30 MiB of raw space
        "c.toml:10: the working set 4G does not fit in layout 'raidz1' on 3 x 10M disks "
        "(about 30 MiB usable).",
    ]


def test_one_consistency_problem_is_one_line_with_its_fix() -> None:
    text = 'name = "c"\nreplicates = 8\nmax_replicates = 4\n[factors]\nlayout = ["raidz1"]\n'
    with pytest.raises(UsageError) as exc:
        parse(text, "c.toml")
    assert exc.value.problem == "c.toml:2: replicates = 8 is more than max_replicates = 4."
    assert exc.value.fix == "Raise max_replicates to at least replicates, or lower replicates."


def test_a_layout_typo_is_left_to_the_backend_when_others_share_the_study() -> None:
    # md and btrfs name their own levels (raid5...): only a zfs-only study is checked here
    text = 'name = "m"\n[factors]\nbackend = ["zfs", "md"]\nlayout = ["raid5"]\n'
    assert parse(text, "m.toml").factors["layout"] == ["raid5"]


def test_the_cli_prints_them_all_and_exits_non_zero(tmp_path: Path) -> None:
    study = tmp_path / "bad.toml"
    study.write_text(MANY)
    p = poolbench("run", str(study), "--dry-run", "--db", str(tmp_path / "r.db"))
    assert p.returncode != 0
    assert "Traceback" not in p.stderr
    for line in (2, 5, 6, 10, 11):
        assert f"{study}:{line}: " in p.stderr
