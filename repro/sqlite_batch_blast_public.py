"""Public API: a run with an unencodable thread id, beside a good run on the
same SQLiteStore, can fail the good run's commit (they share a group commit)."""
import os, tempfile
import anyio, attrs
from returns.result import Result, Success
from pipeline import handler, stores, graph
from pipeline.graph import END

@attrs.frozen
class S:
    n: int = 0

@handler
async def step(s: S) -> Result[S, str]:
    return Success(S(s.n + 1))

g = graph.builder(S).node("a", step).node("b", step).entry("a").edge("a", "b").edge("b", END).build()

async def main():
    store = stores.SQLiteStore(os.path.join(tempfile.mkdtemp(), "s.db"))
    out = {}
    async def run(tid):
        try:
            out[tid] = await g.run(S(), store=store, thread_id=tid)
        except BaseException as e:
            out[tid] = f"raised {type(e).__name__}"
    for i in range(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, f"good{i}")
            tg.start_soon(run, f"bad{i}\ud800")
    bad = {k: v for k, v in out.items() if k.startswith("good") and not (hasattr(v, "unwrap") and v.unwrap().done)}
    print("bad-id runs:", sorted({str(v)[:70] for k, v in out.items() if not k.startswith("good")}))
    print("good runs failed:", len(bad), "of 20;", sorted({str(v)[:70] for v in bad.values()}))
    await store.aclose()

anyio.run(main)
