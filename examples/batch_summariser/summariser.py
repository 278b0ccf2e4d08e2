"""Summarise a folder of documents with map_reduce, under a budget.

Run it (``python -m examples.batch_summariser [FOLDER]``): with
``OPENAI_API_KEY`` (or ``ANTHROPIC_API_KEY``) set it calls that provider;
without one it uses a scripted model, so it runs anywhere.  Each document
is summarised by an agent, four at a time; a budget bounds the whole batch
(tokens, cost, calls, seconds); progress is printed as documents finish;
documents the budget did not cover are listed, not lost.
"""

from __future__ import annotations

import os
import sys

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeAlias

import anyio
import attrs

from returns.result import Failure, Result, Success

from pipeline import (
    Agent,
    Budget,
    Handler,
    Message,
    Note,
    Price,
    RunUsage,
    Secret,
    Usage,
    handler,
    map_reduce,
    scope,
    stream,
)
from pipeline.agents import AgentError
from pipeline.failures import BudgetExceeded, FanOutLimitExceeded
from pipeline.models import Model, ModelRequest, ModelResponse
from pipeline.testing import Reply, ScriptedModel


INSTRUCTIONS = (
    "Summarise the document you are given in one sentence of at most 25 "
    "words. Answer with the sentence only."
)

PRICES = {
    # Per million tokens, keyed by the model's name ("provider:model").
    "openai:gpt-4o-mini": Price(input=0.15, output=0.60),
    "anthropic:claude-haiku-4-5": Price(input=1.0, output=5.0),
    "scripted:summariser": Price(input=0.15, output=0.60),
}

DEFAULT_BUDGET = Budget(
    tokens=20_000,
    cost=0.05,
    model_calls=50,
    wall_time=300.0,
    prices=PRICES,
)

SAMPLES = Path(__file__).parent / "documents"

BatchError: TypeAlias = AgentError | FanOutLimitExceeded
"""What the batch may fail with as a whole (a worker's failure is listed in
the report instead, unless it is about the batch itself)."""


@attrs.frozen
class Document:
    """One text to summarise."""

    name: str
    text: str


@attrs.frozen
class Summary:
    """A document's one-sentence summary."""

    name: str
    text: str


@attrs.frozen
class Report:
    """What the batch produced: summaries in input order, and the documents
    left out (the budget was spent, or the model failed), with why."""

    summaries: tuple[Summary, ...]
    skipped: tuple[tuple[str, str], ...] = ()


def read_folder(folder: Path) -> tuple[Document, ...]:
    """The ``.txt`` files of *folder*, by name."""
    return tuple(
        Document(p.stem, p.read_text(encoding="utf-8").strip())
        for p in sorted(folder.glob("*.txt"))
    )


def summariser(
    model: Model, *, concurrency: int = 4
) -> Handler[Sequence[Document], Report, BatchError]:
    """A handler from documents to a report: one agent run per document,
    *concurrency* at a time (a fixed pool), reduced in input order."""
    agent = Agent("summariser", model, instructions=INSTRUCTIONS)

    @handler(name="summarise")
    async def summarise(doc: Document) -> Result[Summary, AgentError]:
        out = await agent.run((Message.user(doc.text),))
        if type(out) is not Success:
            return Failure(out.failure())
        await stream_progress(doc.name)
        return Success(Summary(doc.name, out.unwrap().text))

    def reduce(
        docs: Sequence[Document],
        results: tuple[Result[Summary, AgentError], ...],
    ) -> Result[Report, FanOutLimitExceeded]:
        summaries: list[Summary] = []
        skipped: list[tuple[str, str]] = []
        for doc, result in zip(docs, results, strict=True):
            if type(result) is Success:
                summaries.append(result.unwrap())
            else:
                failure = result.failure()
                why = (
                    f"budget: {failure.limit}"
                    if isinstance(failure, BudgetExceeded)
                    else type(failure).__name__
                )
                skipped.append((doc.name, why))
        return Success(Report(tuple(summaries), tuple(skipped)))

    return map_reduce(
        list, summarise, reduce, max_concurrency=concurrency, name="batch"
    )


async def stream_progress(name: str) -> None:
    """Tell a listening stream that *name* is done."""
    from pipeline import emit  # noqa: PLC0415

    await emit(Note("summarise", name))


async def summarise_batch(
    docs: Sequence[Document],
    model: Model,
    *,
    budget: Budget = DEFAULT_BUDGET,
    on_progress: Callable[[int, int, str, RunUsage], object] | None = None,
) -> tuple[Result[Report, BatchError], RunUsage]:
    """Run the batch in a scope with *budget*; call *on_progress* (done,
    total, document, usage so far) as each document finishes."""
    batch = summariser(model)
    done = 0
    with scope(budget=budget, name="batch") as opened:
        async with stream(batch, docs) as events:
            async for event in events:
                if isinstance(event, Note) and on_progress is not None:
                    done += 1
                    on_progress(done, len(docs), event.text, opened.usage)
        result = events.result
        usage = opened.usage
    assert result is not None  # the stream finished
    return result, usage


def model_from_env(environ: Mapping[str, str]) -> Model:
    """The provider whose API key is set (its key kept as a Secret), or a
    scripted model that answers every document."""
    name = environ.get("PIPELINE_MODEL")
    if "OPENAI_API_KEY" in environ:
        from pipeline.models.openai import OpenAIModel  # noqa: PLC0415

        return OpenAIModel(
            name or "gpt-4o-mini",
            api_key=Secret(
                environ["OPENAI_API_KEY"], ref="env:OPENAI_API_KEY"
            ),
            base_url=environ.get("OPENAI_BASE_URL"),
        )
    if "ANTHROPIC_API_KEY" in environ:
        from pipeline.models.anthropic import AnthropicModel  # noqa: PLC0415

        return AnthropicModel(
            name or "claude-haiku-4-5",
            api_key=Secret(
                environ["ANTHROPIC_API_KEY"], ref="env:ANTHROPIC_API_KEY"
            ),
        )
    return scripted()


def scripted() -> ScriptedModel:
    """A stand-in model: the first sentence of the document, trimmed."""

    def first_sentence(request: ModelRequest) -> ModelResponse:
        text = request.messages[-1].content
        sentence = text.split(". ")[0].rstrip(".") + "."
        words = len(text.split())
        return Reply.text(
            sentence, usage=Usage(words + 30, len(sentence.split()))
        )

    return ScriptedModel(first_sentence, cycle=True, name="summariser")


def print_progress(done: int, total: int, name: str, usage: RunUsage) -> None:
    """One line per finished document."""
    print(
        f"[{done}/{total}] {name:<12} tokens {usage.total_tokens:>6}  "
        f"cost {usage.cost:.5f}  calls {usage.model_calls}  "
        f"{usage.elapsed:.1f} s"
    )


async def main(argv: Sequence[str], environ: Mapping[str, str]) -> int:
    """Summarise the folder in *argv* (the samples by default)."""
    folder = Path(argv[0]) if argv else SAMPLES
    docs = read_folder(folder)
    if not docs:
        print(f"no .txt files in {folder}", file=sys.stderr)
        return 2
    model = model_from_env(environ)
    budget = DEFAULT_BUDGET
    if model.name not in budget.prices:
        # An unknown model: keep every limit but the cost (no price for it).
        budget = attrs.evolve(budget, cost=None)
    print(f"summarising {len(docs)} documents with {model.name}")
    result, usage = await summarise_batch(
        docs, model, budget=budget, on_progress=print_progress
    )
    if type(result) is not Success:
        print(f"failed: {result.failure()}", file=sys.stderr)
        return 1
    report = result.unwrap()
    for summary in report.summaries:
        print(f"\n{summary.name}: {summary.text}")
    for name, why in report.skipped:
        print(f"\nskipped {name} ({why})")
    print(
        f"\n{usage.total_tokens} tokens, {usage.model_calls} calls, "
        f"cost {usage.cost:.5f}, {usage.elapsed:.1f} s"
    )
    return 0


def run() -> None:
    """The command line entry point."""
    sys.exit(anyio.run(main, sys.argv[1:], dict(os.environ)))
