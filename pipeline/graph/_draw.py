"""Drawing a graph: a Mermaid flowchart."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from .._handler import Handler
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
    entry: str,
    nodes: Mapping[str, object],
    edges: Mapping[str, Edge],
    gates: Sequence[object] = (),
) -> str:
    """A Mermaid flowchart: static edges solid, routes dotted and labelled
    with their target, fan-outs thick; a switch node is a rhombus with a
    labelled edge to each case (the default included), a gate with
    ``before=`` a hexagon in front of its nodes (with its ``stop`` exit),
    other gates a note at the start."""
    names = list(nodes)
    ids = idents(names)
    lines = ["flowchart TD", "  START([start])", "  END([end])"]
    enter = dict(ids)
    leave = dict(ids)
    for name in names:
        ident = ids[name]
        cases = _switch_cases(nodes[name])
        if cases is None:
            lines.append(f"  {ident}[{label(name)}]")
            continue
        lines.extend(_mermaid_switch(ident, name, cases))
        leave[name] = f"{ident}_out"
    lines.extend(_mermaid_gates(gates, ids, enter))
    lines.append(f"  START --> {enter[entry]}")
    for source, edge in edges.items():
        src = leave[source]
        if isinstance(edge, Static):
            lines.append(f"  {src} --> {enter[edge.to]}")
        elif isinstance(edge, Route):
            lines.extend(
                f"  {src} -. {label('end' if t == END else t)} .-> {enter[t]}"
                for t in edge.to
            )
        else:
            lines.extend(f"  {src} ==> {enter[t]}" for t in edge.to)
            lines.extend(
                f"  {leave[t]} --> {enter[edge.join]}" for t in edge.to
            )
    return "\n".join(lines) + "\n"


def _mermaid_switch(
    ident: str, name: str, cases: list[tuple[str, str]]
) -> list[str]:
    """A switch node: a rhombus, a labelled edge to each case, and the
    point where the cases meet again (``{ident}_out``)."""
    lines = [
        f"  {ident}{{{label(name + ' (switch)')}}}",
        f'  {ident}_out((" "))',
    ]
    for i, (cond, case) in enumerate(cases):
        if not case:
            lines.append(f"  {ident} -. {label(cond)} .-> {ident}_out")
            continue
        lines.append(f"  {ident}_c{i}[{label(case)}]")
        lines.append(f"  {ident} -- {label(cond)} --> {ident}_c{i}")
        lines.append(f"  {ident}_c{i} --> {ident}_out")
    return lines


def _mermaid_gates(
    gates: Sequence[object], ids: Mapping[str, str], enter: dict[str, str]
) -> list[str]:
    """Gates scoped ``before=`` nodes as hexagons in front of them
    (updating *enter*), the others as one note at the start."""
    lines: list[str] = []
    every: list[str] = []
    for k, gate in enumerate(gates):
        before = getattr(gate, "nodes", None)
        if not isinstance(before, tuple):
            every.append(gate_name(gate))
            continue
        for target in (t for t in before if t in ids):
            gid = f"g{k}_{ids[target]}"
            lines.append(f"  {gid}{{{{{label('gate: ' + gate_name(gate))}}}}}")
            lines.append(f'  {gid} -- "go on" --> {enter[target]}')
            lines.append(f'  {gid} -. "stop" .-> END')
            enter[target] = gid
    if every:
        text = "gates on every step: " + ", ".join(every)
        lines.append(f"  gates>{label(text)}]")
        lines.append("  gates -.- START")
    return lines


# -- Graphviz ------------------------------------------------------------------

FONT = "Helvetica,Arial,sans-serif"
HEAD = (
    f'  graph [fontname="{FONT}", fontsize=11, nodesep=0.35, ranksep=0.45];',
    (
        f'  node [fontname="{FONT}", fontsize=11, shape=box,'
        ' style="rounded,filled", fillcolor="#eef3fb", color="#4a6fa5"];'
    ),
    f'  edge [fontname="{FONT}", fontsize=10, color="#555555"];',
    (
        '  START [label="start", shape=circle, style=filled,'
        ' fillcolor="#333333", fontcolor=white, width=0.45, fixedsize=true];'
    ),
    (
        '  END [label="end", shape=doublecircle, style=filled,'
        ' fillcolor="#333333", fontcolor=white, width=0.4, fixedsize=true];'
    ),
)
MARK = ', fillcolor="#ffd54f", color="#e65100", penwidth=3'
"""How a highlighted node stands out (``draw(highlight=...)``)."""


def quote(text: str) -> str:
    """*text* as a quoted DOT string."""
    escaped = (
        text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    )
    return f'"{escaped}"'


def gate_name(gate: object) -> str:
    """A gate's name for a drawing."""
    name = getattr(gate, "name", None)
    if isinstance(name, str):
        return name
    return str(getattr(gate, "__name__", "gate"))


def check_highlight(highlight: str | None, names: Iterable[str]) -> None:
    """Raise :class:`ValueError` unless *highlight* is ``None`` or a name."""
    if highlight is not None and highlight not in set(names):
        msg = f"draw(highlight=...): no node named {highlight!r}"
        raise ValueError(msg)


def _switch_cases(action: object) -> list[tuple[str, str]] | None:
    """``(edge label, case name)`` for a switch node, else ``None``; a
    switch without a default gets a ``no match`` case with no name."""
    if not isinstance(action, Handler) or action.kind != "switch":
        return None
    children = [str(h.name) for h in action.children]
    detail: str = action._detail  # noqa: SLF001  # its conditions' names
    conditions = detail.split(", ") if detail else []
    if len(conditions) not in (len(children), len(children) - 1):
        conditions = [f"case {i}" for i in range(len(children))]
    cases = list(zip(conditions, children, strict=False))
    cases.append(
        ("default", children[-1])
        if len(children) > len(conditions)
        else ("no match", "")
    )
    return cases


def _switch(
    ident: str, name: str, cases: list[tuple[str, str]], mark: str
) -> list[str]:
    """A switch node as a cluster: its diamond, a labelled edge to each
    case, and the point where the cases meet again (``{ident}_out``)."""
    lines = [
        f"  subgraph cluster_{ident} {{",
        (
            f"    label={quote(name + ' (switch)')};"
            ' style="rounded,dashed"; color="#4a6fa5";'
        ),
        (
            f"    {ident} [label={quote(name)}, shape=diamond, style=filled,"
            f' fillcolor="#fff3e0"{mark}];'
        ),
        f'    {ident}_out [label="", shape=point, width=0.08];',
    ]
    for i, (cond, case) in enumerate(cases):
        if not case:
            lines.append(
                f"    {ident} -> {ident}_out [label={quote(cond)},"
                " style=dashed];"
            )
            continue
        lines.append(f"    {ident}_c{i} [label={quote(case)}];")
        lines.append(f"    {ident} -> {ident}_c{i} [label={quote(cond)}];")
        lines.append(f"    {ident}_c{i} -> {ident}_out [arrowhead=none];")
    lines.append("  }")
    return lines


def _gates(
    gates: Sequence[object], ids: Mapping[str, str], enter: dict[str, str]
) -> list[str]:
    """Gates scoped ``before=`` nodes as octagons in front of them (updating
    *enter*), the others as one note at the start."""
    lines: list[str] = []
    every: list[str] = []
    for k, gate in enumerate(gates):
        before = getattr(gate, "nodes", None)
        if not isinstance(before, tuple):
            every.append(gate_name(gate))
            continue
        for target in (t for t in before if t in ids):
            gid = f"g{k}_{ids[target]}"
            lines.extend(
                (
                    (
                        f"  {gid} [label={quote('gate: ' + gate_name(gate))},"
                        ' shape=octagon, style=filled, fillcolor="#fde2e2",'
                        ' color="#c62828"];'
                    ),
                    (
                        f'  {gid} -> {enter[target]} [label="go on",'
                        ' color="#c62828"];'
                    ),
                    (
                        f'  {gid} -> END [label="stop", style=dotted,'
                        ' color="#c62828"];'
                    ),
                )
            )
            enter[target] = gid
    if every:
        text = "gates on every step: " + ", ".join(every)
        lines.append(
            f"  gates [label={quote(text)}, shape=note, style=filled,"
            ' fillcolor="#fde2e2", color="#c62828"];'
        )
        lines.append("  gates -> START [style=dotted, arrowhead=none];")
    return lines


def _edge(
    r: int,
    src: str,
    edge: Edge,
    enter: Mapping[str, str],
    leave: Mapping[str, str],
) -> list[str]:
    """The lines of one edge leaving *src*."""
    if isinstance(edge, Static):
        return [f"  {src} -> {enter[edge.to]};"]
    if isinstance(edge, Route):
        router = str(getattr(edge.router, "__name__", "route"))
        rid = f"r{r}"
        return [
            (
                f"  {rid} [label={quote(router + '?')}, shape=diamond,"
                ' style=filled, fillcolor="#fff3e0"];'
            ),
            f"  {src} -> {rid};",
            *(
                f"  {rid} -> {enter[t]}"
                f" [label={quote('end' if t == END else t)}, style=dashed];"
                for t in edge.to
            ),
        ]
    return [
        *(
            f'  {src} -> {enter[t]} [label="fan-out", penwidth=2];'
            for t in edge.to
        ),
        *(
            f'  {leave[t]} -> {enter[edge.join]} [label="join", penwidth=2];'
            for t in edge.to
        ),
    ]


def dot(
    entry: str,
    nodes: Mapping[str, object],
    edges: Mapping[str, Edge],
    gates: Sequence[object] = (),
    *,
    highlight: str | None = None,
    title: str = "",
) -> str:
    """The graph as Graphviz DOT text.

    Switch nodes open into their cases (labelled edges, the default
    included), routes show their router as a diamond with an edge per
    target, fan-outs draw bold edges to each branch and on to the join,
    a gate with ``before=`` stands as an octagon in front of its nodes
    (with its ``stop`` exit) and other gates are noted at the start.
    """
    names = list(nodes)
    check_highlight(highlight, names)
    ids = {END: "END"} | {n: f"n{i}" for i, n in enumerate(names)}
    lines = ["digraph pipeline {", *HEAD]
    if title:
        lines.append(f"  label={quote(title)}; labelloc=t;")
    # What a node is entered through (its own box, a gate) and left from
    # (its box, a switch's exit point).
    enter = dict(ids)
    leave = dict(ids)
    for name in names:
        ident = ids[name]
        mark = MARK if name == highlight else ""
        cases = _switch_cases(nodes[name])
        if cases is None:
            lines.append(f"  {ident} [label={quote(name)}{mark}];")
        else:
            lines.extend(_switch(ident, name, cases, mark))
            leave[name] = f"{ident}_out"
    lines.extend(_gates(gates, ids, enter))
    lines.append(f"  START -> {enter[entry]};")
    for r, (source, edge) in enumerate(edges.items()):
        lines.extend(_edge(r, leave[source], edge, enter, leave))
    lines.append("}")
    return "\n".join(lines) + "\n"
