"""One upstream server process: started with its output in a log file, waited for by a
readiness check (a condition, never a fixed sleep), always stopped and reaped."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.processes import stop

POLL_INTERVAL = 0.05
# A port found free can be taken before the server binds it; the start is then retried.
PORT_TAKEN = ("address already in use", "bind: address already in use")


class StartError(RuntimeError):
    """A server did not become ready: the message holds the tail of its log."""


def log_tail(path: Path, lines: int = 40) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return "(no log)"


@dataclass
class ServerProcess:
    """A running upstream binary: its command line, its log, and how it is stopped."""

    name: str
    argv: Sequence[str]
    log: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as output:
            self.process = subprocess.Popen(
                list(self.argv), stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    def wait_ready(self, ready: Callable[[], bool], timeout: float) -> None:
        """Poll `ready` until it is true; StartError if the process exits or time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                code = None if self.process is None else self.process.returncode
                raise StartError(f"{self.name} exited ({code}):\n{log_tail(self.log)}")
            with contextlib.suppress(OSError, ValueError):
                if ready():
                    return
            time.sleep(POLL_INTERVAL)
        raise StartError(f"{self.name} was not ready within {timeout:.0f} s:\n{log_tail(self.log)}")

    def port_was_taken(self) -> bool:
        text = log_tail(self.log, 200).lower()
        return any(marker in text for marker in PORT_TAKEN)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 15.0) -> None:
        if self.process is not None:
            stop(self.process, timeout)
            self.process = None
