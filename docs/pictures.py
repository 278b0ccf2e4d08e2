"""Sphinx extension: the docs' pictures, made at build time.

Into ``docs/_pictures/`` (git-ignored), when the builder starts:

- every graph and swarm an example module defines at top level
  (``examples/`` and, when present, ``pipeline/examples/``), drawn by
  ``Graph.draw()``/``Swarm.draw()`` (Graphviz): ``<project>-<name>.svg``;
- the command line's live view of the research swarm's scripted run, run
  through the same reporter and runner as ``pipeline run`` into a recording
  rich console: ``live-view.svg``;
- the benchmark figures recorded in ``benchmarks/recorded.json``, plotted
  by matplotlib: ``bench-*.svg``;
- the lifecycle of a question to a human (humans.md), drawn by Graphviz:
  ``humans-lifecycle.svg``.

``pictures.md`` shows them; its list of drawings is
``_pictures/drawings.md``, written here and included there.
"""

from __future__ import annotations

import importlib.util
import io
import json
import sys

from pathlib import Path
from typing import Any

import anyio

from pipeline import Context, Graph, Message, Swarm


DOCS = Path(__file__).parent
ROOT = DOCS.parent
OUT = DOCS / "_pictures"
RECORDED = ROOT / "benchmarks" / "recorded.json"
EXAMPLES = (ROOT / "examples", ROOT / "pipeline" / "examples")


def _load(path: Path) -> Any:
    """The example module at *path*, its folder on ``sys.path`` (examples
    import their neighbours)."""
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = f"_docs_example_{path.parent.parent.name}_{path.parent.name}_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        msg = f"cannot import {path}"
        raise ImportError(msg)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # attrs and cattrs resolve names here
    spec.loader.exec_module(module)
    return module


def drawings() -> dict[str, str]:
    """``{"<project>-<name>": SVG}`` for every example graph and swarm
    (an example shipped twice, in ``examples/`` and in the package, once)."""
    out: dict[str, str] = {}
    for folder in EXAMPLES:
        for path in sorted(folder.glob("*/*.py")):
            if path.stem.startswith("_"):
                continue
            if any(k.startswith(f"{path.parent.name}-") for k in out) and (
                folder != EXAMPLES[0]
            ):
                continue
            module = _load(path)
            for attr, value in sorted(vars(module).items()):
                if isinstance(value, Graph | Swarm):
                    out[f"{path.parent.name}-{attr}"] = value.draw()
    return out


def live_view() -> str:
    """The live view of ``pipeline run research:team``, as a terminal shows
    it at the end of the scripted run (before the summary replaces the
    status line), in SVG."""
    from rich.console import Console  # noqa: PLC0415

    from pipeline.cli._events import Live  # noqa: PLC0415
    from pipeline.cli._execute import execute  # noqa: PLC0415

    research = _load(ROOT / "examples" / "research_swarm" / "research.py")
    team = research.build(*research.scripted_models())
    # Not a terminal: rich then records what the run prints, not each
    # refresh of the live line; the line is printed once, at the end.
    console = Console(record=True, file=io.StringIO(), width=92)

    class Kept(Live):
        def close(self) -> None:
            self._live.stop()
            self._console.print(self._render())

    title = "research:team"
    question = Message.user("How do anyio and trio differ?")

    async def go() -> object:
        return await execute(
            lambda: team.run(Context.of(question)), Kept(console, title)
        )

    anyio.run(go)
    return console.export_svg(title=f"pipeline run {title}")


def _figure(width: float, height: float) -> tuple[Any, Any]:
    import matplotlib as mpl  # noqa: PLC0415

    mpl.use("Agg")  # no display
    mpl.rcParams["svg.hashsalt"] = "pipeline-docs"  # same ids every build
    mpl.rcParams["font.size"] = 9
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt.subplots(1, 1, figsize=(width, height), layout="constrained")


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt  # noqa: PLC0415

    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(fig)
    return buffer.getvalue()


OURS = "#4a6fa5"
PEER = "#b0b0b0"


def plot_overhead(recorded: dict[str, Any]) -> str:
    """Each workload's cost per unit, ours beside the peers', as ranges on
    a log scale, with our target."""
    rows = recorded["overhead"]
    fig, ax = _figure(7.6, 0.27 * len(rows) + 1.4)
    positions: list[float] = []
    labels: list[str] = []
    y, last = 0.0, rows[0]["workload"]
    for r in rows:
        if r["workload"] != last:
            y, last = y + 0.7, r["workload"]
        ours = r["impl"].startswith("pipeline")
        low, high = r["low"], r["high"]
        ax.barh(
            y,
            max(high - low, high * 0.06),  # a single figure: a thin bar
            left=low,
            height=0.65,
            color=OURS if ours else PEER,
        )
        if "target" in r:
            ax.plot([r["target"]], [y], marker="|", ms=11, color="#c62828")
        positions.append(y)
        labels.append(f"{r['workload']}: {r['impl']}")
        y += 1
    ax.set_yticks(positions, labels)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(0.3, 30_000)
    ax.set_xlabel("µs per unit (log scale); red mark: our target")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title("pipeline (blue) and its peers (grey)", fontsize=9)
    return _svg(fig)


def plot_scaling(recorded: dict[str, Any], workload: str) -> str:
    """Overhead per unit against size for *workload*: our series, the
    peers' (a line, or a band where only a range is recorded), our
    target."""
    rows = [r for r in recorded["scaling"] if r["workload"] == workload]
    fig, ax = _figure(6.4, 3.4)
    target = None
    shades = iter(("#9e9e9e", "#d7b98e"))
    for r in rows:
        ours = r["impl"].startswith("pipeline")
        if "points" in r:
            xs, ys = zip(*r["points"], strict=True)
            ax.plot(
                xs,
                ys,
                marker="o",
                label=r["impl"],
                color=None if ours else "#777777",
                linestyle="-" if ours else "--",
            )
        else:
            low, high = r["range"]
            ax.axhspan(
                low, high, color=next(shades), alpha=0.45, label=r["impl"]
            )
        target = r.get("target", target)
    if target is not None:
        ax.axhline(target, color="#c62828", linestyle=":", label="our target")
    if any(v < 0 for r in rows for _, v in r.get("points", ())):
        ax.axhline(0, color="#333333", linewidth=0.6)
    ax.set_xscale("log")
    values = [
        v
        for r in rows
        for v in (
            [y for _, y in r.get("points", ())] + list(r.get("range", ()))
        )
    ]
    if min(values) > 0:
        ax.set_yscale("log")
    else:
        ax.set_yscale("symlog", linthresh=10)
    ax.set_ylim(top=max(values) * 2.5)
    unit, against = rows[0]["unit"], rows[0]["against"]
    ax.set_xlabel(f"{unit}es" if unit.endswith("h") else f"{unit}s")
    ax.set_ylabel(f"µs/{unit} over {against}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best", ncols=2)
    ax.set_title(workload, fontsize=9)
    return _svg(fig)


def plot_durable(recorded: dict[str, Any]) -> str:
    """W9: node commits per second on one SQLite file, ours and plain
    ``sqlite3``'s, by the number of concurrent threads."""
    d = recorded["durable"]
    fig, ax = _figure(6.4, 3.2)
    threads = d["threads"]
    width = 0.38
    for i, series in enumerate(d["series"]):
        ours = series["impl"].startswith("pipeline")
        xs = [j + (i - 0.5) * width for j in range(len(threads))]
        bars = ax.bar(
            xs,
            series["values"],
            width,
            label=series["impl"],
            color=OURS if ours else PEER,
        )
        ax.bar_label(bars, fmt="{:,.0f}", fontsize=8)
    ax.set_xticks(range(len(threads)))
    ax.set_xticklabels([f"C = {c:,}" for c in threads])
    ax.set_ylabel(d["unit"])
    ax.legend(fontsize=8)
    ax.set_title(d["workload"], fontsize=9)
    return _svg(fig)


def plots() -> dict[str, str]:
    """``{"bench-<what>": SVG}`` from ``benchmarks/recorded.json``."""
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    return {
        "bench-peers": plot_overhead(recorded),
        "bench-fan-out": plot_scaling(recorded, "W2 fan-out"),
        "bench-history": plot_scaling(recorded, "W4 history"),
        "bench-durable": plot_durable(recorded),
    }


LIFECYCLE = r"""digraph lifecycle {
  rankdir=LR; nodesep=0.35; ranksep=0.4;
  node [shape=box, style="rounded,filled", fillcolor="#eef2f8",
        color="#4a6fa5", fontname="Helvetica", fontsize=10];
  edge [fontname="Helvetica", fontsize=9, color="#555555"];
  ask [label="step runs\ninterrupt(question, T)"];
  pending [label="question committed\nas pending (id V-digest)"];
  paused [label="run returns paused\n(status interrupted)", shape=octagon,
          fillcolor="#fbe9e7", color="#c62828"];
  check [label="answer validated\nagainst T"];
  committed [label="answer committed\n(author, at)"];
  again [label="step runs again:\ninterrupt returns the answer,\nthe run goes on"];
  stopped [label="stopped record\n(stays stopped)", fillcolor="#eeeeee",
           color="#777777"];
  ask -> pending -> paused;
  paused -> check [label="resume(answer=...,\lquestion=id)\l"];
  paused -> paused [label="stale id:\nStaleAnswer", color="#c62828"];
  check -> pending [label="InvalidAnswer:\nasked again", color="#c62828"];
  check -> committed -> again;
  check -> stopped [label="declined\n(a gate's Stop)", style=dashed];
}
"""
"""A question's way from ``interrupt`` to the step that gets the answer."""


def lifecycle() -> str:
    """:data:`LIFECYCLE` rendered by Graphviz, as SVG."""
    from pipeline._render import svg  # noqa: PLC0415

    return svg(LIFECYCLE)


def make(_app: object) -> None:
    """Write every picture into ``_pictures/``, and the page fragment that
    shows the drawings."""
    OUT.mkdir(exist_ok=True)
    listing = []
    for name, svg in drawings().items():
        (OUT / f"{name}.svg").write_text(svg, encoding="utf-8")
        project, _, attr = name.partition("-")
        listing.append(
            f"`examples/{project}`, `{attr}`:\n\n"
            f"![{project} {attr}](/_pictures/{name}.svg)\n"
        )
    (OUT / "drawings.md").write_text("\n".join(listing), encoding="utf-8")
    (OUT / "live-view.svg").write_text(live_view(), encoding="utf-8")
    for name, svg in plots().items():
        (OUT / f"{name}.svg").write_text(svg, encoding="utf-8")
    (OUT / "humans-lifecycle.svg").write_text(lifecycle(), encoding="utf-8")


def setup(app: Any) -> dict[str, bool]:
    """Make the pictures when the builder starts."""
    app.connect("builder-inited", make)
    return {"parallel_read_safe": True}
