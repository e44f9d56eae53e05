"""`poolbench fleet run`: one study on every host at once, over SSH, collected into one store.

In order: every host checked (fleet/readiness.py: a host not ready is named and left out, the
others go on); the study file sent to each; the study started on each, detached, with the
same seed (so the same trial order) and that host's disks (fleet/host_side.py); then each host
polled every `poll_s` seconds, its new log lines printed with its name in front. A host whose
link drops is said so, and polled again until `link_grace_s` has passed without an answer:
its study goes on there and `--resume TAG` collects it later. A host whose study ended has
its store fetched (scp over the same shared connection) and imported into the local store,
each run tagged with the host and the fleet run's tag in its origin, ids remapped.

Ctrl-C (or SIGTERM, SIGHUP) here stops every host's study the way Ctrl-C stops one (torn
down, what was finished kept) before this command ends; `--resume TAG` then finishes them
(each host's `run --resume`).

The fleet run's own state (hosts, tag, seed, what each host reached) is a JSON file beside
the local store (fleet/TAG.json), so `--resume` needs nothing else.
"""

from __future__ import annotations

import base64
import json
import secrets
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from poolbench.errors import PoolbenchError
from poolbench.fleet import host_side
from poolbench.fleet.readiness import HostCheck, check_host
from poolbench.fleet.ssh import SSH_FAILED, SshTarget, Transport
from poolbench.fleet.sshhosts import FleetHost
from poolbench.store.db import Store
from poolbench.store.merge import import_store
from poolbench.store.queries import StoredFigure, stored_figures
from poolbench.system import stopping

CALL_TIMEOUT = 60.0  # one host-* call, connection included
STOP_TIMEOUT = 30.0  # one host-stop call: every host is told at once, so this bounds them all
STOP_WORKERS = 16
FETCH_TIMEOUT = 600.0  # one host's store
START_LEAD_S = 3.0
# Each host's start is two calls in turn (host-put, host-start), each starting poolbench on the
# host: about 0.6 s apiece on an idle one, up to 3 s on a busy one (the suite beside a guest:
# the third of three hosts began 1 s per host late). Time for both on a busy host.
START_PER_HOST_S = 3.0
ENDED = ("finished", "partial", "failed")  # an interrupted run is resumed, not collected


@dataclass
class HostRun:
    label: str
    state: str = "pending"  # pending, starting, running, lost, collected, failed, left out,
    # stopped
    offset: int = 0  # how much of its log was printed
    remote_run: int | None = None
    remote_status: str | None = None
    local_run: int | None = None
    reason: str = ""
    last_answer: float = 0.0
    attempt: str = ""  # the name of its last start call (a stop can cancel it in flight)


@dataclass
class FleetRun:
    tag: str
    study_file: str  # its name, as the hosts' runs show it (a built-in study: its name)
    study_text: str  # what every host runs, kept for --resume ("" for a built-in study)
    hostfile: str
    seed: int
    hosts: dict[str, HostRun] = field(default_factory=dict)
    run_options: list[str] = field(default_factory=list)  # more `poolbench run` options
    builtin: list[str] = field(default_factory=list)  # `study NAME OPTIONS...` instead of a file
    start_at: float | None = None  # every host's study waits for this instant (--together)
    targets: dict[str, dict[str, object]] = field(default_factory=dict)  # label -> its host
    # file line as the run began (fleet_hosts): --resume reaches the same hosts, whatever
    # the host file says by then

    def save(self, path: Path) -> None:
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> FleetRun:
        doc = json.loads(path.read_text())
        hosts = {k: HostRun(**v) for k, v in doc.pop("hosts").items()}
        return cls(**doc, hosts=hosts)


def remember_hosts(run: FleetRun, hosts: list[FleetHost]) -> None:
    run.targets = {
        h.label: {"host": h.target.host, "user": h.target.user, "port": h.target.port,
                  "disks": h.disks, "poolbench": h.poolbench}
        for h in hosts
    }  # fmt: skip


def fleet_hosts(run: FleetRun) -> dict[str, FleetHost]:
    """The hosts the run began with (remember_hosts)."""
    out = {}
    for label, t in run.targets.items():
        port = t.get("port")
        target = SshTarget(str(t["host"]), _opt(t.get("user")),
                           int(port) if isinstance(port, int) else None)  # fmt: skip
        out[label] = FleetHost(target, _opt(t.get("disks")), str(t.get("poolbench") or "poolbench"))
    return out


def _opt(value: object) -> str | None:
    return None if value is None else str(value)


def new_tag() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def state_path(store_path: Path, tag: str) -> Path:
    """Where fleet run TAG's state is kept: beside the local store (made on the first save)."""
    return store_path.parent / "fleet" / f"{tag}.json"


@dataclass
class Controller:
    transport: Transport
    store: Store
    run: FleetRun
    hosts: dict[str, FleetHost]
    say: Callable[[str], None]
    poll_s: float = 2.0
    link_grace_s: float = 120.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    save: Callable[[], None] = lambda: None  # the run's state to disk (before a start call)
    restart: set[str] = field(default_factory=set)  # hosts whose stopped study is resumed
    # once when met (set by `resume`: the user asked for them to be finished)

    def _call(
        self,
        label: str,
        args: list[str],
        input_text: str | None = None,
        timeout: float = CALL_TIMEOUT,
    ) -> tuple[int, str, str]:
        """`poolbench fleet ARGS` on the host (its host-* side: fleet/host_side.py)."""
        host = self.hosts[label]
        r = self.transport.run(host.target, [host.poolbench, "fleet", *args],
                               timeout=timeout, input_text=input_text)  # fmt: skip
        return r.returncode, r.stdout, r.stderr

    def begin(self, checks: list[HostCheck], together: bool = False) -> None:
        """Hosts not ready are left out, named; the study starts on every other (with
        `together`, at one instant all of them wait for, their clocks' skew stated)."""
        for c in checks:
            hr = self.run.hosts.setdefault(c.label, HostRun(c.label))
            if not c.ready:
                hr.state, hr.reason = "left out", "; ".join(c.problems)
                self.say(f"[{c.label}] left out: {hr.reason}")
        ready = [c for c in checks if c.ready]
        if together and ready:
            # Each start call is one round trip or two: time for all of them, then some.
            self.run.start_at = time.time() + START_LEAD_S + START_PER_HOST_S * len(ready)
            when = time.strftime("%H:%M:%S", time.localtime(self.run.start_at))
            self.say(f"every host starts its study at {when} by its own clock; "
                     + skew_text(ready))  # fmt: skip
        for label, hr in self.run.hosts.items():
            if hr.state == "pending":
                self.start(label)

    def start(self, label: str, resume: int | None = None) -> None:
        """The study on the host, detached: a study file is sent first; a built-in study is
        the host's own `poolbench study NAME`. The same seed everywhere; the host's disks."""
        hr, host = self.run.hosts[label], self.hosts[label]
        rc, out, err = 0, "", ""
        if self.run.builtin:
            args = ["study", *self.run.builtin]
        else:
            rc, out, err = self._call(label, ["host-put", self.run.tag], self.run.study_text)
            args = ["run", out.strip()]
        if rc == 0:
            args += ["--seed", str(self.run.seed)]
            args += (
                ["--resume", str(resume)]
                if resume
                else [*(["--disks", host.disks] if host.disks else []), *self.run.run_options]
            )
            at = ["--at", repr(self.run.start_at)] if self.run.start_at and not resume else []
            # On record before the call: a stop that lands while it is on its way cancels
            # this very start there (stop_all), so no study is left running unseen.
            hr.state, hr.attempt = "starting", secrets.token_hex(4)
            self.save()
            rc, out, err = self._call(
                label, ["host-start", self.run.tag, *at, "--attempt", hr.attempt, "--", *args]
            )
        if rc != 0:
            hr.state, hr.reason = "failed", _reason(rc, err)
            self.say(f"[{label}] not started: {hr.reason}")
            return
        hr.state, hr.last_answer = "running", self.clock()
        self.say(f"[{label}] {'resumed' if resume else 'started'} ({self.run.study_file}, "
                 f"seed {self.run.seed})")  # fmt: skip

    def poll_once(self, label: str) -> None:
        """The host asked once (and again at once while an ended study's log has more)."""
        while self._poll_step(label):
            pass

    def _poll_step(self, label: str) -> bool:
        """One host-status call taken in; True when the study ended with more log to read."""
        hr = self.run.hosts[label]
        rc, out, err = self._call(label, ["host-status", self.run.tag, "--from", str(hr.offset)])
        now = self.clock()
        if rc == SSH_FAILED:
            if hr.state != "lost":
                self.say(f"[{label}] link lost ({_reason(rc, err)}); its study goes on there")
                hr.state = "lost"
            if now - hr.last_answer > self.link_grace_s:
                hr.state, hr.reason = "failed", "link lost: its study goes on there"
                self.say(f"[{label}] no answer for {self.link_grace_s:g} s: left to "
                         f"`poolbench fleet run --resume {self.run.tag}`")  # fmt: skip
            return False
        if rc != 0:
            hr.state, hr.reason = "failed", _reason(rc, err)
            self.say(f"[{label}] {hr.reason}")
            return False
        if hr.state == "lost":
            self.say(f"[{label}] link back")
        hr.state, hr.last_answer = "running", now
        try:
            running, more = self._take_status(hr, out)
        except (ValueError, KeyError, TypeError, IndexError):
            hr.state = "failed"
            hr.reason = f"its answer is not a fleet run's status: {out.strip()[:80]!r}"
            self.say(f"[{label}] {hr.reason}")
            return False
        if running:
            return False
        if more:  # the study ended with more log than one answer carries: the rest first
            return True
        self.collect(label)
        return False

    def _take_status(self, hr: HostRun, out: str) -> tuple[bool, bool]:
        """One host-status answer taken in: its log said, its runs noted; (running, more)."""
        st = json.loads(out)
        log, nxt, runs = str(st["log"]), int(st["next"]), list(st["runs"])
        last = (int(runs[-1]["id"]), str(runs[-1]["status"])) if runs else None
        for line in log.splitlines():
            self.say(f"[{hr.label}] {line}")
        hr.offset = nxt
        if last:
            hr.remote_run, hr.remote_status = last
        return bool(st["running"]), bool(st.get("more", False))

    def collect(self, label: str) -> None:
        hr = self.run.hosts[label]
        if hr.remote_status not in ENDED:
            what = f"run {hr.remote_run} {hr.remote_status}" if hr.remote_run else "no run begun"
            if label in self.restart:
                self.restart.discard(label)
                self.say(f"[{label}] its study stopped there ({what}): "
                         + ("resuming it" if hr.remote_run else "starting it"))  # fmt: skip
                self.start(label, resume=hr.remote_run)
                return
            hr.state = "failed"
            hr.reason = f"its study stopped there ({what})"
            self.say(f"[{label}] {hr.reason}: `poolbench fleet run --resume {self.run.tag}`")
            return
        remote = host_side.run_dir(self.run.tag) / host_side.STORE
        rc, out, err = self._call(label, ["host-fetch", self.run.tag], timeout=FETCH_TIMEOUT)
        try:
            data = base64.b64decode(out, validate=False) if rc == 0 else b""
        except ValueError:
            data = b""
        if not data:
            why = _reason(rc, err) if rc else "what it sent is not a store"
            hr.state, hr.reason = "failed", f"its store could not be fetched: {why}"
            self.say(f"[{label}] {hr.reason}")
            return
        with tempfile.TemporaryDirectory(prefix="poolbench-fleet-") as tmp:
            local = Path(tmp) / "store.db"
            local.write_bytes(data)
            tags = {"fleet_host": label, "fleet_tag": self.run.tag}
            report = import_store(self.store, local, [hr.remote_run] if hr.remote_run else None,
                                  source=f"ssh://{label}{remote}", tags=tags)  # fmt: skip
        # Already here (collected before, its state not saved in time): the run it became.
        ids = [new for _, new in report.imported] or [here for _, here in report.existing]
        if not ids:
            hr.state, hr.reason = "failed", f"its store has no run {hr.remote_run}"
            self.say(f"[{label}] {hr.reason}")
            return
        hr.local_run, hr.state = ids[0], "collected"
        self.say(f"[{label}] {hr.remote_status}: run {hr.remote_run} there is run "
                 f"{hr.local_run} here")  # fmt: skip

    def stop_all(self) -> None:
        """Ctrl-C to every host's study (each tears down there, its finished results kept),
        all hosts at once; a host whose start was on its way has that start cancelled. A
        second signal here does not cut this short (each call has its time limit)."""
        todo = [hr for hr in self.run.hosts.values() if hr.state in ("starting", "running", "lost")]
        if not todo:
            return
        with (
            stopping.deferred("telling every host's study to stop"),
            ThreadPoolExecutor(max_workers=min(len(todo), STOP_WORKERS)) as pool,
        ):
            answers = list(pool.map(self._stop_one, todo))
        for hr, (rc, out, err) in zip(todo, answers, strict=True):
            if rc != 0:
                self.say(f"[{hr.label}] could not be told to stop: {_reason(rc, err)}")
            elif _signalled(out) or hr.state == "starting":  # a start: cancelled there
                hr.state = "stopped"
                self.say(f"[{hr.label}] stopped (Ctrl-C there: torn down, what was finished kept)")
            else:  # its study ended before the Ctrl-C reached it: nothing was stopped
                self.say(f"[{hr.label}] its study had already ended there: `--resume` collects it")

    def _stop_one(self, hr: HostRun) -> tuple[int, str, str]:
        cancel = ["--attempt", hr.attempt] if hr.state == "starting" and hr.attempt else []
        return self._call(hr.label, ["host-stop", self.run.tag, *cancel], timeout=STOP_TIMEOUT)

    def resume(self) -> None:
        """Each host not collected yet: one left out is checked again and started if ready
        now; the others polled: a study that ended is collected, one that stopped (or never
        began) is resumed there (`run --resume`) or started, once, when it is met, now or
        while waiting (a study told to stop a moment ago may still be tearing down)."""
        self.restart = {k for k, h in self.run.hosts.items() if h.state != "collected"}
        for label, hr in self.run.hosts.items():
            if hr.state == "collected":
                continue
            if hr.state == "left out":
                self.restart.discard(label)
                c = check_host(self.transport, self.hosts[label], time.time)
                if not c.ready:
                    hr.reason = "; ".join(c.problems)
                    self.say(f"[{label}] still left out: {hr.reason}")
                    continue
                hr.state = "pending"
                self.start(label)
                continue
            hr.state, hr.last_answer = "running", self.clock()
            self.poll_once(label)
            never_put = hr.state == "failed" and hr.remote_run is None  # no such run there
            if never_put and label in self.restart and not hr.reason.startswith("link"):
                self.restart.discard(label)
                self.start(label)

    def wait(self, on_round: Callable[[], None]) -> None:
        while any(h.state in ("running", "lost") for h in self.run.hosts.values()):
            for label, hr in self.run.hosts.items():
                if hr.state in ("running", "lost"):
                    self.poll_once(label)
            on_round()
            if any(h.state in ("running", "lost") for h in self.run.hosts.values()):
                self.sleep(self.poll_s)


def skew_text(checks: list[HostCheck]) -> str:
    """How far apart the hosts' clocks are from this one's, as measured (fleet/readiness.py):
    a start time means what the clocks mean."""
    known = [c for c in checks if c.skew_s is not None and c.skew_bound_s is not None]
    if not known:
        return "their clocks could not be compared with this one's"
    worst = max(abs(c.skew_s or 0) + (c.skew_bound_s or 0) for c in known)
    each = ", ".join(f"{c.label} {c.skew_s:+.3f} s (±{c.skew_bound_s:.3f})" for c in known)
    return f"their clocks against this one's: {each}; so they start within {2 * worst:.3f} s"


def _signalled(out: str) -> bool:
    """Whether host-stop's answer says a running study got the Ctrl-C ({"stopped": true})."""
    try:
        said = json.loads(out)
    except ValueError:
        return True  # an answer this version does not know: it took the call
    return not isinstance(said, dict) or said.get("stopped") is not False


def _reason(rc: int, err: str) -> str:
    lines = [ln.strip() for ln in err.strip().splitlines() if ln.strip()]
    text = " ".join(lines).removeprefix("error: ") if lines else f"exit {rc}"
    return ("ssh: " if rc == SSH_FAILED and not text.startswith("ssh") else "") + text


def summary_error(run: FleetRun) -> PoolbenchError | None:
    bad = [h for h in run.hosts.values() if h.state != "collected"]
    if not bad:
        return None
    return PoolbenchError(
        f"{len(bad)} of {len(run.hosts)} host(s) did not finish fleet run {run.tag}: "
        + "; ".join(f"{h.label}: {(h.reason or h.state).rstrip('.')}" for h in bad)
        + ".",
        f"Fix what is named, then `poolbench fleet run --resume {run.tag}` finishes them.",
    )


def measured(
    store: Store, run: FleetRun
) -> dict[str, dict[tuple[str, str], tuple[str, list[float]]]]:
    """Each collected host's replicate values per (configuration, workload), for the fleet's
    answer (fleet/answer.py)."""
    out: dict[str, dict[tuple[str, str], tuple[str, list[float]]]] = {}
    for label, figures in _collected(store, run).items():
        per: dict[tuple[str, str], tuple[str, list[float]]] = {}
        for f in figures:
            per.setdefault((f.config, f.workload), (f.unit, []))[1].append(f.value)
        out[label] = per
    return out


def warned(store: Store, run: FleetRun) -> dict[str, dict[tuple[str, str], list[str]]]:
    """Each collected host's guard warnings per (configuration, workload), distinct, in the
    order first met: a figure a host cannot vouch for is shown so, not averaged in silently."""
    out: dict[str, dict[tuple[str, str], list[str]]] = {}
    for label, figures in _collected(store, run).items():
        per: dict[tuple[str, str], list[str]] = {}
        for f in figures:
            seen = per.setdefault((f.config, f.workload), [])
            seen.extend(w for w in f.warnings if w not in seen)
        out[label] = {k: v for k, v in per.items() if v}
    return out


def _collected(store: Store, run: FleetRun) -> dict[str, list[StoredFigure]]:
    return {
        h.label: stored_figures(store, h.local_run)
        for h in run.hosts.values()
        if h.state == "collected" and h.local_run is not None
    }
