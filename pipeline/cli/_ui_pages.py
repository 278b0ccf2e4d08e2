"""The web UI's pages: server-rendered HTML, every value escaped.

States may hold text an attacker wrote (a ticket, a model's reply), so
nothing reaches the page unescaped: :func:`esc` is the only way in, and
the one exception, :func:`drawing`, is markup this package makes itself.
"""

from __future__ import annotations

import difflib
import html

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlencode


STYLE: Final = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;
text-align:left;vertical-align:top}th{background:#f3f3f3}
pre{background:#f7f7f7;padding:.6em;overflow:auto;max-height:40em}
.here{background:#fff3b0}.error{color:#a00;border:1px solid #a00;padding:.5em}
.warning{color:#850;border:1px solid #c90;padding:.5em}
.add{background:#e6ffec}.del{background:#ffebe9}
form{display:inline-block;margin:.3em 1em .3em 0}nav a{margin-right:1em}
"""


def esc(value: object) -> str:
    """*value* as text safe inside HTML (``None`` is empty)."""
    return "" if value is None else html.escape(str(value), quote=True)


def href(path: str, **query: object) -> str:
    """A link to *path* with *query* (escaped for an attribute)."""
    pairs = {k: str(v) for k, v in query.items() if v is not None}
    return esc(f"{path}?{urlencode(pairs)}" if pairs else path)


def page(title: str, body: str, *, store: str, writes: bool) -> str:
    """A whole page around *body* (already escaped)."""
    mode = "writes allowed" if writes else "read-only"
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{esc(title)} · pipeline</title><style>{STYLE}</style>"
        "</head><body><nav><a href='/'>threads</a>"
        f"<span>store {esc(store)} ({mode})</span></nav>"
        f"<h1>{esc(title)}</h1>{body}</body></html>"
    )


def error(message: str, hint: str = "") -> str:
    """A refusal, shown above the page."""
    more = f"<div>{esc(hint)}</div>" if hint else ""
    return f"<div class=error role=alert><b>{esc(message)}</b>{more}</div>"


def warning(message: str, hint: str = "") -> str:
    """Something the reader should know about what the page shows."""
    more = f"<div>{esc(hint)}</div>" if hint else ""
    return f"<div class=warning role=status><b>{esc(message)}</b>{more}</div>"


def table(
    columns: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    marked: int | None = None,
) -> str:
    """A table of cells that are already HTML; row *marked* highlighted."""
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = []
    for i, row in enumerate(rows):
        cls = " class=here" if i == marked else ""
        body.append(
            f"<tr{cls}>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>"
        )
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def hidden(fields: Mapping[str, object]) -> str:
    """Hidden inputs for a form."""
    return "".join(
        f"<input type=hidden name='{esc(k)}' value='{esc(v)}'>"
        for k, v in fields.items()
    )


def drawing(obj: Any, node: str | None, picture: str | None) -> str:
    """The graph or swarm *obj*, with *node* (where the thread stands)
    named and, in *picture* (its SVG drawing, made by this package through
    Graphviz from the code's node names, never from a state), marked.
    Without a picture (no Graphviz), the Mermaid text, escaped."""
    where = (
        f"<p>the thread stands at <b class=here>{esc(node)}</b></p>"
        if node
        else ""
    )
    if picture is not None and "<svg" in picture:
        svg = picture[picture.index("<svg") :]
        return f"{where}<div class=drawing>{svg}</div>"
    return f"{where}<pre class=mermaid-text>{esc(obj.mermaid())}</pre>"


def diff(before: str, after: str, a: int, b: int) -> str:
    """Lines of a unified diff of two JSON texts, coloured."""
    lines = difflib.unified_diff(
        before.splitlines(),
        after.splitlines(),
        f"version {a}",
        f"version {b}",
        lineterm="",
    )
    out = []
    for line in lines:
        cls = ""
        if line.startswith("+") and not line.startswith("+++"):
            cls = " class=add"
        elif line.startswith("-") and not line.startswith("---"):
            cls = " class=del"
        out.append(f"<span{cls}>{esc(line)}</span>")
    if not out:
        return "<p>the two versions hold the same state</p>"
    return "<pre class=diff>" + "\n".join(out) + "</pre>"
