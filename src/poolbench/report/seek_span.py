"""How far a seeking disk's head travels in a study: the one-disk baseline holds the whole
working set, a member of a wider layout only its share, and a shorter stroke is a shorter
seek. The study's disk model (`[disks] model`, emulate/model.py) gives the random read time
over each span; the predicted table scales the baseline's random IOPS by their ratio."""

from __future__ import annotations

from poolbench.emulate.model import PRESETS, Geometry, HddParams
from poolbench.errors import PoolbenchError
from poolbench.planner.layout import Layout
from poolbench.planner.space import psize_to_asize
from poolbench.report.data import RunData
from poolbench.units import parse_size


def disk_model(run: RunData) -> tuple[HddParams, int] | None:
    """The study's emulated disk and its size in bytes; None for disks without a head."""
    disks = run.study.disks
    model = disks.model if disks is not None else None
    if disks is None or model is None:
        return None
    given = {k: v for k, v in model.items() if v is not None and k != "name"}
    try:
        params = HddParams.from_dict({**PRESETS[str(model.get("name"))].as_dict(), **given})
        return params, int(parse_size(str(disks.size)))
    except (KeyError, ValueError, PoolbenchError):
        return None


def member_span(layout: Layout, data_bytes: int, recordsize: int, ashift: int) -> int:
    """Bytes of the working set on one member: each top-level vdev an equal share of the
    records, a mirror's side all of its vdev's, a raidz member its share of the parity and
    padding too (`psize_to_asize`)."""
    spec = layout.vdevs[0]
    records = -(-data_bytes // recordsize) / len(layout.vdevs)
    asize = psize_to_asize(spec, recordsize, ashift)
    per_member = asize if spec.kind in ("disk", "mirror") else asize / spec.width
    return int(records * per_member)


def span_share(run: RunData, layout: Layout, recordsize: int, ashift: int) -> float:
    """The one-disk pool's random read time over this layout's member's: above 1 where the
    member holds less of the working set (its seeks are shorter). 1 without a disk model."""
    found = disk_model(run)
    try:
        data = int(parse_size(str(run.study.workloads.size)))
    except (PoolbenchError, ValueError):
        return 1.0
    if found is None or len({v.kind for v in layout.vdevs}) != 1:
        return 1.0
    hdd, size = found
    g = Geometry(hdd, size)
    one = min(int(data // 1), size)
    mine = max(min(member_span(layout, data, recordsize, ashift), size), recordsize + 1)
    return g.expected_random_s(recordsize, 0, one) / g.expected_random_s(recordsize, 0, mine)
