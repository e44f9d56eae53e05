"""Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe).

The standard library is the whole client: Chromium reads JSON commands, each ended by a NUL
byte, on its fd 3 and answers on its fd 4, so no websocket library, no chromedriver and no
port are needed. Used by the layout test to set an exact viewport width, read element boxes
with JavaScript and take full-page screenshots. Offline: every proxy goes nowhere.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--proxy-server=127.0.0.1:9",  # no network, even by accident
    "--hide-scrollbars",
    "--remote-debugging-pipe",
]


class Browser:
    """One Chromium process and one page target; `close` (or `with`) ends the process."""

    def __init__(self, profile: Path) -> None:
        assert CHROMIUM is not None
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def fds() -> None:  # in the child: the protocol's fixed descriptors 3 and 4
            # Copied above 4 first: either pipe end may itself be descriptor 3 or 4.
            r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 5)
            w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 5)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self._proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=fds,
            close_fds=False,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._next = 0
        self._events: list[str] = []  # names of the events read while awaiting an answer
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.call("Page.enable", session=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError, AssertionError):  # already gone: nothing to close
            self.call("Browser.close")
        try:
            self._proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        os.close(self._to_child)
        os.close(self._from_child)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            assert time.monotonic() < deadline, "Chromium did not answer in time"
            chunk = os.read(self._from_child, 1 << 16)
            assert chunk, "Chromium closed its DevTools pipe"
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        out: dict[str, Any] = json.loads(msg)
        return out

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        """Send one command and return its result (events that arrive meanwhile are dropped,
        except those `wait_event` asks for first)."""
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            msg["sessionId"] = self._session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + 60
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._next:
                assert "error" not in answer, f"{method}: {answer['error']}"
                result: dict[str, Any] = answer.get("result", {})
                return result
            if answer.get("method"):
                self._events.append(answer["method"])

    def open(self, page: Path, width: int, height: int = 900) -> None:
        """Load `page` in a viewport `width` CSS pixels wide, and wait for its load event."""
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        self._events = []
        self.call("Page.navigate", session=True, url=page.as_uri())
        deadline = time.monotonic() + 60
        while "Page.loadEventFired" not in self._events:
            answer = self._read(deadline)
            if answer.get("method"):
                self._events.append(answer["method"])

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page (DevTools is not bound by
        the page's Content-Security-Policy, so the page needs no change to be measured)."""
        r = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        assert "exceptionDetails" not in r, r["exceptionDetails"]
        return r["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        """A PNG of the whole page, not only the viewport."""
        r = self.call("Page.captureScreenshot", session=True, format="png",
                      captureBeyondViewport=True)  # fmt: skip
        path.write_bytes(base64.b64decode(r["data"]))
        return path
