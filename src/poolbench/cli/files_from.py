"""`study --files-from @NAME`: a study's untar workload writes files of the user's sizes.

The saved histogram (`plan --data PATH --save-data NAME`) gives the shape; the tree has the
study's small-file count ([workloads] metadata_files) of files, fewer when that many would
not fit the study's working set ([workloads] size: a study's working-set rule); the
sizes are drawn with the seed (`--seed`, else 0) by planner/filedraw.py and written once as
a tar archive beside the histogram (store/filetrees.py), which the study's `untar` workload
extracts onto every configuration. What was drawn, from what and how it was scaled is said
before the plan and kept as a note in the study file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from poolbench.errors import UsageError
from poolbench.planner.filedraw import Drawn, scaled_draw, size_class
from poolbench.planner.filesizes import FileSizes, from_dict
from poolbench.store import filetrees, histograms
from poolbench.study.builtin.base import StudyFile, WorkloadsTable
from poolbench.study.model import Workloads
from poolbench.units import parse_size

KiB = 1024
# a study file's defaults: its small-file count and working set ([workloads])
METADATA_FILES = Workloads.model_fields["metadata_files"].default
WORKING_SET = Workloads.model_fields["size"].default
DEFAULT_NAMES: list[str] = Workloads().names


@dataclass(frozen=True)
class UserFiles:
    name: str
    histogram: FileSizes
    seed: int
    db: Path | None


def load(text: str, seed: int | None, db: Path | None) -> UserFiles:
    """--files-from: a saved histogram of files, by @NAME."""
    if not text.startswith("@"):
        raise UsageError(
            f"--files-from {text}: give a saved histogram as @NAME.",
            "Save one first with `poolbench plan --data /some/dir --save-data NAME`, then "
            "--files-from @NAME.",
        )
    doc, path = histograms.load(text[1:], db)
    h = from_dict(doc, str(path))
    if h.kind != "files":
        raise UsageError(
            f"@{text[1:]} holds a pool's blocks (from zdb output), not files: there are no "
            "file sizes to write.",
            "Save a scan of the directory instead: plan --data /some/dir --save-data NAME.",
        )
    return UserFiles(text[1:], h, seed if seed is not None else 0, db)


def _budget(workloads: WorkloadsTable) -> tuple[int, str]:
    """The study's working set ([workloads] size, the study file's default when unset)."""
    size = workloads.get("size", WORKING_SET)
    return parse_size(size), f"the study's working set of {size}"


def draw_for(study: StudyFile, uf: UserFiles) -> tuple[Drawn, str]:
    """The sizes for this study, and the sentence that says what they are."""
    files = study.workloads.get("metadata_files", METADATA_FILES)
    budget, budget_text = _budget(study.workloads)
    d = scaled_draw(uf.histogram.counts, files, budget, uf.seed)
    if d.capped_by == "bytes":
        cap = f"scaled {d.scale:.3g}x by count to fit {budget_text}"
    elif len(d.sizes) < d.source_files:
        cap = f"scaled {d.scale:.3g}x by count to the study's small-file count ({files:,})"
    else:
        cap = f"all of them (the study's small-file count is {files:,})"
    said = (
        f"--files-from @{uf.name}: untar writes {len(d.sizes):,} files of {_n(d.total)} "
        f"drawn (seed {uf.seed}) from the histogram's {d.source_files:,} files of "
        f"{_n(uf.histogram.logical_bytes)} ({uf.histogram.source}), {cap}"
    )
    if d.left_out_share >= 0.0005:
        said += (
            f"; size classes too rare for one file at this scale are left out "
            f"({d.left_out_share:.1%} of the histogram's bytes)"
        )
    return d, said + "."


def shape_lines(d: Drawn, uf: UserFiles) -> list[str]:
    """The drawn distribution beside the histogram's, one line per size class."""
    src: dict[int, int] = {}
    for u, c in uf.histogram.counts.items():
        src[size_class(u)] = src.get(size_class(u), 0) + c
    got: dict[int, int] = {}
    for s in d.sizes:
        k = size_class(-(-s // 512))
        got[k] = got.get(k, 0) + 1
    lines = ["files by size (up to): histogram share / drawn share / drawn files"]
    for k in sorted(src):
        label = "0 B" if k == 0 else _n(512 << (k - 1))
        lines.append(
            f"  {label:>7}: {src[k] / d.source_files:6.1%} / "
            f"{got.get(k, 0) / max(1, len(d.sizes)):6.1%} / {got.get(k, 0):,}"
        )
    return lines


def apply(study: StudyFile, uf: UserFiles, d: Drawn) -> Path:
    """Point the study's untar workload at the drawn tree's archive and add untar to its
    workloads. The archive is written now, a dry run included: the study file names it, and
    the dry run checks every input the real run would read."""
    path = filetrees.archive_path(uf.name, uf.histogram.counts, uf.seed, len(d.sizes), uf.db)
    dirs = uf.histogram.notes.dirs
    per_dir = max(1, round(uf.histogram.files / dirs)) if dirs else 1000
    filetrees.write_archive(path, d.sizes, uf.seed, per_dir)
    # a study without names of its own runs the study file's default workloads, and untar
    names = study.workloads.setdefault("names", list(DEFAULT_NAMES))
    if "untar" not in names:
        names.insert(0, "untar")
    study.workloads["tarball"] = str(path)
    return path


def _n(b: int) -> str:
    """1536 → 1.5 KiB: 1024-based, one decimal (exact sizes come out as 4 KiB)."""
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", KiB)):
        if b >= div:
            return f"{b / div:.1f} {unit}".replace(".0 ", " ")
    return f"{b} B"
