"""`[disks] model` in a study file: a preset by name or a table of overrides, validated with
located errors, refused beside `cap` and on sources that are not loop devices; the dry run
shows the emulators started before the loop devices and stopped after them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import poolbench

from poolbench.emulate.model import PRESETS, HddParams
from poolbench.errors import UsageError
from poolbench.safety.journal import Journal
from poolbench.study.model import parse
from poolbench.system.runner import RecordingRunner

STUDY = """name = "s"
[disks]
count = 2
size = "256M"
{disks}
[factors]
backend = ["btrfs"]
layout = ["raid1"]
[workloads]
names = ["rand-read-4k"]
size = "64M"
"""


def study(disks: str) -> str:
    return STUDY.format(disks=disks)


def test_a_preset_by_name() -> None:
    s = parse(study('model = "hdd-7200"'))
    assert s.disks.model is not None
    assert s.disks.model.params() == PRESETS["hdd-7200"]
    assert "emulated disks with a head" in s.disks.describe()
    assert "7200 rpm, seek 0.23/7.5/17.06 ms" in s.disks.describe()


def test_a_table_overrides_the_presets_figures_and_keeps_the_rest() -> None:
    s = parse(study('model = {name = "hdd-7200", rpm = 5400, inner_mb_s = 60}'))
    assert s.disks.model is not None
    assert s.disks.model.params() == HddParams(rpm=5400, inner_mb_s=60)
    table = study("").replace("[factors]", "[disks.model]\navg_seek_ms = 9\n[factors]")
    t = parse(table)  # the table form: the preset by default
    assert t.disks.model is not None
    assert t.disks.model.params() == HddParams(avg_seek_ms=9)


@pytest.mark.parametrize(
    ("disks", "line", "words"),
    [
        ('model = "hdd-5400"', 5, "disks.model.name: must be 'hdd-7200'"),
        ("model = {avg_seek_ms = 20}", 5, "the seek times must grow"),
        ("model = {avg_seek_ms = 5}", 5, "never falls with distance"),
        ("model = {rpm = 100}", 5, "disks.model.rpm: must be at least 3600"),
        ("model = {colour = 1}", 5, "disks.model.colour: unknown key"),
        ('model = "hdd-7200"\ncap = 20', 2, "model and cap are two kinds of emulated disk"),
        ('model = "hdd-7200"\nsource = "files"', 2, 'model needs source = "loop"'),
    ],
)
def test_bad_models_are_refused_with_their_line(disks: str, line: int, words: str) -> None:
    with pytest.raises(UsageError) as err:
        parse(study(disks), "s.toml")
    assert f"s.toml:{line}: " in str(err.value)
    assert words in str(err.value)


def test_the_journal_undoes_an_emulator_after_its_loop_device(tmp_path: Path) -> None:
    runner = RecordingRunner(dry_run=True)
    j = Journal(runner)
    j.emulated_disk_intent(str(tmp_path / "seek0"))
    j.loop_intent(str(tmp_path / "seek0" / "disk.img"))
    j.loop_created("/dev/loop9", str(tmp_path / "seek0" / "disk.img"))
    assert j.teardown() == []
    assert runner.argvs == [
        ("losetup", "--detach", "/dev/loop9"),
        ("umount", str(tmp_path / "seek0")),
    ]


def test_the_dry_run_starts_emulators_before_loops_and_stops_them_after(tmp_path: Path) -> None:
    f = tmp_path / "s.toml"
    f.write_text(study('model = {name = "hdd-7200", rpm = 5400}'))
    r = poolbench("run", str(f), "--dry-run", "--db", str(tmp_path / "db"),
                  "--scratch-dir", str(tmp_path / "scratch"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = r.stdout + r.stderr
    lines = [x.split("would run: ", 1)[1] for x in out.splitlines() if "would run: " in x]
    servers = [x for x in lines if "-m poolbench.emulate.server" in x]
    assert len(servers) == 2  # one trial, two disks
    params = json.loads(servers[0].split("--params ")[1].split(" --seed")[0].strip("'"))
    assert HddParams.from_dict(params) == HddParams(rpm=5400)
    assert "--size 268435456" in servers[0]

    def where(prefix: str) -> list[int]:
        return [i for i, x in enumerate(lines) if x.startswith(prefix)]

    started, looped = where(servers[0].split()[0]), where("losetup --find")
    detached, stopped = where("losetup --detach"), where("umount " + str(tmp_path / "scratch"))
    assert max(started) < min(looped) and max(detached) < min(
        i for i in stopped if "seek" in lines[i]
    )
    assert [lines[i].rsplit("/", 1)[1] for i in stopped if "seek" in lines[i]] == ["seek1", "seek0"]
    assert "mkfs.btrfs -f -q -L" in out and "/dev/loop-for-seek0 /dev/loop-for-seek1" in out
