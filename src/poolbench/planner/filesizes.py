"""The shape of the user's data: a histogram of file (or block) sizes (pure).

A histogram counts files by size in 512-byte units, rounded up: 512 B is ZFS's smallest block
(SPA_MINBLOCKSIZE), a file of one block gets a block of its size rounded up to it, and every
recordsize is a multiple of it, so the rounding changes no block count and no single-block
size the space model computes. The scanner (system/datascan.py) fills one from a directory
tree; `zdb -Lbbbs` output (planner/zdbstats.py) fills one of *blocks* instead of files, the
shape an existing pool already has. `as_dict`/`from_dict` are the stored form (a named
histogram, `plan --data @NAME`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from poolbench.errors import UsageError

UNIT = 512  # SPA_MINBLOCKSIZE
FORMAT = "poolbench-file-sizes/1"

Kind = Literal["files", "blocks"]


@dataclass(frozen=True)
class ScanNotes:
    """What the scan saw besides sizes: each is stated beside the prediction."""

    dirs: int = 0
    hardlinks_skipped: int = 0  # extra names of a file already counted
    symlinks_skipped: int = 0
    other_skipped: int = 0  # sockets, fifos, devices
    mounts_skipped: int = 0  # directories on another filesystem (not crossed, like du -x)
    unreadable: int = 0
    unreadable_examples: tuple[str, ...] = ()
    changed_during_scan: int = 0  # modified after the scan began: their size is one moment's
    sparse_files: int = 0
    seconds: float = 0.0
    # Sampling: past `sample_over` files, one in `sample_every` is measured and weighs that
    # many; the total's 95% error is then stated (Horvitz-Thompson, Poisson sampling).
    sample_over: int = 0
    sample_every: int = 1
    sampled_files: int = 0
    total_error_95: float = 0.0  # relative half-width of the logical total's 95% interval


@dataclass(frozen=True)
class FileSizes:
    """How many files of each size: `counts[u]` files of u × 512 bytes (rounded up)."""

    counts: Mapping[int, int]
    logical_bytes: int  # Σ st_size (exact, or the sampled estimate)
    allocated_bytes: int  # Σ st_blocks × 512 on the scanned filesystem
    source: str
    kind: Kind = "files"
    notes: ScanNotes = field(default_factory=ScanNotes)
    # From zdb: the pool's measured metadata share (non-file blocks / all blocks, in asize).
    measured_metadata_fraction: float | None = None

    @property
    def files(self) -> int:
        return sum(self.counts.values())

    def bucket(self, upper: int) -> tuple[int, int]:
        """(files, logical bytes at the 512-B rounding) of sizes ≤ upper bytes."""
        n = b = 0
        for u, c in self.counts.items():
            if u * UNIT <= upper:
                n += c
                b += u * UNIT * c
        return n, b

    def as_dict(self) -> dict[str, object]:
        return {
            "format": FORMAT,
            "kind": self.kind,
            "source": self.source,
            "files": self.files,
            "logical_bytes": self.logical_bytes,
            "allocated_bytes": self.allocated_bytes,
            "measured_metadata_fraction": self.measured_metadata_fraction,
            "notes": {
                k: list(v) if isinstance(v, tuple) else v for k, v in vars(self.notes).items()
            },
            # JSON keys are strings: the size in 512-byte units, rounded up
            "counts_512b_units": {str(u): c for u, c in sorted(self.counts.items())},
        }


def from_dict(doc: Mapping[str, object], where: str) -> FileSizes:
    """A stored histogram back; a file that is not one is refused naming `where`."""
    bad = UsageError(
        f"{where} is not a poolbench file-size histogram (format {FORMAT}).",
        "Scan the directory again with `poolbench plan --data PATH --save-data NAME`.",
    )
    if doc.get("format") != FORMAT:
        raise bad
    try:
        raw = doc["counts_512b_units"]
        assert isinstance(raw, dict)
        counts = {int(k): int(v) for k, v in raw.items()}
        assert all(u >= 0 and c >= 0 for u, c in counts.items())
        notes_raw = doc.get("notes") or {}
        assert isinstance(notes_raw, dict)
        known = set(vars(ScanNotes()))
        fields: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in notes_raw.items() if k in known
        }
        notes = ScanNotes(**fields)
        kind: Kind = "blocks" if doc.get("kind") == "blocks" else "files"
        frac = doc.get("measured_metadata_fraction")
        return FileSizes(
            counts=counts,
            logical_bytes=int(str(doc["logical_bytes"])),
            allocated_bytes=int(str(doc["allocated_bytes"])),
            source=str(doc.get("source", where)),
            kind=kind,
            notes=notes,
            measured_metadata_fraction=float(str(frac)) if frac is not None else None,
        )
    except (KeyError, ValueError, TypeError, AssertionError) as exc:
        raise bad from exc


def units_of(size: int) -> int:
    """A size in bytes as the histogram keeps it: 512-byte units, rounded up."""
    return -(-size // UNIT)
