"""Settings of a study that are each valid but cannot work together, refused up front (at
`--dry-run` already) instead of failing hours into a run. Pure: no I/O except checking that the
untar workload's tarball is a readable file."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from poolbench import capabilities, is_digits
from poolbench.errors import UsageError
from poolbench.factors import specs as spec
from poolbench.planner.capacity import predicted_usable
from poolbench.planner.space import SPA_MINDEVSIZE
from poolbench.units import parse_size

if TYPE_CHECKING:
    from poolbench.study.model import Study

# The ZFS release the capacity check assumes; raidz space accounting differs little between
# releases, and the check only refuses a working set that cannot fit at all.
_CAPACITY_RULES = "2.3"


Located = tuple[tuple[str, ...], UsageError]  # the key it is about, and what is wrong


def problems(study: Study) -> list[Located]:
    """Every problem of the study, each with the key it is about (for its line): a file is
    fixed in one pass, not one error per attempt."""
    found: list[Located] = []
    checks = (
        (("replicates",), _replicates),
        (("factors",), _levels_ascii),
        (("disks", "size"), _zfs_device_size),
        (("workloads", "size"), _fits),
        (("factors", spec.FRAG_TARGET), _frag_needs_aging),
    )
    for loc, check_one in checks:
        try:
            check_one(study)
        except UsageError as exc:
            found.append((loc, exc))
    return found


def _replicates(study: Study) -> None:
    if study.replicates > study.max_replicates:
        raise UsageError(
            f"replicates = {study.replicates} is more than max_replicates = "
            f"{study.max_replicates}.",
            "Raise max_replicates to at least replicates, or lower replicates.",
        )


def _levels_ascii(study: Study) -> None:
    # Levels end up on zpool/zfs/mkfs command lines: '١٢' must not become `ashift=١٢`.
    for key, levels in study.factors.items():
        for level in levels:
            if isinstance(level, str) and not level.isascii():
                raise UsageError(
                    f"factor '{key}' has the level {level!r}, which is not plain ASCII.",
                    "Write levels with ASCII letters and digits (e.g. ashift = [9, 12]).",
                )


def _zfs_device_size(study: Study) -> None:
    """zpool create refuses a device under SPA_MINDEVSIZE: a ZFS study on smaller sparse
    files (or slices) would fail at its first trial, so it is refused here, dry runs too."""
    d = study.disks
    if d.source == "devices" or d.count == 0:
        return  # device sizes are known only after probing them
    if "zfs" not in [str(b) for b in study.factors.get("backend", ["zfs"])]:
        return
    sliced = d.vdev_source == "slice" or "slice" in study.factors.get(spec.VDEV_SOURCE, [])
    what, size = (
        ("slice_size", d.slice_size) if sliced and d.slice_size else ("the disk size", d.size)
    )
    if parse_size(size) < SPA_MINDEVSIZE:
        raise UsageError(
            f"{what} {size} ({parse_size(size):,} bytes) is under ZFS's minimum "
            f"device size of 64 MiB ({SPA_MINDEVSIZE:,} bytes, SPA_MINDEVSIZE): zpool create "
            "would refuse every pool of this study.",
            "Use disks (and slices) of at least 64M (e.g. --disks 6x256M), or a backend other "
            "than zfs.",
        )


def _fits(study: Study) -> None:
    """The working set, after the highest fill level, must fit in every layout's usable space."""
    d = study.disks
    if d.source == "devices" or d.count == 0:
        return  # device sizes are known only after probing them
    ws = parse_size(study.workloads.size)
    # aging fills to its fill level, 80% without one (factors/aging.py DEFAULT_FILL)
    default = [spec.AGING_FILL] if spec.AGING in study.factors else [0]
    fill = max((int(x) for x in study.factors.get(spec.FILL, default)), default=0)
    ashifts = [int(a) for a in study.factors.get("ashift", [12]) if is_digits(str(a))] or [12]
    for layout in (str(x) for x in study.factors.get("layout", [])):
        if _widths(layout, d.count) > d.count:
            continue  # wider than the disks: the backend refuses that with its own message
        usable = d.count * d.size_bytes  # raw space bounds every stack
        # A layout the planner does not model (btrfs, md): the raw bound still holds.
        with contextlib.suppress(UsageError, ValueError):
            usable = min(
                predicted_usable(layout, a, d.count, d.size_bytes, _CAPACITY_RULES) for a in ashifts
            )
        if ws + usable * fill // 100 > usable:
            raise UsageError(
                f"the working set {study.workloads.size}"
                + (f" after filling {fill}%" if fill else "")
                + f" does not fit in layout {layout!r} on {d.count} x {d.size} disks "
                f"(about {usable // 2**20} MiB usable).",
                "Lower [workloads] size or the fill levels, or use more or larger disks.",
            )


def _frag_needs_aging(study: Study) -> None:
    """A fragmentation target is what aging rounds chase: alone it would do nothing."""
    if spec.FRAG_TARGET in study.factors and spec.AGING not in study.factors:
        raise UsageError(
            "factor 'frag_target' needs an 'aging' factor: aging rounds are what reach it.",
            "Add e.g. aging = [1, 3], or remove frag_target.",
        )


def _widths(layout: str, n_disks: int) -> int:
    """Disks a study layout uses (`raidz1:3+mirror:2` = 5; `raidz2` = every disk), read by
    the one layout grammar; a layout it cannot read counts as wider than the disks (the
    backend refuses it with its own message)."""
    from poolbench.planner.layout import parse_layout

    try:
        return parse_layout(layout, (1 << 30,) * n_disks).disk_count
    except (UsageError, ValueError):
        return n_disks + 1


def check_tarball(study: Study) -> None:
    """The untar workload needs a readable tarball, refused already at --dry-run."""
    if "untar" not in study.workloads.names:
        return
    tarball = study.workloads.tarball
    if tarball and Path(tarball).is_file() and os.access(tarball, os.R_OK):
        return
    from poolbench.study.builtin.fs_compare import DEFAULT_TARBALL

    another = (
        "give another source tree with [workloads] tarball = FILE.tar[.xz|.gz] (poolbench "
        "study: --tarball FILE)"
    )
    if tarball == DEFAULT_TARBALL and not Path(tarball).exists():
        # the default tree is a package this machine lacks, not a path the user mistyped
        raise capabilities.unsupported(
            "untar-tarball",
            f"The untar workload extracts {tarball} by default, and this machine does not "
            "have it; nothing was created.",
            f"Install it (Debian: apt-get install --no-remove linux-source-6.1), or {another}",
        )
    if not tarball:
        what = "no tarball is set"
    elif not Path(tarball).exists():
        what = f"its tarball {tarball} does not exist"
    else:
        what = f"its tarball {tarball} is not a readable file"
    raise UsageError(
        f"The untar workload needs a source tree to extract, but {what}.",
        f"Install linux-source-6.1 (Debian: apt-get install --no-remove linux-source-6.1) or "
        f"{another}. " + capabilities.doctor_hint("untar-tarball"),
    )
