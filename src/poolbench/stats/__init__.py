"""Statistics (pure): the replicate rule, reported intervals, outliers, comparisons.

`ReplicatePolicy` is the one object the engine, bench, studies, the fleet and the reports use;
the modules behind it each hold one rule (see docs/statistics.md).
"""

from poolbench.stats.compare import Ratio
from poolbench.stats.policy import MeanCI, ReplicatePolicy
from poolbench.stats.power import detectable_change, no_difference_text

__all__ = ["MeanCI", "Ratio", "ReplicatePolicy", "detectable_change", "no_difference_text"]
