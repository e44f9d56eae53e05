"""A study file, validated.

```toml
name = "parity"
seed = 42                     # optional; recorded either way, so the order can be replayed
replicates = 3                # each configuration is built and measured this many times, at least
max_replicates = 6            # ... and up to this many while its 95% CI is wider than ci_target
ci_target = 5.0               # percent

[disks]
count = 5                     # sparse files of `size`, as loop devices (source = "loop")
size = "512M"
source = "loop"               # loop | files | devices
# devices = ["/dev/sdb", "/dev/sdc"]     # source = "devices": only through the safety layer
vdev_source = "whole"         # whole | partition | slice
# slice_size = "256M"
# cap = 20                    # MiB/s per loop device (blkio throttle): disks of a known speed
# model = "hdd-7200"          # or disks with a head: seek, rotation, zoned transfer (not with
#                             # cap); figures overridable: model = {name = "hdd-7200", rpm = 5400}

[factors]                     # every combination of levels is one configuration
backend = ["zfs"]
layout = ["raidz1", "raidz2"]
ashift = [9, 12]

[workloads]
names = ["seq-write", "seq-read"]
size = "256M"                 # working set per configuration
runtime = 10                  # seconds, for time-based workloads
min_window = 3                # seconds: the shortest timed window (short writes repeat)
compressibility = 0
```

Errors name the file, the line and the fix; unknown keys are refused (a typo such as
`replicate = 5` must not silently run the default).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from poolbench.emulate.model import PRESETS, HddParams
from poolbench.errors import UsageError
from poolbench.factors import registry as factor_registry
from poolbench.planner.layout import check_widths
from poolbench.study import consistency
from poolbench.study.problems import located, problems

# MAX_STUDY_BYTES: re-exported, the limit callers name beside load()
from poolbench.study.reading import read_text
from poolbench.units import MiB, parse_size
from poolbench.workloads.library import parse_list

KNOWN_FACTORS = {
    "backend": "zfs | btrfs | md | directory",
    "layout": "ZFS topology (raidz2, mirror:2+mirror:2, draid1:4d:1s), btrfs profile "
    "(raid1, raid10, raid5, ...), md level (raid5, ...)",
    "ashift": "ZFS pool ashift, 9..16",
    "recordsize": "ZFS dataset recordsize, a power of two (128K, 1M)",
    "compression": "ZFS: off, lz4, gzip, zstd, ...; btrfs: a compress= mount option value",
    "atime": "ZFS: on | off",
    "sync": "ZFS: standard | always | disabled",
    "primarycache": "ZFS: all | metadata | none",
    "logbias": "ZFS: latency | throughput (how synchronous writes use the intent log)",
    "special_small_blocks": "ZFS (OpenZFS): 0, or a power of two up to 16M; blocks this "
    "small or smaller go to the special vdev",
    "target": "ZFS: dataset (files on the pool's dataset) | zvol (a sparse zvol's block "
    "device; OpenZFS)",
    "volblocksize": "ZFS, with target = zvol: the zvol's block, a power of two from 512 "
    "(without it a zvol takes the recordsize level, else ZFS's default)",
    "fs": "md: ext4 | ext3 | xfs",
    "chunk": "md chunk size (mdadm --chunk), e.g. 64K, 512K",
    "assume_clean": "md: yes | no; yes skips the initial resync (mdadm --assume-clean)",
    "metadata_profile": "btrfs metadata profile",
    # Trial factors: the trial loop applies them, not the backend (each factors/ module's specs).
    **{spec.key: spec.description for spec in factor_registry.SPECS},
}

# Levels a trial factor accepts (backend options are checked by the backend).
_TRIAL_LEVELS: dict[str, Callable[[Any], bool]] = {
    spec.key: spec.valid for spec in factor_registry.SPECS
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DiskModel(_Strict):
    """`[disks] model`: emulated disks with a head (emulate/model.py, docs/emulated-disks.md).
    A preset's name, with any of its datasheet figures overridden; None keeps the preset's."""

    name: Literal["hdd-7200"] = "hdd-7200"
    rpm: float | None = Field(default=None, ge=3600, le=20_000, allow_inf_nan=False)
    single_track_ms: float | None = Field(default=None, gt=0, le=100, allow_inf_nan=False)
    avg_seek_ms: float | None = Field(default=None, gt=0, le=100, allow_inf_nan=False)
    full_stroke_ms: float | None = Field(default=None, gt=0, le=100, allow_inf_nan=False)
    outer_mb_s: float | None = Field(default=None, gt=0, le=10_000, allow_inf_nan=False)
    inner_mb_s: float | None = Field(default=None, gt=0, le=10_000, allow_inf_nan=False)

    @model_validator(mode="after")
    def _a_disk(self) -> DiskModel:
        problems = self.params().problems()
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def params(self) -> HddParams:
        """The preset with this table's figures in place of its own."""
        given = {k: v for k, v in self.model_dump(exclude={"name"}).items() if v is not None}
        return HddParams.from_dict({**PRESETS[self.name].as_dict(), **given})

    def describe(self) -> str:
        p = self.params()
        return (
            f"{p.name}: {p.rpm:g} rpm, seek {p.single_track_ms:g}/{p.avg_seek_ms:g}/"
            f"{p.full_stroke_ms:g} ms (track/average/full stroke), {p.outer_mb_s:g} to "
            f"{p.inner_mb_s:g} MB/s outer to inner"
        )


class Disks(_Strict):
    count: int = Field(default=0, ge=0, le=64)
    size: str = "512M"
    source: Literal["loop", "files", "devices"] = "loop"
    devices: list[str] = Field(default_factory=list)
    vdev_source: Literal["whole", "partition", "slice"] = "whole"
    slice_size: str | None = None
    # MiB/s: each loop device capped for reads and writes (emulated disks of a known speed,
    # system/throttle.py); None: the sparse files as fast as this machine's disk is.
    cap: float | None = Field(default=None, gt=0, le=1_000_000, allow_inf_nan=False)
    # Emulated disks with a head instead: each loop device over a FUSE server that gives
    # every request its seek, rotation and transfer time (emulate/). A name or a table.
    model: DiskModel | None = None

    @field_validator("model", mode="before")
    @classmethod
    def _model_by_name(cls, v: object) -> object:
        return {"name": v} if isinstance(v, str) else v

    @field_validator("size", "slice_size")
    @classmethod
    def _size(cls, v: str | None) -> str | None:
        if v is not None:
            _valid_size(v, "size")
        return v

    @field_validator("devices")
    @classmethod
    def _device_paths(cls, v: list[str]) -> list[str]:
        for path in v:
            if "\x00" in path or len(path.encode()) > 4095:
                raise ValueError(
                    f"device {path[:60]!r} is not a path the system can open (a NUL byte, or "
                    "longer than 4095 bytes); give device paths such as /dev/sdb"
                )
        return v

    @model_validator(mode="after")
    def _cap_only_on_loops(self) -> Disks:
        if self.cap is not None and self.source != "loop":
            raise ValueError(
                f'cap needs source = "loop" (it caps the loop devices poolbench makes), not '
                f'"{self.source}": a real disk is measured at its own speed'
            )
        if self.model is not None and self.source != "loop":
            raise ValueError(
                f'model needs source = "loop" (the emulated disks are loop devices poolbench '
                f'makes), not "{self.source}": a real disk has its own head'
            )
        if self.model is not None and self.cap is not None:
            raise ValueError(
                "model and cap are two kinds of emulated disk: a disk with a head (model) "
                "serves each request in its seek, rotation and transfer time, a capped one "
                "(cap) at a rate in bytes per second; keep one of them"
            )
        return self

    @model_validator(mode="after")
    def _slice_below_size(self) -> Disks:
        sliced = self.slice_size and self.source != "devices"
        if sliced and parse_size(str(self.slice_size)) >= self.size_bytes:
            raise ValueError(
                f"slice_size {self.slice_size} is not smaller than the disks' size "
                f'{self.size}; a slice is part of a disk (use vdev_source = "partition" '
                "for one spanning the disk)"
            )
        return self

    @property
    def size_bytes(self) -> int:
        return parse_size(self.size)

    @property
    def n(self) -> int:
        return len(self.devices) if self.source == "devices" else self.count

    def describe(self) -> str:
        """One line for plans and dry runs: which disks, and their exact size in bytes."""
        if self.source == "devices":
            return f"disks: {len(self.devices)} devices: {', '.join(self.devices)}"
        kind = "sparse files" if self.source == "files" else "sparse files as loop devices"
        capped = f", each capped at {self.cap:g} MiB/s" if self.cap else ""
        if self.model is not None:
            kind = "emulated disks with a head, loop devices"
            capped = f" ({self.model.describe()})"
        return f"disks: {self.count} {kind} of {self.size} = {self.size_bytes:,} bytes each{capped}"


class Workloads(_Strict):
    names: list[str] = Field(default_factory=lambda: ["seq-write", "seq-read"], min_length=1)
    size: str = "256M"
    runtime: int = Field(default=10, ge=1, le=3600)
    # The shortest timed window worth a figure (DESIGN.md section 3 rule 7, engine/window.py):
    # time-based workloads run at least this long, shorter size-bound writes are repeated.
    min_window: float = Field(default=3.0, ge=0, le=3600, allow_inf_nan=False)
    compressibility: int = Field(default=0, ge=0, le=99)
    iodepth: int = Field(default=1, ge=1, le=1024)
    jobs: int = Field(default=1, ge=1, le=256)
    metadata_files: int = Field(default=2000, ge=10)
    # The tarball the `untar` workload extracts (a real source tree, e.g. Debian's
    # /usr/src/linux-source-6.1.tar.xz); compressed tarballs are unpacked once, untimed.
    tarball: str | None = None

    @field_validator("names")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        try:
            parse_list(",".join(v))
        except UsageError as exc:  # as a validation error: reported with the file's others
            raise ValueError(exc.paragraph()) from None
        return v

    @field_validator("size")
    @classmethod
    def _size(cls, v: str) -> str:
        _valid_size(v, "working set", MiB)
        return v


def _valid_size(text: str, what: str, minimum: int = 1) -> None:
    """A size in the one grammar (poolbench.units), as a validation error with a location."""
    try:
        parse_size(text, what=what, minimum=minimum)
    except UsageError as exc:
        raise ValueError(exc.paragraph()) from None


Level = str | int
BASELINE_LAYOUT = "stripe:1"  # the single-disk pool whose figures feed the speed model


class Planner(_Strict):
    # Add a single-disk configuration (layout stripe:1) the report's predictions rest on.
    disk_baseline: bool = False


class Study(_Strict):
    name: str = Field(min_length=1, max_length=80)
    description: str = ""
    seed: int | None = None
    replicates: int = Field(default=3, ge=2, le=100)
    max_replicates: int = Field(default=6, ge=2, le=1000)
    ci_target: float = Field(default=5.0, gt=0, lt=100)
    disks: Disks = Field(default_factory=Disks)
    factors: dict[str, list[Level]]
    workloads: Workloads = Field(default_factory=Workloads)
    # Combinations of the matrix that are not built: each entry drops every configuration
    # whose levels match all of its keys, e.g. {backend = "zfs", fs = "xfs"}.
    exclude: list[dict[str, Level]] = Field(default_factory=list)
    planner: Planner = Field(default_factory=Planner)

    @model_validator(mode="before")
    @classmethod
    def _disk_baseline(cls, data: Any) -> Any:
        """`[planner] disk_baseline = true`: one more layout level, a single-disk pool,
        measured like the others so predictions rest on this machine's disks."""
        planner = data.get("planner") if isinstance(data, dict) else None
        factors = data.get("factors") if isinstance(data, dict) else None
        if not (isinstance(planner, dict) and planner.get("disk_baseline") is True):
            return data
        layouts = factors.get("layout") if isinstance(factors, dict) else None
        backends = factors.get("backend", ["zfs"]) if isinstance(factors, dict) else ["zfs"]
        if [str(b) for b in backends] != ["zfs"]:
            raise ValueError(
                "[planner] disk_baseline needs backend zfs only (the speed model "
                "predicts ZFS layouts); drop the other backends or the key"
            )
        if (
            isinstance(factors, dict)
            and isinstance(layouts, list)
            and BASELINE_LAYOUT not in [str(x) for x in layouts]
        ):
            data = {**data, "factors": {**factors, "layout": [*layouts, BASELINE_LAYOUT]}}
        return data

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", v):
            raise ValueError("use letters, digits, '-', '_' and '.' only")
        return v

    @field_validator("factors")
    @classmethod
    def _factors(cls, v: dict[str, list[Level]]) -> dict[str, list[Level]]:
        for key, levels in v.items():
            if key not in KNOWN_FACTORS:
                raise ValueError(
                    f"unknown factor '{key}'; known factors: {', '.join(sorted(KNOWN_FACTORS))}"
                )
            if not levels:
                raise ValueError(f"factor '{key}' has no levels")
            if len({str(x) for x in levels}) != len(levels):
                raise ValueError(f"factor '{key}' lists a level twice")
            ok = _TRIAL_LEVELS.get(key)
            bad = [x for x in levels if ok is not None and not ok(x)]
            if bad:
                raise ValueError(f"factor '{key}': {bad[0]!r} is not valid ({KNOWN_FACTORS[key]})")
        if "layout" not in v:
            raise ValueError("a study needs a 'layout' factor (e.g. layout = [\"raidz1\"])")
        backends = [str(b) for b in v.get("backend", ["zfs"])]
        if "zfs" in backends:
            for level in v["layout"]:
                _check_zfs_layout(str(level), only_zfs=backends == ["zfs"])
        return v

    @model_validator(mode="after")
    def _exclude(self) -> Study:
        for entry in self.exclude:
            unknown = set(entry) - set(self.factors) - {"backend"}
            if not entry or unknown:
                raise ValueError(
                    f"exclude entry {entry} names no factor of this study"
                    + (f" ({', '.join(sorted(unknown))})" if unknown else "")
                )
        return self


_ZFS_TYPES = re.compile(r"\s*(stripe|mirror|raidz[0-9]*|draid[0-9]*)\b", re.ASCII)


def _check_zfs_layout(level: str, only_zfs: bool = False) -> None:
    """A ZFS layout level in the planner's grammar (the disk count is checked at run time,
    where --disks may have changed it); btrfs/md/generic levels are the backends' to check,
    unless zfs is the only backend (then `raid2` gets the planner's did-you-mean)."""
    if not only_zfs and not _ZFS_TYPES.match(level):
        return
    try:
        check_widths(level)
    except UsageError as exc:
        raise ValueError(exc.paragraph()) from None


def load(path: Path) -> tuple[Study, str]:
    """Read and validate a study file; returns the study and its exact text (for the record)."""
    text = read_text(path)
    return parse(text, str(path)), text


def _infer_switched(data: dict[str, Any], origin: str) -> dict[str, Any]:
    """A key that another key switches off is inferred or refused, never silently dropped:
    `[disks] devices` means source = "devices"; with source = "loop"/"files" it is refused."""
    disks = data.get("disks")
    if not isinstance(disks, dict) or not disks.get("devices"):
        return data
    source = disks.get("source")
    if source is None:
        return {**data, "disks": {**disks, "source": "devices"}}
    if source != "devices":
        raise UsageError(
            f"{origin}: [disks] lists devices but says source = {source!r}, which ignores them.",
            'Set source = "devices" to use those devices, or remove the devices line to use '
            f"{source} disks.",
        )
    return data


def _toml(text: str, origin: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(
            f"{origin}: not valid TOML: {exc}.",
            "Fix the syntax at that line (strings need quotes, lists need brackets).",
        ) from exc
    except RecursionError:
        raise UsageError(
            f"{origin}: the TOML is nested too deeply to be a study file.",
            "A study file has tables one level deep ([disks], [factors], [workloads]).",
        ) from None
    except ValueError:  # an integer of thousands of digits (Python's int limit)
        raise UsageError(
            f"{origin}: a number has more digits than any setting can use.",
            'Use numbers of ordinary size (a count, a percent, a size such as "512M").',
        ) from None


def parse(text: str, origin: str = "<study>") -> Study:
    data = _infer_switched(_toml(text, origin), origin)
    try:
        study = Study.model_validate(data)
    except ValidationError as exc:
        raise UsageError(
            "The study file is not valid:\n  " + "\n  ".join(problems(exc, text, origin)),
            "Fix the lines named above; examples/ has a valid study of each kind.",
        ) from None
    except UsageError as exc:  # raised by a validator (workload names, sizes)
        raise UsageError(f"{origin}: {exc.problem}", exc.fix) from None
    except RecursionError:
        raise UsageError(f"{origin}: a value is nested too deeply.", "Use plain values.") from None
    except OverflowError:  # a size such as "1e400" (the size parser's float overflows)
        raise UsageError(
            f"{origin}: a size is too large to use.", 'Write sizes like "512M" or "4G".'
        ) from None
    check_consistency(study, origin, text)
    return study


def check_consistency(study: Study, origin: str, text: str = "") -> None:
    """Every consistency problem at once, each at its line of `text` when given; also for a
    study changed after parsing (`run --disks`), which model_copy does not check again."""
    found = consistency.problems(study)
    if found:
        raise UsageError(
            ("The study file is not valid:\n  " if len(found) > 1 else "")
            + "\n  ".join(located(text, origin, loc, exc.problem) for loc, exc in found),
            " ".join(dict.fromkeys(exc.fix for _, exc in found)),
        )
