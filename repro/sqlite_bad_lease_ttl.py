"""SQLiteStore(lease_ttl=...) accepts 0, negative and NaN values: what does a
checkpointed run on such a store do?"""
import os, tempfile, math
import anyio, attrs
from returns.result import Result, Success
from pipeline import handler, stores, graph
from pipeline.graph import END

@attrs.frozen
class S:
    n: int = 0

@handler
async def inc(s: S) -> Result[S, str]:
    return Success(S(s.n + 1))

g = graph.builder(S).node("a", inc).node("b", inc).entry("a").edge("a", "b").edge("b", END).build()

async def main():
    for ttl in (0, -1, math.nan, math.inf):
        store = stores.SQLiteStore(os.path.join(tempfile.mkdtemp(), "x.db"), lease_ttl=ttl)
        try:
            with anyio.fail_after(20):
                out = await g.run(S(), store=store, thread_id="t")
            r = out.unwrap().state if type(out) is Success else out.failure()
            print(f"lease_ttl={ttl}: {r!r}"[:200])
        except Exception as e:
            print(f"lease_ttl={ttl}: raised {type(e).__name__}: {str(e)[:100]}")
        finally:
            await store.aclose()

anyio.run(main)
