"""Expand a study into configurations and order its trials (pure).

A configuration is one combination of factor levels; a trial is one configuration built and
measured once (replicate r). Trials run round by round — every configuration once per round,
in an order shuffled per round from the recorded seed — so the replicates of a configuration
are spread over the whole run (A B A B, never A A B B) and slow drift (disks filling up,
heat, the host's other load) cannot masquerade as a difference between configurations.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from poolbench.stats.rounds import rounds
from poolbench.study.model import Study

# The stack a configuration builds when its study names none.
DEFAULT_BACKEND = "zfs"
# Factors listed in this order in configuration keys, the rest alphabetically after.
_KEY_ORDER = ("backend", "layout", "ashift", "recordsize", "compression", "fs")
# (Trial factors — vdev_source, compressibility, fill — sort alphabetically after these.)


@dataclass(frozen=True)
class Config:
    levels: tuple[tuple[str, str], ...]  # (factor, level) in key order

    @property
    def key(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.levels)

    @property
    def backend(self) -> str:
        """The stack this configuration builds (DEFAULT_BACKEND when its study names none)."""
        return self.get("backend") or DEFAULT_BACKEND

    def get(self, factor: str, default: str | None = None) -> str | None:
        for k, v in self.levels:
            if k == factor:
                return v
        return default


def parse_key(key: str) -> dict[str, str]:
    """A stored configuration key back into its levels: the inverse of `Config.key`, for
    rows stored before the levels were kept as data (store 0006_config_levels).

    A level may hold spaces ('layout=raidz1:3 + log mirror:2'), so a token without '=' (or
    one that starts with '=') continues the previous level; {} when the key does not start
    with a level at all (a bench run's target path)."""
    out: dict[str, str] = {}
    last = ""
    for token in key.split(" "):
        k, sep, v = token.partition("=")
        if sep and k and k not in out:
            out[k], last = v, k
        elif last:
            out[last] += " " + token
        else:
            return {}
    return out


@dataclass(frozen=True)
class Trial:
    index: int  # position in the run's order
    replicate: int  # round
    config: Config


def configs(study: Study) -> list[Config]:
    factors = dict(study.factors)
    factors.setdefault("backend", [DEFAULT_BACKEND])
    names = sorted(factors, key=lambda f: (_KEY_ORDER.index(f) if f in _KEY_ORDER else 99, f))
    combos = itertools.product(*(factors[n] for n in names))
    out = [
        Config(tuple((n, str(v)) for n, v in zip(names, combo, strict=True))) for combo in combos
    ]
    return [c for c in out if not excluded(study, c)]


def excluded(study: Study, cfg: Config) -> bool:
    """Whether a study's `exclude` list drops this configuration (all keys of an entry match)."""
    return any(all(cfg.get(k) == str(v) for k, v in entry.items()) for entry in study.exclude)


def plan(study: Study, seed: int) -> list[Trial]:
    """The planned trials: `study.replicates` rounds (more may be added while CIs are wide)."""
    cfgs = configs(study)
    trials: list[Trial] = []
    for r, order in rounds(lambda _r: cfgs, seed, 0, study.replicates):
        trials += [Trial(len(trials) + i, r, c) for i, c in enumerate(order)]
    return trials
