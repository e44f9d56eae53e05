"""A disk with a head: what one request costs on a spinning disk (pure; docs/emulated-disks.md).

A request that starts where the previous one ended streams on (the drive's read-ahead and the
next sector under the head): it costs its transfer only. Any other request is positioned:

    service = seek(track distance) + rotation + size / rate(offset)

* **seek**: Ruemmler & Wilkes ("An introduction to disk drive modeling", IEEE Computer 27(3),
  1994, section "Seek time"): the arm accelerates and decelerates over a short seek, so its
  time grows with the square root of the distance, and coasts over a long one, which grows
  linearly. One curve with both terms, seek(d) = c + a*sqrt(y) + b*y for d >= 1 tracks with
  y = (d-1)/(D-1) the fraction of the stroke, is fitted in closed form to a datasheet's three
  figures, as Lee & Katz do ("An analytic performance model of disk arrays", SIGMETRICS
  1993): seek(1) = single track, seek(D) = full stroke, and its mean over all pairs of tracks
  (a distance's share falls linearly with it: density 2(1-y)) = the average seek, which is
  how datasheets define it (the weighted average of all seek combinations). A seek of 0
  tracks costs nothing.
* **rotation**: a uniformly random share of one revolution (mean: half a revolution). For a
  random workload the platter's angle when the head arrives is uniform anyway; modelling the
  angle instead would turn this machine's own timing jitter (tens of microseconds) into
  phase patterns no real disk has, and the mean would no longer be computable in closed form.
* **transfer** at a zoned rate, linear in the offset from the datasheet's outer-zone rate at
  offset 0 to its inner-zone rate at the last byte. A track holds one revolution's worth of
  bytes at its zone's rate, so outer tracks are longer and the track of an offset is a
  logarithm (`Geometry.track`).

The image is the whole disk, shrunk: it spans the full stroke with tracks as long as the real
drive's, so it has fewer of them. I/O spread over X% of the image seeks like I/O spread over
X% of a real drive. Not modelled: command queueing (NCQ) and any reordering, a write cache
(writes are positioned and transferred before they complete: `hdparm -W0`), head and cylinder
switches within a transfer, and command overhead.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, fields

MB = 1_000_000  # datasheets' MB/s are 10^6 bytes per second


@dataclass(frozen=True)
class HddParams:
    """A spinning disk's datasheet figures. The preset `hdd-7200` is the Seagate
    Constellation.2 SAS (ST91000640SS, 7200 rpm) product manual 100620418 Rev. H (2012),
    sections 5.1 and 5.2.1: seek times for reads, not including controller overhead;
    "internal data rate 84 - 163 MB/s (variable with zone)"."""

    name: str = "hdd-7200"
    rpm: float = 7200.0
    single_track_ms: float = 0.23
    avg_seek_ms: float = 7.5
    full_stroke_ms: float = 17.06
    outer_mb_s: float = 163.0
    inner_mb_s: float = 84.0

    def problems(self) -> list[str]:
        """What makes these figures no disk (empty: a disk)."""
        out = []
        lo = (2 * self.single_track_ms + self.full_stroke_ms) / 3
        hi = (7 * self.single_track_ms + 8 * self.full_stroke_ms) / 15
        if not self.single_track_ms <= self.avg_seek_ms <= self.full_stroke_ms:
            out.append(
                f"the seek times must grow: single_track_ms {self.single_track_ms:g} <= "
                f"avg_seek_ms {self.avg_seek_ms:g} <= full_stroke_ms {self.full_stroke_ms:g}"
            )
        elif not lo - 1e-9 <= self.avg_seek_ms <= hi + 1e-9:
            out.append(
                f"avg_seek_ms {self.avg_seek_ms:g} is outside {lo:.2f}..{hi:.2f} ms, where a seek "
                f"curve through single_track_ms {self.single_track_ms:g} and full_stroke_ms "
                f"{self.full_stroke_ms:g} never falls with distance"
            )
        if self.inner_mb_s > self.outer_mb_s:
            out.append(
                f"inner_mb_s {self.inner_mb_s:g} is above outer_mb_s {self.outer_mb_s:g}: the "
                "outer zone (offset 0) is the fast one"
            )
        return out

    def as_dict(self) -> dict[str, float | str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> HddParams:
        unknown = set(d) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown disk model parameters: {', '.join(sorted(unknown))}")
        base = cls()

        def figure(key: str) -> float:
            return float(str(d.get(key, getattr(base, key))))

        return cls(
            name=str(d.get("name", base.name)),
            rpm=figure("rpm"),
            single_track_ms=figure("single_track_ms"),
            avg_seek_ms=figure("avg_seek_ms"),
            full_stroke_ms=figure("full_stroke_ms"),
            outer_mb_s=figure("outer_mb_s"),
            inner_mb_s=figure("inner_mb_s"),
        )


PRESETS: dict[str, HddParams] = {"hdd-7200": HddParams()}


class Geometry:
    """One emulated disk of `size` bytes with the figures `p`: tracks, zones, seek curve."""

    __slots__ = ("p", "size", "rev_s", "_r0", "_k", "_u_scale", "tracks", "_a", "_b", "_c")

    def __init__(self, p: HddParams, size: int) -> None:
        if size <= 0:
            raise ValueError("a disk has a size")
        self.p, self.size = p, size
        self.rev_s = 60.0 / p.rpm
        self._r0 = p.outer_mb_s * MB  # bytes/s at offset 0
        self._k = (p.outer_mb_s - p.inner_mb_s) * MB / size  # rate lost per byte inward
        # track(u) = integral of 1/(rate * rev) over the offsets: a logarithm when zoned
        self._u_scale = 1.0 / (self.rev_s * self._k) if self._k else 0.0
        self.tracks = self.track(size - 1) + 1
        c, avg, full = p.single_track_ms, p.avg_seek_ms, p.full_stroke_ms
        self._a = (-10 * c + 15 * avg - 5 * full) / 3 / 1000
        self._b = (7 * c - 15 * avg + 8 * full) / 3 / 1000
        self._c = c / 1000

    def rate(self, offset: int) -> float:
        """Bytes per second under the head at `offset`."""
        return self._r0 - self._k * offset

    def _u(self, offset: float) -> float:
        if not self._k:
            return offset / (self._r0 * self.rev_s)
        return self._u_scale * math.log(self._r0 / (self._r0 - self._k * offset))

    def track(self, offset: int) -> int:
        return int(self._u(offset))

    def track_start(self, k: int) -> int:
        """The first byte of track `k` (the inverse of `track`), for tests and iologs."""
        if not self._k:
            return math.ceil(k * self._r0 * self.rev_s)
        off = self._r0 / self._k * (1 - math.exp(-k / self._u_scale))
        n = math.ceil(off - 1e-6)
        return n if self.track(n) >= k else n + 1

    def seek_s(self, distance: int) -> float:
        """Seconds to move the head `distance` tracks."""
        if distance <= 0:
            return 0.0
        y = (distance - 1) / (self.tracks - 2) if self.tracks > 2 else 0.0
        return self._c + self._a * math.sqrt(y) + self._b * y

    def expected_seek_s(self, lo: int = 0, hi: int | None = None) -> float:
        """Mean seek between two offsets drawn uniformly from [lo, hi) (random I/O over that
        span): exact over the tracks, weighted by how many bytes of the span each holds."""
        import numpy as np

        hi = self.size if hi is None else hi
        first, last = self.track(lo), self.track(hi - 1)
        starts = [max(lo, self.track_start(k)) for k in range(first, last + 1)] + [hi]
        share = np.diff(np.array(starts, dtype=float)) / (hi - lo)
        pairs = np.correlate(share, share, mode="full")[len(share) - 1 :]  # P(distance = d)
        pairs[1:] *= 2  # both directions
        seeks = np.array([self.seek_s(d) for d in range(len(pairs))])
        return float(pairs @ seeks)

    def expected_transfer_s(self, size: int, lo: int = 0, hi: int | None = None) -> float:
        """Mean transfer time of `size` bytes at an offset uniform in [lo, hi)."""
        hi = self.size if hi is None else hi
        if not self._k:
            return size / self._r0
        return size * math.log(self.rate(lo) / self.rate(hi)) / (self._k * (hi - lo))

    def expected_random_s(self, size: int, lo: int = 0, hi: int | None = None) -> float:
        """Mean service time of random requests of `size` bytes over [lo, hi): every one is
        positioned (seek + half a revolution on average + transfer)."""
        seek = self.expected_seek_s(lo, hi)
        return seek + self.rev_s / 2 + self.expected_transfer_s(size, lo, hi)


@dataclass(frozen=True)
class Service:
    """What one request cost, in seconds."""

    seek_s: float
    rotation_s: float
    transfer_s: float

    @property
    def total_s(self) -> float:
        return self.seek_s + self.rotation_s + self.transfer_s

    @property
    def positioned(self) -> bool:
        return self.rotation_s > 0 or self.seek_s > 0


class Head:
    """One disk's moving parts: where the head is, and a seeded draw of the platter's angle."""

    def __init__(self, geometry: Geometry, seed: int = 0) -> None:
        self.g = geometry
        self.pos = 0  # the byte after the last one transferred
        self._rng = random.Random(seed)

    def serve(self, offset: int, size: int) -> Service:
        g, last = self.g, self.g.size - 1
        transfer = size / g.rate(min(offset, last))
        if offset == self.pos:
            seek = rotation = 0.0
        else:
            seek = g.seek_s(abs(g.track(min(offset, last)) - g.track(min(self.pos, last))))
            rotation = self._rng.random() * g.rev_s
        self.pos = offset + size
        return Service(seek, rotation, transfer)
