"""One fio controller process drives every live host at once: `fio --output-format=json
--client=H1 job1 --client=H2 job2 ...`. fio connects to every server, sends each its own
complete job file (fio's client mode ignores job options given on the command line) and
starts them together; poolbench then reads each host's part (fleet/clientout.py).

This module owns what lives on the hosts: each host's job files, the data laid out there
(prepared once per shape, removed at the end through fio itself, as nothing else runs
there), and which hosts have failed (a failed host gets no further job)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from poolbench.fleet import clientout
from poolbench.fleet.hosts import Host
from poolbench.fleet.records import FleetHostFailed, FleetOptions
from poolbench.system.runner import Runner
from poolbench.system.watchdog import scaled
from poolbench.workloads import fiojob, fiolimit
from poolbench.workloads.library import Workload

CLEANUP_TIMEOUT_S = 120


@dataclass
class Controller:
    runner: Runner
    hosts: list[Host]
    targets: dict[str, str]  # by host label: the directory measured there
    options: FleetOptions
    run_id: int
    jobs_dir: Path | None = None  # where the job files are written (a run's temporary dir)
    failures: dict[str, str] = field(default_factory=dict)  # by host label: what went wrong
    prepared: set[str] = field(default_factory=set)  # file prefixes laid out on the hosts

    def live(self) -> list[str]:
        return [h.label for h in self.hosts if h.label not in self.failures]

    # -- the job files -------------------------------------------------------------------------
    def params(self, label: str, w: Workload) -> fiojob.JobParams:
        o = self.options
        return fiojob.JobParams(
            directory=self.targets[label], size_bytes=o.size, compressibility=o.compressibility,
            runtime_s=o.runtime_s, iodepth=o.iodepth, numjobs=o.numjobs,
            file_prefix=self.prefix(w),
        )  # fmt: skip

    def prefix(self, w: Workload) -> str:
        # fio's client mode prefixes every file name with the server's IP address, so hosts
        # sharing a filesystem never collide. Fresh-file writers get their own files (unlinked
        # after each run); readers and in-place writers share prepared data of one shape.
        if w.fresh_file:
            return f"poolbench-run{self.run_id}.{w.name}"
        shape = fiojob.JobParams(directory="/", size_bytes=self.options.size)
        per_file = fiojob.file_bytes(w, shape)
        return f"poolbench-run{self.run_id}.data{w.streams}x{per_file}"

    def job_texts(self, w: Workload) -> dict[str, str]:
        """Each live host's complete job file for one measurement of `w`."""
        texts = {}
        for label in self.live():
            text = fiojob.render(w, self.params(label, w))
            if w.fresh_file:
                text = text.replace("[global]\n", "[global]\nunlink=1\n", 1)
            texts[label] = text
        return texts

    def dry_argv(self, w: Workload) -> list[str]:
        """--dry-run: the controller command one measurement of `w` would run."""
        argv = ["fio", "--output-format=json"]
        for i, h in enumerate(self.hosts):
            argv += [f"--client={h.connect}", f"{w.name}.host{i}.fio"]
        return argv

    # -- running -------------------------------------------------------------------------------
    def run(
        self, name: str, texts: dict[str, str], direction: str, timeout: float | None
    ) -> clientout.FleetOutput:
        """One controller process over every live host; each host's figures or error."""
        assert self.jobs_dir is not None
        argv = ["fio", "--output-format=json"]
        hosts = [h for h in self.hosts if h.label not in self.failures]
        for i, h in enumerate(hosts):
            path = self.jobs_dir / f"{name}.host{i}.fio"
            path.write_text(texts[h.label])
            argv += [f"--client={h.connect}", str(path)]
        if timeout is None:  # size-bound: the limit its jobs imply (workloads/fiolimit.py)
            timeout = max(fiolimit.limit_s(t) for t in texts.values())
        res = self.runner.run(argv, check=False, timeout=timeout)
        return clientout.parse(res.stdout, res.stderr, hosts, direction)

    def fail(self, errors: dict[str, str], during: str) -> None:
        """Mark the hosts that failed and stop the run (the others' results are kept)."""
        if not errors:
            return
        self.failures.update(errors)
        raise FleetHostFailed(
            f"While {during}: " + "; ".join(errors.values()) + ".",
            "The other hosts' finished results are kept and the run is marked partial. Check "
            "the named host's fio server (`poolbench hosts check`) and run again.",
        )

    def prepare(self, w: Workload, rep: int) -> None:
        """Lay out the data `w` reads or rewrites, once per shape, on every live host."""
        if not w.needs_data or self.prefix(w) in self.prepared:
            return
        texts = {}
        for label in self.live():
            job = fiojob.render_prepare(w, self.params(label, w))
            assert job is not None
            texts[label] = job
        out = self.run(f"prepare-{w.name}.{rep}", texts, "write", None)
        self.fail(out.errors, f"preparing data for {w.name}")
        self.prepared.add(self.prefix(w))

    def cleanup(self) -> list[str]:
        """Remove the prepared data files on every host still answering; returns the notes
        for what may remain (on a failed host, or where the removal failed)."""
        notes = [
            f"host {label} failed: poolbench's data files (names containing "
            f"poolbench-run{self.run_id}.) may remain under {self.targets[label]} there; "
            "remove them by hand"
            for label in sorted(self.failures)
        ]
        live = self.live()
        if not self.prepared or not live or self.runner.dry_run:
            return notes
        texts = {label: self._removal_job(label) for label in live}
        try:
            out = self.run("cleanup", texts, "read", scaled(CLEANUP_TIMEOUT_S))
        except Exception as exc:  # never mask the run's own outcome
            return [*notes, f"could not remove the data files on the hosts: {exc}"]
        for label, err in out.errors.items():
            notes.append(f"data files under {self.targets[label]} may remain: {err}")
        return notes

    def _removal_job(self, label: str) -> str:
        """A job that reads one block of each prepared file and unlinks it (fio is the only
        thing poolbench can run on a host)."""
        lines = [
            "[global]", f"directory={self.targets[label]}", "rw=read", "bs=4096", "size=4096",
            "ioengine=psync", "allow_file_create=0", "unlink=1", "",
        ]  # fmt: skip
        for prefix in sorted(self.prepared):
            streams = int(prefix.rsplit(".data", 1)[1].split("x", 1)[0])
            params = fiojob.JobParams(directory="/", size_bytes=1, file_prefix=prefix)
            for n in fiojob.file_names(params, streams):
                lines += [f"[rm.{n}]", f"filename={n}", ""]
        return "\n".join(lines)
