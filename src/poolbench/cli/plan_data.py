"""`plan --data`: space, recordsize and special vdev sizing from the user's own data.

The data is a directory tree (scanned, sizes only), a saved histogram (`@NAME`, or its JSON
file), or a pool's `zdb -Lbbbs` output. Everything after loading is the planner's pure
arithmetic (planner/dataspace.py, planner/special.py).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import click

from poolbench.cli.plan_data_options import DataOptions
from poolbench.errors import UsageError
from poolbench.planner.capacity import plan_pool
from poolbench.planner.dataspace import DataSpace, WriteModel, data_space
from poolbench.planner.filesizes import FileSizes, ScanNotes, from_dict
from poolbench.planner.layout import Layout
from poolbench.planner.rules import RuleSet
from poolbench.planner.search import Candidate
from poolbench.planner.special import SpecialLevel, special_levels
from poolbench.planner.zdbstats import looks_like_zdb, parse_zdb
from poolbench.store import histograms
from poolbench.units import format_size

KiB = 1024
ADVICE_SIZES = (16 * KiB, 128 * KiB, 1024 * KiB)
SUMMARY_BUCKETS = (4 * KiB, 16 * KiB, 128 * KiB, 1 << 20)  # the data's files by size, up to
# A compressor's output on incompressible input, per input byte: what a tail record's data
# costs once its zeros are gone (lzjb: a copy-map byte per 8 literals; lz4: a length byte per
# 255 literals; zstd and gzip store such blocks raw, a few bytes of header).
EXPANSION = {"lz4": 1 + 1 / 255, "lzjb": 9 / 8, "zstd": 1.0, "gzip": 1.0}


def load_data(text: str, db: Path | None, sample_over: int) -> FileSizes:
    """--data: @NAME, a saved histogram or zdb output file, or a directory to scan."""
    if text.startswith("@"):
        doc, path = histograms.load(text[1:], db)
        return from_dict(doc, str(path))
    path = Path(text)
    if path.is_file():
        return _from_file(path)
    if not path.exists() and not path.is_symlink():
        raise UsageError(
            f"plan --data {text}: no such directory or file.",
            "Give the directory whose files you will store, a histogram saved with "
            "--save-data (as @NAME), or a file of `zdb -Lbbbs POOL` output.",
        )
    from poolbench.system.datascan import scan_tree

    result = scan_tree(path, sample_over=sample_over, progress=_progress)
    notes = ScanNotes(**result.notes)  # type: ignore[arg-type]
    return FileSizes(
        result.counts, result.logical_bytes, result.allocated_bytes, result.root, notes=notes
    )


def _progress(files: int, logical: int, dirs: int) -> None:
    click.echo(f"scanning: {files:,} files, {format_size(logical)}, {dirs:,} directories", err=True)


def _from_file(path: Path) -> FileSizes:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise UsageError(
            f"plan --data {path}: {exc.strerror or exc}.", "Give a readable file."
        ) from exc
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError:
            doc = {}
        return from_dict(doc if isinstance(doc, dict) else {}, str(path))
    if looks_like_zdb(text):
        return parse_zdb(text, str(path))
    raise UsageError(
        f"plan --data {path} is a file, but neither a saved histogram nor zdb output.",
        "Give a directory to scan, a histogram saved with --save-data, or `zdb -Lbbbs POOL` "
        "output saved to a file.",
    )


def write_model(
    recordsize: int, compression: str, compressibility: float, rules: RuleSet
) -> WriteModel:
    if recordsize > 1 << rules.max_block_shift:
        raise UsageError(
            f"--recordsize {format_size(recordsize)} is over {rules.label}'s largest block "
            f"({format_size(1 << rules.max_block_shift)}).",
            f"Use --recordsize {format_size(1 << rules.max_block_shift)} or less.",
        )
    return WriteModel(
        recordsize=recordsize,
        compression=compression != "off",
        compressibility=compressibility / 100,
        expansion=EXPANSION.get(compression, 1.0),
        embedded=rules.max_block_shift > 17,  # embedded_data and large_blocks: ZoL 0.6.4/5 on
        indirect_bps=128 if rules.max_block_shift <= 17 else 1024,
    )


def _with_rs(m: WriteModel, rs: int) -> WriteModel:
    return replace(m, recordsize=rs)


@dataclass(frozen=True)
class LayoutData:
    """Everything `plan --layout … --data …` shows: the data and the model; per ashift the
    space it needs, the recordsize advice (none for zdb block statistics) and the special
    vdev's levels. The tables read its fields; `as_json` is the --json document."""

    h: FileSizes
    m: WriteModel
    spaces: list[DataSpace]
    advice: list[DataSpace]
    special: list[tuple[int, list[SpecialLevel]]]  # (ashift, levels)

    def as_json(self) -> dict[str, object]:
        return {
            "data": data_summary(self.h),
            "model": model_dict(self.m),
            "space": [s.as_dict() for s in self.spaces],
            "recordsize_advice": [s.as_dict() for s in self.advice],
            "special": [
                {"ashift": a, "levels": [lv.as_dict() for lv in levels]}
                for a, levels in self.special
            ],
        }


def layout_report(
    layout: Layout, ashifts: list[int], rules: RuleSet, whole_disk: bool, h: FileSizes,
    m: WriteModel,
) -> LayoutData:  # fmt: skip
    plans = [plan_pool(layout, a, rules, whole_disk) for a in ashifts]
    sizes = [rs for rs in ADVICE_SIZES if rs <= 1 << rules.max_block_shift]
    if m.recordsize not in sizes:
        sizes = sorted({*sizes, m.recordsize})
    return LayoutData(
        h, m, [data_space(p, h, m) for p in plans],
        [] if h.kind == "blocks" else [
            data_space(p, h, _with_rs(m, rs)) for p in plans for rs in sizes
        ],
        [(p.ashift, special_levels(p, h, m)) for p in plans],
    )  # fmt: skip


def data_summary(h: FileSizes) -> dict[str, object]:
    d = h.as_dict()
    d.pop("counts_512b_units")
    by_size = []
    for upper in (*SUMMARY_BUCKETS, 1 << 62):
        n, b = h.bucket(upper)
        by_size.append({"up_to_bytes": upper if upper < 1 << 62 else None, "files": n, "bytes": b})
    d["cumulative"] = by_size
    return d


def model_dict(m: WriteModel) -> dict[str, object]:
    return {
        "recordsize": m.recordsize,
        "compression": m.compression,
        "compressibility": m.compressibility,
        "compressor_expansion": round(m.expansion, 6),
        "embedded_data": m.embedded,
        "metadata": "model: dnode, directory and indirect blocks, compressed, two copies "
        "(docs/planner.md)",
    }


def rank_for_data(
    cands: list[Candidate], ashift: int, rules: RuleSet, whole_disk: bool, h: FileSizes,
    m: WriteModel,
) -> list[tuple[Candidate, list[DataSpace], int]]:  # fmt: skip
    """The search's candidates ordered by how much of *this* data they hold: each pool's
    usable space × (the data's logical bytes / what the data is charged there)."""
    out = []
    for c in cands:
        spaces = [data_space(plan_pool(p, ashift, rules, whole_disk), h, m) for p in c.pools]
        holds = sum(_holds(s) for s in spaces)
        out.append((c, spaces, holds))
    out.sort(key=lambda t: (-t[2], -t[0].failures_tolerated, t[0].name))
    return out


def _holds(s: DataSpace) -> int:
    """Logical bytes of data shaped like this that fit in the pool's usable space."""
    if s.charged == 0:
        return s.plan.usable_bytes
    return int(s.plan.usable_bytes * s.logical_bytes / s.charged)


def search_report(
    ranked: list[tuple[Candidate, list[DataSpace], int]], h: FileSizes, m: WriteModel
) -> dict[str, object]:
    return {
        "data": data_summary(h),
        "model": model_dict(m),
        "ranked_by": "holds_bytes: logical bytes of data of this shape that fit",
        "candidates": [
            {**c.as_dict(), "holds_bytes": holds, "data": [s.as_dict() for s in spaces]}
            for c, spaces, holds in ranked
        ],
    }


def emit_json(doc: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")


def save_if_asked(h: FileSizes, name: str | None, db: Path | None) -> None:
    if name is None:
        return
    if h.kind != "files":
        raise UsageError(
            "--save-data keeps a scanned file-size histogram; zdb block statistics are "
            "read from their file each time.",
            "Drop --save-data, or give a directory to --data.",
        )
    path = histograms.save(name, h.as_dict(), db)
    click.echo(f"saved the histogram as @{name} ({path})", err=True)


def _inputs(data: DataOptions, rules: RuleSet, db: Path | None) -> tuple[FileSizes, WriteModel]:
    from poolbench.workloads.workload import parse_record_size

    assert data.data_text is not None  # the callers plan the data only when it is given
    m = write_model(
        parse_record_size(data.recordsize_text),
        data.compression,
        float(data.compressibility),
        rules,
    )
    if data.save_data is not None:
        histograms.check_name(data.save_data)  # refused before a long scan, not after
    h = load_data(data.data_text, db, data.sample_over)
    save_if_asked(h, data.save_data, db)
    return h, m


def plan_layout_data(
    layout: Layout, ashifts: list[int], rules: RuleSet, whole_disk: bool,
    data: DataOptions, db: Path | None, as_json: bool,
) -> None:  # fmt: skip
    h, m = _inputs(data, rules, db)
    report = layout_report(layout, ashifts, rules, whole_disk, h, m)
    if as_json:
        emit_json({"layout": layout.spec(), "zfs_rules": rules.name, **report.as_json()})
        return
    from poolbench.cli.plan_data_show import show_data  # rich only for tables
    from poolbench.cli.plan_show import human_spec

    show_data(report, f"{human_spec(layout)}: space for your data")


def plan_search_data(
    cands: list[Candidate], ashift: int, rules: RuleSet, whole_disk: bool,
    data: DataOptions, db: Path | None, as_json: bool, top: int,
) -> None:  # fmt: skip
    h, m = _inputs(data, rules, db)
    ranked = rank_for_data(cands, ashift, rules, whole_disk, h, m)
    if as_json:
        emit_json({"zfs_rules": rules.name, "ashift": ashift, **search_report(ranked, h, m)})
        return
    from poolbench.cli.plan_data_show import show_ranked  # rich only for tables

    show_ranked(h, ranked, top)
