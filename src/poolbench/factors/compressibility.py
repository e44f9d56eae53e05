"""The `compressibility` trial factor: how compressible the data the workloads write is
(percent, fio's buffer_compress_percentage), overriding the study's `[workloads]
compressibility` for one configuration."""

from __future__ import annotations

from typing import TYPE_CHECKING

from poolbench.factors.base import Factor, Levels
from poolbench.factors.specs import Spec, int_in

if TYPE_CHECKING:
    from poolbench.study.model import Workloads

KEY = "compressibility"


class Compressibility(Factor):
    """The configuration's [workloads] with its compressibility."""

    specs = (
        Spec(
            KEY,
            "overrides [workloads] compressibility per configuration: 0..99 percent",
            int_in(0, 99),
        ),
    )
    order = 20  # the configuration's [workloads], which nothing after it changes
    section = ""

    def workloads(self, workloads: Workloads, levels: Levels) -> Workloads:
        return workloads.model_copy(update={KEY: int(levels[KEY])})


FACTOR = Compressibility()
