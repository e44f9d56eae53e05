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

[factors]                     # every combination of levels is one configuration
backend = ["zfs"]
layout = ["raidz1", "raidz2"]
ashift = [9, 12]

[workloads]
names = ["seq-write", "seq-read"]
size = "256M"                 # working set per configuration
runtime = 10                  # seconds, for time-based workloads
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

from poolbench.errors import UsageError
from poolbench.guards.workingset import parse_size
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
    "fs": "md: ext4 | ext3 | xfs",
    "metadata_profile": "btrfs metadata profile",
    # Trial factors: the trial loop applies them, not the backend (orchestrate.TRIAL_FACTORS).
    "vdev_source": "overrides [disks] vdev_source per configuration: whole | partition | slice",
    "compressibility": "overrides [workloads] compressibility per configuration: 0..99 percent",
    "fill": "percent of the pool's usable space filled (incompressible, untimed) before the "
    "workloads run: 1..95",
}

# Levels a trial factor accepts (backend options are checked by the backend).
_TRIAL_LEVELS: dict[str, Callable[[Any], bool]] = {
    "vdev_source": lambda v: str(v) in ("whole", "partition", "slice"),
    "compressibility": lambda v: isinstance(v, int) and 0 <= v <= 99,
    "fill": lambda v: isinstance(v, int) and 1 <= v <= 95,
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Disks(_Strict):
    count: int = Field(default=0, ge=0, le=64)
    size: str = "512M"
    source: Literal["loop", "files", "devices"] = "loop"
    devices: list[str] = Field(default_factory=list)
    vdev_source: Literal["whole", "partition", "slice"] = "whole"
    slice_size: str | None = None

    @field_validator("size", "slice_size")
    @classmethod
    def _size(cls, v: str | None) -> str | None:
        if v is not None:
            parse_size(v)
        return v

    @property
    def size_bytes(self) -> int:
        return parse_size(self.size)

    @property
    def n(self) -> int:
        return len(self.devices) if self.source == "devices" else self.count


class Workloads(_Strict):
    names: list[str] = Field(default_factory=lambda: ["seq-write", "seq-read"], min_length=1)
    size: str = "256M"
    runtime: int = Field(default=10, ge=1, le=3600)
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
        parse_list(",".join(v))  # raises UsageError with the valid forms
        return v

    @field_validator("size")
    @classmethod
    def _size(cls, v: str) -> str:
        parse_size(v)
        return v


Level = str | int


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


def _line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """Best effort: the line of the TOML key an error location points at."""
    keys = [str(k) for k in loc if isinstance(k, str)]
    if not keys:
        return None
    table, key = keys[:-1], keys[-1]
    current: list[str] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        m = re.match(r"^\[([^\]]+)\]", line)
        if m:
            current = [p.strip() for p in m.group(1).split(".")]
            if current == keys:
                return n
            continue
        if current == table and re.match(rf"^{re.escape(key)}\s*=", line):
            return n
    if table:
        return _line_of(text, tuple(table))
    return None


def load(path: Path) -> tuple[Study, str]:
    """Read and validate a study file; returns the study and its exact text (for the record)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise UsageError(
            f"Cannot read the study file {path}: {exc.strerror}.",
            "Check the path; examples are in examples/.",
        ) from exc
    return parse(text, str(path)), text


def parse(text: str, origin: str = "<study>") -> Study:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(
            f"{origin}: not valid TOML: {exc}.",
            "Fix the syntax at that line (strings need quotes, lists need brackets).",
        ) from exc
    try:
        return Study.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            line = _line_of(text, loc)
            where = ".".join(str(x) for x in loc) or "(top level)"
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                msg = "unknown key (a typo?); remove it or check the spelling against examples/"
            problems.append(f"{origin}{f':{line}' if line else ''}: {where}: {msg}")
        raise UsageError(
            "The study file is not valid:\n  " + "\n  ".join(problems),
            "Fix the lines named above; examples/ has a valid study of each kind.",
        ) from None
    except UsageError as exc:  # raised by a validator (workload names, sizes)
        raise UsageError(f"{origin}: {exc.problem}", exc.fix) from None
