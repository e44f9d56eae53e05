"""`poolbench plan`: usable space as ZFS computes it, layout search, predicted speed, risk.

No I/O, no root: everything comes from the planner's models (src/poolbench/planner).
"""

from __future__ import annotations

import json
import math
import sys
import textwrap
from pathlib import Path
from typing import Any

import click

from poolbench import is_digits
from poolbench.cli.common import FiniteFloat, WholeNumber, db_option, open_store
from poolbench.cli.plan_data_options import (
    NO_DATA,
    DataOptions,
    check_data_options,
    data_options,
)
from poolbench.errors import CommandLineError, UsageError
from poolbench.planner.capacity import plan_pool
from poolbench.planner.expansion import plan_expansion
from poolbench.planner.layout import ClassVdev, Layout, parse_class, parse_layout
from poolbench.planner.performance import (
    DEFAULT_SPEEDS,
    DiskSpeed,
    parse_disk_speed,
    predict_detailed,
)
from poolbench.planner.resilience import RiskInputs, class_notes, pool_risk
from poolbench.planner.rules import (
    DEFAULT_VERSION,
    RuleSet,
    parse_zfs_version,
    raidz_expansion_supported,
    rules_note,
)
from poolbench.planner.screened import fit_screen
from poolbench.planner.search import Objective, search
from poolbench.units import parse_disks


@click.command("plan")
@click.option(
    "--layout",
    "layout_text",
    metavar="LAYOUT",
    help="Evaluate one layout: with sizes ('raidz2:6x4TB', 'raidz1:3x1TB + mirror:2x4TB') or, "
    "as a study writes it, with widths on --disks ('raidz2', 'raidz1:3 + mirror:2').",
)
@click.option(
    "--disks",
    "disks_text",
    metavar="DISKS",
    help="Disks as COUNTxSIZE joined by commas, e.g. 2x3TB,3x2TB (TB = 10^12, T = 2^40 "
    "bytes): alone, search layouts for them; with a --layout in widths, its disks.",
)
@click.option(
    "--ashift",
    "ashift_text",
    default="12",
    show_default=True,
    metavar="N[,N...]",
    help="Sector size exponent of every vdev (9 = 512 B, 12 = 4 KiB); with --layout, "
    "several (--ashift 9,12) compare their space.",
)
@click.option(
    "--zfs-version",
    default=DEFAULT_VERSION,
    show_default=True,
    help="v23 (alias zfs-fuse) or an OpenZFS / ZFS on Linux release: 0.6.3, 0.8, 2.3.",
)
@click.option(
    "--whole-disk/--no-whole-disk",
    default=None,
    help="Devices are whole disks that `zpool create` partitions on Linux "
    "(default: off for --layout, on for --disks alone).",
)
@click.option(
    "--min-failures",
    type=WholeNumber(0, 64),
    default=0,
    show_default=True,
    help="Search: only layouts that survive at least N disk failures.",
)
@click.option(
    "--objective",
    type=click.Choice(["space", "speed", "balanced"]),
    default="balanced",
    show_default=True,
    help="Search: how to order the results.",
)
@click.option(
    "--disk-speed",
    metavar="SPEED",
    help="One disk's figures: THROUGHPUT,IOPS, e.g. 180M,250iops (M = MiB/s).",
)
@click.option(
    "--disk-speed-from",
    "disk_speed_run",
    metavar="RUN",
    default=None,
    help="Take one disk's figures from a stored `poolbench bench` run of that disk "
    "(seq-read, seq-write, rand-read-4k, rand-write-4k; the rest from --disk-class); "
    "RUN is a run id, 'latest', or model:NAME (the latest bench run of a disk of that model), "
    "or screen:ID / screen:latest, a disk screen: its median disk, and with --layout each "
    "vdev at its slowest screened member (the disks in the order screened).",
)
@db_option
@click.option(
    "--disk-class",
    type=click.Choice(["hdd", "ssd", "nvme"]),
    default="hdd",
    show_default=True,
    help="Default speed figures when --disk-speed is not given.",
)
@click.option(
    "--afr",
    type=FiniteFloat(0.0, 1.0),
    default=0.015,
    show_default=True,
    help="Risk model: annual failure rate per disk.",
)
@click.option(
    "--ure",
    type=FiniteFloat(0.0, 1.0),
    default=1e-15,
    show_default=True,
    help="Risk model: unrecoverable read errors per bit read.",
)
@click.option(
    "--fill",
    type=FiniteFloat(0.0, 1.0),
    default=0.8,
    show_default=True,
    help="Risk model: fraction of the pool in use when a disk fails.",
)
@click.option(
    "--top",
    type=WholeNumber(1, 100000),
    default=20,
    show_default=True,
    help="Search: how many layouts to show in the table.",
)
@click.option(
    "--expand-to",
    type=WholeNumber(2, 255),
    default=None,
    metavar="WIDTH",
    help="With --layout: the pool after RAIDZ expansion (OpenZFS >= 2.3, `zpool attach` to "
    "its raidz vdev) to WIDTH disks, each as large as its largest member.",
)
@click.option(
    "--slog",
    metavar="VDEV",
    help="Search: add this log vdev to every layout, with sizes: 'mirror:2x100G', '1x100G'.",
)
@click.option(
    "--special",
    metavar="VDEV",
    help="Search: add this special vdev to every layout: 'mirror:2x500G' (OpenZFS >= 0.8).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
@data_options
def plan(
    layout_text: str | None,
    disks_text: str | None,
    ashift_text: str,
    zfs_version: str,
    whole_disk: bool | None,
    min_failures: int,
    objective: str,
    disk_speed: str | None,
    disk_speed_run: str | None,
    db: Path | None,
    disk_class: str,
    afr: float,
    ure: float,
    fill: float,
    top: int,
    expand_to: int | None,
    slog: str | None,
    special: str | None,
    as_json: bool,
    **data: Any,
) -> None:
    """What each layout of your disks gives you, before you buy or wipe anything.

    Usable space is computed the way ZFS computes it (labels, metaslabs, raidz parity and
    padding, deflate ratio, slop), to the byte, for the chosen ZFS release. Predicted speed
    and the resilver risk are models and are labelled so.

    \b
    Examples (TB = 10^12 bytes, as disks are sold; T = TiB, as zfs prints):
      poolbench plan --layout 'raidz2:6x4TB' --ashift 12 --zfs-version 2.3 --json
      poolbench plan --layout 'raidz1:3 + mirror:2' --disks 3x4TB,2x2TB
      poolbench plan --disks 2x3TB,3x2TB --min-failures 1 --objective space
      poolbench plan --layout 'raidz2:6x4TB + special mirror:2x500GB + log mirror:2x100GB'
      poolbench plan --layout 'raidz2:6x4TB' --expand-to 8
      poolbench plan --layout 'raidz2:6x4TB' --ashift 9,12,13
      poolbench plan --disks 6x4TB --special mirror:2x500GB --slog mirror:2x100GB
      poolbench plan --layout 'raidz2:6x4TB' --data /srv/photos --save-data photos
    """
    _check_given(layout_text, disks_text)
    _check_numbers(afr, ure, fill, top, min_failures)
    rules = parse_zfs_version(zfs_version)
    disk = _one_disk(disk_speed, disk_speed_run, db, disk_class)
    inputs = RiskInputs(afr=afr, ure_per_bit=ure, fill=fill)
    disks = _disk_sizes(disks_text) if disks_text is not None else None
    _check_combinations(layout_text, expand_to, slog, special, zfs_version)
    data_opts = DataOptions(**data)
    check_data_options(data_opts, expand_to)
    ashifts = parse_ashifts(ashift_text, several=layout_text is not None)
    if layout_text is not None:
        args = (layout_text, disks, ashifts, rules, bool(whole_disk), disk, inputs, as_json)
        _plan_one_layout(*args, expand_to, zfs_version, data_opts, db)
    else:
        assert disks is not None and disks_text is not None
        _binary_size_hint(list(disks) if not as_json else [])
        classes = _search_classes(slog, special)
        disk = fit_screen(disk, None)
        search = (disks_text, disks, ashifts[0], rules, whole_disk is not False, disk, min_failures)
        _plan_search(*search, objective, top, as_json, classes, data_opts, db)  # type: ignore[arg-type]


def _plan_one_layout(
    layout_text: str, disks: tuple[int, ...] | None, ashifts: list[int], rules: RuleSet,
    whole_disk: bool, disk: DiskSpeed, inputs: RiskInputs, as_json: bool,
    expand_to: int | None, zfs_version: str, data: DataOptions, db: Path | None,
) -> None:  # fmt: skip
    """--layout: the plan at one ashift, several compared, or (--data) the data's space."""
    note = rules_note(zfs_version)
    layout = _layout_on(layout_text, disks)
    disk = fit_screen(disk, layout.disk_count)
    _binary_size_hint([d for v in layout.vdevs for d in v.devices] if not as_json else [])
    if data.data_text is not None:
        from poolbench.cli.plan_data import plan_layout_data  # the scanner: on use

        plan_layout_data(layout, ashifts, rules, whole_disk, data, db, as_json)
        return
    if len(ashifts) > 1:
        _compare_ashifts(layout, ashifts, rules, whole_disk, as_json, note)
        return
    args = (layout, ashifts[0], rules, whole_disk, disk, inputs, as_json, expand_to)
    _plan_layout(*args, note)


def _check_given(layout_text: str | None, disks_text: str | None) -> None:
    if layout_text is None and disks_text is None:
        raise CommandLineError(
            "Give --layout, --disks, or both.",
            "Use --layout 'raidz2:6x4TB' (or --layout raidz2 --disks 6x4TB) to evaluate one "
            "layout, or --disks 2x3TB,3x2TB alone to search.",
        )


def parse_ashifts(text: str, *, several: bool) -> list[int]:
    """--ashift: one exponent, or (with --layout) a comma list to compare: 9,12,13."""
    items = [i.strip() for i in text.split(",")]
    if not all(is_digits(i) and len(i) <= 2 and 9 <= int(i) <= 16 for i in items):
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise CommandLineError(
            f"--ashift '{shown}' is not an ashift or a list of them.",
            "Give exponents from 9 to 16 (9 = 512 B, 12 = 4 KiB sectors), e.g. --ashift 12 "
            "or, to compare with --layout, --ashift 9,12,13.",
        )
    ashifts = list(dict.fromkeys(int(i) for i in items))
    if len(ashifts) > 1 and not several:
        raise CommandLineError(
            f"--ashift {text} gives several ashifts; a search takes one.",
            "Search with one (--ashift 12), or compare ashifts on one layout: "
            "--layout 'raidz2:6x4TB' --ashift 9,12.",
        )
    return ashifts


# Disk sizes as they are sold (TB); one of these written with a binary unit (4T = 4 TiB) is
# most likely the vendor's decimal size written in the wrong unit.
_SOLD_TB = {1, 2, 3, 4, 5, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32}


def _binary_size_hint(sizes: list[int]) -> None:
    """On stderr: a disk of 4T (4 TiB) is 10% larger than the 4 TB disk a shop sells."""
    tib = 1 << 40
    sold = sorted({s // tib for s in sizes if s % tib == 0 and s // tib in _SOLD_TB})
    if sold:
        n = sold[0]
        text = (
            f"note: {n}T is {n} TiB = {n * tib / 1e12:.2f} TB. A disk sold as '{n} TB' "
            f"holds {n}x10^12 bytes: write {n}TB for it (T, G are 1024-based; TB, GB "
            "decimal)."
        )
        click.echo(textwrap.fill(text, 79), err=True)


def _compare_ashifts(
    layout: Layout, ashifts: list[int], rules: RuleSet, whole_disk: bool, as_json: bool,
    note: str,
) -> None:  # fmt: skip
    """--ashift 9,12,…: the layout's space at each ashift, side by side."""
    plans = [plan_pool(layout, a, rules, whole_disk) for a in ashifts]
    if as_json:
        doc = {"layout": layout.spec(), "zfs_rules_note": note,
               "by_ashift": [p.as_dict() for p in plans]}  # fmt: skip
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    from poolbench.cli.plan_show import show_ashifts  # rich only for tables

    show_ashifts(plans, note)


def _check_combinations(
    layout: str | None, expand_to: int | None, slog: str | None, special: str | None,
    zfs_version: str,
) -> None:  # fmt: skip
    if expand_to is not None and layout is None:
        raise CommandLineError(
            "--expand-to grows the raidz vdev of one --layout.",
            "Give the layout too: --layout raidz2:6x4T --expand-to 8.",
        )
    if expand_to is not None and not raidz_expansion_supported(zfs_version):
        raise UsageError(
            f"RAIDZ expansion (`zpool attach` to a raidz vdev) needs OpenZFS 2.3 or later; "
            f"--zfs-version is {zfs_version}.",
            "Use --zfs-version 2.3, or plan a new pool at the wider width instead.",
        )
    if layout is not None and (slog or special):
        raise CommandLineError(
            "--slog and --special add class vdevs to the search's layouts; with --layout, "
            "write them in the layout.",
            "E.g. --layout 'raidz2:6x4T + log mirror:2x100G + special mirror:2x500G'.",
        )


def _search_classes(slog: str | None, special: str | None) -> tuple[ClassVdev, ...]:
    out: tuple[ClassVdev, ...] = ()
    if special:
        out += parse_class("special", special, "--special")
    if slog:
        out += parse_class("log", slog, "--slog")
    return out


def _check_numbers(afr: float, ure: float, fill: float, top: int, min_failures: int) -> None:
    """The model inputs are fractions and counts; inf and nan are neither (and print as
    invalid JSON)."""
    finite = all(math.isfinite(x) for x in (afr, ure, fill))
    if not finite or not 0 < afr < 1 or ure < 0 or not 0 < fill <= 1:
        raise CommandLineError(
            "--afr and --fill must be fractions in (0, 1] and --ure a finite number of 0 or more.",
            "For example --afr 0.015 --fill 0.8 --ure 1e-15.",
        )
    if top < 1:
        raise CommandLineError(
            f"--top {top} shows nothing.", "Give --top 1 or more, e.g. --top 20."
        )
    if min_failures < 0:
        raise CommandLineError("--min-failures must be 0 or more.", "For example --min-failures 1.")


def _one_disk(speed: str | None, run: str | None, db: Path | None, disk_class: str) -> DiskSpeed:
    """One disk's figures: --disk-speed, a stored bench run, or the class defaults; the class
    also says whether it is a spinning disk (what limits its streaming rate)."""
    if speed and run:
        raise CommandLineError("Give --disk-speed or --disk-speed-from, not both.")
    base = DEFAULT_SPEEDS[disk_class]
    if run:
        from poolbench.report.measured_disk import disk_speed_from_store  # the store: on use

        return disk_speed_from_store(open_store(db, "read"), run, base)
    return parse_disk_speed(speed, base.medium) if speed else base


def _layout_on(text: str, disks: tuple[int, ...] | None) -> Layout:
    """--layout, its widths taking --disks in order (a study's meaning)."""
    layout = parse_layout(text, disks)
    if disks is not None and layout.disk_count < len(disks):
        click.echo(
            f"note: the layout uses the first {layout.disk_count} of the {len(disks)} disks "
            "in --disks.",
            err=True,
        )
    return layout


def _disk_sizes(text: str) -> tuple[int, ...]:
    """--disks for the planner: sizes only (it does no I/O, so it cannot read a device)."""
    disks = parse_disks(text)
    if disks.devices:
        raise CommandLineError(
            f"plan --disks '{text}' names devices; the planner reads nothing from them.",
            "Give their sizes instead, e.g. --disks 6x4TB (`poolbench disks` lists sizes).",
        )
    return disks.sizes


def _plan_layout(
    layout: Layout,
    ashift: int,
    rules: RuleSet,
    whole_disk: bool,
    disk: DiskSpeed,
    inputs: RiskInputs,
    as_json: bool,
    expand_to: int | None = None,
    note: str = "",
) -> None:
    result = plan_pool(layout, ashift, rules, whole_disk)
    grown = plan_expansion(result, expand_to) if expand_to is not None else None
    detail = predict_detailed(layout, disk, ashift=ashift)
    risk = pool_risk(layout, disk, inputs)
    if as_json:
        doc = result.as_dict()
        doc["predicted_speed"] = {
            "model": True,
            "disk": disk.source,
            **detail.speed.as_dict(),
            "basis": {k: v["basis"] for k, v in detail.figures().items()},
            "notes": list(detail.notes),
        }
        doc["resilience"] = risk.as_dict()
        doc["class_notes"] = class_notes(layout)
        doc["zfs_rules_note"] = note
        if grown is not None:
            doc["expansion"] = grown.as_dict()
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    from poolbench.cli.plan_show import show_layout  # rich only for tables

    show_layout(result, grown, detail, disk, risk, class_notes(layout), note)


def _plan_search(
    text: str,
    disk_sizes: tuple[int, ...],
    ashift: int,
    rules: RuleSet,
    whole_disk: bool,
    disk: DiskSpeed,
    min_failures: int,
    objective: Objective,
    top: int,
    as_json: bool,
    classes: tuple[ClassVdev, ...] = (),
    data: DataOptions = NO_DATA,
    db: Path | None = None,
) -> None:
    disks = list(disk_sizes)
    cands = search(
        disks,
        ashift=ashift,
        rules=rules,
        disk_speed=disk,
        min_failures=min_failures,
        objective=objective,
        whole_disk=whole_disk,
        classes=classes,
    )
    if not cands:
        raise UsageError(
            f"No layout of {text} survives {min_failures} disk failures.",
            "Lower --min-failures or add disks.",
        )
    if data.data_text is not None:
        from poolbench.cli.plan_data import plan_search_data  # the scanner: on use

        return plan_search_data(cands, ashift, rules, whole_disk, data, db, as_json, top)
    if as_json:
        doc = {
            "disks": disks,
            "zfs_rules": rules.name,
            "ashift": ashift,
            "whole_disk": whole_disk,
            "objective": objective,
            "disk_speed": disk.source,
            "candidates": [c.as_dict() for c in cands],
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")  # one write: 674 layouts at once
        return
    from poolbench.cli.plan_show import show_candidates  # rich only for tables

    show_candidates(cands[:top], disk, rules, len(cands))
