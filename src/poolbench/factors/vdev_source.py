"""The `vdev_source` trial factor: what each member of the pool is made of for one
configuration (a whole disk, a partition, a slice), overriding the study's `[disks]
vdev_source`. It acts where the trial makes its disks (backends/sources.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from poolbench.errors import UsageError
from poolbench.factors import specs
from poolbench.factors.base import Factor, Levels, Preflight
from poolbench.factors.specs import Spec, one_of

if TYPE_CHECKING:
    from poolbench.study.model import Disks

KEY = specs.VDEV_SOURCE


def disks_for(disks: Disks, levels: Levels) -> Disks:
    """[disks] with the configuration's `vdev_source` level applied."""
    source = levels.get(KEY)
    if source is None or source == disks.vdev_source:
        return disks
    if source != "whole" and disks.source == "files":
        raise UsageError(
            f"vdev_source={source} needs block devices, but [disks] source is 'files'.",
            'Use source = "loop" (loop devices over sparse files) or real devices.',
        )
    if source == "slice" and not disks.slice_size:
        raise UsageError(
            "vdev_source=slice needs [disks] slice_size.", 'Add e.g. slice_size = "256M".'
        )
    return disks.model_copy(update={"vdev_source": source})


class VdevSource(Factor):
    """The configuration's [disks] with its vdev source."""

    specs = (
        Spec(
            KEY,
            "overrides [disks] vdev_source per configuration: whole | partition | slice",
            one_of("whole", "partition", "slice"),
        ),
    )
    order = 10  # first: what the disks are made of, before anything is made on them
    section = ""

    def check(self, at: Preflight) -> None:
        disks_for(at.disks, at.levels)

    def disks(self, disks: Disks, levels: Levels) -> Disks:
        return disks_for(disks, levels)


FACTOR = VdevSource()
