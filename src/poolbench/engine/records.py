"""Typed records of the trial loop: what a trial builds (TrialConfig).

What the guards found (Findings) and one stored figure (Measurement) are the records/
package's (records/findings.py, records/measurement.py), shared by the engine, the store and
the reports, and imported from there. This module is pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

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
