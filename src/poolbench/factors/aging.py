"""The `aging` (and `frag_target`) trial factor: a pool made old on purpose, by a recorded,
repeatable sequence of file creations, overwrites and deletions, before the workloads run.

A fresh pool filled sequentially (the `fill` factor) has its free space in a few large runs;
a pool that lived has it in many small holes between surviving files, and a layout that wins
fresh may lose old (Smith & Seltzer; Geriatrix). The recipe:

* **fill**: create files whose sizes are drawn from `SIZE_CLASSES` (many small files, most
  bytes in the large ones) until the live bytes reach `fill_percent` of the room the fresh
  filesystem offered for files (statfs f_bavail: on ZFS its AVAIL, nearly USED + AVAIL);
* **each round**: delete a seeded share of the live files, overwrite a part of another share
  in place (a copy-on-write stack allocates the new blocks elsewhere), and create files again
  until the fill level is back;
* **with a fragmentation target** (OpenZFS's `fragmentation` pool property, what `zpool list
  -o frag` shows): rounds go on past the asked number until the pool reports the target or
  `max_rounds` is reached, and the record says which.

The plan is pure: the operations depend only on (seed, usable bytes, fill, round), never on
what the filesystem did, so the same seed ages every layout of a run the same way. Running
it is plain Python file I/O on the trial's mountpoint (incompressible bytes, each file
fsync'd), untimed; what it reached (rounds, live bytes, the fill statfs reports, the stack's
own fragmentation figure) goes with every measurement of the trial as its `aging` section.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from poolbench import capabilities
from poolbench.backends.base import Backend, Pool, SupportsFragmentation, capability
from poolbench.errors import PoolbenchError
from poolbench.factors import fill, specs
from poolbench.factors.base import AfterPool, Factor, Preflight
from poolbench.factors.specs import Spec, int_in
from poolbench.records import sections

KEY = specs.AGING
FRAG_KEY = specs.FRAG_TARGET
KiB = 1 << 10
MiB = 1 << 20
# (size, weight by count): the mean file is ~340 KiB, and 5% of the files hold ~60% of the
# bytes, as in the file-size surveys (Agrawal et al., FAST '07: most files small, most bytes
# in large ones). Classes larger than a pool's `max_file` are left out for it.
SIZE_CLASSES: tuple[tuple[int, int], ...] = (
    (4 * KiB, 30), (16 * KiB, 25), (64 * KiB, 20), (256 * KiB, 12), (1 * MiB, 8), (4 * MiB, 5),
)  # fmt: skip
DELETE_SHARE = 0.35  # of the live files, per round
OVERWRITE_SHARE = 0.10  # of the live files (after the deletions), per round
SUBDIRS = 16  # files spread over this many directories (no single huge directory)
DIRECTORY = ".poolbench-aging"


class AgingFailed(PoolbenchError):
    """An operation of the recipe failed (the filesystem full, an I/O error): the trial
    fails and is torn down; the study goes on."""


@dataclass(frozen=True)
class Op:
    """One operation of the recipe. `offset`/`size`: the bytes written (create: the file)."""

    kind: str  # create | overwrite | delete
    name: str  # relative to the aging directory: "d03/f000042"
    size: int = 0
    offset: int = 0


@dataclass(frozen=True)
class Recipe:
    """What to age to: the seed, the fill level, the rounds, an optional fragmentation
    target (percent, OpenZFS) and the most rounds spent reaching it."""

    seed: int
    fill_percent: int
    rounds: int
    frag_target: int | None = None
    max_rounds: int = 0  # 0: rounds (no target), else the cap while the target is not met

    @property
    def cap(self) -> int:
        return max(self.rounds, self.max_rounds) if self.frag_target is not None else self.rounds


def max_file(usable: int) -> int:
    """The largest file for a pool of `usable` bytes: at most 1/64 of it, so even a small
    pool holds enough files for deletions to leave holes between survivors."""
    return max(SIZE_CLASSES[0][0], usable // 64)


@dataclass
class Plan:
    """The recipe's operations, round by round, with the live files it leaves (pure)."""

    recipe: Recipe
    usable: int
    live: dict[str, int] = field(default_factory=dict)  # name → size
    _next: int = 0
    _rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        # A string seed: the same operations under every Python (hash randomisation aside).
        self._rng = random.Random(f"poolbench-aging:{self.recipe.seed}")
        self._classes = [(s, w) for s, w in SIZE_CLASSES if s <= max_file(self.usable)]

    @property
    def target(self) -> int:
        return self.usable * self.recipe.fill_percent // 100

    @property
    def live_bytes(self) -> int:
        return sum(self.live.values())

    def _size(self) -> int:
        sizes, weights = zip(*self._classes, strict=True)
        return int(self._rng.choices(sizes, weights)[0])

    def _refill(self) -> Iterator[Op]:
        """Create files until the live bytes reach the target (the last one cut to fit)."""
        have = self.live_bytes
        while have < self.target:
            size = min(self._size(), self.target - have)
            name = f"d{self._next % SUBDIRS:02d}/f{self._next:07d}"
            self._next += 1
            self.live[name] = size
            have += size
            yield Op("create", name, size)

    def fill(self) -> list[Op]:
        """Round 0: the pool filled to the target, file by file."""
        return list(self._refill())

    def round(self) -> list[Op]:
        """One aging round: deletions, in-place overwrites, then files again to the target."""
        names = sorted(self.live)
        gone = self._rng.sample(names, int(len(names) * DELETE_SHARE))
        ops = [Op("delete", n) for n in gone]
        for n in gone:
            del self.live[n]
        kept = sorted(self.live)
        for n in self._rng.sample(kept, int(len(kept) * OVERWRITE_SHARE)):
            size = self.live[n]
            part = max(1, size // 2)  # half the file, at a seeded offset
            offset = self._rng.randrange(0, size - part + 1)
            ops.append(Op("overwrite", n, part, offset))
        return ops + list(self._refill())


# -- running it -------------------------------------------------------------------------------
Fragmentation = Callable[[], tuple[float | None, str]]


def _write(path: Path, size: int, offset: int = 0, create: bool = True) -> None:
    """`size` incompressible bytes at `offset`, fsync'd (an aged pool holds real data)."""
    flags = os.O_WRONLY | (os.O_CREAT | os.O_TRUNC if create else 0)
    fd = os.open(path, flags, 0o644)
    try:
        os.lseek(fd, offset, os.SEEK_SET)
        left = size
        while left > 0:
            chunk = os.urandom(min(left, 1 * MiB))
            left -= os.write(fd, chunk)
        os.fsync(fd)
    finally:
        os.close(fd)


def apply(root: Path, ops: list[Op]) -> int:
    """Carry out `ops` under `root`; returns the bytes written. A filesystem that fills up
    (its overhead for small files above what the usable figure assumed) fails the trial."""
    written = 0
    for op in ops:
        path = root / op.name
        try:
            if op.kind == "delete":
                path.unlink()
                continue
            if op.kind == "create":
                path.parent.mkdir(parents=True, exist_ok=True)  # the directory too
            _write(path, op.size, op.offset, create=op.kind == "create")
        except OSError as exc:
            raise AgingFailed(
                f"Aging {root.parent}: {op.kind} of {op.name} ({op.size} bytes) failed: "
                f"{exc.strerror or exc}.",
                "Lower the fill level (the pool's overhead for small files is larger than "
                "its usable figure assumes), or use larger disks.",
            ) from None
        written += op.size
    return written


def available(mountpoint: Path) -> int:
    """The bytes statfs says a file may still take (f_bavail): the room for files."""
    st = os.statvfs(mountpoint)
    return st.f_bavail * st.f_frsize


def used_percent(consumed: int, space: int) -> float | None:
    """How much of the room for files the recipe's files took, by statfs: what the stack
    really spent on them (metadata, raidz parity past its nominal ratio, btrfs's chunks)."""
    return round(100 * consumed / space, 1) if space > 0 else None


def age(
    mountpoint: Path, usable: int, recipe: Recipe, fragmentation: Fragmentation
) -> sections.AgeRecord:
    """Age the filesystem at `mountpoint` by `recipe` to its fill level of `usable` bytes
    (the room for files); `fragmentation` reads the stack's own free-space fragmentation
    figure (percent, or None and why not)."""
    t0 = time.monotonic()
    root = mountpoint / DIRECTORY
    before = available(mountpoint)
    plan = Plan(recipe, usable)
    counts = {"create": 0, "overwrite": 0, "delete": 0}

    def run(ops: list[Op]) -> int:
        for op in ops:
            counts[op.kind] += 1
        return apply(root, ops)

    written = run(plan.fill())
    for _ in range(recipe.rounds):
        written += run(plan.round())
    done = recipe.rounds
    frag, how = fragmentation()
    # Past the asked rounds only while a target is set, readable and not yet met.
    while recipe.frag_target is not None and frag is not None and frag < recipe.frag_target:
        if done >= recipe.cap:
            break
        written += run(plan.round())
        done += 1
        frag, how = fragmentation()
    return sections.AgeRecord(
        seed=recipe.seed,
        rounds_asked=recipe.rounds,
        rounds=done,
        fill_percent_asked=recipe.fill_percent,
        usable_bytes=usable,
        live_bytes=plan.live_bytes,
        files=len(plan.live),
        achieved_percent=used_percent(before - available(mountpoint), usable),
        frag_target=recipe.frag_target,
        frag_percent=frag,
        frag_how=how,
        frag_reached=None if recipe.frag_target is None or frag is None
        else frag >= recipe.frag_target,
        bytes_written=written,
        operations=counts,
        seconds=round(time.monotonic() - t0, 2),
        data="incompressible (os.urandom), each file fsync'd, not timed",
    )  # fmt: skip


# -- one trial's pool -------------------------------------------------------------------------
DEFAULT_FILL = specs.AGING_FILL  # percent, when the configuration has no `fill` level
EXTRA_ROUNDS = 10  # at most this many rounds past the asked ones, chasing a frag target


def recipe_for(levels: Mapping[str, str], seed: int) -> Recipe:
    """The recipe a configuration's levels ask for: `aging` rounds, to its `fill` level,
    with its `frag_target` if any; the run's seed, so every layout is aged alike."""
    rounds = int(levels[KEY])
    frag = levels.get(FRAG_KEY)
    return Recipe(seed, int(levels.get(fill.KEY, DEFAULT_FILL)), rounds,
                  int(frag) if frag is not None else None, rounds + EXTRA_ROUNDS)  # fmt: skip


def check(backend: str, dialect: str, levels: Mapping[str, str]) -> None:
    """A fragmentation target where the stack has no fragmentation figure to reach it by,
    refused before anything is built."""
    if FRAG_KEY not in levels:
        return
    if backend == "zfs" and dialect == "openzfs":
        return
    what = "zfs-fuse (pool version 23)" if backend == "zfs" else f"the {backend} backend"
    raise capabilities.unsupported(
        "fragmentation",
        f"frag_target={levels[FRAG_KEY]} needs the pool's free-space fragmentation "
        f"figure, which {what} does not report; nothing was created.",
        "Remove frag_target (the aging rounds and fill are still recorded), or run on "
        "OpenZFS 2.x (the guest tier: vm/run-openzfs-tier.sh).",
    )


def age_pool(
    backend: Backend, pool: Pool, levels: Mapping[str, str], working_set: int, seed: int,
    dry: bool = False,
) -> sections.AgeRecord | None:  # fmt: skip
    """Age the trial's pool before its workloads (refused first when the working set would
    not fit on top of the fill level). `dry`: a dry run's pool, not built: its files are
    written by this process, not by a command, so there is nothing to show of them; the
    fragmentation read after the asked rounds runs its commands (OpenZFS: `zpool sync`), and
    the rounds past them a fragmentation target would take cannot be known. None then."""
    recipe = recipe_for(levels, seed)
    # The room a fresh filesystem offers for files, by statfs, the same figure for every
    # stack: a small btrfs holds back a large share of its size for metadata chunks and its
    # global reserve, which a fill of `f_blocks` would count as filled by the recipe.
    usable = fill.usable_bytes(pool) if dry else available(pool.mountpoint)
    fill.check_room(pool.spec.name, usable, recipe.fill_percent, working_set)
    if dry:
        fragmentation_of(backend, pool)()
        return None
    return age(pool.mountpoint, usable, recipe, fragmentation_of(backend, pool))


def fragmentation_of(backend: Backend, pool: Pool) -> Fragmentation:
    """How `age` reads the pool's free-space fragmentation after its rounds (the backend's
    own figure, through its runner), or says why there is none."""
    reads = capability(backend, SupportsFragmentation)

    def frag() -> tuple[float | None, str]:
        if reads is None:
            return None, f"none: the {backend.name} backend reports no free-space fragmentation"
        return reads.free_fragmentation(pool)

    return frag


def _alone_mib(levels: specs.Levels, basis: specs.Basis) -> float:
    """The estimate: aging without a fill factor fills the pool itself (at AGING_FILL)."""
    return 0.0 if fill.KEY in levels else fill.prefill_mib(levels, basis)


class Aging(Factor):
    """The pool aged to its fill level before its workloads, instead of filled in one pass."""

    specs = (
        Spec(
            KEY,
            "rounds of file deletions, overwrites and creations that age the pool "
            "at its fill level (80% without a fill factor) before the workloads run: "
            "0..50",
            int_in(0, 50),
            _alone_mib,
        ),
        Spec(
            FRAG_KEY,
            "with aging, OpenZFS: more rounds (at most 10) until the pool's "
            "fragmentation property reaches this percent: 1..100",
            int_in(1, 100),
        ),
    )
    order = 50  # the fill it replaces, where the fill stands
    section = sections.AGING
    replaces = (fill.KEY,)

    def check(self, at: Preflight) -> None:
        check(at.backend, at.dialect, at.levels)

    def after_pool(self, at: AfterPool) -> sections.AgeRecord | None:
        if KEY not in at.levels:  # a frag_target alone: study/consistency.py refuses it
            return None
        assert at.working_set is not None
        aged = age_pool(at.backend, at.pool, at.levels, at.working_set, at.seed,
                        dry=at.runner.dry_run)  # fmt: skip
        return aged


FACTOR = Aging()
