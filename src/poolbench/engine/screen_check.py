"""Before a study on real disks: what a recent screen of those disks (matched by serial
number, within store/screens.RECENT_DAYS) says about them. A slow disk among them is warned
about before any layout is built: a comparison of layouts on unequal disks measures the slow
disk as much as the layouts (a pool waits for its slowest member). Disks with no recent
screen are named with the command that screens them (disks with a serial number only:
nothing else can be matched).

Screening automatically before a study (the study's own read-only screen when none is
recent) is not done yet: the study only warns and offers the command.
"""

from __future__ import annotations

import shlex

from poolbench.engine.screen_compare import SLOW_RULE, slow_disks
from poolbench.engine.screen_records import DiskScreen
from poolbench.safety.claims import ClaimSet
from poolbench.store.db import Store
from poolbench.store.screens import RECENT_DAYS, recent_by_serial


def study_notes(store: Store, claims: ClaimSet) -> list[str]:
    """Warnings and notes for a study about to run on `claims`' disks."""
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
    if missing and len(claims.claims) > 1:
        out.append(
            f"note: no screen within {RECENT_DAYS} days of {', '.join(missing)}: unequal disks "
            "would go unnoticed; screen them first (read-only): poolbench disks --screen "
            + " ".join(shlex.quote(c.path) for c in claims.claims)
        )
    return out
