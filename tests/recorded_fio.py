"""A fio that answers from recorded output (tests/data), for driving the trial loop in process:
every other command goes through the same RecordingRunner and answers exit 0, so a study on
the directory backend runs its real path (preflight, trials, journals, the store) in
milliseconds, as any user, with figures a test can compute from the recorded JSON itself.

The model is hyperfine's mock executor: the code under test is unchanged, only the one door
every command goes through (the Runner) answers from a script.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from poolbench.system.runner import CommandResult, RecordingRunner

DATA = Path(__file__).parent / "data"
VERSION = "fio-3.33\n"  # the version the recordings were made with
LAY_OUT = "fio-seq-write.json"  # what a read's prepare job (the untimed lay-out write) answers


@dataclass(frozen=True)
class Recording:
    """One recorded fio run, read as a test reads it (not through poolbench's parser)."""

    text: str
    direction: str  # "read" or "write": where fio counted the job's I/O

    @classmethod
    def load(cls, name: str) -> Recording:
        text = (DATA / name).read_text()
        job = json.loads(text[text.index("{") :])["jobs"][0]
        return cls(text, "read" if job["read"]["io_bytes"] else "write")

    @property
    def job(self) -> dict[str, object]:
        return json.loads(self.text[self.text.index("{") :])["jobs"][0]  # type: ignore[no-any-return]

    @property
    def io_bytes(self) -> int:
        return int(self.job[self.direction]["io_bytes"])  # type: ignore[index]

    @property
    def total_ios(self) -> int:
        return int(self.job[self.direction]["total_ios"])  # type: ignore[index]

    @property
    def seconds(self) -> float:
        return int(self.job[self.direction]["runtime"]) / 1000  # type: ignore[index]


@dataclass
class RecordedFio:
    """`fio --version` answers VERSION; a timed job answers its workload's recording; a
    prepare job answers LAY_OUT. `fail` maps the n-th timed job (1-based, over the whole
    session) to a recording answered with exit 1 (fio's exit when a job fails); at the
    `interrupt_at`-th timed job, Ctrl-C arrives while fio runs (the runner raises
    KeyboardInterrupt, as the local runner does after stopping fio)."""

    answers: dict[str, str]  # workload name -> recording under tests/data
    fail: dict[int, str] = field(default_factory=dict)
    interrupt_at: int | None = None
    timed: list[str] = field(default_factory=list)  # each timed job's file name, in order

    def runner(self) -> RecordingRunner:
        return RecordingRunner({"fio": self.answer})

    def answer(self, argv: Sequence[str]) -> CommandResult | str:
        if tuple(argv[1:]) == ("--version",):
            return VERSION
        job = Path(argv[-1]).name  # "seq-write.0.fio", "prepare-rand-read-4k.fio"
        if job.startswith("prepare-"):
            return (DATA / LAY_OUT).read_text()
        self.timed.append(job)
        n = len(self.timed)
        if n == self.interrupt_at:
            raise KeyboardInterrupt
        if n in self.fail:
            failed = Recording.load(self.fail[n])
            return CommandResult(tuple(argv), 1, failed.text, "fio: io_u error", 0.0)
        return Recording.load(self.answers[job.split(".")[0]]).text
