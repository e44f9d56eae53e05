"""Typed records of the trial loop: what a trial builds (TrialConfig).

What the guards found (Findings) and one stored figure (Measurement) are the records/
package's, shared by the engine, the store and the reports; they are re-exported here for
the trial loop's modules. This module is pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from poolbench.records.findings import CacheFinding as CacheFinding
from poolbench.records.findings import DataFinding as DataFinding
from poolbench.records.findings import DeviceFinding as DeviceFinding
from poolbench.records.findings import Findings as Findings
from poolbench.records.findings import FioFinding as FioFinding
from poolbench.records.findings import modelled_amplification as modelled_amplification
from poolbench.records.findings import write_amplification as write_amplification
from poolbench.records.measurement import Measurement as Measurement
from poolbench.study.matrix import Config


# -- what a trial builds ------------------------------------------------------------------------
@dataclass(frozen=True)
class TrialConfig:
    """One trial of a study: the configuration it builds, which replicate, its place in the
    run's order."""

    config: Config
    replicate: int
    index: int

    @property
    def key(self) -> str:
        """'backend=zfs layout=raidz1 ashift=12': the configuration as stored."""
        return self.config.key

    @property
    def levels(self) -> dict[str, str]:
        return dict(self.config.levels)

    @property
    def backend(self) -> str:
        return self.config.backend
