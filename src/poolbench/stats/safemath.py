"""exp and expm1 that answer inf instead of raising: a disturbed replicate (15 MiB/s among
150s) can make a log-scale bound or a detectable change's exponent pass 709, where
math.exp raises OverflowError; a bound of inf is the honest answer there."""

from __future__ import annotations

import math

_MAX = 709.0  # math.exp(709.78…) is the largest float


def exp(x: float) -> float:
    return math.inf if x > _MAX else math.exp(x)


def expm1(x: float) -> float:
    return math.inf if x > _MAX else math.expm1(x)
