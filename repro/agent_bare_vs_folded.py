"""Differential: an agent run nothing records nor traces (Loop.unchecked)
against the same run traced (the fold engine's path).  Prints each
scenario's outcome on both paths and whether they agree."""
import anyio, attrs
from opentelemetry.sdk.trace import TracerProvider
from returns.result import Success, Failure
from pipeline import Context, Message, scope, interrupt, Output
from pipeline.agents import Agent
from pipeline.budgets import Budget
from pipeline.tools import tool
from pipeline.testing import ScriptedModel, Reply

@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b

@tool
def boom(x: int) -> int:
    """Raise."""
    raise ValueError("secret value 1234")

@tool
async def ask(q: str) -> str:
    """Ask a person."""
    return str(await interrupt(q, str))

@attrs.frozen
class Num:
    n: int

def scenarios():
    yield "answer", lambda: Agent("a", ScriptedModel(Reply.text("hi")))
    yield "tool-then-answer", lambda: Agent("a", ScriptedModel(Reply.tool_call("add", {"a": 1, "b": 2}), Reply.text("3")), tools=(add,))
    yield "turn-limit", lambda: Agent("a", ScriptedModel(Reply.tool_call("add", {"a": 1, "b": 2}), cycle=True), tools=(add,), max_turns=2)
    yield "turn-limit-answer", lambda: Agent("a", ScriptedModel(Reply.tool_call("add", {"a": 1, "b": 2}), Reply.tool_call("add", {"a": 1, "b": 2}), Reply.text("done")), tools=(add,), max_turns=2, on_turn_limit="answer")
    yield "model-error", lambda: Agent("a", ScriptedModel(Reply.error()))
    yield "tool-raises", lambda: Agent("a", ScriptedModel(Reply.tool_call("boom", {"x": 1}), Reply.text("ok")), tools=(boom,))
    yield "bad-args", lambda: Agent("a", ScriptedModel(Reply.tool_call("add", "{not json"), Reply.text("ok")), tools=(add,))
    yield "unknown-tool", lambda: Agent("a", ScriptedModel(Reply.tool_call("nope", {}), Reply.text("ok")), tools=(add,))
    yield "output-retries", lambda: Agent("a", ScriptedModel(Reply.text("x"), Reply.text("y"), Reply.text("z")), output=Output(Num, retries=1), max_turns=1)
    yield "output-retries-2", lambda: Agent("a", ScriptedModel(Reply.text("x"), cycle=True), output=Output(Num, retries=2), max_turns=3)
    yield "interrupt-in-tool", lambda: Agent("a", ScriptedModel(Reply.tool_call("ask", {"q": "ok?"}), Reply.text("ok"), strict=False), tools=(ask,))

def show(out):
    if isinstance(out, BaseException):
        return f"raised {type(out).__name__}: {str(out)[:100]}"
    if type(out) is Success:
        r = out.unwrap()
        return f"Success(turns={getattr(r,'turns',None)}, msgs={[ (m.role, m.content[:20]) for m in getattr(r,'messages',())]})"
    import re; return re.sub(r"elapsed=[0-9.e-]+", "elapsed=_", f"Failure({out.failure()!r})")[:300]

async def one(make, traced, budget=None):
    agent = make()
    try:
        if traced:
            with scope(tracer_provider=TracerProvider(), budget=budget):
                return await agent.run([Message.user("go")])
        if budget is not None:
            with scope(budget=budget):
                return await agent.run([Message.user("go")])
        return await agent.run([Message.user("go")])
    except Exception as e:  # noqa
        return e

async def main():
    for name, make in scenarios():
        a = show(await one(make, False)); b = show(await one(make, True))
        print(("SAME " if a == b else "DIFF ") + name)
        if a != b:
            print("   bare  :", a); print("   traced:", b)
        else:
            print("   ", a[:200])
    for name, budget in (("budget-calls", Budget(model_calls=1)), ("budget-tokens", Budget(tokens=3))):
        make = lambda: Agent("a", ScriptedModel(Reply.tool_call("add", {"a": 1, "b": 2}), Reply.text("3"), strict=False), tools=(add,))
        a = show(await one(make, False, budget)); b = show(await one(make, True, budget))
        print(("SAME " if a == b else "DIFF ") + name)
        if a != b:
            print("   bare  :", a); print("   traced:", b)
        else:
            print("   ", a[:200])

anyio.run(main)
