"""``pipeline`` with several questions waiting at once (fan-out branches
that each ask): listed with their ids by ``run``, ``show`` and
``threads``, answered one by one with ``answer --question``."""

from __future__ import annotations

import json

from pathlib import Path

import pytest

from pipeline.cli import ExitCode
from tests.cli.runner import FLOWS, cli


@pytest.mark.slow
def test_questions_of_branches_are_listed_and_answered_by_id(
    tmp_path: Path,
) -> None:
    store = str(tmp_path / "threads.sqlite3")
    ran = cli(
        "run",
        f"{FLOWS}:two_asks",
        "--input",
        "{}",
        "--store",
        store,
        "--thread",
        "t",
        cwd=tmp_path,
    )
    assert ran.returncode == ExitCode.PAUSED, ran.stderr
    assert "paused: a? (question " in ran.stderr
    assert "paused: b? (question " in ran.stderr
    assert "--question ID" in ran.stderr

    shown = json.loads(cli("show", "t", "--store", store, cwd=tmp_path).stdout)
    listed = shown["pending"]["questions"]
    assert [(q["question"], q["where"]) for q in listed] == [
        ("a?", "b:ask_a"),
        ("b?", "b:ask_b"),
    ]
    ids = {q["question"]: q["id"] for q in listed}

    threads = cli("threads", "--store", store, cwd=tmp_path)
    assert "interrupted (2 questions)" in threads.stdout

    unnamed = cli("answer", "t", "1", "--store", store, cwd=tmp_path)
    assert unnamed.returncode == ExitCode.USAGE
    assert ids["a?"] in unnamed.stderr
    assert ids["b?"] in unnamed.stderr

    first = cli(
        "answer", "t", "2", "--question", ids["b?"], "--store", store,
        cwd=tmp_path,
    )  # fmt: skip
    assert first.returncode == ExitCode.PAUSED, first.stderr
    assert "paused: a?" in first.stderr
    again = json.loads(cli("show", "t", "--store", store, cwd=tmp_path).stdout)
    assert again["pending"]["id"] == ids["a?"]  # the same id as before

    done = cli(
        "answer", "t", "1", "--question", ids["a?"], "--store", store,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == ExitCode.OK, done.stderr
    assert json.loads(done.stdout) == {"a": 1, "b": 2}
