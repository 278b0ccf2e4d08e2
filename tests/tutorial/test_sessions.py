"""The shell sessions of docs/tutorial.md, run as shown.

Every ```` ```console ```` block of the page is a session: each ``$ `` line
is a command, the lines under it (up to the next command) its output, stdout
and stderr together.  The sessions run in order in one empty directory, with
the files the page asks the reader to save (a ``<!-- file: NAME -->`` line
before a Python block) written there first, and each command's output must
be exactly what the page shows.

- ``pipeline ...`` runs the real command line (``python -m pipeline``, what
  the ``pipeline`` script runs) in a subprocess; ``python ...`` runs this
  interpreter.
- A ``^C`` line in the output is the reader pressing Ctrl-C: the command
  gets SIGINT once its thread's checkpoint at the version the hint names
  ("kept at version N") is committed, waiting on the SQLite store itself.
- ``export NAME=VALUE`` sets a variable for the commands after it.
- ``pip install 'DIST[EXTRAS]' ...`` is not run (CI has no package index):
  the extras it names must be ones pyproject.toml declares.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
import tomllib

from pathlib import Path

import anyio
import attrs
import pytest

from pipeline.stores import SQLiteStore


ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorial.md"
CONSOLE = re.compile(r"^```console\n(.*?)^```", re.MULTILINE | re.DOTALL)
FILE = re.compile(
    r"^<!-- file: (\S+) -->\n```python\n(.*?)^```", re.MULTILINE | re.DOTALL
)
KEPT = re.compile(r"kept at version (\d+)")
CTRL_C = "^C"
HIDDEN = {"PIPELINE_STORE", "PIPELINE_MODEL", "PIPELINE_RESOLVER"}
"""Variables a developer's shell may hold that would change the output."""


@attrs.frozen
class Command:
    """One ``$`` line of a session and the output shown under it."""

    line: str
    output: str

    @property
    def argv(self) -> list[str]:
        """The command's words, as a shell splits them."""
        return shlex.split(self.line)

    @property
    def presses_ctrl_c(self) -> bool:
        """The reader presses Ctrl-C while it runs."""
        return CTRL_C in self.output.splitlines()


def sessions(text: str) -> list[list[Command]]:
    """The page's console blocks, each a list of commands."""
    found: list[list[Command]] = []
    for block in CONSOLE.findall(text):
        commands: list[Command] = []
        for line in block.splitlines():
            if line.startswith("$ "):
                commands.append(Command(line[2:], ""))
            else:
                assert commands, f"output before any command: {line!r}"
                last = commands.pop()
                joined = f"{last.output}{line}\n"
                commands.append(Command(last.line, joined))
        found.append(commands)
    return found


def files(text: str) -> dict[str, str]:
    """The files the page asks the reader to save, by name."""
    return dict(FILE.findall(text))


def environment() -> dict[str, str]:
    """A reader's environment: the repository importable, no provider key
    or store of the developer's own."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in HIDDEN
        and not name.startswith(("OPENAI_", "ANTHROPIC_"))
    }
    env["PYTHONPATH"] = str(ROOT)
    return env


def program(argv: list[str]) -> list[str]:
    """What runs for a command: this interpreter for ``python``, the command
    line's module for ``pipeline``."""
    name, *rest = argv
    if name == "python":
        return [sys.executable, *rest]
    if name == "pipeline":
        return [sys.executable, "-m", "pipeline", *rest]
    pytest.fail(f"the tutorial runs a command the test cannot: {name!r}")


def option(argv: list[str], name: str) -> str:
    """The value given to option *name* in *argv*."""
    assert name in argv, f"{name} missing from {shlex.join(argv)}"
    return argv[argv.index(name) + 1]


async def head(path: Path, thread: str) -> int | None:
    """The thread's last committed version in the SQLite file at *path*."""
    async with SQLiteStore(path) as store:
        return await store.head(thread)


def committed(path: Path, thread: str) -> int | None:
    """:func:`head`, or None before the command made the file (reading
    never creates it)."""
    return anyio.run(head, path, thread) if path.exists() else None


def interrupted(
    command: Command, argv: list[str], cwd: Path, env: dict[str, str]
) -> tuple[str, int]:
    """Run *command*, press Ctrl-C once the checkpoint its output names is
    committed, and return its output and exit status."""
    kept = KEPT.search(command.output)
    assert kept, "a ^C session must show which version was kept"
    version = int(kept.group(1))
    store = cwd / option(argv, "--store")
    thread = option(argv, "--thread")
    with subprocess.Popen(  # noqa: S603  # our interpreter, the page's words
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as process:
        deadline = time.monotonic() + 60
        while (seen := committed(store, thread)) is None or (seen < version):
            assert process.poll() is None, "the run ended before Ctrl-C"
            assert time.monotonic() < deadline, "no checkpoint in 60 s"
            time.sleep(0.02)  # polling the store between reads
        assert seen == version, f"the run went past version {version}"
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=60)
    return out, process.returncode


def installable(argv: list[str]) -> None:
    """A ``pip install`` line names extras pyproject.toml declares."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    declared = set(project["project"]["optional-dependencies"])
    requirement = argv[2]
    match = re.fullmatch(r"([A-Za-z0-9_.-]+)\[([a-z0-9,]+)\]", requirement)
    assert match, requirement
    extras = set(match.group(2).split(","))
    assert extras <= declared, extras - declared


def test_the_page_has_sessions_and_files() -> None:
    """The parser finds what the page holds (so an edit that breaks the
    markup fails here, not by running nothing)."""
    text = PAGE.read_text(encoding="utf-8")
    assert set(files(text)) == {"desk.py"}
    commands = [c for s in sessions(text) for c in s]
    assert sum(c.presses_ctrl_c for c in commands) == 1
    words = [c.argv[:2] for c in commands]
    for step in (["pipeline", "run"], ["pipeline", "resume"]):
        assert step in words
    assert ["pipeline", "answer"] in words


@pytest.mark.slow
def test_the_shell_sessions_print_what_the_page_shows(tmp_path: Path) -> None:
    """Run every session of the tutorial in order in one directory."""
    text = PAGE.read_text(encoding="utf-8")
    for name, body in files(text).items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    env = environment()
    ran = 0
    for session in sessions(text):
        for command in session:
            argv = command.argv
            if argv[:2] == ["pip", "install"]:
                installable(argv)
                continue
            if argv[0] == "export":
                name, _, value = argv[1].partition("=")
                env[name] = value
                continue
            if command.presses_ctrl_c:
                out, status = interrupted(
                    command, program(argv), tmp_path, env
                )
                assert status == 130, out  # cancelled, checkpoints kept
                expected = command.output.replace(f"{CTRL_C}\n", "")
            else:
                done = subprocess.run(  # noqa: S603  # the page's words
                    program(argv),
                    cwd=tmp_path,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    timeout=120,
                    check=False,
                )
                out, expected = done.stdout, command.output
                paused = command.output.startswith("paused:")
                assert done.returncode == (4 if paused else 0), out
            assert out == expected, f"$ {command.line}"
            ran += 1
    assert ran == 5  # version, run, resume, threads, answer
