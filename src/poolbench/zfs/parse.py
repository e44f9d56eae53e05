"""Readers of `zpool`, `zfs` and `zdb` output, for both dialects. Pure: text in, values out.

There is one `zpool status` parser (`read_status`) and one `zpool list` parser
(`parse_pool_list`); everything else that needs a pool's vdevs or GUIDs goes through them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from poolbench import is_digits

# Words of the tree that are no device: interior vdevs below a top-level vdev while a member is
# replaced or a hot spare stands in (replacing-1, spare-2), and dRAID's distributed spares
# (draid2-0-0), which live inside the dRAID vdev. Every other word in the tree is a leaf.
_NESTED_INTERIOR = re.compile(r"^(replacing|spare)-\d+$|^draid\d-\d+-\d+$")
_TOP = re.compile(r"^(mirror|raidz[123]?|draid[123]?(?::\d+[dcs])*)-\d+$")


@dataclass(frozen=True)
class TopVdev:
    """One top-level vdev as `zpool status` shows it."""

    kind: str  # stripe | mirror | raidz1..3 | draidP:Dd:Cc:Ss
    name: str
    leaves: tuple[str, ...]

    @property
    def width(self) -> int:
        return len(self.leaves)


@dataclass
class PoolStatus:
    """What `zpool status POOL` says: health, the data vdevs (not logs, cache, spares) and
    every leaf device of the pool (data, logs, cache and spares alike), as shown."""

    health: str = ""
    tops: list[TopVdev] = field(default_factory=list)
    leaves: list[str] = field(default_factory=list)
    scan: str = ""  # the scan:/scrub: line (resilver progress)
    # the leaves of each class section, by its header: logs, cache, spares, special, dedup
    class_leaves: dict[str, list[str]] = field(default_factory=dict)
    # the top-level vdevs of each class section (mirror-1, or a lone disk), as named there
    class_tops: dict[str, list[str]] = field(default_factory=dict)


def top_kind(name: str) -> str | None:
    """The kind of a top-level vdev from its name in `zpool status` (None for a leaf)."""
    m = _TOP.match(name)
    if not m:
        return None
    kind = m.group(1)
    if kind == "raidz":
        return "raidz1"
    if kind.startswith("draid") and (len(kind) == 5 or kind[5] == ":"):
        kind = "draid1" + kind[5:]
    return kind


def _config_lines(text: str, status: PoolStatus) -> list[tuple[int, str]]:
    """(indent, first word) of each line of the config tree; fills health and scan."""
    out: list[tuple[int, str]] = []
    in_config = False
    for raw in text.splitlines():
        line = raw.expandtabs(8)
        words = line.split()
        if not words:
            continue
        if not in_config:
            if words[0] == "state:" and len(words) > 1:
                status.health = words[1]
            elif words[0] in ("scan:", "scrub:"):
                status.scan = line.strip()
            in_config = words[0] == "NAME" and "STATE" in words
            continue
        if words[0] == "errors:":
            break
        out.append((len(line) - len(line.lstrip()), words[0]))
    return out


def _class_member(status: PoolStatus, section: str, word: str, top: bool) -> None:
    """A line of a class section (logs, cache, spares, special, dedup)."""
    if top:
        status.class_tops[section].append(word)
    if (not top or top_kind(word) is None) and not _NESTED_INTERIOR.match(word):
        status.leaves.append(word)
        status.class_leaves[section].append(word)


def read_status(text: str, pool: str) -> PoolStatus:
    """Parse `zpool status POOL` (OpenZFS, with or without -P, and zfs-fuse)."""
    status = PoolStatus()
    pool_indent = -1
    in_data = True  # below the pool line, before a logs/cache/spares/special section
    section = ""
    cur: tuple[str, str, list[str]] | None = None

    def close() -> None:
        if cur is not None:
            status.tops.append(TopVdev(cur[0], cur[1], tuple(cur[2])))

    for indent, word in _config_lines(text, status):
        if pool_indent < 0:
            pool_indent = indent if word == pool else -1
            continue
        if indent <= pool_indent:  # a section header: logs, cache, spares, special, dedup
            close()
            cur, in_data, section = None, False, word
            status.class_leaves.setdefault(section, [])
            status.class_tops.setdefault(section, [])
            continue
        if not in_data:
            _class_member(status, section, word, top=indent == pool_indent + 2)
            continue
        kind = top_kind(word) if indent == pool_indent + 2 else None
        if kind is None and not _NESTED_INTERIOR.match(word):
            status.leaves.append(word)
        if indent == pool_indent + 2:
            close()
            cur = (kind, word, []) if kind is not None else None
            if kind is None:  # a leaf right under the pool: one disk of a stripe
                status.tops.append(TopVdev("stripe", word, (word,)))
        elif cur is not None and not _NESTED_INTERIOR.match(word):
            cur[2].append(word)
    close()
    return status


def parse_status(text: str, pool: str) -> tuple[list[TopVdev], str]:
    """The data vdevs and the health of `zpool status POOL` (a view of `read_status`)."""
    s = read_status(text, pool)
    return s.tops, s.health


def leaf_path(word: str) -> str:
    """A leaf as `zpool status` names it, as a path: a bare name is a device under /dev."""
    return word if word.startswith("/") else f"/dev/{word}"


def member_paths(text: str, pool: str) -> list[str]:
    """Real paths of every leaf device of the pool in `zpool status POOL` output."""
    return [os.path.realpath(leaf_path(w)) for w in read_status(text, pool).leaves]


def parse_pool_list(text: str) -> dict[str, int]:
    """Pool name -> GUID, from `zpool list -H -o name,guid` (both dialects)."""
    pools: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and is_digits(parts[1].strip()):
            pools[parts[0]] = int(parts[1])
    return pools


def parse_zfs_get(text: str) -> dict[str, dict[str, str]]:
    """property -> {value, source}, from `zfs get -Hp -o property,value,source`."""
    values: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3:
            values[parts[0]] = {"value": parts[1], "source": parts[2]}
    return values


def parse_pool_get(text: str, pool: str, prop: str, dialect: str) -> str | None:
    """One pool property from `commands.pool_prop` output, in either dialect."""
    if dialect == "openzfs":
        return text.strip() or None
    for line in text.splitlines()[1:]:  # zfs-fuse: NAME PROPERTY VALUE SOURCE
        words = line.split()
        if len(words) >= 3 and words[0] == pool and words[1] == prop:
            return words[2]
    return None


def parse_pool_get_all(text: str, pool: str, dialect: str) -> dict[str, dict[str, str]]:
    """property -> {value, source} from `commands.pool_props_all`, in either dialect."""
    if dialect == "openzfs":
        return parse_zfs_get(text)
    values: dict[str, dict[str, str]] = {}
    for line in text.splitlines()[1:]:  # zfs-fuse: NAME PROPERTY VALUE SOURCE
        words = line.split()
        if len(words) >= 4 and words[0] == pool:
            values[words[1]] = {"value": " ".join(words[2:-1]), "source": words[-1]}
    return values


def zdb_pool_section(text: str, pool: str) -> str | None:
    """`pool`'s section of `zdb -C` without a pool name (the cache file: `NAME:` at the
    line's start, its configuration indented under it), or None if the pool is not there."""
    lines = text.splitlines()
    try:
        start = lines.index(f"{pool}:")
    except ValueError:
        return None
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i][:1] not in ("", " ", "\t")),
        len(lines),
    )
    return "\n".join(lines[start:end]) + "\n"


def parse_zdb_ashift(text: str) -> list[int]:
    """ashift of each top-level vdev, from `zdb -C POOL` (leaves carry none)."""
    return [int(m.group(1)) for m in re.finditer(r"^\s*ashift:\s*(\d+)\s*$", text, re.M)]


def parse_zdb_paths(text: str) -> list[str]:
    """The path of every leaf vdev, from `zdb -C POOL`."""
    return re.findall(r"^\s*path:\s*'([^']+)'", text, re.M)


def version_tuple(text: str) -> tuple[int, ...]:
    """(2, 2, 3) from "zfs-2.2.3-1"; () if there is no version in the text."""
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(g) for g in m.groups() if g is not None) if m else ()


def parse_fuse_pool_version(text: str) -> str | None:
    """zfs-fuse's pool version from `zpool upgrade -v`."""
    m = re.search(r"running ZFS pool version (\d+)", text)
    return m.group(1) if m else None


@dataclass(frozen=True)
class ResilverStatus:
    done: bool
    in_progress: bool
    resilvered_bytes: int | None  # as `zpool status` reports it (rounded by its units)
    line: str  # the scan/scrub line, for the record
    # OpenZFS's sequential rebuild (dRAID onto a distributed spare, or `zpool replace -s`):
    # the top-level vdev it rebuilt, as its status line names it ("draid1:2d:5c:1s-0"); ""
    # for a healing resilver
    rebuilt_vdev: str = ""


@dataclass(frozen=True)
class ScrubStatus:
    """The scrub OpenZFS starts after a sequential rebuild (zfs_rebuild_scrub_enabled): a
    rebuild copies blocks without checking their checksums, the scrub checks them."""

    seen: bool  # a scrub line is in the output
    done: bool
    line: str


_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = r"([\d.]+[BKMGT]?)"
# print_rebuild_status_impl (cmd/zpool/zpool_main.c): "resilver (VDEV) in progress since
# DATE", then "resilvered (VDEV) SIZE in H:MM:SS with N errors on DATE"
_REBUILD_DONE = re.compile(r"resilvered \(([^)]+)\) " + _SIZE + r" in ")
_REBUILD_RUNNING = re.compile(r"resilver \(([^)]+)\) in progress")


def _human_bytes(text: str) -> int | None:
    m = re.fullmatch(r"([\d.]+)([BKMGT]?)", text.strip().upper())
    return int(float(m.group(1)) * _UNITS[m.group(2)]) if m else None


def _scan_lines(status: str) -> list[str]:
    """Every scan:/scrub: line (OpenZFS prints a scrub's and a rebuild's, one each)."""
    out = []
    for raw in status.splitlines():
        words = raw.strip()
        if words.startswith(("scan:", "scrub:")):
            out.append(words)
    return out


def parse_resilver(status: str) -> ResilverStatus:
    """The resilver state of `zpool status` output, in both dialects:

    zfs-fuse (v23): ``scrub: resilver completed after 0h0m with 0 errors on ...`` and
    ``resilver in progress for 0h0m, 12.34% done, 0h1m to go``, with ``12M resilvered`` after
    the new member; OpenZFS: ``scan: resilvered 12.3M in 00:00:01 with 0 errors on ...`` and
    ``scan: resilver in progress since ...``; its sequential rebuild names the top vdev:
    ``scan: resilver (draid1:2d:5c:1s-0) in progress since ...``, then ``scan: resilvered
    (draid1:2d:5c:1s-0) 80.0M in 00:00:05 with 0 errors on ...`` below the scrub's line.
    """
    lines = _scan_lines(status)
    for line in lines:
        m = _REBUILD_DONE.search(line)
        if m:
            return ResilverStatus(True, False, _human_bytes(m.group(2)), line, m.group(1))
        m = _REBUILD_RUNNING.search(line)
        if m:
            return ResilverStatus(False, True, None, line, m.group(1))
    line = lines[-1] if lines else ""
    in_progress = "resilver in progress" in status
    done = not in_progress and bool(
        re.search(r"resilver(ed)?\b.*\b(completed|with \d+ errors)", line)
        or re.search(r"resilvered [\d.]+[BKMGT]? in ", line)
    )
    m = re.search(r"resilvered ([\d.]+[BKMGT]?) in ", line)
    if m:
        n = _human_bytes(m.group(1))
        if n is not None:
            return ResilverStatus(done, in_progress, n, line)
    each = re.finditer(r"\s([\d.]+[BKMGT]?) resilvered", status)
    found = [_human_bytes(x.group(1)) for x in each]
    sizes = [n for n in found if n is not None]
    return ResilverStatus(done, in_progress, sum(sizes) if sizes else None, line)


def parse_scrub(status: str) -> ScrubStatus:
    """OpenZFS's scrub line: ``scrub in progress since ...`` or ``scrub repaired 0B in
    00:00:01 with 0 errors on ...`` (print_scan_scrub_resilver_status)."""
    for line in _scan_lines(status):
        if "scrub in progress" in line:
            return ScrubStatus(True, False, line)
        if "scrub repaired" in line or "scrub canceled" in line:
            return ScrubStatus(True, True, line)
    return ScrubStatus(False, False, "")


# `zpool iostat -Hvlp` columns after the vdev name (OpenZFS 2.x, zpool-iostat(8)): capacity,
# operations and bandwidth, then average latencies in ns (total, disk, sync queue, async
# queue: read and write each; scrub, trim and, from 2.2, rebuild waits).
IOSTAT_COLUMNS = (
    "alloc", "free", "read_ops", "write_ops", "read_bytes_s", "write_bytes_s",
    "total_wait_read_ns", "total_wait_write_ns", "disk_wait_read_ns", "disk_wait_write_ns",
    "syncq_wait_read_ns", "syncq_wait_write_ns", "asyncq_wait_read_ns", "asyncq_wait_write_ns",
    "scrub_wait_ns", "trim_wait_ns", "rebuild_wait_ns",
)  # fmt: skip


# One vdev's row of `zpool iostat -Hvlp`: its name and the numeric columns (None for "-").
IostatRow = dict[str, str | int | None]


def class_alloc(
    status: PoolStatus, iostat: list[IostatRow], column: str = "alloc"
) -> dict[str, int]:
    """Bytes allocated on the data vdevs ("normal") and on each allocation class's vdevs
    (special, dedup), from `zpool iostat -v`'s per-vdev alloc and `zpool status`'s sections:
    what a special vdev holds beside the data; `column` "free": the bytes still free there.
    A class whose vdevs have no such figure is left out."""
    alloc = {str(r["name"]): r.get(column) for r in iostat}
    out: dict[str, int] = {}
    groups = {"normal": [t.name for t in status.tops]}
    groups |= {c: status.class_tops.get(c, []) for c in ("special", "dedup")}
    for cls, names in groups.items():
        got = [alloc.get(n) for n in names]
        if names and all(isinstance(v, int) for v in got):
            out[cls] = sum(v for v in got if isinstance(v, int))
    return out


def parse_iostat(text: str) -> list[IostatRow]:
    """One row per vdev of `zpool iostat -Hvlp`: name and the numeric columns ("-" -> None)."""
    rows: list[IostatRow] = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) < 7:
            continue
        row: IostatRow = {"name": parts[0].strip()}
        for col, value in zip(IOSTAT_COLUMNS, parts[1:], strict=False):
            v = value.strip()
            row[col] = int(v) if is_digits(v) else None
        rows.append(row)
    return rows


# -- the dedup table (`zpool status -D`) ----------------------------------------------------
@dataclass(frozen=True)
class DedupTable:
    """What `zpool status -D` says of the pool's dedup table (DDT): its entries (one per
    unique block written with dedup on), their size on disk and in core in all (bytes), and
    the blocks and logical bytes they are referenced by (its histogram's total)."""

    entries: int
    disk_bytes: int
    core_bytes: int
    referenced_blocks: int
    referenced_bytes: int


_DDT = re.compile(r"DDT entries (\d+), size (\S+) on disk, (\S+) in core")
_NICE = re.compile(r"(\d+(?:\.\d+)?)([BKMGTPE]?)")


def nicenum(text: str) -> int:
    """A number as ZFS prints it for people (zfs_nicenum: 1024-based, "597", "1.26K",
    "389B", "64M"), or exactly (-p: "1290")."""
    m = _NICE.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"not a ZFS number: {text!r}")
    power = "BKMGTPE".index(m.group(2) or "B")  # B (bytes) and no suffix alike
    return round(float(m.group(1)) * (1 << 10 * power))


def parse_dedup_table(text: str, averaged: bool) -> DedupTable:
    """The DDT summary of `zpool status -D` in either dialect: " dedup: DDT entries N, size
    D on disk, C in core[, X cached (P%)]" (OpenZFS; "no DDT entries" when empty) or the
    line without " dedup: " (zfs-fuse; nothing at all when empty), then the histogram whose
    "Total" row counts the referenced blocks and bytes. `averaged`: the sizes printed are
    per entry (zfs-fuse and OpenZFS before 2.3 divide them by the entries; 2.3 prints the
    totals), so they are multiplied back."""
    m = _DDT.search(text)
    if m is None and re.search(r"DDT entries \d", text):  # a table, in words not known here
        line = text[text.index("DDT entries") :].splitlines()[0]
        raise ValueError(f"a DDT summary this parse does not know: {line!r}")
    if m is None:  # no table: dedup never wrote a block, or every one was freed
        return DedupTable(0, 0, 0, 0, 0)
    entries = int(m.group(1))
    scale = entries if averaged else 1
    blocks = size = 0
    for line in text[m.end() :].splitlines():
        words = line.split()
        if len(words) == 9 and words[0] == "Total":  # allocated ×4, referenced ×4
            blocks, size = nicenum(words[5]), nicenum(words[6])
    return DedupTable(entries, nicenum(m.group(2)) * scale, nicenum(m.group(3)) * scale,
                      blocks, size)  # fmt: skip
