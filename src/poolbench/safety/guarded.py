"""The guarded runner: destructive work runs only on claimed devices (safety/claims.py).

It rechecks the claim set before the first mutating command, and refuses any mutating command
that names a /dev path that is not claimed: the last line of defence if a bug hands a backend
the wrong device.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from poolbench.errors import PoolbenchError, UsageError
from poolbench.safety.claims import ClaimSet, Resolver, resolve_dev
from poolbench.system.runner import CallRecord, CommandResult, Runner


class GuardedRunner:
    """A runner for destructive work on claimed devices.

    Before the first mutating command it rechecks the claims (dry runs included: the check is
    read-only). Every mutating command that names a /dev path must name a claimed device, a
    partition of one, a device built only from claimed devices (md, dm), a path that does not
    exist yet (an array about to be created), or a path explicitly allowed (`allow`).
    """

    def __init__(self, inner: Runner, claims: ClaimSet, *, resolve: Resolver | None = None) -> None:
        self.inner = inner
        self.claims = claims
        self.resolve = resolve or resolve_dev
        self.allowed: set[str] = set()

    @property
    def dry_run(self) -> bool:
        return self.inner.dry_run

    @dry_run.setter
    def dry_run(self, value: bool) -> None:
        self.inner.dry_run = value

    @property
    def calls(self) -> list[CallRecord]:
        return self.inner.calls

    @calls.setter
    def calls(self, value: list[CallRecord]) -> None:
        self.inner.calls = value

    def which(self, program: str) -> str | None:
        return self.inner.which(program)

    def allow(self, path: str) -> None:
        """A device poolbench itself created (a loop device, an md array) may be written."""
        self.allowed.add(path)

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        input_text: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        mutates: bool = True,
        reap_group: bool = True,
    ) -> CommandResult:
        if mutates:
            if not self.claims.rechecked:
                self.claims.recheck(self.inner, self.resolve)
            self._check_devices(argv)
        return self.inner.run(
            argv,
            check=check,
            input_text=input_text,
            env=env,
            timeout=timeout,
            mutates=mutates,
            reap_group=reap_group,
        )

    def _check_devices(self, argv: Sequence[str]) -> None:
        names = {c.name for c in self.claims.claims}
        sys_block = self.claims.paths.sys_root / "class" / "block"
        prefixes = ("/dev/", str(self.claims.paths.dev_root) + "/")
        for arg in list(argv)[1:]:
            path = arg.rsplit("=", 1)[-1]
            if not path.startswith(prefixes) or path in self.allowed:
                continue
            try:
                majmin = self.resolve(path)
            except FileNotFoundError:
                continue  # not there yet: nothing to destroy
            except (OSError, UsageError):
                continue  # not a block device (/dev/null, /dev/urandom)
            link = self.claims.paths.sys_root / "dev" / "block" / majmin
            name = os.path.basename(os.path.realpath(link))
            node = sys_block / name
            parent = node.resolve().parent.name if (node / "partition").exists() else None
            slaves = set(os.listdir(node / "slaves")) if (node / "slaves").is_dir() else set()
            if name in names or parent in names or (slaves and slaves <= names):
                continue
            raise PoolbenchError(
                f"Refusing to run a command on {path}, which is not a claimed device: "
                f"{' '.join(argv)}",
                "This is a bug in poolbench; please report it. Nothing was run.",
            )
