"""A registry's members found in its package, so that a new trial factor or built-in study is
its module alone: every module of the package but the registry's own helpers (named by the
registry) exports its member under one agreed name (`FACTOR`, `BUILTIN`). The order members
are applied or listed in is the registry's to declare, never the file system's; two members
that claim one name are refused, since either could be the one a configuration meant.

A module that exports nothing (a member whose export was misspelled, or a helper the registry
does not name) is not a member: `Found.strays` names it, and the registries' tests hold that
there is none."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Generic, TypeGuard, TypeVar

T = TypeVar("T")


class DuplicateMember(ValueError):
    """Two members of one registry claim the same name."""


@dataclass(frozen=True)
class Found(Generic[T]):
    members: tuple[T, ...]  # in module-name order (the registry orders them itself)
    strays: tuple[str, ...]  # modules that are neither a member nor a named helper


def members(
    package: str, export: str, is_member: Callable[[object], TypeGuard[T]], helpers: Collection[str]
) -> Found[T]:
    """Each module of `package` (not its subpackages) but `helpers`, imported, with the
    value it exports as `export` when that is a member."""
    where = importlib.import_module(package).__path__
    found: list[T] = []
    strays: list[str] = []
    for info in sorted(pkgutil.iter_modules(where), key=lambda m: m.name):
        if info.ispkg or info.name in helpers:
            continue
        value = getattr(importlib.import_module(f"{package}.{info.name}"), export, None)
        if is_member(value):
            found.append(value)
        else:
            strays.append(info.name)
    return Found(tuple(found), tuple(strays))


def by_name(items: Iterable[T], names: Callable[[T], Iterable[str]]) -> dict[str, T]:
    """Every name each item claims → the item, in the items' order; a name claimed twice
    is refused with both claimants."""
    out: dict[str, T] = {}
    for item in items:
        for name in names(item):
            if name in out:
                raise DuplicateMember(f"{name!r} is claimed by both {out[name]!r} and {item!r}")
            out[name] = item
    return out
