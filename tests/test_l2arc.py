"""The l2arc study without a pool: arcstats parsing and interval deltas on recorded
snapshots, the steady summary, the ARC ceiling journaled and put back (an injected sysfs
root), the verdict of the notes, and the study's refusals and dry run."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from poolbench.engine import cleanup
from poolbench.engine import offers as offers_mod
from poolbench.errors import EXIT_UNSUPPORTED, PoolbenchError, Unsupported, UsageError
from poolbench.factors import arc_max as arc_limit
from poolbench.guards import l2arc
from poolbench.guards.cache import read_arcstats
from poolbench.records.sections import L2arcReads
from poolbench.safety.journal import Journal
from poolbench.store.facts import ConfigFacts, StudyFacts
from poolbench.study.builtin import l2arc_notes, registry
from poolbench.study.builtin.context import Context
from poolbench.system import modparams
from poolbench.system.runner import RecordingRunner

DATA = Path(__file__).parent / "data" / "arcstats"
MiB = 1 << 20
GiB = 1 << 30


# -- arcstats: parsing and deltas ---------------------------------------------------------------
def test_recorded_arcstats_parse_and_give_one_intervals_deltas() -> None:
    before, after = read_arcstats(DATA / "before.txt"), read_arcstats(DATA / "after.txt")
    assert before is not None and after is not None
    assert before["l2_hits"] == 20480 and after["c_max"] == 128 * MiB
    i = l2arc.interval(0, before, after, 6.0, 1500.0, 2.5)
    # after − before, counter by counter (the fixture's reads: 6000 hits, 4000 misses, of
    # which the cache device served 3000 and missed 1000)
    assert (i.hits, i.misses, i.l2_hits, i.l2_misses) == (6000, 4000, 3000, 1000)
    assert i.l2_hit_rate == pytest.approx(0.75) and i.arc_hit_rate == pytest.approx(0.6)
    assert i.l2_size == 283115520  # the cache device's content at the interval's end
    assert l2arc.Interval.from_json(i.as_dict()) == i


def test_a_counter_that_went_down_counts_zero_and_no_l2_lookups_is_no_rate() -> None:
    i = l2arc.interval(0, {"hits": 10, "l2_hits": 5}, {"hits": 4, "l2_hits": 5}, 1.0, 1.0, None)
    assert i.hits == 0 and i.l2_hits == 0
    assert i.l2_hit_rate is None and i.arc_hit_rate is None


def _iv(index: int, iops: float, l2h: int, l2m: int, p99: float | None = 1.0) -> l2arc.Interval:
    return l2arc.Interval(index, 2.0, iops, p99, 100, 900, l2h, l2m, 0)


def test_the_steady_half_is_what_the_figure_is_made_of() -> None:
    ivs = [_iv(0, 100, 0, 1000), _iv(1, 200, 100, 900), _iv(2, 300, 600, 400, 3.0),
           _iv(3, 500, 800, 200, 1.0), _iv(4, 400, 700, 300, 2.0)]  # fmt: skip
    assert [i.index for i in l2arc.steady(ivs)] == [2, 3, 4]
    s = l2arc.summarize(ivs)
    # (300 + 500 + 400) reads/s × 2 s each over 6 s; 2100 hits of 3000 L2 lookups
    assert s.iops == pytest.approx(400.0) and s.intervals == 3
    assert (s.l2_hits, s.l2_misses, s.l2_hit_rate) == (2100, 900, 0.7)
    assert s.p99_ms == 2.0  # the median of 3.0, 1.0, 2.0
    assert l2arc.steady([]) == [] and [i.index for i in l2arc.steady(ivs[:1])] == [0]


# -- the ARC's ceiling: set, journaled, put back ------------------------------------------------
class FakeKernel:
    """/sys/module/zfs/parameters and arcstats as OpenZFS keeps them: each write of a
    parameter runs its tuning update (arc_tuning_update): zfs_arc_min moves c_min when it
    is ≥ 32 MiB and ≤ c_max, zfs_arc_max moves c_max when it is ≥ 64 MiB and above c_min;
    a 0 ("the default") moves nothing."""

    def __init__(self, root: Path, c_max: int = 4 * GiB, c_min: int = 128 * MiB) -> None:
        self.root, self.c_max, self.c_min = root, c_max, c_min
        root.mkdir(parents=True, exist_ok=True)
        for name in (modparams.ARC_MAX, modparams.ARC_MIN):
            (root / name).write_text("0\n")

    def write(self, name: str, value: int, root: Path = modparams.PARAMETERS) -> None:
        (root / name).write_text(f"{value}\n")
        if name == modparams.ARC_MIN and 32 * MiB <= value <= self.c_max:
            self.c_min = value
        if name == modparams.ARC_MAX and value >= 64 * MiB and value > self.c_min:
            self.c_max = value

    def stats(self, _path: Path | None = None) -> dict[str, int]:
        return {"c_max": self.c_max, "c_min": self.c_min}


@pytest.fixture
def kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeKernel:
    k = FakeKernel(tmp_path / "parameters")
    monkeypatch.setattr(arc_limit, "read_arcstats", k.stats)
    monkeypatch.setattr(modparams, "write", k.write)
    return k


def test_the_ceiling_is_lowered_journaled_first_and_put_back_by_teardown(
    kernel: FakeKernel, tmp_path: Path
) -> None:
    journal = Journal(RecordingRunner(), tmp_path / "run1-pid99999999-trial0.jsonl")
    done = arc_limit.apply(journal, {"arc_max": "96M"}, root=kernel.root)
    assert kernel.stats()["c_max"] == 96 * MiB and done["c_max"] == 96 * MiB
    # the floor (128 MiB) stood above the new ceiling: lowered first, to half of it
    assert modparams.read(modparams.ARC_MIN, kernel.root) == 48 * MiB
    assert [e["kind"] for e in Journal.load(RecordingRunner(), journal.path).entries] == [
        "param", "param"]  # fmt: skip
    assert journal.teardown() == []
    # The files read 0 again ("the default") and the ARC is as large as before: the
    # ceiling in effect was written back first, since OpenZFS ignores a 0.
    assert modparams.read(modparams.ARC_MAX, kernel.root) == 0
    assert modparams.read(modparams.ARC_MIN, kernel.root) == 0
    assert kernel.stats() == {"c_max": 4 * GiB, "c_min": 128 * MiB}
    assert not journal.path.exists()


def test_cleanup_after_a_crash_puts_the_ceiling_back(kernel: FakeKernel, tmp_path: Path) -> None:
    journals = tmp_path / "journals"
    journals.mkdir()
    # pid 99999999 is not alive: the journal of a crashed run
    crashed = Journal(RecordingRunner(), journals / "run1-pid99999999-trial0.jsonl")
    arc_limit.apply(crashed, {"arc_max": "256M"}, root=kernel.root)
    assert kernel.stats()["c_max"] == 256 * MiB
    outcomes = cleanup.cleanup(RecordingRunner(), journals)
    assert len(outcomes) == 1 and kernel.stats()["c_max"] == 4 * GiB
    assert modparams.read(modparams.ARC_MAX, kernel.root) == 0


def test_a_ceiling_someone_else_changed_since_is_left_alone(
    kernel: FakeKernel, tmp_path: Path
) -> None:
    journal = Journal(RecordingRunner(), tmp_path / "j.jsonl")
    arc_limit.apply(journal, {"arc_max": "256M"}, root=kernel.root)
    modparams.write(modparams.ARC_MAX, 512 * MiB, kernel.root)  # the administrator's
    left = journal.teardown()
    assert any("not the 268435456 poolbench set; left alone" in x for x in left), left
    assert modparams.read(modparams.ARC_MAX, kernel.root) == 512 * MiB


def test_a_ceiling_openzfs_did_not_take_stops_the_trial(
    kernel: FakeKernel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(arc_limit, "read_arcstats", lambda _p=None: {"c_max": GiB, "c_min": 0})
    journal = Journal(RecordingRunner(), tmp_path / "j.jsonl")
    with pytest.raises(PoolbenchError, match="OpenZFS did not take the new ceiling"):
        arc_limit.apply(journal, {"arc_max": "96M"}, root=kernel.root)
    assert journal.teardown() == [] and modparams.read(modparams.ARC_MAX, kernel.root) == 0


def test_without_openzfs_parameters_the_trial_is_refused(tmp_path: Path) -> None:
    journal = Journal(RecordingRunner(), tmp_path / "j.jsonl")
    with pytest.raises(Unsupported, match="is not OpenZFS"):
        arc_limit.apply(journal, {"arc_max": "96M"}, root=tmp_path / "none",
                        arcstats=tmp_path / "none" / "arcstats")  # fmt: skip
    assert journal.entries == []
    assert arc_limit.apply(journal, {}, root=tmp_path) == {}  # no factor: nothing to do


# -- the study: refusals, dry run ---------------------------------------------------------------
def test_zfs_fuse_is_refused_before_anything_exists() -> None:
    with pytest.raises(Unsupported, match="no arcstats in /proc") as exc:
        registry.build("l2arc", Context(2, "1G", dialect="zfs-fuse"))
    assert exc.value.exit_code == EXIT_UNSUPPORTED


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"arc_max": "32M"}, "below the 64 MiB"),
        ({"arc_max": "128M", "size": "100M"}, "not larger than the ARC"),
        ({"arc_max": "512M"}, "does not fit one 1G disk"),
    ],
)
def test_a_working_set_that_cannot_answer_the_question_is_refused(
    options: dict[str, str], says: str
) -> None:
    with pytest.raises(UsageError, match=says):
        registry.build("l2arc", Context(2, "1G", dialect="openzfs", options=options))


def zfs_answers(monkeypatch: pytest.MonkeyPatch, dialect: str) -> None:
    """This machine's ZFS as `dialect`, answering (a dry run asks it, and runs nothing)."""
    from poolbench.backends.base import Availability
    from poolbench.backends.zfs import backend

    version = "2.3.2" if dialect == "openzfs" else "zfs-fuse, pool version 23"
    monkeypatch.setattr(offers_mod, "probe", lambda: offers_mod.Offers(dialect, True, ""))
    monkeypatch.setattr(backend, "_probe", lambda _r: Availability(True, "", version, dialect))


def test_dry_run_shows_plan_duration_and_the_ceiling_it_changes_and_restores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from poolbench.cli.main import cli

    zfs_answers(monkeypatch, "openzfs")
    r = CliRunner().invoke(cli, [
        "study", "l2arc", "--dry-run", "--db", str(tmp_path / "r.db"),
        "--scratch-dir", str(tmp_path / "scratch"), "--seed", "1",
    ])  # fmt: skip
    out = " ".join(r.output.split())  # the terminal's wrapping undone
    assert r.exit_code == 0, r.output
    assert "sets the ARC's ceiling (zfs_arc_max) to 128 MiB for every trial and puts back" in out
    assert "the working set is 384 MiB, 3.0× the ARC" in out
    assert "6 trials, 2 configurations × 3 replicates" in out
    assert "estimated duration: about" in out
    assert "cache /dev/loop-for-disk1.img" in out  # the cached pool's zpool create
    # the reads in 8 intervals (48 s split: 6 s each), each its own fio run
    assert all(f"l2arc-read-16k.{i}.fio" in out for i in range(8))
    assert not (tmp_path / "scratch").exists()


# -- the notes' verdict -------------------------------------------------------------------------
def _stored(replicate: int, section: dict[str, object]) -> L2arcReads:
    """The l2arc section of one replicate's guards as the store decodes it."""
    got = L2arcReads.decode({"l2arc": section}, replicate)
    assert got is not None
    return got


def _config(layout: str, iops: list[float], l2_hits: int, p99: list[float]) -> ConfigFacts:
    reads = tuple(
        _stored(i, {"intervals": [_iv(0, v / 2, 0, 10).as_dict(),
                                  _iv(1, v, l2_hits, 10, p).as_dict()],
                    "steady": {"iops": v, "l2_hits": l2_hits,
                               "l2_hit_rate": 0.5 if l2_hits else None, "p99_ms": p}})
        for i, (v, p) in enumerate(zip(iops, p99, strict=True))
    )  # fmt: skip
    return ConfigFacts(key=layout, levels={"layout": layout}, figures={"l2arc-read-16k":
                       tuple(iops)}, l2arc=reads)  # fmt: skip


def _facts(*configs: ConfigFacts) -> StudyFacts:
    return StudyFacts("l2arc", "loop", 2, GiB, configs)


def _verdict(facts: StudyFacts) -> str:
    return "\n".join(l2arc_notes.notes(Context(2, "1G"), facts))


def test_a_cache_device_that_serves_reads_faster_pays() -> None:
    text = _verdict(_facts(_config("stripe:1", [100, 104, 98], 0, [9.0, 9.5, 8.8]),
                           _config("stripe:1 + cache 1", [300, 310, 295], 500,
                                   [3.0, 3.1, 2.9])))  # fmt: skip
    assert "verdict: L2ARC pays for this working set" in text
    assert "steady IOPS 302 with the cache device vs 101 without" in text
    assert "p99 0.33× (lower" in text
    # the warm-up table: interval 2's L2 hit rate is 500 of 510 lookups over 3 replicates
    assert "98%" in text and all(len(line) <= 80 for line in text.splitlines()[:6])


def test_no_steady_l2_hits_or_no_gain_is_no_payoff() -> None:
    alone = _config("stripe:1", [100, 104, 98], 0, [9, 9, 9])
    cold = _verdict(_facts(alone, _config("stripe:1 + cache 1", [300, 310, 295], 0, [3, 3, 3])))
    assert "it does not pay: the cache device served no steady reads" in cold
    same = _verdict(_facts(alone, _config("stripe:1 + cache 1", [101, 99, 103], 50, [9, 9, 9])))
    assert "verdict: L2ARC does not pay for this working set" in same


def test_a_ceiling_is_refused_before_anything_is_built_where_it_cannot_be_set() -> None:
    with pytest.raises(Unsupported, match="zfs-fuse"):
        arc_limit.check({"arc_max": "128M"}, "zfs-fuse")
    with pytest.raises(Unsupported, match="below the 64 MiB"):
        arc_limit.check({"arc_max": "32M"})
    arc_limit.check({}, "zfs-fuse")  # no ceiling asked: nothing to refuse


def test_on_zfs_fuse_the_cli_exits_7_with_one_paragraph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from poolbench.cli.main import main

    zfs_answers(monkeypatch, "zfs-fuse")
    with pytest.raises(SystemExit) as exc:
        main(["study", "l2arc", "--dry-run", "--db", str(tmp_path / "r.db"),
              "--scratch-dir", str(tmp_path / "scratch")])  # fmt: skip
    err = capsys.readouterr().err
    assert exc.value.code == EXIT_UNSUPPORTED, err
    assert "zfs-fuse (pool version 23), which has no arcstats in /proc" in " ".join(err.split())
    assert "Traceback" not in err and not (tmp_path / "scratch").exists()


def test_a_hit_rate_still_rising_in_the_steady_half_is_flagged() -> None:
    rising = _config("stripe:1 + cache 1", [300, 310, 295], 500, [3.0, 3.1, 2.9])
    ivs = [_iv(i, 100.0, h, 100 - h).as_dict() for i, h in enumerate([5, 10, 40, 80])]
    reads = tuple(_stored(r.replicate, {"intervals": ivs}) for r in rising.l2arc)
    got = l2arc_notes.notes(
        Context(2, "1G"),
        _facts(ConfigFacts(key="c", levels=rising.levels, figures=rising.figures, l2arc=reads)),
    )
    # steady half: intervals 3 and 4, 40% → 80%
    assert any("still rose from 40% to 80% over the steady half" in x for x in got), got


def test_the_reads_run_in_intervals_with_the_counters_read_between_them(tmp_path: Path) -> None:
    from poolbench.engine import l2arc_reads
    from poolbench.system.runner import CommandResult
    from poolbench.workloads.fiojob import JobParams
    from poolbench.workloads.library import get

    fio_json = (Path(__file__).parent / "data" / "fio-rand-read-4k.jsonplus.json").read_text()
    stats = tmp_path / "arcstats"
    base = (DATA / "before.txt").read_text()
    stats.write_text(base)
    runs = []

    def fio(argv: tuple[str, ...]) -> CommandResult:
        # interval i (from 1): the cache device serves 100 × i of 1000 more ARC misses
        n = len(runs)
        runs.append(Path(argv[-1]).read_text())
        hits, misses = 20480 + 50 * (n + 1) * (n + 2), 60211 + 1000 * (n + 1)
        text = base.replace("l2_hits                         4    20480", f"l2_hits 4 {hits}")
        text = text.replace("misses                          4    60211", f"misses 4 {misses}")
        stats.write_text(text)
        return CommandResult(argv, 0, fio_json, "", 0.0)

    (tmp_path / "jobs").mkdir()
    params = JobParams(directory=str(tmp_path), size_bytes=384 * MiB, runtime_s=48, randseed=5)
    got = l2arc_reads.measure(RecordingRunner({"fio": fio}), get("l2arc-read-16k"), params,
                              arcstats=stats, parameters=tmp_path)  # fmt: skip
    section = got.sections["l2arc"]
    assert isinstance(section, dict) and len(runs) == 8
    assert all("runtime=6" in job and "bs=16384" in job for job in runs)  # 48 s / 8
    assert [f"randseed={5 + i}" in job for i, job in enumerate(runs)] == [True] * 8
    hits = [iv["l2_hits"] for iv in section["intervals"]]  # type: ignore[index,union-attr]
    assert hits == [100 * (i + 1) for i in range(8)]
    # the steady half: intervals 5-8, 500+600+700+800 hits; the recorded fio run's IOPS
    assert section["steady"]["l2_hits"] == 2600  # type: ignore[index,call-overload]
    assert got.value == pytest.approx(25122 / 1.001, rel=1e-3)
