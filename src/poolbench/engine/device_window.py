"""The device byte check around one timed measurement: the block-device counters under the
target read before and after, set against the bytes the application moved (guards/devices)."""

from __future__ import annotations

from dataclasses import dataclass, field

from poolbench.guards import devices, members
from poolbench.guards.amplification import WriteModel
from poolbench.guards.devices import Counters, Target
from poolbench.records.findings import DeviceFinding


@dataclass(frozen=True)
class DeviceOutcome:
    finding: DeviceFinding
    device_bytes: int | None = None
    device_mib_s: float | None = None
    warnings: list[str] = field(default_factory=list)
    members: list[members.MemberRate] = field(default_factory=list)  # per-disk breakdown
    # What this window shows of a slow member (guards/members.py `evidence`); a warning
    # comes only from the replicates together (engine/slow_members.py).
    slow_evidence: dict[str, object] | None = None


class DeviceWindow:
    """Open before the timed part of a measurement, close right after it. A write is judged
    against `model`, what the layout must write (None: not modelled, `unmodelled` says why)."""

    def __init__(
        self, target: Target, model: WriteModel | None = None, unmodelled: str = ""
    ) -> None:
        self.target = target
        self.model = model
        self.unmodelled = unmodelled
        self.before: dict[str, Counters] = (
            devices.read_counters(target.devices) if target.verifiable else {}
        )
        # Per-member rates need the timeline, not only the two ends (guards/members.py).
        self.sampler = members.Sampler(target.devices) if len(target.devices) > 1 else None
        if self.sampler is not None:
            self.sampler.start()

    def abandon(self) -> None:
        """The measurement failed: stop sampling (no figure is made from this window)."""
        if self.sampler is not None:
            self.sampler.stop()
            self.sampler = None

    def close(
        self,
        direction: str,
        app_bytes: int,
        seconds: float,
        *,
        compressibility: int,
        cached_by_design: bool = False,
        warn_unverified: bool = True,
        io_size: int | None = None,
        excess_why: str = "",
        short_why: str = "",
    ) -> DeviceOutcome:
        """`direction`: read, write or meta. Without a countable device, the finding says why
        and (with `warn_unverified`) so does a warning. `excess_why`: why this workload's
        devices may write more than its layout's model (untar: metadata), for the note;
        `short_why`: why they may write less (untar on a compressing pool), for the warning."""
        target = self.target
        per_member = self.sampler.stop() if self.sampler is not None else []
        # The counters' time resolution is the interval they were read at (guards/members.py).
        interval = self.sampler.interval if self.sampler is not None else members.SAMPLE_INTERVAL
        self.sampler = None
        if not target.verifiable:
            warnings = []
            if warn_unverified:
                warnings.append(
                    f"unverified: {target.unverified_reason}, so poolbench cannot confirm the "
                    "bytes reached a disk"
                )
            return DeviceOutcome(DeviceFinding(unverified=target.unverified_reason),
                                 warnings=warnings)  # fmt: skip
        io = devices.delta(self.before, devices.read_counters(target.devices))
        chk = devices.check(
            direction,
            app_bytes,
            io,
            seconds,
            cached_by_design=cached_by_design,
            compressibility=compressibility,
            model=self.model,
            unmodelled=self.unmodelled,
            io_size=io_size,
            excess_why=excess_why,
            short_why=short_why,
        )
        finding = DeviceFinding(
            devices=tuple(target.devices),
            read_bytes=io.read_bytes,
            write_bytes=io.write_bytes,
            ratio_to_app=chk.ratio,
            more={"amplification": chk.amplification} if chk.amplification else {},
        )
        warnings = [w for w in (chk.warning, chk.note) if w]
        evidence = None if cached_by_design else members.evidence(per_member, interval)
        return DeviceOutcome(finding, chk.device_bytes, chk.device_mib_s, warnings, per_member,
                             evidence)  # fmt: skip
