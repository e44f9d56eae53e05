"""Turning the devices a user named into claims, for every destructive command: each one
checked by the safety layer, and the user asked before data is destroyed.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import click

from poolbench.safety.claims import ClaimSet, claim_devices
from poolbench.safety.inventory import protected_paths
from poolbench.system.runner import Runner


def _confirm(text: str) -> bool:
    click.echo(text, err=True)
    answer = click.prompt("Type 'destroy' to destroy this data", default="", err=True)
    return bool(answer.strip() == "destroy")


def claim_from_cli(
    runner: Runner,
    devices: Sequence[str],
    destroy_data_on: Sequence[str],
    yes: bool,
    db: Path | None,
    scratch_dir: Path | None,
) -> ClaimSet:
    """Claims for the devices named on a command line; asks on the terminal if it must."""
    return claim_devices(
        runner,
        devices,
        overrides=destroy_data_on,
        yes=yes,
        confirm=_confirm if sys.stdin.isatty() else None,
        protect=protected_paths(db, scratch_dir),
    )
