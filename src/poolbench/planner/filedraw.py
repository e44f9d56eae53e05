"""File sizes drawn from a stored histogram for a study's small-file tree (pure).

`study --files-from @NAME` measures writing files of the user's sizes: a tree of N files
whose sizes follow the histogram (planner/filesizes.py), N scaled to the study's working set.
The draw is stratified, so the shape holds at any N and not only on average: the files are
first shared out between the power-of-two size classes (512 B, 1K, 2K … as `zdb` bins
blocks) in proportion to the histogram's counts, by largest remainder (each class within
one file of its exact share); inside a class, each file takes one of the histogram's own
512-byte sizes, chosen with its weight, and a byte count uniform within that 512-byte step.
Everything comes from one `random.Random(seed)`: the same seed, histogram and N give the
same sizes in the same order.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from poolbench.errors import UsageError

UNIT = 512


def size_class(units: int) -> int:
    """The power-of-two class of a size in 512-byte units (0: empty files)."""
    return 0 if units <= 0 else (units - 1).bit_length() + 1


def _by_class(counts: Mapping[int, int]) -> dict[int, dict[int, int]]:
    out: dict[int, dict[int, int]] = {}
    for u, c in counts.items():
        if c > 0:
            out.setdefault(size_class(u), {})[u] = c
    return out


def apportion(weights: Mapping[int, int], n: int) -> dict[int, int]:
    """n shared out in proportion to the weights, largest remainder first (ties: the smaller
    key), so every share is within one of its exact value and they sum to n."""
    total = sum(weights.values())
    exact = {k: n * w / total for k, w in weights.items()}
    out = {k: int(v) for k, v in exact.items()}
    left = n - sum(out.values())
    for k in sorted(exact, key=lambda k: (-(exact[k] - out[k]), k))[:left]:
        out[k] += 1
    return out


@dataclass(frozen=True)
class Drawn:
    """The drawn sizes and how they relate to the histogram they came from."""

    sizes: tuple[int, ...]
    seed: int
    source_files: int
    source_bytes: int
    # Share of the histogram's bytes in size classes that got no file at this N (rare,
    # large files): the drawn tree leaves them out, and says so.
    left_out_share: float
    capped_by: str  # "files" ([workloads] metadata_files) or "bytes" (the working set)

    @property
    def total(self) -> int:
        return sum(self.sizes)

    @property
    def scale(self) -> float:
        """Drawn files per file of the histogram."""
        return len(self.sizes) / self.source_files if self.source_files else 0.0


def draw(counts: Mapping[int, int], n: int, seed: int) -> tuple[list[int], float]:
    """n sizes following the histogram, and the byte share of the classes left out."""
    classes = _by_class(counts)
    if not classes or n <= 0:
        return [], 0.0
    per_class = apportion({k: sum(v.values()) for k, v in classes.items()}, n)
    rng = random.Random(seed)
    sizes: list[int] = []
    left_out = 0
    for k in sorted(classes):
        units = sorted(classes[k])
        if per_class[k] == 0:
            left_out += sum(u * UNIT * c for u, c in classes[k].items())
            continue
        picked = rng.choices(units, weights=[classes[k][u] for u in units], k=per_class[k])
        sizes += [0 if u == 0 else rng.randint((u - 1) * UNIT + 1, u * UNIT) for u in picked]
    rng.shuffle(sizes)
    whole = sum(u * UNIT * c for u, c in counts.items())
    return sizes, (left_out / whole if whole else 0.0)


def scaled_draw(counts: Mapping[int, int], files: int, budget: int, seed: int) -> Drawn:
    """At most `files` files (never more than the histogram has) whose total stays within
    `budget` bytes: N shrinks by the ratio of budget to the drawn total until it fits."""
    source_files = sum(c for c in counts.values() if c > 0)
    if source_files == 0:
        raise UsageError(
            "The saved histogram has no files to draw sizes from.",
            "Scan a directory that holds files: plan --data PATH --save-data NAME.",
        )
    n = min(files, source_files)
    capped_by = "files"
    sizes, left_out = draw(counts, n, seed)
    while sum(sizes) > budget and n > 1:
        n = max(1, min(n - 1, int(n * budget / sum(sizes))))
        capped_by = "bytes"
        sizes, left_out = draw(counts, n, seed)
    source_bytes = sum(u * UNIT * c for u, c in counts.items())
    return Drawn(tuple(sizes), seed, source_files, source_bytes, left_out, capped_by)
