"""Reading a study file's text: a regular file of at most MAX_STUDY_BYTES, UTF-8, refused
with the reason otherwise (a FIFO, a device, a directory, a binary file)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from poolbench.errors import UsageError

# A study file is a page of TOML; anything far larger is not one (and /dev/zero never ends).
MAX_STUDY_BYTES = 1024 * 1024


def _unreadable(path: Path, why: str) -> UsageError:
    return UsageError(
        f"Cannot read the study file {path}: {why}.",
        "Give the path of a study file (TOML, UTF-8); examples are in examples/.",
    )


def read_text(path: Path) -> str:
    """The study file's text: a regular file of at most MAX_STUDY_BYTES, UTF-8.

    The file is checked with stat before it is opened and opened with O_NONBLOCK, so a FIFO, a
    device or a directory given by mistake is refused instead of waiting or reading forever."""
    if "\x00" in str(path):
        raise _unreadable(path, "the path contains a NUL byte")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise _unreadable(path, exc.strerror or str(exc)) from exc
    st = os.fstat(fd)
    problem = (
        "it is a directory"
        if stat.S_ISDIR(st.st_mode)
        else "it is not a regular file (a FIFO, device or socket)"
        if not stat.S_ISREG(st.st_mode)
        else f"it is {st.st_size} bytes; a study file is at most {MAX_STUDY_BYTES}"
        if st.st_size > MAX_STUDY_BYTES
        else None
    )
    if problem is not None:
        os.close(fd)
        raise _unreadable(path, problem)
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_STUDY_BYTES + 1)
    if len(data) > MAX_STUDY_BYTES:
        raise _unreadable(path, f"it is larger than {MAX_STUDY_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _unreadable(
            path, f"it is not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x})"
        ) from None
