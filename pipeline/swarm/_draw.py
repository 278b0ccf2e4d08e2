"""Drawing a swarm: its agents and the handoffs each may make (Mermaid)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..graph._draw import (
    HEAD,
    MARK,
    check_highlight,
    gate_name,
    idents,
    label,
    quote,
)
from ._model import Member


def mermaid(entry: str, members: Mapping[str, Member]) -> str:
    """A Mermaid flowchart: one node per agent, one arrow per allowed handoff."""
    ids = idents(members)
    lines = ["flowchart LR", "  START([start])"]
    lines.extend(f"  {ids[n]}[{label(n)}]" for n in members)
    lines.append(f"  START --> {ids[entry]}")
    for m in members.values():
        lines.extend(
            f"  {ids[m.name]} -->|transfer| {ids[t]}" for t in m.handoffs
        )
    return "\n".join(lines) + "\n"


def dot(
    entry: str,
    members: Mapping[str, Member],
    gates: Sequence[object] = (),
    *,
    highlight: str | None = None,
    title: str = "",
) -> str:
    """The swarm as Graphviz DOT text: one box per agent, a labelled edge
    per allowed handoff (``transfer_to_<agent>``, through the handoff
    gates when there are some), and each agent's way out: answering."""
    names = list(members)
    check_highlight(highlight, names)
    ids = {n: f"a{i}" for i, n in enumerate(names)}
    lines = ["digraph swarm {", *HEAD, "  rankdir=LR;"]
    if title:
        lines.append(f"  label={quote(title)}; labelloc=t;")
    for name, m in members.items():
        mark = MARK if name == highlight else ""
        text = name if not m.description else f"{name}\n{m.description}"
        lines.append(f"  {ids[name]} [label={quote(text)}{mark}];")
    lines.append(f"  START -> {ids[entry]};")
    gated = ", ".join(gate_name(g) for g in gates)
    via = f"\n(gate: {gated})" if gated else ""
    colour = ', color="#c62828", fontcolor="#c62828"' if gated else ""
    for m in members.values():
        lines.extend(
            f"  {ids[m.name]} -> {ids[t]}"
            f" [label={quote('transfer_to_' + t + via)}{colour}];"
            for t in m.handoffs
        )
        lines.append(
            f'  {ids[m.name]} -> END [label="answers", style=dotted];'
        )
    lines.append("}")
    return "\n".join(lines) + "\n"
