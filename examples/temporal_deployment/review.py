"""The graph this deployment runs: draft an article, ask an editor, publish.

Nothing here knows about Temporal: the same graph runs in process
(``await REVIEW.run(Article(topic="..."))``) and on a Temporal worker.
"""

from __future__ import annotations

import attrs

from pyrsistent import PVector, pvector
from returns.result import Failure, Result, Success

from pipeline import Graph, handler
from pipeline.fold import Continue, Decision, Interrupt, Stop, Transition
from pipeline.graph import END, builder


@attrs.frozen
class Article:
    """The graph's state."""

    topic: str
    text: str = ""
    log: PVector[str] = attrs.field(factory=pvector)


@attrs.frozen
class Verdict:
    """What the editor answers."""

    approved: bool
    editor: str


@attrs.frozen
class EmptyTopic:
    """A failure value: there was nothing to write about."""

    topic: str


@handler
async def draft(a: Article) -> Result[Article, EmptyTopic]:
    if not a.topic.strip():
        return Failure(EmptyTopic(a.topic))
    text = f"{a.topic.capitalize()} is better than you think."
    return Success(attrs.evolve(a, text=text, log=a.log.append("drafted")))


@handler
async def publish(a: Article) -> Result[Article, EmptyTopic]:
    return Success(attrs.evolve(a, log=a.log.append("published")))


async def editor(t: Transition[Article]) -> Decision:
    """Nothing is published without an editor's approval."""
    if t.targets != ("publish",):
        return Continue()
    verdict = t.answer_as(Verdict)
    if verdict is None:
        return Interrupt(f"publish {t.state.text!r}?")
    if not verdict.approved:
        return Stop(f"rejected by {verdict.editor}")
    return Continue()


REVIEW: Graph[Article, EmptyTopic] = (
    builder(Article)
    .node("draft", draft)
    .node("publish", publish)
    .entry("draft")
    .edge("draft", "publish")
    .edge("publish", END)
    .gate(editor)
    .build(name="review", version="1")
)
