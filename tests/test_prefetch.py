"""The prefetch factor and study without a pool: zfs_prefetch_disable set for a trial,
journaled first and put back by the teardown or `cleanup` (an injected sysfs root), read
back after each measurement; the refusals before anything is built; the study's
configurations, its dry run and its notes. The guest tier runs it on OpenZFS
(tests/guest/test_openzfs_prefetch.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.test_l2arc import zfs_answers

from poolbench.engine import cleanup
from poolbench.errors import EXIT_UNSUPPORTED, PoolbenchError, Unsupported, UsageError
from poolbench.factors import prefetch
from poolbench.factors import registry as factors
from poolbench.safety.journal import Journal
from poolbench.store.factrows import FactRow
from poolbench.store.facts import ConfigFacts, StudyFacts
from poolbench.study.builtin import prefetch as study
from poolbench.study.builtin import registry
from poolbench.study.builtin.context import Context
from poolbench.system import modparams
from poolbench.system.runner import RecordingRunner

GiB = 1 << 30


def _host(tmp_path: Path, value: int) -> Path:
    """A sysfs parameters directory whose zfs_prefetch_disable holds `value`."""
    root = tmp_path / "parameters"
    root.mkdir(exist_ok=True)
    (root / prefetch.PARAM).write_text(f"{value}\n")
    return root


def _journal(tmp_path: Path, name: str = "run1-pid99999999-trial0.jsonl") -> Journal:
    return Journal(RecordingRunner(), tmp_path / name)


@pytest.mark.parametrize(("host", "level", "during"), [(0, "off", 1), (1, "on", 0)])
def test_the_host_value_is_changed_journaled_first_and_put_back_by_teardown(
    tmp_path: Path, host: int, level: str, during: int
) -> None:
    root = _host(tmp_path, host)
    journal = _journal(tmp_path)
    done = prefetch.apply(journal, level, root)
    assert modparams.read(prefetch.PARAM, root) == during
    assert done["disable"] == during and done["host_had"] == host
    (entry,) = Journal.load(RecordingRunner(), journal.path).entries
    assert entry["kind"] == "param" and entry["name"] == prefetch.PARAM
    assert (entry["original"], entry["value"]) == (host, during)
    assert prefetch.read_back(level, root) == prefetch.PrefetchReading(level, during)
    assert journal.teardown() == []
    assert modparams.read(prefetch.PARAM, root) == host  # the host's own value again


def test_a_level_the_host_already_has_is_left_as_it_is(tmp_path: Path) -> None:
    root = _host(tmp_path, 0)
    journal = _journal(tmp_path)
    done = prefetch.apply(journal, "on", root)
    assert done["disable"] == 0 and "left as it was" in str(done["set"])
    assert journal.entries == []  # nothing changed, nothing to put back


def test_cleanup_after_a_crash_puts_the_host_value_back(tmp_path: Path) -> None:
    root = _host(tmp_path, 0)
    journals = tmp_path / "journals"
    journals.mkdir()
    # pid 99999999 is not alive: the journal of a crashed run
    prefetch.apply(_journal(journals), "off", root)
    assert modparams.read(prefetch.PARAM, root) == 1
    assert len(cleanup.cleanup(RecordingRunner(), journals)) == 1
    assert modparams.read(prefetch.PARAM, root) == 0


def test_a_value_someone_else_set_since_is_left_alone(tmp_path: Path) -> None:
    root = _host(tmp_path, 0)
    journal = _journal(tmp_path)
    prefetch.apply(journal, "off", root)
    modparams.write(prefetch.PARAM, 0, root)  # the administrator turned it back on
    (root / prefetch.PARAM).write_text("2\n")  # and then to a value of their own
    journal.teardown()
    assert modparams.read(prefetch.PARAM, root) == 2


def test_a_write_the_kernel_did_not_take_stops_the_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _host(tmp_path, 0)
    monkeypatch.setattr(modparams, "write", lambda *_a, **_k: None)
    journal = _journal(tmp_path)
    with pytest.raises(PoolbenchError, match="zfs_prefetch_disable reads 0 after poolbench "
                       "wrote 1 for prefetch off"):  # fmt: skip
        prefetch.apply(journal, "off", root)
    assert journal.teardown() == [] and modparams.read(prefetch.PARAM, root) == 0


def test_without_the_parameter_the_trial_is_refused(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    with pytest.raises(Unsupported, match="cannot be read") as exc:
        prefetch.apply(journal, "off", tmp_path / "no-module")
    assert exc.value.exit_code == EXIT_UNSUPPORTED and journal.entries == []


def test_a_dry_run_writes_nothing(tmp_path: Path) -> None:
    root = _host(tmp_path, 0)
    journal = Journal(RecordingRunner(dry_run=True), tmp_path / "j.jsonl")
    assert prefetch.apply(journal, "off", root)["set"] == "not in a dry run"
    assert modparams.read(prefetch.PARAM, root) == 0 and journal.entries == []


def test_refused_before_anything_is_built_where_it_cannot_be_set() -> None:
    with pytest.raises(Unsupported, match="zfs-fuse") as exc:
        prefetch.check("zfs", "zfs-fuse", {"prefetch": "off"})
    assert "[prefetch-tunable]" in exc.value.fix
    with pytest.raises(UsageError, match="page cache"):
        prefetch.check("btrfs", "", {"prefetch": "off"})
    prefetch.check("zfs", "zfs-fuse", {})  # not asked: nothing to refuse
    prefetch.check("zfs", "openzfs", {"prefetch": "off"})


def test_the_factor_is_found_and_applied_after_the_data_before_the_workloads() -> None:
    order = list(factors.FACTORS)
    assert "prefetch" in order
    # after the pool's data is laid down and a member slowed; before the resilver's load
    assert order.index("fill") < order.index("slow_member") < order.index("prefetch")
    assert order.index("prefetch") < order.index("load")


def test_the_study_compares_both_levels_on_a_cold_stream_and_random_records() -> None:
    s = registry.build("prefetch", Context(2, "1G", dialect="openzfs"))
    assert s.factors == {"backend": ["zfs"], "layout": ["mirror:2"], "prefetch": ["on", "off"]}
    assert s.workloads["names"] == ["seq-read", "rand-read-128k"]
    given = {"layouts": "raidz1:4,mirror:2+mirror:2"}
    s4 = registry.build("prefetch", Context(4, "1G", dialect="openzfs", options=given))
    assert s4.factors["layout"] == ["raidz1:4", "mirror:2+mirror:2"]
    with pytest.raises(Unsupported, match="zfs-fuse"):
        registry.build("prefetch", Context(2, "1G", dialect="zfs-fuse"))
    with pytest.raises(UsageError, match="at least 2 disks"):
        registry.build("prefetch", Context(1, "1G", dialect="openzfs"))


def test_the_dry_run_says_the_host_wide_change_and_builds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from poolbench.cli.main import cli

    zfs_answers(monkeypatch, "openzfs")
    r = CliRunner().invoke(cli, [
        "study", "prefetch", "--dry-run", "--db", str(tmp_path / "r.db"),
        "--scratch-dir", str(tmp_path / "scratch"), "--seed", "1",
    ])  # fmt: skip
    out = " ".join(r.output.split())
    assert r.exit_code == 0, r.output
    assert "each trial sets zfs_prefetch_disable (1 for prefetch off, 0 for on)" in out
    assert "6 trials, 2 configurations × 3 replicates" in out
    assert re.search(r"fio \S+ \S*seq-read\S*\.fio", out), out
    assert re.search(r"fio \S+ \S*rand-read-128k\S*\.fio", out), out
    assert not (tmp_path / "scratch").exists()


def _row(level: str, disable: int | None, workload: str = "seq-read") -> FactRow:
    reading = {"level": level, "disable": disable}
    return FactRow(config=f"prefetch={level}", workload=workload, replicate=1, value=1.0,
                   guards={"pool": {"prefetch": reading}})  # fmt: skip


def _notes(*configs: ConfigFacts) -> list[str]:
    return study.notes(Context(2, "1G"), StudyFacts("prefetch", "loop", 2, GiB, configs))


def test_the_notes_say_each_configuration_ran_as_asked_or_warn() -> None:
    good = ConfigFacts("prefetch=off", {"prefetch": "off"}, rows=(_row("off", 1), _row("off", 1)))
    lines = _notes(good)
    assert lines[1] == "  prefetch=off: zfs_prefetch_disable=1 during all 2 measurements, as asked"
    bad = ConfigFacts("prefetch=on", {"prefetch": "on"},
                      rows=(_row("on", 0), _row("on", 1), _row("on", None)))  # fmt: skip
    (warned,) = [line for line in _notes(bad) if "WARNING" in line]
    assert "2 of 3 measurements ran with zfs_prefetch_disable=1/None" in warned
    unread = ConfigFacts("prefetch=on", {"prefetch": "on"}, rows=(FactRow(
        config="x", workload="seq-read", replicate=1, value=1.0, guards={}),))  # fmt: skip
    assert _notes(unread)[1] == "  prefetch=on: the host's prefetch was not read back"
