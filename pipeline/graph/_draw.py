"""Drawing a graph: a Mermaid flowchart."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ._edges import Edge, Route, Static
from ._model import END


def idents(names: Iterable[str]) -> dict[str, str]:
    """Distinct Mermaid ids for *names* (``END`` for the end marker).

    Ids keep the letters and digits of the name (``n_plan``); names that
    differ only in other characters get a numbered suffix.
    """
    out = {END: "END"}
    used = {"END", "START"}
    for name in names:
        base = "n_" + "".join(c if c.isalnum() else "_" for c in name)
        ident, k = base, 1
        while ident in used:
            ident, k = f"{base}_{k}", k + 1
        used.add(ident)
        out[name] = ident
    return out


def label(name: str) -> str:
    """*name* as a quoted Mermaid label (quotes escaped)."""
    return '"' + name.replace('"', "#quot;") + '"'


def mermaid(
    entry: str, nodes: Iterable[str], edges: Mapping[str, Edge]
) -> str:
    """A Mermaid flowchart: static edges solid, routes dotted, fan-outs thick."""
    names = list(nodes)
    ids = idents(names)
    lines = ["flowchart TD", "  START([start])", "  END([end])"]
    lines.extend(f"  {ids[n]}[{label(n)}]" for n in names)
    lines.append(f"  START --> {ids[entry]}")
    for source, edge in edges.items():
        src = ids[source]
        if isinstance(edge, Static):
            lines.append(f"  {src} --> {ids[edge.to]}")
        elif isinstance(edge, Route):
            lines.extend(f"  {src} -.-> {ids[t]}" for t in edge.to)
        else:
            lines.extend(f"  {src} ==> {ids[t]}" for t in edge.to)
            lines.extend(f"  {ids[t]} --> {ids[edge.join]}" for t in edge.to)
    return "\n".join(lines) + "\n"
