"""The disk-with-a-head model (emulate/model.py), pure: the seek curve goes through the
datasheet's three figures, tracks and zones are consistent, and the expectations the
emulator's checks rely on agree with the model's own draws."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poolbench.emulate.model import MB, PRESETS, Geometry, HddParams, Head, Service

GIB = 1 << 30
P = PRESETS["hdd-7200"]


def test_the_preset_is_the_datasheet() -> None:
    # Seagate Constellation.2 SAS product manual 100620418 Rev. H, 5.1 and 5.2.1 (reads)
    assert (P.rpm, P.single_track_ms, P.avg_seek_ms, P.full_stroke_ms) == (7200, 0.23, 7.5, 17.06)
    assert (P.outer_mb_s, P.inner_mb_s) == (163, 84)
    assert P.problems() == []


@pytest.mark.parametrize("size", [64 << 20, GIB, 8 * GIB])
def test_the_seek_curve_goes_through_the_three_datasheet_figures(size: int) -> None:
    g = Geometry(P, size)
    assert g.seek_s(0) == 0
    assert g.seek_s(1) == pytest.approx(P.single_track_ms / 1000)
    assert g.seek_s(g.tracks - 1) == pytest.approx(P.full_stroke_ms / 1000)
    # The datasheet's average: over all pairs of tracks, a distance d weighted by the
    # (tracks - d) pairs that are d apart (zero-length seeks excluded, as datasheets do).
    n = g.tracks
    weights = [(n - d, g.seek_s(d)) for d in range(1, n)]
    avg = sum(w * s for w, s in weights) / sum(w for w, _ in weights)
    assert avg * 1000 == pytest.approx(P.avg_seek_ms, rel=0.03 if n < 100 else 0.005)


def test_tracks_hold_one_revolution_at_their_zone_rate() -> None:
    g = Geometry(P, GIB)
    assert g.rate(0) == P.outer_mb_s * MB
    assert g.rate(GIB) == pytest.approx(P.inner_mb_s * MB)
    outer = g.track_start(1) - g.track_start(0)
    inner = g.track_start(g.tracks - 1) - g.track_start(g.tracks - 2)
    assert outer == pytest.approx(P.outer_mb_s * MB * 60 / P.rpm, rel=0.001)
    assert inner == pytest.approx(g.rate(g.track_start(g.tracks - 2)) * 60 / P.rpm, rel=0.01)
    # Outer tracks are longer, so a 1 GiB disk has fewer tracks than at the inner rate alone.
    assert GIB / (P.outer_mb_s * MB / 120) < g.tracks < GIB / (P.inner_mb_s * MB / 120)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=2000))
def test_track_start_is_the_inverse_of_track(k: int) -> None:
    g = Geometry(P, 2 * GIB)
    if k >= g.tracks:
        return
    start = g.track_start(k)
    assert g.track(start) == k
    assert start == 0 or g.track(start - 1) == k - 1


figures = st.tuples(
    st.floats(3600, 15000), st.floats(0.1, 3), st.floats(10, 30), st.floats(0, 1),
    st.floats(20, 300), st.floats(0.2, 1),
)  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(figures)
def test_every_valid_disk_seeks_no_faster_further_away(f: tuple[float, ...]) -> None:
    rpm, single, full, where, outer, inner_share = f
    lo, hi = (2 * single + full) / 3, (7 * single + 8 * full) / 15
    p = HddParams("x", rpm, single, lo + where * (hi - lo), full, outer, outer * inner_share)
    assert p.problems() == []
    g = Geometry(p, 256 << 20)
    seeks = [g.seek_s(d) for d in range(g.tracks)]
    assert all(b >= a - 1e-12 for a, b in zip(seeks, seeks[1:], strict=False))


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"avg_seek_ms": 20.0}, "must grow"),
        ({"avg_seek_ms": 4.0}, "never falls with distance"),
        ({"avg_seek_ms": 12.0}, "never falls with distance"),
        ({"inner_mb_s": 200.0}, "outer zone"),
    ],
)
def test_figures_that_are_no_disk_are_named(change: dict[str, float], words: str) -> None:
    p = HddParams.from_dict({**P.as_dict(), **change})
    assert any(words in x for x in p.problems())


def test_from_dict_refuses_unknown_figures_and_keeps_the_rest() -> None:
    with pytest.raises(ValueError, match="colour"):
        HddParams.from_dict({"colour": 1})
    assert HddParams.from_dict({"rpm": 5400}) == HddParams(rpm=5400)
    assert HddParams.from_dict(P.as_dict()) == P


def test_a_stream_pays_its_transfer_only_and_a_jump_its_seek_and_rotation() -> None:
    g = Geometry(P, GIB)
    head = Head(g, seed=3)
    first = head.serve(0, 131072)  # the head starts at offset 0: this continues from there
    assert first == Service(0.0, 0.0, 131072 / g.rate(0))
    assert not head.serve(131072, 131072).positioned
    far = head.serve(GIB - 4096, 4096)
    assert far.seek_s == pytest.approx(g.seek_s(g.track(GIB - 4096) - g.track(262144)))
    assert 0 <= far.rotation_s < g.rev_s
    assert far.transfer_s == pytest.approx(4096 / g.rate(GIB - 4096))
    # The same track, elsewhere on it: no seek, but the platter must turn to it.
    near = head.serve(GIB - 2 * 4096 - 8192, 4096)
    assert near.seek_s == 0 and 0 < near.rotation_s < g.rev_s


def test_the_rotation_draws_are_seeded() -> None:
    g = Geometry(P, GIB)
    a, b = Head(g, seed=7), Head(g, seed=7)
    offsets = [random.Random(1).randrange(0, GIB // 4096) * 4096 for _ in range(50)]
    assert [a.serve(o, 4096) for o in offsets] == [b.serve(o, 4096) for o in offsets]


@pytest.mark.parametrize(("lo", "hi"), [(0, GIB), (0, 16 << 20), (GIB // 2, GIB)])
def test_the_expected_random_service_is_the_mean_of_the_models_own_draws(lo: int, hi: int) -> None:
    """The figure the real emulator's IOPS are checked against (1 / expected service) is what
    the head itself produces for random requests over the span, by Monte Carlo."""
    g = Geometry(P, GIB)
    head, rng = Head(g, seed=11), random.Random(5)
    n = 40_000
    total = sum(head.serve(rng.randrange(lo, hi - 4096), 4096).total_s for _ in range(n))
    expected = g.expected_random_s(4096, lo, hi)
    spread = math.sqrt(g.rev_s**2 / 12 + (P.full_stroke_ms / 1000) ** 2 / 12) / math.sqrt(n)
    assert total / n == pytest.approx(expected, abs=4 * spread)


def test_the_full_span_random_read_figure() -> None:
    """What a 7200 rpm disk of these figures gives at queue depth 1: about 86 IOPS (4K random
    reads over a 1 GiB emulated disk), the figure docs/emulated-disks.md states."""
    g = Geometry(P, GIB)
    assert 1 / g.expected_random_s(4096) == pytest.approx(86.1, abs=0.2)
    assert g.expected_seek_s() * 1000 == pytest.approx(7.41, abs=0.01)  # uniform in bytes
