"""Times as the store holds them (seconds since the epoch), read back strictly: a value no
clock can show (out of range, not a number) means the store is damaged, said so in one
paragraph rather than an OverflowError from deep in a report."""

from __future__ import annotations

import datetime as dt
from typing import Any

from poolbench.store.opening import StoreError


def stored_time(value: Any, what: str, *, utc: bool = True) -> dt.datetime:
    """The datetime of a stored timestamp (UTC, or local time with `utc=False`)."""
    try:
        seconds = float(value)
        return dt.datetime.fromtimestamp(seconds, dt.UTC if utc else None)
    except (TypeError, ValueError, OverflowError, OSError) as exc:
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise StoreError(
            f"This store is damaged: {what} is {shown}, which is not a time ({exc}).",
            "Export the runs that still read (poolbench export RUN), or restore the store "
            "from a copy; poolbench never writes such a value itself.",
        ) from exc
