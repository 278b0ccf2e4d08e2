"""Differential: a graph run without store or hooks (the engine's _bare
loop) against the same run on a MemoryStore, and with an observer (the
general loop without a journal).  Prints each scenario's outcome."""
import re
import anyio, attrs
from pyrsistent import PVector, pvector
from returns.result import Result, Success, Failure
from pipeline import handler, stores, graph, interrupt
from pipeline.graph import END, GraphLimits, CachePolicy

@attrs.frozen
class S:
    n: int = 0
    log: PVector[str] = attrs.field(factory=pvector)

@handler
async def inc(s: S) -> Result[S, str]:
    return Success(attrs.evolve(s, n=s.n + 1, log=s.log.append(f"inc{s.n}")))

@handler
async def fail(s: S) -> Result[S, str]:
    return Failure("nope")

@handler
async def raises(s: S) -> Result[S, str]:
    raise ValueError("secret 42")

@handler
async def asks(s: S) -> Result[S, str]:
    a = await interrupt("ok?", str)
    return Success(attrs.evolve(s, log=s.log.append(a)))

@handler
async def wrong_type(s: S) -> Result[S, str]:
    return Success("not a state")  # type: ignore[arg-type]

def b():
    return graph.builder(S)

def cases():
    yield "loop-limit", b().node("a", inc).entry("a").route("a", lambda s: "a", to=["a", END]).build(), GraphLimits(max_steps=5)
    yield "failure", b().node("a", inc).node("f", fail).entry("a").edge("a", "f").edge("f", END).build(), None
    yield "raises", b().node("a", inc).node("r", raises).entry("a").edge("a", "r").edge("r", END).build(), None
    yield "interrupt", b().node("a", inc).node("q", asks).entry("a").edge("a", "q").edge("q", END).build(), None
    yield "unknown-route", b().node("a", inc).entry("a").route("a", lambda s: "zzz", to=["a", END]).build(), None
    yield "wrong-type", b().node("a", inc).node("w", wrong_type).entry("a").edge("a", "w").edge("w", END).build(), None
    yield "fanout-fail", b().node("a", inc).node("x", inc).node("f", fail).node("j", inc).entry("a").fan_out("a", ["x", "f"], join="j").edge("j", END).build(), None
    yield "fanout-ok", b().node("a", inc).node("x", inc).node("y", inc).node("j", inc).entry("a").fan_out("a", ["x", "y"], join="j").edge("j", END).build(), None
    yield "fanout-ask", b().node("a", inc).node("x", inc).node("q", asks).node("j", inc).entry("a").fan_out("a", ["x", "q"], join="j").edge("j", END).build(), None
    yield "cached-loop", b().node("a", inc, cache=CachePolicy()).entry("a").route("a", lambda s: END if s.n >= 3 else "a", to=["a", END]).build(), None
    yield "limit-0", b().node("a", inc).entry("a").edge("a", END).build(), GraphLimits(max_steps=1)

def show(out):
    if isinstance(out, BaseException):
        return f"raised {type(out).__name__}"
    if type(out) is Success:
        snap = out.unwrap()
        return f"Success(status={snap.status.name}, step={snap.step}, node={snap.node}, next={snap.next}, state={snap.state}, pending={getattr(snap.pending, 'question', None)})"
    return re.sub(r"0x[0-9a-f]+", "_", f"Failure({out.failure()!r})")[:400]

async def run(g, limits, mode):
    try:
        if mode == "bare":
            return await g.run(S(), limits=limits)
        if mode == "observed":
            async def obs(s): pass
            return await g.run(S(), limits=limits, observers=[obs])
        return await g.run(S(), limits=limits, store=stores.MemoryStore(), thread_id="t")
    except Exception as e:
        return e

async def main():
    for name, g, limits in cases():
        outs = {m: show(await run(g, limits, m)) for m in ("bare", "observed", "stored")}
        same = outs["bare"] == outs["observed"] == outs["stored"]
        print(("SAME " if same else "DIFF ") + name)
        for m, o in outs.items():
            if not same or m == "bare":
                print(f"   {m:8}: {o}")

anyio.run(main)
