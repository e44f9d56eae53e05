"""Which space rules a ZFS release applies (pure).

Every rule here was read in the OpenZFS / ZFS on Linux source at the release tags (the git tags
``zfs-0.6.3`` … ``zfs-2.4.x`` of github.com/openzfs/zfs) and in zfs-fuse 0.7.0 (pool v23,
OpenSolaris onnv ~b130 code). A rule set is a small record of *which* rule is in force; the
arithmetic lives in `capacity.py`. The boundaries, each found by reading the named function at
successive tags:

====================  ========================================================================
rule                  change and where it happened
====================  ========================================================================
metaslab shift        ``vdev_metaslab_set_size``: ``highbit(asize / 200)`` floored at
                      SPA_MAXBLOCKSHIFT up to 0.8.0-rc3; from 0.8.0-rc4 the
                      ``zfs_vdev_default_ms_count`` / ``min_ms_count`` / ``max_ms_shift`` /
                      ``ms_count_limit`` rule (0.8.0 release).
SPA_MAXBLOCKSHIFT     17 (128 KiB) up to 0.6.4.x and in pool v23; 24 (16 MiB) from 0.6.5
                      (large blocks). It floors the metaslab shift.
slop                  ``dsl_pool_adjustedsize``: MAX(dspace/64, 32 MiB) in v23 and ZoL up to
                      0.6.4.x; ``spa_get_slop_space`` MAX(dspace/32, 32 MiB) in 0.6.5.x and
                      0.7.0-rc1..rc3; MAX(dspace/32, MIN(dspace/2, 128 MiB)) from 0.7.0-rc4;
                      capped at 128 GiB (``spa_max_slop``) from 2.0.6; minus the embedded log
                      metaslab space from 2.1.0.
embedded log          ``vdev_metaslab_init`` moves one metaslab of every normal-class top-level
                      vdev with more than ``zfs_embedded_slog_min_ms`` (64) metaslabs to the
                      embedded log class: from 2.1.0.
dRAID                 from 2.1.0.
special/dedup class   allocation classes from 0.8.0 (``spa_special_class``); their space
                      counts in `zpool list` SIZE (``spa_prop_get_config``), not in dspace.
RAIDZ expansion       ``zpool attach`` to a raidz vdev: 2.3.0 (`raidz_expansion_supported`).
====================  ========================================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from poolbench.errors import UsageError

SlopRule = Literal["v23", "shift5_min32m", "shift5_min128m", "shift5_cap128g"]
MetaslabRule = Literal["per_vdev_200", "ms_count_limits"]


@dataclass(frozen=True)
class RuleSet:
    name: str
    label: str
    metaslab_rule: MetaslabRule
    max_block_shift: int  # SPA_MAXBLOCKSHIFT
    slop_rule: SlopRule
    embedded_slog: bool
    draid: bool
    linux_whole_disk_partition: bool  # `zpool create` partitions a whole disk (ZoL/OpenZFS)
    pool_version: str  # what the pool says it is (for reports)
    # special and dedup allocation classes (`zpool create ... special mirror a b`): 0.8.0 on
    alloc_classes: bool = False


V23 = RuleSet(
    name="v23",
    label="pool v23 (zfs-fuse 0.7, OpenSolaris b130-era)",
    metaslab_rule="per_vdev_200",
    max_block_shift=17,
    slop_rule="v23",
    embedded_slog=False,
    draid=False,
    linux_whole_disk_partition=False,  # zfs-fuse's is_whole_disk() always returns false
    pool_version="23",
)
ZOL_060 = RuleSet(
    name="zol-0.6.0",
    label="ZFS on Linux 0.6.0 - 0.6.4.x",
    metaslab_rule="per_vdev_200",
    max_block_shift=17,
    slop_rule="v23",
    embedded_slog=False,
    draid=False,
    linux_whole_disk_partition=True,
    pool_version="5000 (feature flags)",
)
ZOL_065 = RuleSet(
    name="zol-0.6.5",
    label="ZFS on Linux 0.6.5.x (and 0.7.0-rc1..rc3)",
    metaslab_rule="per_vdev_200",
    max_block_shift=24,
    slop_rule="shift5_min32m",
    embedded_slog=False,
    draid=False,
    linux_whole_disk_partition=True,
    pool_version="5000 (feature flags)",
)
ZOL_07 = RuleSet(
    name="zol-0.7",
    label="ZFS on Linux 0.7.x",
    metaslab_rule="per_vdev_200",
    max_block_shift=24,
    slop_rule="shift5_min128m",
    embedded_slog=False,
    draid=False,
    linux_whole_disk_partition=True,
    pool_version="5000 (feature flags)",
)
OZ_08 = RuleSet(
    name="openzfs-0.8",
    label="ZFS on Linux 0.8.x and OpenZFS 2.0.0 - 2.0.5",
    metaslab_rule="ms_count_limits",
    max_block_shift=24,
    slop_rule="shift5_min128m",
    embedded_slog=False,
    draid=False,
    linux_whole_disk_partition=True,
    pool_version="5000 (feature flags)",
    alloc_classes=True,
)
OZ_206 = RuleSet(
    name="openzfs-2.0.6",
    label="OpenZFS 2.0.6 - 2.0.7",
    metaslab_rule="ms_count_limits",
    max_block_shift=24,
    slop_rule="shift5_cap128g",
    embedded_slog=False,
    draid=False,
    linux_whole_disk_partition=True,
    pool_version="5000 (feature flags)",
    alloc_classes=True,
)
OZ_21 = RuleSet(
    name="openzfs-2.1",
    label="OpenZFS 2.1 and later",
    metaslab_rule="ms_count_limits",
    max_block_shift=24,
    slop_rule="shift5_cap128g",
    embedded_slog=True,
    draid=True,
    linux_whole_disk_partition=True,
    pool_version="5000 (feature flags)",
    alloc_classes=True,
)

RULE_SETS: tuple[RuleSet, ...] = (V23, ZOL_060, ZOL_065, ZOL_07, OZ_08, OZ_206, OZ_21)
NEWEST = OZ_21
DEFAULT_VERSION = "2.3"

# First release (as a version tuple) in which each rule set is in force; rc tags are mapped
# as documented above (e.g. 0.8.0-rc4 is where the metaslab rule changed).
_BOUNDARIES: tuple[tuple[tuple[int, ...], RuleSet], ...] = (
    ((0, 6, 0), ZOL_060),
    ((0, 6, 5), ZOL_065),
    ((0, 7, 0), ZOL_07),
    ((0, 8, 0), OZ_08),
    ((2, 0, 6), OZ_206),
    ((2, 1, 0), OZ_21),
)

# A release is a few small numbers (ASCII digits only, at most 4 each): "0.6.5.11", "2.3.1",
# "zfs-2.2.0-rc3". Nothing longer is a release (and int() of 5,000 digits raises).
_VERSION_RE = re.compile(
    r"^(?:zfs-|v(?=[0-9]+\.))?([0-9]{1,4}(?:\.[0-9]{1,4}){0,3})(?:-rc([0-9]{1,4}))?"
    r"(?:-[0-9]{1,8}(?:\.[0-9]{1,8}){0,3})?$",
    re.IGNORECASE | re.ASCII,
)
# The release series that exist (ZFS on Linux 0.6-0.8, then OpenZFS 2.0 on; there was no
# 0.9 or 1.x). A later 2.x is taken with the newest rules, and said so (`rules_note`).
KNOWN_SERIES = ((0, 6), (0, 7), (0, 8), (2, 0), (2, 1), (2, 2), (2, 3), (2, 4))
NEWEST_KNOWN = (2, 4)


def parse_zfs_version(text: str) -> RuleSet:
    """``v23`` / ``zfs-fuse`` or a release number (``0.6.3``, ``0.8``, ``2.3.1``) → rules.

    A release candidate counts as the release it leads to, except the two rc boundaries
    the code changed at (0.7.0-rc1..rc3 still had the 0.6.5 slop; 0.8.0-rc1..rc3 the old
    metaslab rule).
    """
    key = text.strip().lower()
    raw = text.strip() if len(text.strip()) <= 40 else text.strip()[:37] + "..."
    if key in ("v23", "23", "zfs-fuse", "zfsfuse", "fuse"):
        return V23
    m = _VERSION_RE.match(key)
    if not m:
        raise UsageError(
            f"--zfs-version '{raw}' is not a ZFS release.",
            "Give v23 (alias zfs-fuse) or an OpenZFS / ZFS on Linux release such as 0.6.3, "
            "0.6.5, 0.8, 2.1 or 2.3.",
        )
    version = tuple(int(p) for p in m.group(1).split("."))
    while len(version) < 3:
        version = version + (0,)
    rc = int(m.group(2)) if m.group(2) else None
    if version < (0, 6, 0):
        raise UsageError(
            f"--zfs-version {raw} predates ZFS on Linux 0.6.0; its rules are not modelled.",
            "Use v23 for the OpenSolaris-era code (zfs-fuse) or a release from 0.6.0 on.",
        )
    if version[:2] not in KNOWN_SERIES and not (version[0] == 2 and version[:2] > NEWEST_KNOWN):
        raise UsageError(
            f"--zfs-version {raw} is not a ZFS release: ZFS on Linux went 0.6, 0.7, 0.8, then "
            "OpenZFS 2.0, 2.1, … (there was no 0.9 or 1.x).",
            "Give the release `zfs version` prints, e.g. 0.8.6, 2.1.5 or 2.3.1 (or v23 for "
            "zfs-fuse).",
        )
    if rc is not None and version[:3] == (0, 7, 0) and rc <= 3:
        return ZOL_065
    if rc is not None and version[:3] == (0, 8, 0) and rc <= 3:
        return ZOL_07
    chosen = ZOL_060
    for start, rules in _BOUNDARIES:
        if version >= start:
            chosen = rules
    return chosen


def rules_note(text: str) -> str:
    """Which release's space rules a figure rests on, for the figure's label: "OpenZFS 2.3
    (rules of OpenZFS 2.1 and later)"; a 2.x newer than the newest release read is said to
    be taken with the newest rules."""
    rules = parse_zfs_version(text)
    m = _VERSION_RE.match(text.strip().lower())
    note = (
        f"--zfs-version {text.strip()}: space rules of {rules.label}. Other releases reserve "
        "differently (slop, metaslab sizes): compare with --zfs-version 0.6.3, 0.7 or 0.8"
    )
    if m and rules is NEWEST:
        version = tuple(int(p) for p in m.group(1).split("."))
        if version[:2] > NEWEST_KNOWN:
            note += (
                f"; the newest rules read here are {NEWEST_KNOWN[0]}.{NEWEST_KNOWN[1]}'s, a "
                "later release is assumed to keep them"
            )
    return note + "."


def rules_by_name(name: str) -> RuleSet:
    for r in RULE_SETS:
        if r.name == name:
            return r
    return parse_zfs_version(name)


# The release inside a reported version: `zpool version`'s first line is "zfs-2.3.2-2~bpo12+2"
# (Debian), "zfs-2.2.2-0ubuntu9" or "zfs-kmod-2.1.5-1"; a release candidate keeps its "-rcN".
_REPORTED_RE = re.compile(r"(\d+(?:\.\d+){1,3}(?:-rc\d+)?)", re.IGNORECASE)


def reported_release(zfs_version: str) -> str:
    """The release in a version as ZFS reported it, in --zfs-version's grammar:
    'zfs-2.3.2-2~bpo12+2' → '2.3.2'; zfs-fuse (or nothing: this machine's ZFS) → 'v23'."""
    if "fuse" in zfs_version or not zfs_version.strip():
        return "v23"
    m = _REPORTED_RE.search(zfs_version)
    return m.group(1) if m else zfs_version


def rules_for_reported(zfs_version: str) -> RuleSet:
    """The rules for a ZFS as a pool reported it: 'zfs-fuse, pool version 23' → v23,
    'zfs-2.3.2-2~bpo12+2' or '2.3.2-2~bpo12+2' → 2.3.2 (an empty version is taken as
    zfs-fuse, this machine's ZFS)."""
    release = reported_release(zfs_version)
    return V23 if release == "v23" else parse_zfs_version(release)


RAIDZ_EXPANSION_SINCE = (2, 3, 0)


def raidz_expansion_supported(text: str) -> bool:
    """Whether the ZFS named by `text` (as --zfs-version takes it) can `zpool attach` a disk
    to a raidz vdev: the raidz_expansion feature of OpenZFS 2.3.0 (not zfs-fuse, not 2.2)."""
    if parse_zfs_version(text) is V23:
        return False
    m = _VERSION_RE.match(text.strip().lower())
    if not m:
        return False
    version = tuple(int(p) for p in m.group(1).split("."))
    return (version + (0, 0))[:3] >= RAIDZ_EXPANSION_SINCE
