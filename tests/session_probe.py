"""One test session of tests/test_concurrent_sessions.py (run by path).

It takes the session's servers (PostgreSQL, Redis, the Temporal dev
server) and a ``tmp_path``, writes its name into each, reports where they
are over the socket ``PIPELINE_PROBE_PORT`` names, waits for the word that
the other session holds its own too, then reads its name back: a server
or a directory shared with the other session would hold the other's.
"""

from __future__ import annotations

import json
import os
import socket

from pathlib import Path

import psycopg
import redis


PORT_ENV = "PIPELINE_PROBE_PORT"
NAME_ENV = "PIPELINE_PROBE_NAME"


def test_the_session_keeps_its_own(
    postgres_url: str, redis_url: str, temporal_address: str, tmp_path: Path
) -> None:
    """Its name goes in, the other session reports, its name comes out."""
    name = os.environ[NAME_ENV]
    mine = tmp_path / "name"
    mine.write_text(name, encoding="utf-8")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE probe (name text)")
        conn.execute("INSERT INTO probe VALUES (%s)", (name,))
    with redis.Redis.from_url(redis_url) as client:
        client.set("probe", name)
    report = {
        "name": name,
        "postgres": postgres_url,
        "redis": redis_url,
        "temporal": temporal_address,
        "tmp_path": str(tmp_path),
    }
    with socket.create_connection(
        ("127.0.0.1", int(os.environ[PORT_ENV])), timeout=900
    ) as s:
        s.sendall(json.dumps(report).encode() + b"\n")
        with s.makefile("rb") as answer:
            assert answer.readline() == b"go\n"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        rows = conn.execute("SELECT name FROM probe").fetchall()
    assert rows == [(name,)]
    with redis.Redis.from_url(redis_url) as client:
        assert client.get("probe") == name.encode()
    assert mine.read_text(encoding="utf-8") == name
    host, port = temporal_address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30):
        pass  # its dev server still listens
