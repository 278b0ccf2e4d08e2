"""Every optional dependency that is missing says, in one line, which extra
installs it, by our distribution's name (``typed-pipeline``).

Each case runs in a fresh interpreter whose import system refuses one
library, as if it were not installed (a meta-path finder raising
``ModuleNotFoundError``, what a missing package raises); nothing of ours is
mocked.  The same code with nothing refused must succeed, so that a
message cannot come from some other failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from pathlib import Path

import pytest

from pipeline._extras import DISTRIBUTION, install_command


ROOT = Path(__file__).parents[1]

# Refuses BLOCKED and its submodules, as an absent package would.
BLOCKER = """
import importlib.abc, sys

class _Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if BLOCKED and (name == BLOCKED or name.startswith(BLOCKED + ".")):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Absent())
"""

# Runs CODE, then prints what it raised as JSON (or null).
PROBE = """
import json
try:
    exec(CODE, {"__name__": "probe"})
except ImportError as exc:
    print(json.dumps({"type": type(exc).__name__, "message": str(exc),
                      "name": exc.name}))
else:
    print("null")
"""

# A provider that loads OpenTelemetry only when asked for a tracer (as a
# vendor's may): the import our tracing makes is the first one.
TRACED = """
import anyio
from pipeline.runs import scope

class Provider:
    def get_tracer(self, *args, **kwargs):
        from opentelemetry.trace import NoOpTracer
        return NoOpTracer()

async def main():
    with scope(tracer_provider=Provider()):
        pass

anyio.run(main)
"""

FROM_ENV = """
from pipeline.models import from_env
from pipeline.testing import Reply, ScriptedModel
from_env(fallback=ScriptedModel(Reply.text("hi")), environ={"OPENAI_API_KEY": "k"})
"""

# (what a user does, the library refused, the extra that installs it)
CASES = [
    ("import pipeline.models.openai", "openai", "openai"),
    ("import pipeline.models.anthropic", "anthropic", "anthropic"),
    (FROM_ENV, "openai", "openai"),
    ("import pipeline.temporal", "temporalio", "temporal"),
    ("from pipeline.temporal import worker", "temporalio", "temporal"),
    (TRACED, "opentelemetry.trace", "otel"),
    ("import pipeline.testing.strategies", "hypothesis", "testing"),
    ("import pipeline.stores.postgres", "psycopg_pool", "postgres"),
    ("import pipeline.stores.redis", "redis", "redis"),
]


def _env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "PIPELINE_STORE"}
    }
    env["PYTHONPATH"] = str(ROOT)
    return env


def _python(
    blocked: str, body: str, *args: str
) -> subprocess.CompletedProcess[str]:
    script = f"BLOCKED = {blocked!r}\n{BLOCKER}\n{body}"
    return subprocess.run(  # noqa: S603
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        check=False,
        env=_env(),
        cwd=ROOT,
        timeout=120,
    )


def _probe(blocked: str, code: str) -> dict[str, str] | None:
    done = _python(blocked, f"CODE = {code!r}\n{PROBE}")
    assert done.returncode == 0, done.stderr
    found: dict[str, str] | None = json.loads(done.stdout)
    return found


def test_the_install_command_names_our_distribution() -> None:
    assert DISTRIBUTION == "typed-pipeline"
    assert install_command("trio") == "pip install 'typed-pipeline[trio]'"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("code", "blocked", "extra"),
    CASES,
    ids=[f"{extra}-{i}" for i, (_, _, extra) in enumerate(CASES)],
)
def test_a_missing_extra_names_its_install_command(
    code: str, blocked: str, extra: str
) -> None:
    """With the library refused: an ImportError (``MissingExtra``), one
    line, ending with the command; without: no error at all."""
    assert _probe("", code) is None
    raised = _probe(blocked, code)
    assert raised is not None
    assert raised["type"] == "MissingExtra"
    message = raised["message"]
    assert "\n" not in message
    assert message.endswith(f": pip install 'typed-pipeline[{extra}]'")
    assert f"missing: {blocked}" in message
    assert raised["name"] == blocked


CLI = """
import sys
from pipeline.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _cli_error(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.slow
def test_backend_trio_without_trio_names_the_trio_extra() -> None:
    args = ("--backend", "trio", "version")
    assert _python("", CLI, *args).returncode == 0
    done = _python("trio", CLI, *args)
    assert done.returncode == 6  # unavailable
    assert _cli_error(done) == (
        "pipeline: error: --backend trio needs trio (missing: trio): "
        "pip install 'typed-pipeline[trio]'"
    )


@pytest.mark.slow
def test_a_target_whose_extra_is_missing_names_it(tmp_path: Path) -> None:
    """``pipeline run`` of a module that imports an adapter: one line, the
    command, exit 6 (not "your code raised ImportError")."""
    (tmp_path / "uses_openai.py").write_text(
        textwrap.dedent("""
            from returns.result import Result, Success

            from pipeline import handler
            from pipeline.models.openai import OpenAIModel

            @handler
            async def echo(text: str) -> Result[str, None]:
                return Success(text)
        """),
        encoding="utf-8",
    )
    args = ("run", "uses_openai:echo", "--input", '"hi"')
    script = f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n{CLI}"
    assert _python("", script, *args).returncode == 0
    done = _python("openai", script, *args)
    assert done.returncode == 6
    line = _cli_error(done)
    assert line.startswith("pipeline: error: pipeline.models.openai needs")
    assert line.endswith("pip install 'typed-pipeline[openai]'")


@pytest.mark.slow
def test_a_store_url_whose_extra_is_missing_names_it(tmp_path: Path) -> None:
    args = ("threads", "--store", "postgresql://nobody@127.0.0.1:1/none")
    done = _python("psycopg", CLI, *args)
    assert done.returncode == 6
    assert _cli_error(done) == (
        "pipeline: error: this store needs the postgres extra: "
        "pip install 'typed-pipeline[postgres]'"
    )


@pytest.mark.slow
def test_mcp_serve_without_the_mcp_sdk_names_the_mcp_extra() -> None:
    """Checked before the target is imported: a target that does not
    exist is not reached."""
    args = ("mcp", "serve", "no_such_module:thing")
    done = _python("mcp", CLI, *args)
    assert done.returncode == 6  # unavailable
    assert _cli_error(done) == (
        "pipeline: error: pipeline mcp serve needs the MCP SDK (missing: "
        "mcp): pip install 'typed-pipeline[mcp]'"
    )
