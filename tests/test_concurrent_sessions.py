"""Test sessions run side by side (as .ci/run runs one per Python).

Each session starts servers of its own on free loopback ports, with data
directories of its own, and its own ``tmp_path`` root: two sessions held
open at once (tests/session_probe.py) see their own servers and files.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time

from pathlib import Path
from typing import Any

import pytest


ROOT = Path(__file__).parents[1]
PROBE = "tests/session_probe.py"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.temporal,
]


def _port(address: str) -> str:
    return address.rsplit(":", 1)[1].split("/", 1)[0]


_PATIENCE = 900.0
"""Seconds a session may take to start its servers and report (CI runs
three whole suites beside this one on two cores)."""


def _output(session: subprocess.Popen[bytes]) -> str:
    """What a finished (or killed) probe session printed."""
    session.kill()
    out = session.communicate()[0]
    return out.decode(errors="replace")


def _reports(
    server: socket.socket, sessions: list[subprocess.Popen[bytes]]
) -> list[tuple[socket.socket, dict[str, Any]]]:
    """Each session's report, as it connects; a session that ends without
    reporting, or a wait past ``_PATIENCE``, fails the test with what the
    sessions printed (rather than a bare socket timeout)."""
    held: list[tuple[socket.socket, dict[str, Any]]] = []
    deadline = time.monotonic() + _PATIENCE
    while len(held) < len(sessions):
        ended = [s for s in sessions if s.poll() is not None]
        if ended or time.monotonic() > deadline:
            printed = "\n---\n".join(_output(s) for s in sessions)
            why = "ended without reporting" if ended else "did not report"
            pytest.fail(f"a probe session {why}:\n{printed}")
        # Wake at least once a second to notice a session that ended.
        ready, _, _ = select.select([server], [], [], 1.0)
        if ready:
            conn, _address = server.accept()
            conn.settimeout(_PATIENCE)
            with conn.makefile("rb") as lines:
                held.append((conn, json.loads(lines.readline())))
    return held


def test_two_sessions_at_once_keep_their_own_servers() -> None:
    """Two pytest processes, both holding their servers at the same time:
    different ports, different tmp roots, each reads back what it wrote."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIPELINE_POSTGRES", "PIPELINE_REDIS"))
        and k != "PIPELINE_TEMPORAL_ADDRESS"
        and not k.startswith("PYTEST_")
    }
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        sessions = [
            subprocess.Popen(  # noqa: S603
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    PROBE,
                ],
                cwd=ROOT,
                env={
                    **env,
                    "PIPELINE_PROBE_PORT": str(port),
                    "PIPELINE_PROBE_NAME": name,
                },
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            for name in ("first", "second")
        ]
        try:
            held = _reports(server, sessions)
            reports = [report for _conn, report in held]
            for conn, _report in held:
                conn.sendall(b"go\n")
                conn.close()
            outputs = [s.communicate(timeout=_PATIENCE)[0] for s in sessions]
        finally:
            for s in sessions:
                s.kill()
                s.wait()
    for s, out in zip(sessions, outputs, strict=True):
        assert s.returncode == 0, out.decode(errors="replace")
    assert sorted(r["name"] for r in reports) == ["first", "second"]
    for key in ("postgres", "redis", "temporal"):
        assert _port(reports[0][key]) != _port(reports[1][key]), key
    assert (
        Path(reports[0]["tmp_path"]).parent
        != Path(reports[1]["tmp_path"]).parent
    )  # each session's own basetemp
