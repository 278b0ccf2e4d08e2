"""The ``pipeline`` command end to end: real subprocesses, real SQLite
files, the live view on a pseudo-terminal."""

from __future__ import annotations

import json
import uuid

from pathlib import Path
from xml.etree import ElementTree as ET

import anyio
import pytest

from pipeline import stores
from pipeline.cli import ExitCode, main
from pipeline.stores import Record, record_checksum
from tests.cli.flows import plain
from tests.cli.runner import FLOWS, Terminal, cli, environment


@pytest.fixture(name="store")
def _store(tmp_path: Path) -> str:
    return str(tmp_path / "threads.sqlite3")


def lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line]


def assert_one_line_error(stderr: str) -> None:
    """A mistake is one error line and a hint, never a traceback."""
    assert "Traceback" not in stderr
    out = stderr.strip().splitlines()
    assert len(out) == 2, stderr
    assert out[0].startswith("pipeline: error: ")
    assert out[1].startswith("hint: ")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_run_pause_answer_resume(
    tmp_path: Path, store: str, backend: str
) -> None:
    """A run pauses at its approval gate; answering continues it to the end,
    and history shows every checkpoint once."""
    ran = cli(
        "--backend",
        backend,
        "run",
        f"{FLOWS}:desk",
        "--input",
        '{"text": "I was charged twice"}',
        "--store",
        store,
        "--thread",
        "t1",
        cwd=tmp_path,
    )
    assert ran.returncode == ExitCode.PAUSED, ran.stderr
    assert "paused: send this reply?" in ran.stderr
    assert "pipeline answer t1 ANSWER" in ran.stderr

    shown = cli("show", "t1", "--store", store, cwd=tmp_path)
    snap = json.loads(shown.stdout)
    assert snap["status"] == "interrupted"
    assert snap["pending"] == {
        "question": "send this reply?",
        "answered": False,
        "id": f"{snap['version']}-{snap['pending']['id'].split('-')[1]}",
    }
    assert snap["state"]["category"] == "billing"

    answered = cli(
        "--backend",
        backend,
        "answer",
        "t1",
        "yes",
        "--author",
        "ana@example",
        "--store",
        store,
        cwd=tmp_path,
    )
    assert answered.returncode == ExitCode.OK, answered.stderr
    state = json.loads(answered.stdout)
    assert state == {
        "text": "I was charged twice",
        "category": "billing",
        "reply": "About your billing issue",
        "sent": True,
    }

    hist = cli("history", "t1", "--store", store, "--json", cwd=tmp_path)
    rows = lines(hist.stdout)
    assert [r["version"] for r in rows] == list(range(len(rows)))
    nodes = [r["node"] for r in rows]
    assert nodes.count("send") == 1  # the node ran once
    assert rows[-2]["question"] is None  # answered
    # the answer's record names who answered; the run's records, nobody
    answer_row = next(r for r in rows if r["author"] is not None)
    assert answer_row["author"] == "ana@example"
    assert answer_row["question"] is None
    assert [r["author"] for r in rows].count("ana@example") == 1
    assert rows[-1]["status"] == "done"

    resumed = cli("resume", "t1", "--store", store, cwd=tmp_path)
    assert resumed.returncode == ExitCode.OK  # a done thread stays done
    assert json.loads(resumed.stdout)["sent"] is True


@pytest.mark.slow
def test_declined_answer_stops(tmp_path: Path, store: str) -> None:
    """A gate's stop is its own exit status, and a record: it stays
    stopped; its question is answered again on a fork (``fork
    --answer``); an answer for another question is refused."""
    cli(
        "run",
        f"{FLOWS}:desk",
        "--input",
        '{"text": "x"}',
        "--store",
        store,
        "--thread",
        "t",
        cwd=tmp_path,
    )
    asked = json.loads(cli("show", "t", "--store", store, cwd=tmp_path).stdout)
    question = asked["pending"]["id"]
    assert question.startswith(f"{asked['version']}-")
    stale = cli(
        "answer",
        "t",
        "no",
        "--question",
        "1-0",
        "--store",
        store,
        cwd=tmp_path,
    )
    assert stale.returncode == ExitCode.USAGE
    assert_one_line_error(stale.stderr)
    assert f"not for the question thread 't' waits at ({question})" in (
        stale.stderr
    )
    stopped = cli(
        "answer",
        "t",
        "no",
        "--question",
        question,
        "--store",
        store,
        cwd=tmp_path,
    )
    assert stopped.returncode == ExitCode.STOPPED
    assert "stopped: declined" in stopped.stderr

    # The stop is recorded: show, history and threads say so.
    shown = json.loads(cli("show", "t", "--store", store, cwd=tmp_path).stdout)
    assert (shown["status"], shown["reason"]) == ("stopped", "declined")
    hist = lines(
        cli("history", "t", "--store", store, "--json", cwd=tmp_path).stdout
    )
    assert (hist[-1]["status"], hist[-1]["reason"]) == ("stopped", "declined")
    listed = lines(
        cli("threads", "--store", store, "--json", cwd=tmp_path).stdout
    )
    assert [(r["thread"], r["status"]) for r in listed] == [("t", "stopped")]

    # It stays stopped: a resume runs nothing, an answer says how to go on.
    again = cli("resume", "t", "--store", store, cwd=tmp_path)
    assert again.returncode == ExitCode.STOPPED
    assert "pipeline fork t --version" in again.stderr
    assert len(
        lines(
            cli(
                "history", "t", "--store", store, "--json", cwd=tmp_path
            ).stdout
        )
    ) == len(hist)
    refused = cli("answer", "t", "yes", "--store", store, cwd=tmp_path)
    assert refused.returncode == ExitCode.USAGE
    assert_one_line_error(refused.stderr)
    assert "thread 't' is stopped: declined" in refused.stderr
    fork_hint = f"pipeline fork t --version {asked['version']} --answer ANSWER"
    assert fork_hint in refused.stderr

    # Answering the question again on a fork goes on to the end.
    forked = cli(
        "fork",
        "t",
        "--version",
        str(asked["version"]),
        "--to",
        "t2",
        "--answer",
        "yes",
        "--author",
        "bo",
        "--store",
        store,
        cwd=tmp_path,
    )
    assert forked.returncode == ExitCode.OK, forked.stderr
    assert json.loads(forked.stdout)["sent"] is True
    # The fork's answer names who gave it, as `pipeline answer`'s does.
    rows = lines(
        cli("history", "t2", "--store", store, "--json", cwd=tmp_path).stdout
    )
    assert [r["author"] for r in rows if r["author"]] == ["bo"]
    # A malformed answer is refused before anything is forked.
    malformed = cli(
        "fork",
        "t",
        "--version",
        str(asked["version"]),
        "--to",
        "t4",
        "--answer",
        '{"key": "sk-canary-4 \\ud800"}',  # a lone surrogate
        "--store",
        store,
        cwd=tmp_path,
    )
    assert malformed.returncode == ExitCode.USAGE
    assert_one_line_error(malformed.stderr)
    assert "sk-canary-4" not in malformed.stderr
    listed = lines(
        cli("threads", "--store", store, "--json", cwd=tmp_path).stdout
    )
    assert "t4" not in [r["thread"] for r in listed]
    plain = cli(
        "fork",
        "t",
        "--to",
        "t3",
        "--answer",
        "yes",
        "--store",
        store,
        cwd=tmp_path,
    )
    assert plain.returncode == ExitCode.USAGE
    assert_one_line_error(plain.stderr)


@pytest.mark.slow
def test_edit_a_paused_thread(tmp_path: Path, store: str) -> None:
    """`pipeline edit` patches a paused thread's state: a version with its
    author and reason in history; the answer then goes on from it; a patch
    that does not fit is one error line, naming no value."""
    cli(
        "run",
        f"{FLOWS}:desk",
        "--input",
        '{"text": "x"}',
        "--store",
        store,
        "--thread",
        "t",
        cwd=tmp_path,
    )
    edited = cli(
        "edit",
        "t",
        "--patch",
        '{"reply": "Refunded."}',
        "--author",
        "ana",
        "--reason",
        "kinder reply",
        "--store",
        store,
        "--json",
        cwd=tmp_path,
    )
    assert edited.returncode == ExitCode.OK, edited.stderr
    row = json.loads(edited.stdout)
    assert row["edit"] == {"author": "ana", "reason": "kinder reply"}
    assert row["status"] == "interrupted"
    hist = lines(
        cli("history", "t", "--store", store, "--json", cwd=tmp_path).stdout
    )
    assert hist[-1] == row
    bad = cli(
        "edit",
        "t",
        "--patch",
        '{"sent": "sk-canary-9"}',
        "--author",
        "ana",
        "--reason",
        "oops",
        "--store",
        store,
        cwd=tmp_path,
    )
    assert bad.returncode == ExitCode.USAGE
    assert_one_line_error(bad.stderr)
    assert "sk-canary-9" not in bad.stderr
    assert "$.sent" in bad.stderr  # the field it broke
    whole = cli(
        "edit",
        "t",
        "--state",
        '{"text": "x", "sent": "sk-canary-9"}',
        "--author",
        "ana",
        "--reason",
        "oops",
        "--store",
        store,
        cwd=tmp_path,
    )
    assert whole.returncode == ExitCode.USAGE
    assert_one_line_error(whole.stderr)
    assert "sk-canary-9" not in whole.stderr
    assert "$.sent" in whole.stderr
    answered = cli("answer", "t", "yes", "--store", store, cwd=tmp_path)
    assert answered.returncode == ExitCode.OK, answered.stderr
    assert json.loads(answered.stdout)["reply"] == "Refunded."


@pytest.mark.slow
def test_json_events(tmp_path: Path, store: str) -> None:
    """--json prints every event as one JSON object per line, then the result."""
    ran = cli(
        "run",
        f"{FLOWS}:team",
        "--input",
        '"I was charged twice"',
        "--store",
        store,
        "--json",
        cwd=tmp_path,
    )
    assert ran.returncode == ExitCode.OK, ran.stderr
    events = lines(ran.stdout)
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "result"
    for kind in (
        "node_started",
        "handoff",
        "message_delta",
        "message_complete",
        "tool_call_started",
        "checkpoint_saved",
        "node_finished",
    ):
        assert kind in kinds
    handoff = next(e for e in events if e["type"] == "handoff")
    assert (handoff["source"], handoff["target"], handoff["count"]) == (
        "dispatcher",
        "billing",
        1,
    )
    streamed = "".join(
        str(e["text"]) for e in events if e["type"] == "message_delta"
    )
    assert streamed == "Your refund is on its way."
    assert events[-1]["status"] == "done"
    assert ran.stderr == ""


@pytest.mark.slow
def test_json_events_with_lone_surrogates(tmp_path: Path) -> None:
    """--json writes an event holding a lone surrogate (a file name the OS
    gave undecoded) as a JSON escape, and the run goes on."""
    ran = cli(
        "run", f"{FLOWS}:listing", "--input", "1", "--json", cwd=tmp_path
    )
    assert ran.returncode == ExitCode.OK, ran.stderr
    assert "\\udcff" in ran.stdout
    events = lines(ran.stdout)
    note = next(e for e in events if e["type"] == "note")
    assert note["text"] == "found report-\udcff.txt"
    assert events[-1]["status"] == "done"


@pytest.mark.slow
def test_json_tool_raised_shows_the_type_only(tmp_path: Path) -> None:
    """--json shows a tool's exception by its type, never its text."""
    ran = cli(
        "run", f"{FLOWS}:clerk", "--input", '"help"', "--json", cwd=tmp_path
    )
    assert ran.returncode == ExitCode.OK, ran.stderr
    raised = next(e for e in lines(ran.stdout) if e["type"] == "tool_raised")
    at = raised.pop("at")
    assert isinstance(at, str)
    assert at.endswith("Z")
    assert raised == {
        "type": "tool_raised",
        "tool": "lookup",
        "exception_type": "KeyError",
    }
    assert "example.com" not in ran.stdout


@pytest.mark.slow
def test_json_pause_result(tmp_path: Path, store: str) -> None:
    """A pause under --json ends with a result line saying so."""
    ran = cli(
        "run",
        f"{FLOWS}:desk",
        "--input",
        '{"text": "x"}',
        "--store",
        store,
        "--thread",
        "j",
        "--json",
        cwd=tmp_path,
    )
    assert ran.returncode == ExitCode.PAUSED
    last = lines(ran.stdout)[-1]
    assert str(last.pop("at")).endswith("Z")  # when it was written (UTC)
    assert last == {
        "type": "result",
        "status": "interrupted",
        "thread": "j",
        "version": 3,
        "question": "send this reply?",
    }


@pytest.mark.slow
def test_handlers_and_agents(tmp_path: Path) -> None:
    """Handlers take JSON values; agents take a string as a user message."""
    shout = cli("run", f"{FLOWS}:shout", "--input", '"hi"', cwd=tmp_path)
    assert (shout.returncode, shout.stdout) == (0, '"HI"\n')
    agent = cli("run", f"{FLOWS}:helper", "--input", '"router?"', cwd=tmp_path)
    assert (agent.returncode, agent.stdout) == (0, "Restart the router.\n")
    assert not list(tmp_path.iterdir())  # handlers keep no checkpoints


@pytest.mark.slow
def test_input_from_file(tmp_path: Path, store: str) -> None:
    """--input @FILE reads the JSON from a file."""
    (tmp_path / "in.json").write_text('{"text": "wifi down"}')
    ran = cli(
        "run",
        f"{FLOWS}:plain",
        "--input",
        "@in.json",
        "--store",
        store,
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["category"] == "tech"


@pytest.mark.slow
def test_failed_run(tmp_path: Path, store: str) -> None:
    """A failure value is exit 1 and one line naming it."""
    ran = cli(
        "run",
        f"{FLOWS}:failing",
        "--input",
        '{"text": ""}',
        "--store",
        store,
        cwd=tmp_path,
    )
    assert ran.returncode == ExitCode.FAILED
    assert "error: the run failed: empty ticket" in ran.stderr
    assert "Traceback" not in ran.stderr
    # An answer to it (a human retrying after a crash, say) says that
    # `resume` continues it, and writes nothing.
    ran = cli(
        "run", f"{FLOWS}:failing", "--input", '{"text": ""}',
        *("--thread", "f", "--store", store), cwd=tmp_path,
    )  # fmt: skip
    before = cli("history", "f", "--store", store, "--json", cwd=tmp_path)
    answered = cli("answer", "f", "yes", "--store", store, cwd=tmp_path)
    assert answered.returncode == ExitCode.USAGE
    assert_one_line_error(answered.stderr)
    assert "is not waiting for an answer (it is running" in answered.stderr
    assert "`pipeline resume f --store" in answered.stderr
    after = cli("history", "f", "--store", store, "--json", cwd=tmp_path)
    assert after.stdout == before.stdout


@pytest.mark.slow
def test_raising_code(tmp_path: Path) -> None:
    """Code that raises: one line, unless --traceback asks for it."""
    ran = cli("run", f"{FLOWS}:explode", "--input", '"x"', cwd=tmp_path)
    assert ran.returncode == ExitCode.FAILED
    assert_one_line_error(ran.stderr)
    assert "ZeroDivisionError" in ran.stderr
    shown = cli(
        "--traceback",
        "run",
        f"{FLOWS}:explode",
        "--input",
        '"x"',
        cwd=tmp_path,
    )
    assert "Traceback" in shown.stderr
    assert shown.returncode == 1


@pytest.mark.slow
def test_threads_fork_delete(tmp_path: Path, store: str) -> None:
    """Threads are listed with their target; a fork is a new thread; delete
    removes a thread and its note."""
    cli(
        "run",
        f"{FLOWS}:desk",
        "--input",
        '{"text": "x"}',
        "--store",
        store,
        "--thread",
        "a",
        cwd=tmp_path,
    )
    forked = cli(
        "fork",
        "a",
        "--version",
        "1",
        "--to",
        "b",
        "--store",
        store,
        cwd=tmp_path,
    )
    assert (forked.returncode, forked.stdout) == (0, "b\n")
    listed = cli("threads", "--store", store, "--json", cwd=tmp_path)
    assert lines(listed.stdout) == [
        {
            "thread": "a",
            "head": 3,
            "status": "interrupted",
            "target": f"{FLOWS}:desk",
        },
        {
            "thread": "b",
            "head": 0,
            "status": "running",
            "target": f"{FLOWS}:desk",
        },
    ]
    shown = json.loads(cli("show", "b", "--store", store, cwd=tmp_path).stdout)
    assert (shown["node"], shown["next"]) == ("classify", ["draft"])
    assert shown["origin"] == {"thread": "a", "version": 1}
    assert shown["committed_at"].endswith("Z")
    assert shown["author"] is None
    piped = cli("history", "b", "--store", store, cwd=tmp_path).stdout
    header, first = (line.split("\t") for line in piped.splitlines())
    assert header[:4] == ["version", "parent", "committed (UTC)", "status"]
    assert first[:2] == ["0", "fork of a@1"]
    assert first[2] == shown["committed_at"]
    history_a = lines(
        cli("history", "a", "--store", store, "--json", cwd=tmp_path).stdout
    )
    assert [r["origin"] for r in history_a] == [None] * 4
    assert all(str(r["at"]).endswith("Z") for r in history_a)
    assert history_a[0]["duration"] is None
    assert all(
        isinstance(r["duration"], float) and r["duration"] >= 0
        for r in history_a[1:]
    )
    old = json.loads(
        cli(
            "show", "a", "--version", "0", "--store", store, cwd=tmp_path
        ).stdout
    )
    assert old["status"] == "running"
    assert old["state"]["category"] == ""

    deleted = cli("delete", "a", "--store", store, cwd=tmp_path)
    assert deleted.returncode == 0
    gone = cli("history", "a", "--store", store, cwd=tmp_path)
    assert gone.returncode == ExitCode.NOT_FOUND
    listed = cli("threads", "--store", store, "--json", cwd=tmp_path)
    assert [r["thread"] for r in lines(listed.stdout)] == ["b"]


@pytest.mark.slow
def test_default_store_from_environment(tmp_path: Path) -> None:
    """Without --store: $PIPELINE_STORE, else a file in the current directory."""
    cli(
        "run",
        f"{FLOWS}:plain",
        "--input",
        '{"text": "x"}',
        "--thread",
        "d",
        cwd=tmp_path,
    )
    assert (tmp_path / "pipeline-threads.sqlite3").exists()
    env = environment(PIPELINE_STORE=str(tmp_path / "other.sqlite3"))
    cli(
        "run",
        f"{FLOWS}:plain",
        "--input",
        '{"text": "x"}',
        "--thread",
        "e",
        cwd=tmp_path,
        env=env,
    )
    listed = cli("threads", "--json", cwd=tmp_path, env=env)
    assert [r["thread"] for r in lines(listed.stdout)] == ["e"]


@pytest.mark.slow
def test_draw(tmp_path: Path) -> None:
    """Mermaid text by default; DOT text; SVG and PNG pictures through
    Graphviz, or a clear message without it."""
    drawn = cli("draw", f"{FLOWS}:desk", cwd=tmp_path)
    assert drawn.returncode == 0
    assert drawn.stdout.startswith("flowchart")
    assert "n_draft --> n_send" in drawn.stdout
    team = cli("draw", f"{FLOWS}:team", cwd=tmp_path)
    assert "billing" in team.stdout
    source = cli("draw", f"{FLOWS}:desk", "--format", "dot", cwd=tmp_path)
    assert source.stdout.startswith("digraph")

    made = cli(
        "draw", f"{FLOWS}:desk", "--format", "svg", "-o", "g.svg", cwd=tmp_path
    )
    assert made.returncode == 0, made.stderr
    root = ET.parse(tmp_path / "g.svg").getroot()  # noqa: S314  # dot's output
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = {t.text for t in root.iter("{http://www.w3.org/2000/svg}text")}
    assert {"draft", "send"} <= texts
    png = cli("draw", f"{FLOWS}:team", "--format", "png", cwd=tmp_path)
    assert png.returncode == 0, png.stderr
    assert (tmp_path / "team.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    bare = environment(PATH=str(tmp_path / "empty"))
    missing = cli(
        "draw", f"{FLOWS}:desk", "--format", "svg", cwd=tmp_path, env=bare
    )
    assert missing.returncode == ExitCode.UNAVAILABLE
    assert_one_line_error(missing.stderr)
    assert "Graphviz" in missing.stderr
    nowhere = cli(
        "draw",
        f"{FLOWS}:desk",
        "--format",
        "png",
        "-o",
        "no/g.png",
        cwd=tmp_path,
    )
    assert nowhere.returncode == ExitCode.USAGE
    assert "no directory" in nowhere.stderr


@pytest.fixture(name="paused", scope="module")
def _paused(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One store with thread p paused at its question (mistakes change
    nothing, so every case shares it)."""
    where = tmp_path_factory.mktemp("mistakes")
    store = str(where / "threads.sqlite3")
    cli(
        "run",
        f"{FLOWS}:desk",
        "--input",
        '{"text": "x"}',
        "--store",
        store,
        "--thread",
        "p",
        cwd=where,
    )
    return where, store


BAD = [
    # run
    (["run", "nomodule:x"], ExitCode.USAGE, "no module named 'nomodule'"),
    (["run", "tests.cli.flows"], ExitCode.USAGE, "expected MODULE:OBJECT"),
    (
        ["run", f"{FLOWS}:missing"],
        ExitCode.USAGE,
        "has no attribute 'missing'",
    ),
    (["run", f"{FLOWS}:not_a_flow"], ExitCode.USAGE, "is a int, not a graph"),
    (
        ["run", f"{FLOWS}:desk", "--input", "{oops"],
        ExitCode.USAGE,
        "not valid JSON",
    ),
    (
        ["run", f"{FLOWS}:desk", "--input", '{"txt": "x"}'],
        ExitCode.USAGE,
        "unknown field(s) 'txt' (did you mean 'text'?)",
    ),
    (
        ["run", f"{FLOWS}:desk", "--input", '{"text": 3}'],
        ExitCode.USAGE,
        "expected str @ $.text",
    ),
    (
        ["run", f"{FLOWS}:desk", "--input", "@nofile.json"],
        ExitCode.NOT_FOUND,
        "no file",
    ),
    (
        ["run", f"{FLOWS}:shout", "--thread", "x"],
        ExitCode.USAGE,
        "keeps no checkpoints",
    ),
    (
        ["run", f"{FLOWS}:desk", "--input", '{"text": "x"}', "--thread", "p"],
        ExitCode.USAGE,
        "thread 'p' already exists",
    ),
    (
        [
            "run",
            f"{FLOWS}:desk",
            "--input",
            '{"text": "x"}',
            "--store",
            "ftp://h/x",
        ],
        ExitCode.USAGE,
        "no store for URLs starting ftp://",
    ),
    (
        ["threads", "--store", "redis://u:hunter2@127.0.0.1:1"],
        ExitCode.UNAVAILABLE,
        "cannot reach the store at redis://u:***@127.0.0.1:1",
    ),
    # resume, answer
    (["resume", "nope"], ExitCode.NOT_FOUND, "no thread 'nope'"),
    (
        ["resume", "p", "--version", "99"],
        ExitCode.NOT_FOUND,
        "no checkpoint for thread 'p' at version 99",
    ),
    (["answer", "nope", "yes"], ExitCode.NOT_FOUND, "no thread 'nope'"),
    (
        ["answer", "p", "yes", "--author", "a" * 300],
        ExitCode.USAGE,
        "author cannot be stored: 300 characters",
    ),
    (
        [
            "run",
            f"{FLOWS}:desk",
            "--input",
            '{"text": "x"}',
            "--thread",
            "t" * 300,
        ],
        ExitCode.USAGE,
        "cannot name a thread: 300 characters",
    ),
    (
        ["resume", "p", "--target", f"{FLOWS}:failing"],
        ExitCode.FAILED,
        "written by another version of this graph",
    ),
    (
        ["resume", "p", "--target", f"{FLOWS}:shout"],
        ExitCode.USAGE,
        "is a handler",
    ),
    # threads, history, show, fork, delete against a missing store file
    (
        ["threads", "--store", "absent.sqlite3"],
        ExitCode.NOT_FOUND,
        "no store at",
    ),
    (["history", "nope"], ExitCode.NOT_FOUND, "no thread 'nope'"),
    (
        ["show", "p", "--version", "42"],
        ExitCode.NOT_FOUND,
        "no checkpoint for thread 'p' at version 42",
    ),
    (["show", "nope"], ExitCode.NOT_FOUND, "no thread 'nope'"),
    (["fork", "nope"], ExitCode.NOT_FOUND, "no thread 'nope'"),
    (["fork", "p", "--to", "p"], ExitCode.USAGE, "already exists"),
    (["delete", "nope"], ExitCode.NOT_FOUND, "no thread 'nope'"),
    # draw
    (["draw", "nomodule:x"], ExitCode.USAGE, "no module named"),
    (
        ["draw", f"{FLOWS}:shout"],
        ExitCode.USAGE,
        "draw takes a graph or a swarm",
    ),
]


def _with_store(args: list[str], store: str) -> list[str]:
    if "--store" in args or args[0] == "draw":
        return args
    return [*args, "--store", store]


@pytest.mark.parametrize(("args", "code", "message"), BAD)
def test_mistakes(
    paused: tuple[Path, str],
    args: list[str],
    code: int,
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every command answers a mistake with one line, a hint and its code
    (in-process, through the same entry point as the installed script)."""
    where, store = paused
    monkeypatch.chdir(where)
    monkeypatch.delenv("PIPELINE_STORE", raising=False)
    assert main(_with_store(args, store)) == code
    out = capsys.readouterr()
    assert_one_line_error(out.err)
    assert message in out.err
    assert "hunter2" not in out.err + out.out


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        BAD[0],
        pytest.param(*BAD[4], marks=pytest.mark.slow),
        BAD[12],
        pytest.param(*BAD[16], marks=pytest.mark.slow),
    ],
    ids=["module", "json", "thread", "store"],
)
def test_mistakes_in_a_subprocess(
    paused: tuple[Path, str], args: list[str], code: int, message: str
) -> None:
    """The real command: same line, hint and exit status, no traceback."""
    where, store = paused
    done = cli(*_with_store(args, store), cwd=where)
    assert done.returncode == code, done.stderr
    assert_one_line_error(done.stderr)
    assert message in done.stderr


@pytest.mark.slow
def test_answer_needs_a_question(tmp_path: Path, store: str) -> None:
    """Answering a thread that waits for nothing is refused."""
    cli(
        "run",
        f"{FLOWS}:plain",
        "--input",
        '{"text": "x"}',
        "--store",
        store,
        "--thread",
        "done",
        cwd=tmp_path,
    )
    done = cli("answer", "done", "yes", "--store", store, cwd=tmp_path)
    assert done.returncode == ExitCode.USAGE
    assert_one_line_error(done.stderr)
    assert "is not waiting for an answer (it is done)" in done.stderr


@pytest.mark.slow
def test_input_values_are_never_echoed(tmp_path: Path, store: str) -> None:
    """A malformed input's values (secrets, maybe) stay out of the message."""
    canary = "sk-canary-5f1d"
    for text in (
        f'{{"text": 1, "extra": "{canary}"}}',
        f'{{"text": ["{canary}"]}}',
        f'{{"text": "{canary}',
    ):
        done = cli(
            "run",
            f"{FLOWS}:desk",
            "--input",
            text,
            "--store",
            store,
            cwd=tmp_path,
        )
        assert done.returncode == ExitCode.USAGE
        assert canary not in done.stderr + done.stdout


def test_usage_errors(tmp_path: Path) -> None:
    """Unknown options and commands are click's usage errors, exit 2."""
    done = cli("run", "--bogus", cwd=tmp_path)
    assert done.returncode == ExitCode.USAGE
    assert "No such option" in done.stderr
    assert cli("frobnicate", cwd=tmp_path).returncode == ExitCode.USAGE
    helped = cli("--help", cwd=tmp_path)
    assert helped.returncode == 0
    assert "Exit codes" in helped.stdout


@pytest.mark.slow
def test_live_view_on_a_terminal(tmp_path: Path) -> None:
    """On a terminal the run shows where it is, tokens, and the streamed text."""
    term = Terminal.start(
        "run",
        f"{FLOWS}:helper",
        "--input",
        '"router?"',
        cwd=tmp_path,
        env=environment(),
    )
    term.read_until(b"Restart the router.")
    assert term.wait() == 0
    screen = term.screen().decode(errors="replace")
    assert "tokens 17" in screen
    assert "helper: " in screen
    assert "0 handoffs, 0 tool calls, 17 tokens" in screen  # the summary


@pytest.mark.slow
def test_live_view_shows_handoffs(tmp_path: Path, store: str) -> None:
    """Handoffs appear as they happen, and the count in the status line."""
    term = Terminal.start(
        "run",
        f"{FLOWS}:team",
        "--input",
        '"charged twice"',
        "--store",
        store,
        cwd=tmp_path,
        env=environment(),
    )
    term.read_until(b"dispatcher hands off to billing")
    assert term.wait() == 0
    screen = term.screen().decode(errors="replace")
    assert "handoffs 1" in screen
    assert "billing: " in screen
    assert "Your refund is on its way." in screen


@pytest.mark.slow
def test_ctrl_c_keeps_a_resumable_checkpoint(
    tmp_path: Path, store: str
) -> None:
    """Ctrl-C in the middle of a node cancels the run cleanly: exit 130, the
    committed checkpoints kept, and resuming finishes without running the
    finished nodes again."""
    term = Terminal.start(
        "run",
        f"{FLOWS}:plain",
        "--input",
        '{"text": "x"}',
        "--store",
        store,
        "--thread",
        "c",
        cwd=tmp_path,
        env=environment(FLOWS_BLOCK="1"),
    )
    term.read_until(b"at send")
    term.press_ctrl_c()
    assert term.wait() == ExitCode.CANCELLED
    screen = term.screen().decode(errors="replace")
    assert "cancelled" in screen
    assert "pipeline resume c" in screen
    assert "Traceback" not in screen

    resumed = cli("resume", "c", "--store", store, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["sent"] is True
    hist = lines(
        cli("history", "c", "--store", store, "--json", cwd=tmp_path).stdout
    )
    nodes = [r["node"] for r in hist]
    assert nodes.count("classify") == 1
    assert nodes.count("draft") == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "server",
    [
        pytest.param("postgres_url", marks=pytest.mark.postgres),
        pytest.param("redis_url", marks=pytest.mark.redis),
    ],
)
def test_server_stores(
    tmp_path: Path, server: str, request: pytest.FixtureRequest
) -> None:
    """--store takes a postgresql:// or redis:// URL: the same commands
    work on the server stores."""
    url = str(request.getfixturevalue(server))
    thread = f"cli-{uuid.uuid4().hex[:12]}"
    ran = cli(
        "run",
        f"{FLOWS}:desk",
        "--input",
        '{"text": "charged"}',
        "--store",
        url,
        "--thread",
        thread,
        cwd=tmp_path,
    )
    assert ran.returncode == ExitCode.PAUSED, ran.stderr
    answered = cli("answer", thread, "yes", "--store", url, cwd=tmp_path)
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout)["sent"] is True
    listed = lines(
        cli("threads", "--store", url, "--json", cwd=tmp_path).stdout
    )
    assert {
        "thread": thread,
        "head": 5,
        "status": "done",
        "target": f"{FLOWS}:desk",
    } in listed
    assert cli("delete", thread, "--store", url, cwd=tmp_path).returncode == 0
    gone = cli("show", thread, "--store", url, cwd=tmp_path)
    assert gone.returncode == ExitCode.NOT_FOUND
    assert not list(tmp_path.iterdir())  # no SQLite file made on the side


def test_context_flag(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--context gives any handler a context: a string is one user message."""
    monkeypatch.chdir(tmp_path)
    assert (
        main(["run", f"{FLOWS}:tagged", "--context", "--input", '"hi"']) == 0
    )
    assert capsys.readouterr().out == "Restart the router.\n"
    as_fields = '{"messages": [{"role": "user", "content": "hi"}]}'
    assert (
        main(["run", f"{FLOWS}:tagged", "--context", "--input", as_fields])
        == 0
    )
    assert capsys.readouterr().out == "Restart the router.\n"


# A thread as the release before records carried their time, author and
# origin wrote it (``plain`` run on input {"text": "x"}): four documents,
# byte for byte, but for the graph's fingerprint, filled in (so that a
# change to the flow does not break this test).
OLD_RECORDS = [
    (
        '{"fp":"FP","next":["classify"],"state":{"category":"","reply":"",'
        '"sent":false,"text":"x"},"step":0,"v":1}'
    ),
    '{"fp":"FP","next":["draft"],"state":{"category":"tech"},"step":1,"v":1}',
    (
        '{"fp":"FP","next":["send"],"state":{"reply":"About your tech issue"},'
        '"step":2,"v":1}'
    ),
    (
        '{"fp":"FP","next":[],"state":{"sent":true},"status":"done","step":3,'
        '"v":1}'
    ),
]


@pytest.mark.slow
def test_records_of_an_older_release_still_show(tmp_path: Path) -> None:
    """Records without a time, author or origin read and display: ``?``
    for the time, no author, no origin."""
    path = tmp_path / "old.sqlite3"

    async def write() -> None:
        async with stores.SQLiteStore(path) as store:
            for version, text in enumerate(OLD_RECORDS):
                data = text.replace("FP", plain.fingerprint).encode()
                parent = None if version == 0 else version - 1
                record = Record(
                    "old",
                    version,
                    parent,
                    data,
                    record_checksum("old", version, parent, data),
                )
                await store.commit(record, expected_head=parent)

    anyio.run(write)
    target = ("--store", str(path), "--target", f"{FLOWS}:plain")
    piped = cli("history", "old", *target, cwd=tmp_path)
    assert piped.returncode == ExitCode.OK, piped.stderr
    header, *rows = (line.split("\t") for line in piped.stdout.splitlines())
    assert header[:4] == ["version", "parent", "committed (UTC)", "status"]
    assert [row[:4] for row in rows] == [
        ["0", "", "?", "running"],
        ["1", "0", "?", "running"],
        ["2", "1", "?", "running"],
        ["3", "2", "?", "done"],
    ]
    as_json = lines(
        cli("history", "old", *target, "--json", cwd=tmp_path).stdout
    )
    assert [(r["at"], r["author"], r["origin"]) for r in as_json] == [
        (None, None, None)
    ] * 4
    shown = cli("show", "old", *target, cwd=tmp_path)
    assert shown.returncode == ExitCode.OK, shown.stderr
    head = json.loads(shown.stdout)
    assert (head["committed_at"], head["author"], head["origin"]) == (
        None,
        None,
        None,
    )
    assert head["state"]["sent"] is True


@pytest.mark.slow
def test_null_answers_an_optional_question(tmp_path: Path, store: str) -> None:
    """``pipeline answer T null`` answers ``None`` (an ``int | None``
    question's none), rather than resuming without an answer."""
    ran = cli(
        "run",
        f"{FLOWS}:optional",
        "--input",
        "{}",
        "--store",
        store,
        "--thread",
        "t",
        cwd=tmp_path,
    )
    assert ran.returncode == ExitCode.PAUSED, ran.stderr
    answered = cli("answer", "t", "null", "--store", store, cwd=tmp_path)
    assert answered.returncode == ExitCode.OK, answered.stderr
    assert json.loads(answered.stdout) == {"limit": None}
