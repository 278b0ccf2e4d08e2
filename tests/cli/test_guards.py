"""The command line's guards: secrets it never prints, mistakes that are
usage errors (exit 2) and never leave a thread stuck, Ctrl-C at any time.
Each runs the real command in a subprocess."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

from pathlib import Path

import pytest

from pipeline.cli import ExitCode, main
from tests.cli.guarded import CANARY, GUARDED
from tests.cli.runner import cli, environment
from tests.cli.test_cli import assert_one_line_error


@pytest.fixture(name="store")
def _store(tmp_path: Path) -> str:
    return str(tmp_path / "threads.sqlite3")


@pytest.mark.slow
def test_tool_exception_quoting_a_secret(tmp_path: Path, store: str) -> None:
    """A tool raising an error that quotes its secret argument: one log
    line naming the type, the value nowhere (plain, --json, --traceback,
    the store file)."""
    plain = cli("run", f"{GUARDED}:door", "--store", store, cwd=tmp_path)
    assert plain.returncode == ExitCode.OK, plain.stderr
    logged = [line for line in plain.stderr.splitlines() if "raised" in line]
    assert logged == [
        (
            "pipeline: error: tool 'unlock' raised ValueError "
            "(--traceback shows more)"
        )
    ]
    assert "Traceback" not in plain.stderr
    as_json = cli(
        "run", f"{GUARDED}:door", "--store", store, "--json", cwd=tmp_path
    )
    raised = [
        doc
        for doc in map(json.loads, as_json.stdout.splitlines())
        if doc["type"] == "tool_raised"
    ]
    # Every event line carries its time (`at`); nothing else is said.
    assert [doc.pop("at")[-1] for doc in raised] == ["Z"]
    assert raised == [
        {
            "type": "tool_raised",
            "tool": "unlock",
            "exception_type": "ValueError",
        }
    ]
    full = cli(
        "--traceback", "run", f"{GUARDED}:door", "--store", store, cwd=tmp_path
    )
    assert "in unlock" in full.stderr  # the frames, messages withheld
    for done in (plain, as_json, full):
        assert CANARY not in done.stdout + done.stderr
    assert CANARY.encode() not in Path(store).read_bytes()


@pytest.mark.slow
def test_an_answer_of_the_wrong_type_keeps_the_thread_waiting(
    tmp_path: Path, store: str
) -> None:
    """`pipeline answer` with an answer the gate refuses (answer_as(int)
    gets text): exit 2, one line and a hint; the thread still waits, and
    the right answer then finishes it."""
    order = '{"item": " tea "}'
    ran = cli(
        "run", f"{GUARDED}:orders", "--input", order, "--thread", "o",
        *("--store", store),
        cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == ExitCode.PAUSED, ran.stderr
    wrong = cli("answer", "o", "plenty", "--store", store, cwd=tmp_path)
    assert wrong.returncode == ExitCode.USAGE
    assert_one_line_error(wrong.stderr)
    assert "malformed answer: the answer is not a int" in wrong.stderr
    assert "thread o still waits" in wrong.stderr
    shown = cli("show", "o", "--store", store, "--json", cwd=tmp_path)
    assert json.loads(shown.stdout)["status"] == "interrupted"
    right = cli("answer", "o", "3", "--store", store, cwd=tmp_path)
    assert right.returncode == ExitCode.OK, right.stderr
    assert json.loads(right.stdout) == {"item": "tea", "quantity": 0}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            f"postgresql://127.0.0.1:1/db?user=ann&password={CANARY}",
            "postgresql://127.0.0.1:1/db?user=ann&password=***",
        ),
        (
            f"postgresql://ann:{CANARY}@127.0.0.1:1/db?sslpassword={CANARY}",
            "postgresql://ann:***@127.0.0.1:1/db?sslpassword=***",
        ),
        (
            f"redis://127.0.0.1:1/0?password={CANARY}",
            "redis://127.0.0.1:1/0?password=***",
        ),
        (f"redis://:{CANARY}@127.0.0.1:1/0", "redis://:***@127.0.0.1:1/0"),
    ],
)
def test_store_passwords_are_never_printed(
    tmp_path: Path, url: str, shown: str
) -> None:
    """A password in a store URL, as user:password@ or as a query
    parameter, shows as ***; the user and everything else stay."""
    done = cli("threads", "--store", url, cwd=tmp_path)
    assert done.returncode == ExitCode.UNAVAILABLE
    assert f"cannot reach the store at {shown} " in done.stderr
    assert CANARY not in done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.postgres
def test_store_password_on_a_live_server(
    tmp_path: Path, postgres_url: str
) -> None:
    """On a server that takes the URL (trust auth ignores the password):
    the thread line and the hints show *** for it."""
    url = (
        f"{postgres_url}{'&' if '?' in postgres_url else '?'}password={CANARY}"
    )
    thread = f"pw-{tmp_path.name[-12:]}"
    ran = cli(
        "run", f"{GUARDED}:orders", "--input", '{"item": "tea"}',
        *("--store", url, "--thread", thread),
        cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == ExitCode.PAUSED, ran.stderr
    assert "password=***" in ran.stderr
    assert f"--store {postgres_url}" in ran.stderr  # the hint keeps the rest
    again = cli(
        "run", f"{GUARDED}:orders", "--input", '{"item": "tea"}',
        *("--store", url, "--thread", thread),
        cwd=tmp_path,
    )  # fmt: skip
    assert again.returncode == ExitCode.USAGE
    assert f"`pipeline resume {thread} --store {postgres_url}" in again.stderr
    for done in (ran, again):
        assert CANARY not in done.stdout + done.stderr
    assert cli("delete", thread, "--store", url, cwd=tmp_path).returncode == 0


# The ``pipeline`` console script, with a Ctrl-C (SIGINT to itself) at a
# chosen moment: while a module is imported (an audit hook sees it start),
# or at exit, after the command printed its result.
_CONSOLE = """
import atexit, os, signal, sys
when, *argv = sys.argv[1:]
def interrupt():
    os.kill(os.getpid(), signal.SIGINT)
if when == "exit":
    atexit.register(interrupt)
else:
    sys.addaudithook(
        lambda event, args: event == "import" and args[0] == when and interrupt()
    )
sys.argv = ["pipeline", *argv]
from pipeline.__main__ import main
sys.exit(main())
"""


@pytest.mark.parametrize(
    "when",
    [
        "pipeline.cli",
        "click",
        "pipeline.cli._app",
        "anyio",
        pytest.param("exit", marks=pytest.mark.slow),
    ],
)
def test_ctrl_c_at_any_moment(tmp_path: Path, when: str) -> None:
    """Ctrl-C while the command line loads: one line, exit 130, never a
    traceback; after the result is printed: exit 0 (nothing to cancel),
    never death by signal."""
    done = subprocess.run(  # noqa: S603  # our own interpreter and code
        [sys.executable, "-c", _CONSOLE, when, "run", f"{GUARDED}:door"],
        cwd=tmp_path,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in done.stderr
    if when == "exit":
        assert done.returncode == ExitCode.OK, done.stderr
        assert json.loads(done.stdout) == {"note": "Could not unlock."}
    else:
        assert done.returncode == ExitCode.CANCELLED, done.stderr
        assert done.stderr == "pipeline: error: cancelled\n"


_DEEP = "[" * 5000 + "]" * 5000


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input", _DEEP], "--input: nests too deeply"),
        (
            ["--input", "1" * 5000],
            f"--input: has an integer of more than {sys.get_int_max_str_digits()} digits",
        ),
        (
            ["--input", '"\\ud800"'],
            "--input: has a string with a lone surrogate",
        ),
        (["--input", "NaN"], "--input: NaN and Infinity are not JSON numbers"),
        (
            ["--input", '{"item": "x"}', "--thread", ""],
            "cannot name a thread: 0 characters",
        ),
    ],
    ids=["deep", "long-int", "surrogate", "nan", "empty-thread"],
)
def test_input_mistakes_are_usage_errors(
    tmp_path: Path, store: str, args: list[str], message: str
) -> None:
    """Input the program cannot take is exit 2 and one line naming why,
    never "your code raised"."""
    done = cli(
        "run", f"{GUARDED}:orders", "--store", store, *args, cwd=tmp_path
    )
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert_one_line_error(done.stderr)
    assert message in done.stderr
    assert not Path(store).exists()  # nothing started


@pytest.mark.slow
@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (_DEEP, "malformed answer: nests too deeply"),
        ('"\\udc00"', "malformed answer: has a string with a lone surrogate"),
        ("1" * 5000, "malformed answer: has an integer of more than"),
    ],
    ids=["deep", "surrogate", "long-int"],
)
def test_answer_mistakes_are_usage_errors(
    tmp_path: Path, store: str, answer: str, message: str
) -> None:
    """An answer the program cannot take: exit 2, nothing is written (a
    ``null`` answer used to resume without one: it re-asked, exit 4, and
    committed a record), the thread still waits at the same question."""
    ran = cli(
        "run", f"{GUARDED}:orders", "--input", '{"item": "tea"}',
        *("--thread", "o", "--store", store),
        cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == ExitCode.PAUSED, ran.stderr
    before = cli("history", "o", "--store", store, "--json", cwd=tmp_path)
    done = cli("answer", "o", answer, "--store", store, cwd=tmp_path)
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert_one_line_error(done.stderr)
    assert message in done.stderr
    after = cli("history", "o", "--store", store, "--json", cwd=tmp_path)
    assert after.stdout == before.stdout  # nothing written
    right = cli("answer", "o", "2", "--store", store, cwd=tmp_path)
    assert right.returncode == ExitCode.OK, right.stderr


@pytest.mark.slow
def test_draw_into_a_missing_directory(tmp_path: Path) -> None:
    """`draw -o` into a directory that does not exist: exit 2, one line."""
    done = cli(
        "draw", f"{GUARDED}:orders", "-o", str(tmp_path / "no" / "g.mmd"),
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == ExitCode.USAGE
    assert_one_line_error(done.stderr)
    assert "-o: no directory" in done.stderr


@pytest.mark.slow
def test_secret_state_from_the_command_line(
    tmp_path: Path, store: str
) -> None:
    """A graph with a Secret state field: --input takes the stored form
    {"$secret": REF}, never the value; --resolver (or PIPELINE_RESOLVER)
    gives the references' values to run, show and history; without it
    reading the thread is a usage error naming the reference."""
    by_value = cli(
        "run", f"{GUARDED}:login", "--input", json.dumps({"token": CANARY}),
        *("--store", store), cwd=tmp_path,
    )  # fmt: skip
    assert by_value.returncode == ExitCode.USAGE
    assert_one_line_error(by_value.stderr)
    assert "a secret, given by value" in by_value.stderr
    assert "@ $.token" in by_value.stderr
    stored = json.dumps({"token": {"$secret": "crm"}})
    unknown = cli(
        "run", f"{GUARDED}:login", "--input", stored,
        *("--store", store), cwd=tmp_path,
    )  # fmt: skip
    assert unknown.returncode == ExitCode.USAGE
    assert "secret 'crm' cannot be resolved @ $.token" in unknown.stderr
    assert "--resolver MODULE:OBJECT" in unknown.stderr
    ran = cli(
        "--resolver", f"{GUARDED}:VAULT",
        "run", f"{GUARDED}:login", "--input", stored, "--thread", "s",
        *("--store", store), cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == ExitCode.OK, ran.stderr
    assert json.loads(ran.stdout) == {
        "token": {"$secret": "crm"},
        "length": len(CANARY),
    }
    for command in ("show", "history"):
        blind = cli(command, "s", "--store", store, cwd=tmp_path)
        assert blind.returncode == ExitCode.USAGE, blind.stderr
        assert_one_line_error(blind.stderr)
        assert "secret 'crm' cannot be resolved" in blind.stderr
        assert "--resolver MODULE:OBJECT" in blind.stderr
        seen = cli(
            command, "s", "--store", store, cwd=tmp_path,
            env=environment(PIPELINE_RESOLVER=f"{GUARDED}:vault"),
        )  # fmt: skip
        assert seen.returncode == ExitCode.OK, seen.stderr
        assert CANARY not in seen.stdout + seen.stderr
    wrong = cli(
        "--resolver", f"{GUARDED}:not_a_resolver", "show", "s",
        *("--store", store), cwd=tmp_path,
    )  # fmt: skip
    assert wrong.returncode == ExitCode.USAGE
    assert "is a int, not a resolver" in wrong.stderr
    for done in (by_value, unknown, ran):
        assert CANARY not in done.stdout + done.stderr
    assert CANARY.encode() not in Path(store).read_bytes()


_LOGIN = f"{GUARDED}:login"
_STORED = json.dumps({"token": {"$secret": "crm"}})

IN_PROCESS = [
    (
        ["run", _LOGIN, "--input", json.dumps({"token": CANARY})],
        "given by value",
    ),
    (["run", _LOGIN, "--input", _STORED], "secret 'crm' cannot be resolved"),
    (
        ["--resolver", f"{GUARDED}:not_a_resolver", "run", _LOGIN],
        "is a int, not a resolver",
    ),
    (["run", _LOGIN, "--input", _DEEP], "nests too deeply"),
    (["run", _LOGIN, "--input", '["\\ud800"]'], "lone surrogate"),
    (["run", _LOGIN, "--input", "9" * 5000], "digits"),
    (["run", _LOGIN, "--input", "[NaN]"], "NaN and Infinity"),
    (
        [
            "run",
            f"{GUARDED}:orders",
            "--input",
            '{"item": "x"}',
            "--thread",
            "",
        ],
        "0 characters",
    ),
    (["draw", _LOGIN, "-o", "no/such/dir/g.mmd"], "-o: no directory"),
]


@pytest.mark.parametrize(("args", "message"), IN_PROCESS)
def test_guards_in_process(
    tmp_path: Path,
    store: str,
    args: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same mistakes through the entry point the script calls, in
    this process: exit 2, one line, nothing secret."""
    monkeypatch.chdir(tmp_path)
    extra = [] if args[0] == "draw" else ["--store", store]
    assert main([*args, *extra]) == ExitCode.USAGE
    out = capsys.readouterr()
    assert_one_line_error(out.err)
    assert message in out.err
    assert CANARY not in out.out + out.err


def test_resolver_and_answers_in_process(
    tmp_path: Path,
    store: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--resolver in this process: a run with a stored secret, then a
    paused thread refusing answers it cannot take, then finishing."""
    monkeypatch.chdir(tmp_path)
    resolver = ["--resolver", f"{GUARDED}:VAULT"]
    ran = main(
        [*resolver, "run", _LOGIN, "--input", _STORED, "--store", store]
    )
    assert ran == ExitCode.OK
    assert CANARY not in capsys.readouterr().out
    order = ["run", f"{GUARDED}:orders", "--input", '{"item": "tea"}']
    assert main([*order, "--thread", "o", "--store", store]) == ExitCode.PAUSED
    for answer in ("lots", _DEEP, "NaN"):
        capsys.readouterr()
        code = main(["answer", "o", answer, "--store", store])
        assert code == ExitCode.USAGE
        assert "malformed answer" in capsys.readouterr().err
    assert main(["answer", "o", "2", "--store", store]) == ExitCode.OK
    url = f"redis://u:{CANARY}@127.0.0.1:1/0?token={CANARY}"
    assert main(["threads", "--store", url]) == ExitCode.UNAVAILABLE
    assert "redis://u:***@127.0.0.1:1/0?token=***" in capsys.readouterr().err


def test_a_question_from_a_node_shown_and_answered_in_process(
    tmp_path: Path,
    store: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A node's ``interrupt``: ``show`` has its question and payload,
    ``answer`` with JSON that does not fit the declared type is refused
    naming the field (never the value) and the thread still waits; a
    fitting answer reaches the node."""
    monkeypatch.chdir(tmp_path)
    run = ["run", f"{GUARDED}:refunds", "--input", '{"amount": 40}']
    assert main([*run, "--thread", "r", "--store", store]) == ExitCode.PAUSED
    assert "paused: refund this?" in capsys.readouterr().err
    assert main(["show", "r", "--store", store, "--json"]) == ExitCode.OK
    pending = json.loads(capsys.readouterr().out)["pending"]
    assert pending["question"] == "refund this?"
    assert pending["payload"] == {"amount": 40}
    wrong = '{"approved": "SECRET-perhaps"}'
    assert main(["answer", "r", wrong, "--store", store]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "$.approved" in err
    assert "SECRET" not in err
    assert main(["show", "r", "--store", store, "--json"]) == ExitCode.OK
    assert json.loads(capsys.readouterr().out)["status"] == "interrupted"
    right = '{"approved": true, "note": "ok"}'
    assert main(["answer", "r", right, "--store", store]) == ExitCode.OK
    assert json.loads(capsys.readouterr().out) == {
        "amount": 40,
        "verdict": "paid: ok",
    }


def test_a_typed_gate_answer_refused_leaves_the_store_unchanged(
    tmp_path: Path,
    store: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A gate's ``Interrupt(question, Approval, apply=...)``: ``answer``
    with JSON that does not fit is exit 2 naming the field, the thread's
    records are as they were (the value is nowhere in the file); a fitting
    answer ``--author`` is applied to the state in the record naming the
    author."""
    monkeypatch.chdir(tmp_path)
    run = ["run", f"{GUARDED}:releases", "--input", '{"version": "1.2"}']
    assert main([*run, "--thread", "r", "--store", store]) == ExitCode.PAUSED
    capsys.readouterr()
    history = ["history", "r", "--store", store, "--json"]
    assert main(history) == ExitCode.OK
    before = capsys.readouterr().out
    wrong = '{"approved": "SECRET-perhaps", "note": "x"}'
    assert (
        main(["answer", "r", wrong, "--store", store, "--author", "mal"])
        == ExitCode.USAGE
    )
    err = capsys.readouterr().err
    assert "$.approved" in err
    assert "SECRET" not in err
    assert main(history) == ExitCode.OK
    assert capsys.readouterr().out == before  # not one record more
    assert b"SECRET" not in b"".join(
        p.read_bytes() for p in tmp_path.iterdir()
    )
    right = '{"approved": true, "note": "ana"}'
    argv = ["answer", "r", right, "--store", store, "--author", "ana"]
    assert main(argv) == ExitCode.OK
    assert json.loads(capsys.readouterr().out) == {
        "version": "1.2",
        "approved_by": "ana",
    }
    assert main(history) == ExitCode.OK
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x]
    assert [r.get("author") for r in rows if r.get("author")] == ["ana"]


def test_program_entry_in_process(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """pipeline.__main__.main runs the command line on sys.argv, and once
    it is done ignores Ctrl-C (restored here: this process goes on)."""
    from pipeline.__main__ import main as program  # noqa: PLC0415

    monkeypatch.setattr(sys, "argv", ["pipeline", "version"])
    before = signal.getsignal(signal.SIGINT)
    try:
        assert program() == ExitCode.OK
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
    assert capsys.readouterr().out.strip()
