"""Before a study on real disks: what a recent screen of those disks (matched by serial
number, within store/screens.RECENT_DAYS) says about them. A slow disk among them is warned
about before any layout is built: a comparison of layouts on unequal disks measures the slow
disk as much as the layouts (a pool waits for its slowest member). Disks with no recent
screen are named with the command that screens them (disks with a serial number only:
nothing else can be matched).

Before a real run (not a dry run), disks with a serial number and no recent screen are
screened first, read-only and short (BEFORE_STUDY: sequential 1M reads and random 4K reads
at queue depth 1, 10 s each, twice), stored like any screen, so the warning and the report's
disk speeds have figures. Disks without a serial (loop devices) are never screened here:
nothing could find their screen again. `--no-screen` (StudyRequest.screen) skips that screen:
the study then says, and stores in its run's metadata (`screen`), that its disks' speeds were
not screened, so a slow disk among them was not looked for.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

from poolbench.engine.screen.compare import SLOW_RULE, slow_disks
from poolbench.engine.screen.jobs import ScreenOptions
from poolbench.engine.screen.records import DiskScreen
from poolbench.engine.screen.run import ScreenDisk, screen
from poolbench.errors import PoolbenchError
from poolbench.safety.claims import ClaimSet
from poolbench.store.db import Store
from poolbench.store.screens import RECENT_DAYS, add_screen, recent_by_serial
from poolbench.system.diskqueue import SYS_ROOT
from poolbench.system.runner import Runner

BEFORE_STUDY = ScreenOptions(runtime_s=10, repeats=2, tests=("seq-read", "rand-read-4k-qd1"))


def not_screened(paths: list[str]) -> str:
    """What --no-screen left out: said before the study and kept with its run."""
    return (
        f"{', '.join(paths)} not screened (--no-screen, and no screen of them within "
        f"{RECENT_DAYS} days): their speeds were not measured, so a slow disk among "
        "them was not looked for and the layouts may be compared on unequal disks (screen "
        "them: poolbench disks --screen " + " ".join(shlex.quote(p) for p in paths) + ")"
    )


def unscreened(store: Store, claims: ClaimSet) -> list[str]:
    """The claimed disks with a serial number and no recent screen."""
    found = recent_by_serial(store, [c.serial for c in claims.claims if c.serial])
    return [c.path for c in claims.claims if c.serial and c.serial not in found]


def study_notes(store: Store, claims: ClaimSet, screening: bool = True) -> list[str]:
    """Warnings and notes for a study about to run on `claims`' disks (`screening`: the real
    run screens those with no recent screen; False: --no-screen)."""
    serials = [c.serial for c in claims.claims if c.serial]
    found = recent_by_serial(store, serials)
    screens: list[DiskScreen] = []
    for c in claims.claims:
        if c.serial and c.serial in found:
            d = DiskScreen.from_json(found[c.serial].result)
            d.device = c.path  # the path it has now, whatever it had when screened
            screens.append(d)
    out = [
        f"warning: a screen of these disks (by serial, within {RECENT_DAYS} days) shows "
        f"{s.text()}; the layouts will be compared on unequal disks, and every layout that "
        f"uses {s.device} waits for it (named when {SLOW_RULE})"
        for s in slow_disks(screens)
    ]
    # Only disks with a serial number: one without (a loop device) is never matched anyway.
    missing = [c.path for c in claims.claims if c.serial and c.serial not in found]
    if missing and not screening:
        out.append(f"warning: {not_screened(missing)}")
    elif missing and len(claims.claims) > 1:
        out.append(
            f"note: no screen within {RECENT_DAYS} days of {', '.join(missing)}: the real run "
            f"screens them first (read-only, all at once, about "
            f"{BEFORE_STUDY.estimate_s(len(missing)):.0f} s); "
            "a longer screen now: poolbench disks --screen "
            + " ".join(shlex.quote(c.path) for c in claims.claims)
        )
    return out


def screen_unscreened(
    runner: Runner,
    store: Store,
    claims: ClaimSet,
    note: Callable[[str], None],
    sys_root: Path = SYS_ROOT,
) -> int:
    """Screen (read-only, BEFORE_STUDY) the claimed disks that have a serial number and no
    recent screen, and store it; returns how many disks were screened."""
    found = recent_by_serial(store, [c.serial for c in claims.claims if c.serial])
    todo = [c for c in claims.claims if c.serial and c.serial not in found]
    if not todo:
        return 0
    opts = BEFORE_STUDY
    note(
        f"screening {', '.join(c.path for c in todo)} first (read-only, "
        f"about {opts.estimate_s(len(todo)):.0f} s, all at once: {', '.join(opts.tests)}, "
        f"{opts.runtime_s:g} s x {opts.repeats} each; no recent screen of them in the store)"
    )
    try:
        result = screen(runner, [ScreenDisk(c.path, c.name) for c in todo], opts,
                        sys_root=sys_root)  # fmt: skip
    except PoolbenchError as exc:  # the study itself may still work: say so and go on
        note(f"warning: the screen before the study failed, so unequal disks would go "
             f"unnoticed: {exc.paragraph()}")  # fmt: skip
        return 0
    settings = {"runtime_s": opts.runtime_s, "repeats": opts.repeats, "before_study": True,
                "path": None if result.path is None else result.path.to_json()}  # fmt: skip
    if result.path is not None and result.path.limited:
        note(f"warning: {result.path.text()}")
    add_screen(store, [d.to_json() for d in result.disks], False, settings)
    return len(todo)


def before_study(
    runner: Runner,
    store: Store,
    claims: ClaimSet,
    note: Callable[[str], None],
    screening: bool,
    sys_root: Path = SYS_ROOT,
) -> str | None:
    """A real run's screen of its unscreened disks (screen_unscreened); with `screening`
    False (--no-screen) none, and what it left out is returned for the run's metadata
    (`screen`; study_notes says it). None: nothing was left out."""
    if screening:
        screen_unscreened(runner, store, claims, note, sys_root)
        return None
    missing = unscreened(store, claims)
    return not_screened(missing) if missing else None
