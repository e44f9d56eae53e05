"""What the registry knows about a built-in study, and the study-file skeleton they share.

A study module builds its study file with `study_file(...)` (disks, replicates and the common
options --replicates, --max-replicates, --workloads, --size, --runtime, --min-window applied
the same way for every study) and declares one `Builtin`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from poolbench import capabilities
from poolbench.errors import UsageError
from poolbench.study.builtin.context import Context
from poolbench.units import parse_size

if TYPE_CHECKING:
    from poolbench.store.facts import StudyFacts

MiB = 1 << 20

# Options every study takes (beyond its own): the CLI spelling is --max-replicates etc.
COMMON_OPTIONS = ("replicates", "max_replicates", "workloads", "size", "runtime", "min_window")

Level = str | int  # a factor's level as the study file spells it (study.model.Level)


class DisksTable(TypedDict, total=False):
    """The study file's [disks] table (study.model.Disks validates it)."""

    source: str
    devices: list[str]
    count: int
    size: str
    cap: float
    slice_size: str


class WorkloadsTable(TypedDict, total=False):
    """The study file's [workloads] table (study.model.Workloads validates it)."""

    names: list[str]
    size: str
    runtime: int
    min_window: float
    compressibility: int
    iodepth: int
    jobs: int
    metadata_files: int
    tarball: str


@dataclass
class StudyFile:
    """A built-in study as its study file says it, before study.model validates the TOML;
    --files-from changes its workloads before it is written."""

    name: str
    description: str
    replicates: int
    max_replicates: int
    disks: DisksTable
    factors: dict[str, list[Level]]
    workloads: WorkloadsTable
    exclude: list[dict[str, Level]] = field(default_factory=list)
    ci_target: float = 5.0

    def toml_data(self) -> dict[str, object]:
        """The TOML document, in the order the file shows its keys."""
        out: dict[str, object] = {
            "name": self.name,
            "description": self.description,
            "replicates": self.replicates,
            "max_replicates": self.max_replicates,
            "ci_target": self.ci_target,
            "disks": self.disks,
            "factors": self.factors,
            "workloads": self.workloads,
        }
        if self.exclude:
            out["exclude"] = self.exclude
        return out


Notes = Callable[[Context, "StudyFacts"], list[str]]


@dataclass(frozen=True)
class Builtin:
    name: str
    question: str
    default_disks: tuple[int, str]  # (count, size)
    build: Callable[[Context], StudyFile]
    options: dict[str, str]  # study-specific option → help (the CLI adds --option for each)
    needs_loop: bool = False  # partitions need block devices
    notes: Notes | None = None  # printed after the run, from the stored facts
    pre_notes: Callable[[Context], list[str]] | None = None  # printed before the run


def _disks(ctx: Context, override: DisksTable | None) -> DisksTable:
    d: DisksTable
    if ctx.devices:
        d = {"source": "devices", "devices": list(ctx.devices)}
    else:
        d = {"count": ctx.n, "size": ctx.disk_size, "source": "loop"}
    d.update(override or {})
    if ctx.devices:  # real devices: their count and size are what they are
        d.pop("count", None)
        d.pop("size", None)
    return d


def study_file(
    ctx: Context,
    name: str,
    description: str,
    factors: Mapping[str, Sequence[Level]],
    workloads: WorkloadsTable,
    *,
    replicates: int = 3,
    max_replicates: int = 6,
    disks: DisksTable | None = None,
    exclude: Sequence[Mapping[str, Level]] = (),
) -> StudyFile:
    """The study file, with the common options applied."""
    reps = ctx.opt_int("replicates", replicates)
    out = StudyFile(
        name,
        description,
        reps,
        max(reps, ctx.opt_int("max_replicates", max_replicates)),
        _disks(ctx, disks),
        {key: list(levels) for key, levels in factors.items()},
        {**workloads},
        [dict(entry) for entry in exclude],
    )
    if "workloads" in ctx.options:
        out.workloads["names"] = ctx.opt_list("workloads", [])
    if "size" in ctx.options:
        out.workloads["size"] = ctx.options["size"].upper()
    if "runtime" in ctx.options:
        out.workloads["runtime"] = ctx.opt_int("runtime", 10)
    if "min_window" in ctx.options:
        out.workloads["min_window"] = float(ctx.options["min_window"])
    return out


def working_set(ctx: Context, fraction: float, cap: str = "1G", floor: str = "8M") -> str:
    """A working set: `fraction` of one disk, between floor and cap, whole MiB. A share
    raised to the floor or cut to the cap is announced (unless --size replaces it)."""
    share = int(ctx.disk_bytes * fraction)
    n = min(parse_size(cap), max(parse_size(floor), share))
    if n != share and "size" not in ctx.options and not ctx.devices:
        why = (
            f"cut to the {cap} cap so a trial stays minutes long"
            if n < share
            else f"raised to the {floor} floor so a workload moves enough bytes to time"
        )
        ctx.announce(
            f"working set {n // MiB}M: {fraction:.0%} of one {ctx.disk_size} disk would be "
            f"{share / MiB:.1f}M, {why} (--size sets it)."
        )
    return f"{n // MiB}M"


def uses_disks(ctx: Context, used: int, why: str) -> None:
    """Announce that the study builds its pools on `used` of the disks given, and why."""
    if used < ctx.n:
        which = f"disks 1-{used}" if used > 1 else "disk 1"
        if ctx.devices:
            which = ", ".join(ctx.devices[:used])
        rest = ctx.n - used
        ctx.announce(
            f"uses {used} of the {ctx.n} disks given ({which}): {why}; the other "
            + (f"{rest} stay unused." if rest > 1 else "one stays unused.")
        )


def refuse_on_zfs_fuse(
    ctx: Context, study: str, needs: str, lacks: str, since: str, capability: str
) -> None:
    """A study zfs-fuse cannot run, refused before anything is created; `capability` is
    what it lacks, as `poolbench doctor` names it."""
    if ctx.dialect == "zfs-fuse":
        raise capabilities.unsupported(
            capability,
            f"The {study} study needs {needs}, but this machine's ZFS is zfs-fuse (pool "
            f"version 23), which has no {lacks} ({since}); nothing was created.",
            "Run the study on OpenZFS (the guest tier: vm/run-openzfs-tier.sh).",
        )


def need(ctx: Context, n: int, what: str) -> None:
    if ctx.n < n:
        raise UsageError(
            f"The {what} needs at least {n} disks; --disks gives {ctx.n}.",
            f"Give more disks, e.g. --disks {n}x1G.",
        )


def default_left_out(ctx: Context, line: str) -> None:
    """Announce what the study's default layouts leave out on these disks (nothing to say
    when --layouts replaced them)."""
    if "layouts" not in ctx.options:
        ctx.announce(line)


def default_pairs(ctx: Context) -> str:
    """mirror_pairs over every disk, announcing the odd one out of the default layouts."""
    if ctx.n % 2:
        default_left_out(
            ctx,
            f"{mirror_pairs(ctx.n)} leaves disk {ctx.n} out (2-way mirror pairs over {ctx.n} "
            "disks); the other layouts use every disk.",
        )
    return mirror_pairs(ctx.n)


def mirror_pairs(n: int) -> str:
    """Striped 2-way mirrors over n disks (an odd disk out stays unused)."""
    return "+".join(["mirror:2"] * (n // 2))
