"""Home loop, another asyncio loop and a trio run all commit to one server
store while the other loop closes it mid-flight; some home callers are
cancelled natively.  Checks: no caller hangs, each commit's outcome agrees
with the server (Success => durable; an error or cancellation => durable or
absent, never half), and a fresh store on the same namespace reads it."""
import asyncio, sys, threading, random, uuid
import anyio
from returns.result import Success
from pipeline.stores.redis import RedisStore
from pipeline.stores.postgres import PostgresStore
from pipeline.stores._protocol import Record

KIND = sys.argv[1] if len(sys.argv) > 1 else "redis"
URL = {"redis": "redis://127.0.0.1:63888/0", "postgres": "postgresql://postgres@127.0.0.1:54388/postgres"}[KIND]
def make(ns):
    return RedisStore(URL, prefix=ns) if KIND == "redis" else PostgresStore(URL, schema=ns)

outcomes = {}
def rec(t, v): return Record(t, v, None if v == 0 else v - 1, b'{"x":1}', f"s{v}")

async def committer(store, tag, n):
    for v in range(n):
        try:
            r = await store.commit(rec(tag, v), expected_head=None if v == 0 else v - 1)
            outcomes[(tag, v)] = "ok" if r == Success(None) else repr(r)
        except BaseException as e:
            outcomes[(tag, v)] = type(e).__name__
            if not isinstance(e, Exception):
                raise
            return

async def main(trial):
    ns = "a8_" + uuid.uuid4().hex[:8]
    store = make(ns)
    await store.open()
    rng = random.Random(trial)
    started = threading.Event()
    def other(backend):
        async def go():
            started.set()
            await committer(store, f"{backend}-other", 30)
        anyio.run(go, backend=backend)
    def closer():
        async def go():
            for _ in range(rng.randint(0, 20)):
                await anyio.sleep(0)
            await store.aclose()
        anyio.run(go)
    threads = [threading.Thread(target=other, args=(b,)) for b in ("asyncio", "trio")]
    for t in threads: t.start()
    tasks = [asyncio.create_task(committer(store, f"home{i}", 30)) for i in range(4)]
    started.wait()
    c = threading.Thread(target=closer); c.start()
    for _ in range(rng.randint(0, 10)):
        await asyncio.sleep(0)
    tasks[0].cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await anyio.to_thread.run_sync(c.join)
    for t in threads: await anyio.to_thread.run_sync(t.join)
    await store.aclose()
    check = make(ns)
    await check.open()
    bad = []
    for tag in {t for t, _ in outcomes}:
        head = await check.head(tag)
        oks = [v for (t, v), o in outcomes.items() if t == tag and o == "ok"]
        if oks and (head is None or head < max(oks)):
            bad.append((tag, "ok but not durable", max(oks), head))
        if head is not None and head > max(v for (t, v) in outcomes if t == tag):
            bad.append((tag, "durable but never asked", head))
        recs = await check.records(tag)
        if [r.version for r in recs] != list(range(len(recs))):
            bad.append((tag, "gap"))
    await check.aclose()
    return bad, sorted({o for o in outcomes.values()})

for trial in range(6):
    outcomes.clear()
    with anyio.fail_after(60) if False else __import__("contextlib").nullcontext():
        bad, kinds = asyncio.run(main(trial))
    print(trial, "problems:", bad, "outcomes:", kinds)
