"""Step changes in a history of measurements, found honestly (pure).

    from poolbench.stats.changepoint import Point, detect
    history = detect([Point.from_values(run_values, label=run_id), ...])

`detect` (module `detect`) is the one entry point; the caller needs to know nothing of the
method. docs/statistics.md §8 states it and its simulated calibration.
"""

from poolbench.stats.changepoint.detect import ALPHA, detect
from poolbench.stats.changepoint.points import Point
from poolbench.stats.changepoint.result import Drift, History, Outlier, Segment, Step

__all__ = ["ALPHA", "Drift", "History", "Outlier", "Point", "Segment", "Step", "detect"]
