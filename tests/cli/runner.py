"""Running the real ``pipeline`` command in a subprocess (and in a pty)."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time

from pathlib import Path

import attrs


_ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")
ROOT = Path(__file__).resolve().parents[2]
FLOWS = "tests.cli.flows"


def environment(**extra: str) -> dict[str, str]:
    """The child's environment: the repository importable, no store set."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PIPELINE_STORE", "FLOWS_BLOCK"}
    }
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m pipeline ARGS`` in *cwd*, output captured."""
    return subprocess.run(  # noqa: S603  # our own interpreter and arguments
        [sys.executable, "-m", "pipeline", *args],
        cwd=cwd,
        env=env or environment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@attrs.define
class Terminal:
    """A ``pipeline`` process on a pseudo-terminal (its controlling tty)."""

    pid: int
    fd: int
    output: bytearray = attrs.field(factory=bytearray)

    @classmethod
    def start(cls, *args: str, cwd: Path, env: dict[str, str]) -> Terminal:
        """Fork a child whose stdin, stdout and stderr are a new pty."""
        env = {
            **env,
            "TERM": "xterm-256color",
            "COLUMNS": "160",
            "LINES": "40",
        }
        pid, fd = pty.fork()
        if pid == 0:  # the child: becomes the command
            try:
                os.chdir(cwd)
                os.execve(  # noqa: S606
                    sys.executable,
                    [sys.executable, "-m", "pipeline", *args],
                    env,
                )
            finally:
                os._exit(127)
        return cls(pid, fd)

    def read_until(self, needle: bytes, timeout: float = 60) -> bytes:
        """Read the screen until *needle* appears (waiting on the pty, not
        sleeping); fail after *timeout* seconds."""
        deadline = time.monotonic() + timeout
        while needle not in self.screen():
            left = deadline - time.monotonic()
            if left <= 0:
                msg = f"{needle!r} never appeared in {self.screen()[-400:]!r}"
                raise AssertionError(msg)
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready and not self._read():
                msg = f"exited before {needle!r}: {self.screen()[-400:]!r}"
                raise AssertionError(msg)
        return self.screen()

    def screen(self) -> bytes:
        """Everything written so far, without terminal escape codes."""
        return _ANSI.sub(b"", bytes(self.output))

    def _read(self) -> bool:
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        self.output.extend(chunk)
        return bool(chunk)

    def press_ctrl_c(self) -> None:
        """Type Ctrl-C: the terminal sends SIGINT to the foreground job."""
        os.write(self.fd, b"\x03")

    def wait(self, timeout: float = 60) -> int:
        """Read to the end; the exit status."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], 1)
            if ready and not self._read():
                break
        else:
            os.kill(self.pid, signal.SIGKILL)
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)
