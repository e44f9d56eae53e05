"""What the registry knows about a built-in study, and the study-file skeleton they share.

A study module builds its study dict with `study_file(...)` (disks, replicates and the common
options --replicates, --max-replicates, --workloads, --size, --runtime, --min-window applied
the same way for every study) and declares one `Builtin`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from poolbench import capabilities
from poolbench.errors import UsageError
from poolbench.study.builtin.context import Context
from poolbench.units import parse_size

if TYPE_CHECKING:
    from poolbench.store.facts import StudyFacts

MiB = 1 << 20

# Options every study takes (beyond its own): the CLI spelling is --max-replicates etc.
COMMON_OPTIONS = ("replicates", "max_replicates", "workloads", "size", "runtime", "min_window")

StudyDict = dict[str, Any]  # the study file as TOML data (what study.model validates)
Notes = Callable[[Context, "StudyFacts"], list[str]]


@dataclass(frozen=True)
class Builtin:
    name: str
    question: str
    default_disks: tuple[int, str]  # (count, size)
    build: Callable[[Context], StudyDict]
    options: dict[str, str]  # study-specific option → help (the CLI adds --option for each)
    needs_loop: bool = False  # partitions need block devices
    notes: Notes | None = None  # printed after the run, from the stored facts
    pre_notes: Callable[[Context], list[str]] | None = None  # printed before the run


def _disks(ctx: Context, override: dict[str, Any] | None) -> dict[str, Any]:
    if ctx.devices:
        d: dict[str, Any] = {"source": "devices", "devices": list(ctx.devices)}
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
    factors: dict[str, list[Any]],
    workloads: dict[str, Any],
    *,
    replicates: int = 3,
    max_replicates: int = 6,
    disks: dict[str, Any] | None = None,
    exclude: list[dict[str, Any]] | None = None,
) -> StudyDict:
    """The study dict, in the key order the TOML file shows."""
    reps = ctx.opt_int("replicates", replicates)
    out: StudyDict = {
        "name": name,
        "description": description,
        "replicates": reps,
        "max_replicates": max(reps, ctx.opt_int("max_replicates", max_replicates)),
        "ci_target": 5.0,
        "disks": _disks(ctx, disks),
        "factors": factors,
        "workloads": {**workloads},
    }
    if exclude:
        out["exclude"] = exclude
    if "workloads" in ctx.options:
        out["workloads"]["names"] = ctx.opt_list("workloads", [])
    if "size" in ctx.options:
        out["workloads"]["size"] = ctx.options["size"].upper()
    if "runtime" in ctx.options:
        out["workloads"]["runtime"] = ctx.opt_int("runtime", 10)
    if "min_window" in ctx.options:
        out["workloads"]["min_window"] = float(ctx.options["min_window"])
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
