"""A built-in study that changes the request (disks left unused, a working set raised or
cut, a default dropped on this ZFS) says so; one the real run would refuse is refused at
--dry-run already; the dry-run plan shows the working set, the workloads and the replicates
a 10% difference needs."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import poolbench

from poolbench.errors import UsageError
from poolbench.stats import ReplicatePolicy
from poolbench.study import estimate
from poolbench.study.builtin import registry
from poolbench.study.builtin.context import Context
from poolbench.study.model import parse

GiB = 1 << 30


def _said(name: str, ctx: Context) -> list[str]:
    registry.build(name, ctx)
    return ctx.said


def test_mirror_says_which_disks_it_uses_and_why() -> None:
    ctx = Context(6, "1G")
    text = registry.study_text("mirror", ctx)
    line = (
        "uses 3 of the 6 disks given (disks 1-3): the widest layout, mirror:3, needs 3; "
        "--levels sets the mirror widths; the other 3 stay unused."
    )
    assert ctx.said[0] == line
    assert f"# note: {line}\n" in text  # --print-toml carries it too
    assert parse(text).disks.count == 3  # ... and it is what the study file does


def test_a_study_using_every_disk_says_nothing_about_disks() -> None:
    assert not any("disks given" in x for x in _said("mirror", Context(3, "1G")))
    assert not any("disks given" in x for x in _said("parity", Context(6, "1G")))


def test_parity_at_narrower_widths_says_the_rest_stay_unused() -> None:
    said = _said("parity", Context(6, "1G", options={"widths": "4"}))
    assert said == [
        "uses 4 of the 6 disks given (disks 1-4): the widest raidz asked for (--widths) is 4; "
        "the other 2 stay unused."
    ]


def test_geometry_on_zfs_fuse_says_it_plans_no_draid() -> None:
    fuse = Context(6, "1G", dialect="zfs-fuse")
    layouts = registry.build("geometry", fuse).factors["layout"]
    assert not any(str(x).startswith("draid") for x in layouts)
    assert fuse.said[0].startswith("no dRAID layout: ")
    assert "OpenZFS 2.1 added it" in fuse.said[0]
    assert "datasets only, no zvol target: zfs-fuse has no zvols." in fuse.said
    assert "vs dRAID" not in registry.build("geometry", fuse).description
    openzfs = Context(6, "1G", dialect="openzfs")
    assert "draid1:1s" in registry.build("geometry", openzfs).factors["layout"]
    assert openzfs.said == []  # nothing left out, nothing to say
    assert "raidz1/raidz2 vs dRAID: random reads" in registry.build("geometry", openzfs).description


def test_geometry_over_an_odd_count_names_the_disk_the_mirrors_leave_out() -> None:
    said = _said("geometry", Context(5, "1G", dialect="openzfs"))
    assert (
        "mirror:2+mirror:2 leaves disk 5 out (2-way mirror pairs over 5 disks); the other "
        "layouts use every disk." in said
    )


def test_working_set_cut_to_the_cap_is_said_with_the_arithmetic() -> None:
    ctx = Context(6, "10G")
    assert registry.build("parity", ctx).workloads["size"] == "1024M"
    # half of one 10 GiB disk is 5120 MiB; the cap is 1G
    assert ctx.said == [
        "working set 1024M: 50% of one 10G disk would be 5120.0M, cut to the 1G cap so a "
        "trial stays minutes long (--size sets it)."
    ]


def test_working_set_raised_to_the_floor_is_said() -> None:
    ctx = Context(6, "64M")
    assert registry.build("parity", ctx).workloads["size"] == "32M"  # half, no clamp
    assert ctx.said == []
    # btrfs and md take disks under ZFS's 64 MiB: a quarter of 16 MiB is 4 MiB
    ctx = Context(4, "16M")
    assert registry.build("fs-compare", ctx).workloads["size"] == "8M"
    assert (
        "working set 8M: 25% of one 16M disk would be 4.0M, raised to the 8M floor so a "
        "workload moves enough bytes to time (--size sets it)." in ctx.said
    )


def test_size_given_is_never_announced_as_changed() -> None:
    ctx = Context(6, "10G", options={"size": "256M"})
    assert registry.build("parity", ctx).workloads["size"] == "256M"
    assert ctx.said == []


def test_width_study_says_which_widths_it_left_out() -> None:
    ctx = Context(5, "1G", options={"widths": "4,8"})
    layouts = registry.build("width", ctx).factors["layout"]
    assert layouts == ["raidz1:4", "raidz2:4"]
    assert ctx.said == ["--widths 8 left out: wider than the 5 disks."]


def test_zfs_study_on_disks_under_64_mib_is_refused_at_dry_run() -> None:
    p = poolbench("study", "parity", "--disks", "6x10M", "--dry-run")
    assert p.returncode != 0
    assert "Traceback" not in p.stderr + p.stdout
    err = " ".join(p.stderr.split())
    assert "the disk size 10M (10,485,760 bytes) is under ZFS's minimum device size" in err
    assert f"64 MiB ({64 * 2**20:,} bytes, SPA_MINDEVSIZE)" in err


def test_zfs_study_file_on_small_disks_is_refused_but_64_mib_is_not() -> None:
    body = 'name = "s"\n[factors]\nlayout = ["mirror:2"]\n[workloads]\nsize = "8M"\n'
    body += "[disks]\ncount = 2\n"
    with pytest.raises(UsageError, match=r"the disk size 63M \(66,060,288 bytes\) is under"):
        parse(body + 'size = "63M"\n', "s.toml")
    assert parse(body + 'size = "64M"\n', "s.toml").disks.size == "64M"
    # other backends have no such minimum
    other = body.replace("[factors]\n", '[factors]\nbackend = ["btrfs"]\n')
    assert parse(other + 'size = "32M"\n', "s.toml").disks.size == "32M"


def test_run_disks_override_is_checked_like_the_file(tmp_path: Path) -> None:
    study = tmp_path / "s.toml"
    study.write_text('name = "s"\n[factors]\nlayout = ["raidz1"]\n[workloads]\nsize = "8M"\n')
    p = poolbench("run", str(study), "--dry-run", "--disks", "6x10M", "--db", str(tmp_path / "r"))
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "with --disks 6x10M: the disk size 10M (10,485,760 bytes) is under" in " ".join(
        p.stderr.split()
    )
    p = poolbench("run", str(study), "--dry-run", "--disks", "", "--db", str(tmp_path / "r"))
    assert p.returncode != 0 and "--disks '' is neither COUNTxSIZE" in p.stderr


def test_study_prints_its_notes_before_the_plan() -> None:
    # The notes come before the dry run asks any backend, so this holds on every machine.
    p = poolbench("study", "mirror", "--disks", "6x1G", "--dry-run")
    out = " ".join(p.stdout.split())
    assert "note: uses 3 of the 6 disks given (disks 1-3)" in out


def test_working_set_line_says_the_size_and_why_against_ram() -> None:
    study = parse('name = "s"\n[factors]\nlayout = ["raidz1"]\n[workloads]\nsize = "64M"\n')
    text = estimate.working_set_text(study, 16 * GiB)
    # 64 MiB of 16 GiB is 1/256 = 0.39%
    assert text.startswith(
        "working set: 64M = 67,108,864 bytes per configuration ([workloads] size), 0.39% of "
        "this machine's 16.0 GiB RAM: below the 2× RAM a bench uses by default"
    )
    assert text.endswith("workloads (2, each trial): seq-write, seq-read")
    big = parse('name = "s"\n[factors]\nlayout = ["raidz1"]\n[workloads]\nsize = "40G"\n')
    assert "2.50× this machine's 16.0 GiB RAM: at least 2× RAM, so no cache can hold it" in (
        estimate.working_set_text(big, 16 * GiB)
    )


@pytest.mark.slow  # the sequential boundaries at every replicate count searched, to the last
def test_replicates_for_ten_percent_is_the_fewest_that_detect_it() -> None:
    p = ReplicatePolicy(0.05, 3, 6)
    n = estimate.replicates_for(p, 0.05, 0.10, 2)
    assert n is not None
    assert p.detectable(0.05, n=n, family=2) <= 0.10 < p.detectable(0.05, n=n - 1, family=2)
    assert estimate.replicates_for(p, 0.001, 0.10, 1) == 3  # already detected at min_runs
    assert estimate.replicates_for(p, 50.0, 0.10, 1) is None  # beyond any count searched


def test_dry_run_plan_shows_working_set_workloads_and_replicates_for_ten_percent(
    tmp_path: Path,
) -> None:
    target = tmp_path / "target"
    target.mkdir()
    study = tmp_path / "s.toml"
    study.write_text(
        f'name = "dir"\n[factors]\nbackend = ["directory"]\nlayout = ["{target}"]\n'
        '[workloads]\nnames = ["seq-write", "rand-read-4k"]\nsize = "64M"\nruntime = 5\n'
    )
    p = poolbench("run", str(study), "--dry-run", "--db", str(tmp_path / "r.db"))
    assert p.returncode == 0, p.stderr
    out = " ".join(p.stdout.split())
    assert "working set: 64M = 67,108,864 bytes per configuration" in out
    timed = "time-based (rand-read-4k) run 5 s each"
    assert f"workloads (2, each trial): seq-write, rand-read-4k; {timed}" in out
    want = estimate.replicates_for(ReplicatePolicy(0.05, 3, 6), estimate.ASSUMED_CV, 0.10, 1)
    assert f"{want} replicates per configuration would detect 10%" in out


def test_defaults_left_out_on_few_disks_are_said_unless_layouts_are_given() -> None:
    ctx = Context(4, "1G")
    layouts = registry.build("capacity", ctx).factors["layout"]
    assert "raidz3" not in layouts and "raidz2" in layouts
    assert ctx.said == ["no raidz3 layout: raidz3 needs at least 5 disks; --disks gives 4."]
    ctx = Context(4, "1G")  # 3 in the pool, one spare: raidz2 needs 4 besides it
    assert registry.build("resilver", ctx).factors["layout"] == ["mirror:2", "raidz1:3"]
    assert ctx.said == [
        "no raidz2 layout: it needs 4 disks besides the spare; --disks gives 4 in all."
    ]
    ctx = Context(4, "1G", options={"layouts": "raidz1:3"})
    registry.build("resilver", ctx)
    assert ctx.said == []  # the user chose the layouts: nothing was left out of them
    ctx = Context(3, "1G")
    assert registry.build("ashift", ctx).factors["layout"] == ["raidz1", "mirror:2"]
    assert ctx.said == ["mirror:2 uses 2 of the 3 disks (raidz1 uses all 3)."]


def test_mirror_leaving_one_disk_says_one() -> None:
    said = _said("mirror", Context(4, "1G"))
    assert said[0].endswith("--levels sets the mirror widths; the other one stays unused.")


def test_example_files_carry_the_notes_of_their_default_disks() -> None:
    # expand's default 4 disks hold a raidz1 of 3 and the disk to attach: no raidz2
    from pathlib import Path as P

    text = (P(__file__).resolve().parents[1] / "examples" / "expand.toml").read_text()
    assert text == registry.example_text("expand")
    assert "# note: no raidz2 layout: it needs 4 disks besides the one attached" in text


# -- refusals say what is wrong with what was given -------------------------------------------
@pytest.mark.parametrize(
    ("ctx", "said"),
    [
        (Context(2, "1G"), "2 disks make none of them (raidz1 needs 3)"),
        (Context(6, "1G", devices=("/dev/sda",)), "1 disk makes none of them (raidz1 needs 3)"),
    ],
)
def test_parity_on_too_few_disks_says_so_not_widths(ctx: Context, said: str) -> None:
    with pytest.raises(UsageError) as exc:
        registry.build("parity", ctx)
    assert exc.value.problem == (
        f"The parity study compares raidz1, raidz2 and raidz3 over all the disks; {said}."
    )
    assert "widths" not in exc.value.problem  # none were given


def test_width_study_names_the_widths_and_parities_that_fit_nothing() -> None:
    ctx = Context(3, "1G", options={"widths": "2", "levels": "1"})
    with pytest.raises(UsageError) as exc:
        registry.build("width", ctx)
    assert exc.value.problem == (
        "No raidz width of parity 1 fits 3 disks at --widths 2: raidz1 needs at least 3 "
        "disks, raidz2 4, raidz3 5."
    )
