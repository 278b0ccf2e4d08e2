"""Watching a run: JSON lines, a live view on a terminal, or nothing."""

from __future__ import annotations

import json
import re
import sys
import time

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from .._serde import unicode_safe


if TYPE_CHECKING:
    import cattrs

    from rich.console import Console, RenderableType

    from ..events import Event


class Reporter(Protocol):
    """Sees every event of a run, then stops."""

    async def event(self, event: Event) -> None:
        """One event, as it happens."""
        ...

    def close(self) -> None:
        """The run is over (finished, failed or cancelled)."""
        ...


class Silent:
    """Shows nothing while the run runs (output is not a terminal)."""

    async def event(self, event: Event) -> None:
        """Ignore *event*."""

    def close(self) -> None:
        """Nothing to stop."""


_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def event_type(event: object) -> str:
    """``NodeStarted`` -> ``node_started``."""
    return _CAMEL.sub("_", type(event).__name__).lower()


def encode(
    converter: cattrs.Converter,
    kind: str,
    value: object,
    stamp: Mapping[str, object] | None = None,
) -> bytes:
    """A JSON line ``{"type": kind, ...stamp, ...fields of value}``.

    An exception shows as its type only (a tool's exception text may hold
    a secret; the log has it); lone surrogates (a file name the OS gave
    undecoded, say) become JSON escapes, so any event can be written."""
    fields: Any = converter.unstructure(value)
    doc = (
        {"type": kind, **(stamp or {}), **fields}
        if isinstance(fields, dict)
        else {
            "type": kind,
            **(stamp or {}),
            "value": fields,
        }
    )
    line = json.dumps(
        doc, ensure_ascii=False, separators=(",", ":"), default=_shown
    )
    return unicode_safe(line, escape=True).encode() + b"\n"


def _shown(value: object) -> str:
    """A value JSON has no form for, as the line shows it: an exception by
    its type, a type (``ToolRaised``'s exception type) by its name."""
    if isinstance(value, BaseException):
        return type(value).__name__
    if isinstance(value, type):
        if value.__module__ == "builtins":
            return value.__qualname__
        return f"{value.__module__}.{value.__qualname__}"
    return str(value)


class JsonLines:
    """Each event as one JSON object per line on *out* (``--json``).

    Every line carries ``at``, when it was written (ISO 8601, UTC, on
    *wall*: seconds since the epoch); a node's or tool call's end carries
    ``duration`` too, seconds since its start (on *ticks*, a monotonic
    clock).  Tests pass clocks of their own."""

    def __init__(
        self,
        converter: cattrs.Converter,
        out: TextIO,
        *,
        wall: Callable[[], float] = time.time,
        ticks: Callable[[], float] = time.monotonic,
    ) -> None:
        self._converter = converter
        self._out = out
        self._wall = wall
        self._ticks = ticks
        self._started: dict[object, float] = {}

    async def event(self, event: Event) -> None:
        """Write *event* at once (flushed: a pipe sees it now)."""
        from .. import events as ev  # noqa: PLC0415

        duration = None
        if isinstance(event, ev.NodeStarted):
            self._started[event.nodes, event.step] = self._ticks()
        elif isinstance(event, ev.ToolCallStarted):
            self._started[event.agent, event.call.id] = self._ticks()
        elif isinstance(event, ev.NodeFinished):
            duration = self._since((event.nodes, event.step))
        elif isinstance(event, ev.ToolCallFinished):
            duration = self._since((event.agent, event.call.id))
        self.write(event_type(event), event, duration)

    def _since(self, key: object) -> float | None:
        start = self._started.pop(key, None)
        return None if start is None else round(self._ticks() - start, 6)

    def write(
        self, kind: str, value: object, duration: float | None = None
    ) -> None:
        """Write ``{"type": kind, "at": ..., ...}`` and flush."""
        at = datetime.fromtimestamp(self._wall(), UTC)
        stamp: dict[str, object] = {
            "at": at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        }
        if duration is not None:
            stamp["duration"] = duration
        self._out.write(encode(self._converter, kind, value, stamp).decode())
        self._out.flush()

    def close(self) -> None:
        """Nothing to stop."""


class Live:
    """Live progress on a terminal: where the run is, and what it says.

    The bottom line shows the current node or agent, steps, handoffs,
    tool calls, tokens and elapsed time; assistant text streams above it
    as it arrives, and each finished message stays on screen.
    """

    def __init__(self, console: Console, title: str) -> None:
        from rich.live import Live as RichLive  # noqa: PLC0415

        self._console = console
        self._title = title
        self._started = time.monotonic()
        self._where = "starting"
        self._steps = 0
        self._handoffs = 0
        self._tools = 0
        self._tokens = 0
        self._speaker = ""
        self._text = ""
        self._live = RichLive(
            get_renderable=self._render,
            console=console,
            refresh_per_second=8,
            transient=True,
        )
        self._live.start()

    def _render(self) -> RenderableType:
        from rich.console import Group  # noqa: PLC0415
        from rich.text import Text  # noqa: PLC0415

        elapsed = time.monotonic() - self._started
        status = Text.assemble(
            ("● ", "cyan"),
            (self._title, "bold"),
            "  at ",
            (self._where, "bold cyan"),
            f"  steps {self._steps}  handoffs {self._handoffs}"
            f"  tools {self._tools}  tokens {self._tokens}"
            f"  {elapsed:.1f}s",
        )
        if not self._text:
            return status
        speaking = Text.assemble(
            (f"{self._speaker}: ", "bold green"), self._text
        )
        return Group(speaking, status)

    async def event(self, event: Event) -> None:
        """Update the view from *event*."""
        from .. import events as ev  # noqa: PLC0415

        if isinstance(event, ev.NodeStarted):
            self._where = ", ".join(event.nodes)
        elif isinstance(event, ev.NodeFinished):
            self._steps = event.step
        elif isinstance(event, ev.Handoff):
            self._handoffs = event.count
            self._where = event.target
            self._console.print(
                f"[dim]↪ {event.source} hands off to {event.target}[/dim]"
            )
        elif isinstance(event, ev.MessageDelta):
            if event.agent != self._speaker:
                self._speaker, self._text = event.agent, ""
            self._text += event.text
        elif isinstance(event, ev.MessageComplete):
            self._complete(event)
        elif isinstance(event, ev.ToolCallStarted):
            self._tools += 1
            self._console.print(
                f"[dim]⚙ {event.agent} calls {event.call.name}[/dim]"
            )
        elif isinstance(event, ev.Interrupted):
            self._console.print(f"[yellow]? {event.question}[/yellow]")
        self._live.refresh()

    def _complete(self, event: Any) -> None:
        from rich.text import Text  # noqa: PLC0415

        message = event.message
        usage = message.usage
        if usage is not None:
            self._tokens += usage.total_tokens
        if message.role == "assistant" and message.content:
            self._console.print(
                Text.assemble(
                    (f"{event.agent}: ", "bold green"), message.content
                )
            )
        if event.agent == self._speaker:
            self._text = ""

    def close(self) -> None:
        """Replace the live line with a summary (finished messages stay)."""
        self._live.stop()
        elapsed = time.monotonic() - self._started
        self._console.print(
            f"[dim]{self._steps} steps, {self._handoffs} handoffs, "
            f"{self._tools} tool calls, {self._tokens} tokens, "
            f"{elapsed:.1f}s[/dim]"
        )


def reporter(
    *, json: bool, converter: cattrs.Converter, title: str
) -> Reporter:
    """``--json`` lines, the live view on a terminal, else silence."""
    if json:
        return JsonLines(converter, sys.stdout)
    if sys.stdout.isatty():
        from rich.console import Console  # noqa: PLC0415

        return Live(Console(stderr=False), title)
    return Silent()
