"""The ``pipeline`` command: its options and subcommands (click)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import click

from ._exits import ExitCode, UserError


_STORE_HELP = (
    "checkpoints: a SQLite file (default: $PIPELINE_STORE, else "
    "./pipeline-threads.sqlite3), or a postgresql:// or redis:// URL"
)
_TARGET_HELP = (
    "the graph or swarm that runs the thread (default: the one "
    "`pipeline run` noted)"
)

store_option = click.option("--store", metavar="PATH|URL", help=_STORE_HELP)
json_option = click.option(
    "--json", "as_json", is_flag=True, help="print JSON lines instead"
)
version_option = click.option(
    "--version",
    "version",
    type=click.IntRange(min=0),
    metavar="N",
    help="a checkpoint version (default: the latest)",
)
target_option = click.option(
    "--target", "ref", metavar="MODULE:OBJECT", help=_TARGET_HELP
)


def _go(
    ctx: click.Context,
    make: Callable[[Any], Awaitable[ExitCode]],
    store: str | None = None,
    *,
    as_json: bool = False,
    trace: str | None = None,
) -> int:
    """Run the async body of a command on the chosen event loop (with
    ``--trace``, an OpenTelemetry provider set globally for it)."""
    import anyio  # noqa: PLC0415

    from ._output import logs  # noqa: PLC0415
    from ._stores import resolve  # noqa: PLC0415
    from ._threads import Settings  # noqa: PLC0415
    from ._trace import tracing  # noqa: PLC0415

    settings = Settings(
        resolve(store), json=as_json, traceback=ctx.obj["traceback"]
    )
    body = make
    if ctx.obj["resolver"]:
        from ._target import load_resolver  # noqa: PLC0415

        body = _resolving(load_resolver(ctx.obj["resolver"]), make)
    with logs(traceback=settings.traceback), tracing(trace):
        return int(anyio.run(body, settings, backend=ctx.obj["backend"]))


def _resolving(
    found: Callable[[str], object], make: Callable[[Any], Awaitable[ExitCode]]
) -> Callable[[Any], Awaitable[ExitCode]]:
    """*make* inside a scope whose secrets *found* resolves."""

    async def body(settings: Any) -> ExitCode:
        from ..runs import scope  # noqa: PLC0415

        with scope(secrets=found):
            return await make(settings)

    return body


trace_option = click.option(
    "--trace",
    type=click.Choice(["otlp", "console"]),
    help="trace the run with OpenTelemetry: to an OTLP/HTTP endpoint "
    "($OTEL_EXPORTER_OTLP_ENDPOINT, default http://localhost:4318), or to "
    "stderr (needs typed-pipeline[otel])",
)


class _Commands(click.Group):
    """The command group; Ctrl-C before a run watches for it (while a
    command loads) is one line, not click's blank line and "Aborted!"."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise UserError("cancelled", code=ExitCode.CANCELLED) from None


@click.group(
    cls=_Commands,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--backend",
    type=click.Choice(["asyncio", "trio"]),
    default="asyncio",
    show_default=True,
    help="the event loop to run on",
)
@click.option(
    "--traceback",
    is_flag=True,
    help="show the traceback when your code raises",
)
@click.option(
    "--resolver",
    metavar="MODULE:OBJECT",
    envvar="PIPELINE_RESOLVER",
    help="resolves the secret references a thread stores: a function from "
    "a reference to its value, or a mapping (default: $PIPELINE_RESOLVER, "
    "else env:NAME references only)",
)
@click.pass_context
def cli(
    ctx: click.Context, backend: str, traceback: bool, resolver: str | None
) -> None:
    """Run, watch, resume and inspect pipelines, graphs and swarms.

    \b
    Exit codes:
      0  done          1  the run failed     2  usage mistake
      3  not found     4  paused (answer)    5  stopped by a gate
      6  unavailable (store, busy thread, renderer, extra)
      130  cancelled with Ctrl-C (the checkpoint is kept)
    """
    if backend == "trio":
        from .._extras import require  # noqa: PLC0415
        from ..errors import MissingExtra  # noqa: PLC0415

        try:
            require("--backend trio", "trio", "trio", ("trio",))
        except MissingExtra as exc:
            raise UserError(str(exc), code=ExitCode.UNAVAILABLE) from None
    ctx.obj = {
        "backend": backend,
        "traceback": traceback,
        "resolver": resolver,
    }


@cli.command()
@click.argument("target", metavar="MODULE:OBJECT")
@click.option(
    "--input",
    "input_text",
    metavar="JSON|@FILE",
    help="the input as JSON (a graph's state fields; a string for a "
    "swarm or agent), or @FILE to read it",
)
@store_option
@click.option(
    "--thread", metavar="ID", help="the new thread's id (default: random)"
)
@click.option(
    "--context",
    is_flag=True,
    help="give a handler a Context (a string input is one user message)",
)
@json_option
@trace_option
@click.pass_context
def run(
    ctx: click.Context,
    target: str,
    input_text: str | None,
    store: str | None,
    thread: str | None,
    context: bool,
    as_json: bool,
    trace: str | None,
) -> int:
    """Run a handler, graph or swarm; graphs and swarms keep checkpoints.

    On a terminal a live line shows the current node or agent, steps,
    handoffs, tool calls, tokens and time, and assistant text streams as
    it arrives.  Ctrl-C cancels, keeping the last checkpoint.
    """
    from ._commands import run as body  # noqa: PLC0415

    return _go(
        ctx,
        lambda s: body(
            s,
            target,
            input_text=input_text,
            thread_id=thread,
            store_given=store is not None,
            context=context,
        ),
        store,
        as_json=as_json,
        trace=trace,
    )


@cli.command()
@click.argument("thread")
@version_option
@target_option
@store_option
@json_option
@trace_option
@click.pass_context
def resume(
    ctx: click.Context,
    thread: str,
    version: int | None,
    ref: str | None,
    store: str | None,
    as_json: bool,
    trace: str | None,
) -> int:
    """Continue THREAD from its latest (or --version N) checkpoint."""
    from ._commands import resume as body  # noqa: PLC0415

    return _go(
        ctx,
        lambda s: body(s, thread, version=version, ref=ref, answer_text=None),
        store,
        as_json=as_json,
        trace=trace,
    )


def _author(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> str:
    """``--author`` (default: the login name, if there is one)."""
    if value is not None:
        return value
    import getpass  # noqa: PLC0415

    try:
        return getpass.getuser()
    except (OSError, KeyError, ImportError):  # no login name known
        return ""


@cli.command()
@click.argument("thread")
@click.argument("answer")
@click.option(
    "--author",
    envvar="PIPELINE_AUTHOR",
    callback=_author,
    help="who answers, kept in the answer's record "
    "($PIPELINE_AUTHOR, default: your login name)",
)
@click.option(
    "--question",
    metavar="ID",
    help="the id of the question ANSWER is for (`pipeline show` prints it:"
    " pending.id); refused if THREAD waits at another",
)
@target_option
@store_option
@json_option
@trace_option
@click.pass_context
def answer(
    ctx: click.Context,
    thread: str,
    answer: str,
    author: str,
    question: str | None,
    ref: str | None,
    store: str | None,
    as_json: bool,
    trace: str | None,
) -> int:
    """Answer the question THREAD paused on, and continue it.

    ANSWER is JSON when it parses as JSON (true, 3, {"ok": true}),
    else the text itself.  A stopped thread waits for no answer: answer
    its question again on a fork (`pipeline fork THREAD --version V
    --answer ANSWER`).
    """
    from ._commands import resume as body  # noqa: PLC0415

    return _go(
        ctx,
        lambda s: body(
            s,
            thread,
            version=None,
            ref=ref,
            answer_text=answer,
            question=question,
            author=author,
        ),
        store,
        as_json=as_json,
        trace=trace,
    )


@cli.command()
@store_option
@json_option
@click.pass_context
def threads(ctx: click.Context, store: str | None, as_json: bool) -> int:
    """List the threads in the store."""
    from ._commands import threads as body  # noqa: PLC0415

    return _go(ctx, body, store, as_json=as_json)


@cli.command()
@click.argument("thread")
@target_option
@store_option
@json_option
@click.pass_context
def history(
    ctx: click.Context,
    thread: str,
    ref: str | None,
    store: str | None,
    as_json: bool,
) -> int:
    """List THREAD's checkpoints, oldest first."""
    from ._commands import history as body  # noqa: PLC0415

    return _go(ctx, lambda s: body(s, thread, ref), store, as_json=as_json)


@cli.command()
@click.argument("thread")
@version_option
@target_option
@store_option
@json_option
@click.pass_context
def show(
    ctx: click.Context,
    thread: str,
    version: int | None,
    ref: str | None,
    store: str | None,
    as_json: bool,
) -> int:
    """Print THREAD's snapshot (state included) as JSON."""
    from ._commands import show as body  # noqa: PLC0415

    return _go(
        ctx, lambda s: body(s, thread, version, ref), store, as_json=as_json
    )


@cli.command()
@click.argument("thread")
@version_option
@click.option("--to", "new_id", metavar="ID", help="the new thread's id")
@click.option(
    "--answer",
    "answer_text",
    metavar="ANSWER",
    help="answer the question the fork waits at, and continue the fork "
    "(how a question a stopped thread declined is answered again)",
)
@click.option(
    "--author",
    envvar="PIPELINE_AUTHOR",
    callback=_author,
    help="with --answer: who answers, kept in the answer's record "
    "($PIPELINE_AUTHOR, default: your login name)",
)
@target_option
@store_option
@json_option
@click.pass_context
def fork(
    ctx: click.Context,
    thread: str,
    version: int | None,
    new_id: str | None,
    answer_text: str | None,
    author: str,
    ref: str | None,
    store: str | None,
    as_json: bool,
) -> int:
    """Copy THREAD (at --version N) into a new thread; print its id.

    A stopped snapshot's copy runs again (resume it); with --answer, the
    fork of a question is answered and continued at once.
    """
    from ._commands import fork as body  # noqa: PLC0415

    return _go(
        ctx,
        lambda s: body(
            s, thread, version, new_id, ref, answer_text, author=author
        ),
        store,
        as_json=as_json,
    )


@cli.command()
@click.argument("thread")
@click.option(
    "--state",
    "state_text",
    metavar="JSON|@FILE",
    help="the whole new state",
)
@click.option(
    "--patch",
    "patch_text",
    metavar="JSON|@FILE",
    help="a JSON merge patch over the state (null deletes a field)",
)
@click.option("--author", required=True, help="who makes the change")
@click.option("--reason", required=True, help="why")
@target_option
@store_option
@json_option
@click.pass_context
def edit(
    ctx: click.Context,
    thread: str,
    state_text: str | None,
    patch_text: str | None,
    author: str,
    reason: str,
    ref: str | None,
    store: str | None,
    as_json: bool,
) -> int:
    """Edit the state of THREAD, paused or stopped: a version of its own
    with --author and --reason, shown by `pipeline history`."""
    from ._commands import edit as body  # noqa: PLC0415

    return _go(
        ctx,
        lambda s: body(
            s,
            thread,
            state_text=state_text,
            patch_text=patch_text,
            author=author,
            reason=reason,
            ref=ref,
        ),
        store,
        as_json=as_json,
    )


@cli.command()
@click.argument("thread")
@store_option
@click.pass_context
def delete(ctx: click.Context, thread: str, store: str | None) -> int:
    """Delete THREAD and all its checkpoints."""
    from ._commands import delete as body  # noqa: PLC0415

    return _go(ctx, lambda s: body(s, thread), store)


@cli.command()
@click.argument("target", metavar="MODULE:OBJECT")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["mermaid", "dot", "svg", "png"]),
    default="mermaid",
    show_default=True,
    help="svg and png are rendered by Graphviz's dot",
)
@click.option(
    "--output",
    "-o",
    metavar="FILE",
    help="write here (default: stdout for mermaid and dot, OBJECT.FORMAT "
    "otherwise)",
)
@click.pass_context
def draw(ctx: click.Context, target: str, fmt: str, output: str | None) -> int:
    """Draw a graph or swarm: Mermaid or DOT text, or an SVG or PNG
    picture (rendered by Graphviz)."""
    from ._commands import draw as body  # noqa: PLC0415

    return int(body(target, fmt, output, traceback=ctx.obj["traceback"]))


@cli.group()
def mcp() -> None:
    """MCP: offer an agent or graph to MCP clients (needs
    typed-pipeline[mcp])."""


@mcp.command("serve")
@click.argument("target", metavar="MODULE:OBJECT")
@click.pass_context
def mcp_serve(ctx: click.Context, target: str) -> int:
    """Offer the agent or graph MODULE:OBJECT as an MCP server on stdin
    and stdout: one tool, named after it."""
    from ._commands import mcp_serve as body  # noqa: PLC0415

    root = ctx.find_root()
    return int(
        body(
            target,
            backend=root.obj["backend"],
            traceback=root.obj["traceback"],
        )
    )


@cli.command()
def demo() -> int:
    """Run the offline demo pipeline."""
    from ..demo import run as body  # noqa: PLC0415

    body()
    return 0


@cli.command()
def version() -> int:
    """Print the version."""
    from .._version import __version__  # noqa: PLC0415

    click.echo(__version__)
    return 0


@cli.command()
@store_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="the address to serve on; any but loopback needs the printed token",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="the port (0: any free one)",
)
@target_option
@click.option(
    "--allow-writes",
    is_flag=True,
    help="let the page answer questions and fork threads (default: read-only)",
)
@click.pass_context
def ui(
    ctx: click.Context,
    store: str | None,
    host: str,
    port: int,
    ref: str | None,
    allow_writes: bool,
) -> int:
    """Serve a web UI over the store: threads, timelines, states, diffs.

    Needs the ui extra: pip install 'typed-pipeline[ui]'.
    """
    from ._output import logs  # noqa: PLC0415
    from ._stores import resolve  # noqa: PLC0415
    from ._threads import Settings  # noqa: PLC0415
    from ._ui import serve  # noqa: PLC0415

    settings = Settings(resolve(store), traceback=ctx.obj["traceback"])
    with logs(traceback=settings.traceback):
        return int(
            serve(
                settings,
                host=host,
                port=port,
                ref=ref,
                writes=allow_writes,
                echo=click.echo,
            )
        )
