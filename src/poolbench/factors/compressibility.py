"""The `compressibility` trial factor: how compressible the data the workloads write is
(percent, fio's buffer_compress_percentage), overriding the study's `[workloads]
compressibility` for one configuration."""

from __future__ import annotations

from poolbench.factors import specs
from poolbench.factors.base import Factor, Levels
from poolbench.study.model import Workloads

KEY = specs.COMPRESSIBILITY


class Compressibility(Factor):
    """The configuration's [workloads] with its compressibility."""

    keys = (KEY,)
    section = ""

    def workloads(self, workloads: Workloads, levels: Levels) -> Workloads:
        return workloads.model_copy(update={KEY: int(levels[KEY])})


FACTOR = Compressibility()
