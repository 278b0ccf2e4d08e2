"""The batch summariser example, run as a test: scripted models, a budget
that runs out, the command line, and the OpenAI path against a real HTTP
server on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.batch_summariser.summariser import (
    DEFAULT_BUDGET,
    SAMPLES,
    Document,
    main,
    model_from_env,
    read_folder,
    scripted,
    summarise_batch,
)
from pipeline import Budget, RunUsage
from pipeline.models.openai import OpenAIModel
from pipeline.testing import ScriptedModel
from tests.models.llm_server import FakeLLM
from tests.models.test_openai import text_stream


DOCS = read_folder(SAMPLES)


@pytest.fixture(name="llm")
def _llm() -> Iterator[FakeLLM]:
    server = FakeLLM()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_samples_are_there() -> None:
    """The example ships five documents to summarise."""
    assert [d.name for d in DOCS] == [
        "bakery",
        "harbour",
        "library",
        "rail",
        "solar",
    ]


async def test_every_document_is_summarised_in_order() -> None:
    """All documents come back, in input order, with progress for each."""
    seen: list[tuple[int, int, str]] = []

    def progress(done: int, total: int, name: str, usage: RunUsage) -> None:
        seen.append((done, total, name))
        assert usage.model_calls >= done

    result, usage = await summarise_batch(
        DOCS, scripted(), on_progress=progress
    )
    report = result.unwrap()
    assert [s.name for s in report.summaries] == [d.name for d in DOCS]
    assert report.summaries[0].text.startswith("A family bakery")
    assert report.skipped == ()
    assert [s[0] for s in seen] == [1, 2, 3, 4, 5]
    assert sorted(s[2] for s in seen) == sorted(d.name for d in DOCS)
    assert usage.model_calls == 5
    assert 0 < usage.cost < DEFAULT_BUDGET.cost  # type: ignore[operator]


async def test_a_spent_budget_skips_the_rest_and_says_why() -> None:
    """With room for two calls, two documents are summarised; the others
    are listed as skipped by the budget, and no further call was made."""
    model = scripted()
    result, usage = await summarise_batch(
        DOCS, model, budget=Budget(model_calls=2)
    )
    report = result.unwrap()
    assert len(report.summaries) == 2
    assert [why for _, why in report.skipped] == ["budget: model_calls"] * 3
    assert usage.model_calls == 2
    assert len(model.requests) == 2


async def test_command_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The entry point prints progress, summaries and totals; an empty
    folder is a clear error."""
    assert await main([], {}) == 0
    out = capsys.readouterr().out
    assert "summarising 5 documents with scripted:summariser" in out
    assert "[5/5]" in out
    assert "rail: The regional rail line" in out
    assert "5 calls" in out
    assert await main([str(tmp_path)], {}) == 2
    assert "no .txt files" in capsys.readouterr().err


async def test_openai_provider_when_a_key_is_set(llm: FakeLLM) -> None:
    """With OPENAI_API_KEY set, the example talks to that provider (here a
    real HTTP server on loopback speaking its wire format)."""
    environ = {
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": f"{llm.url}/v1",
        "PIPELINE_MODEL": "m",
    }
    model = model_from_env(environ)
    assert isinstance(model, OpenAIModel)
    assert model.name == "openai:m"
    # The batch streams its progress, so the agent streams its answers.
    llm.reply(text_stream("On", "e."), text_stream("Two."))
    docs = (Document("a", "First text."), Document("b", "Second text."))
    async with model:
        result, usage = await summarise_batch(
            docs, model, budget=Budget(tokens=1_000, model_calls=2)
        )
    report = result.unwrap()
    assert report.skipped == (), report.skipped
    assert sorted(s.text for s in report.summaries) == ["One.", "Two."]
    assert usage.total_tokens == 14
    assert len(llm.requests) == 2
    sent = sorted(body["messages"][-1]["content"] for _, body in llm.requests)
    assert sent == ["First text.", "Second text."]
    assert all(body["model"] == "m" for _, body in llm.requests)


def test_without_a_key_the_model_is_scripted() -> None:
    """No key: a scripted model, so the example runs anywhere."""
    assert isinstance(model_from_env({}), ScriptedModel)
